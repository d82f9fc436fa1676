import type { Node } from '../db/nodes.js';
import type { ActionContext } from './actions/types.js';

/** A clean step as the API takes it and Ironic shows it in `clean_step`. */
export interface CleanStep {
  interface: string;
  step: string;
  args?: Record<string, unknown>;
  priority?: number;
}

/** A step an interface offers, with what runs it. */
export interface AvailableCleanStep {
  interface: string;
  step: string;
  priority: number;
  abortable: boolean;
  requiresRamdisk: boolean;
  run(ctx: ActionContext, args: Record<string, unknown>): Promise<void>;
}

const noop = async (): Promise<void> => {};

/**
 * The out-of-band clean steps of the node's interfaces. Ironic's fake RAID and BIOS
 * interfaces offer their configuration steps at priority 0 (manual cleaning only) and do
 * nothing; the Redfish and IPMI interfaces Galvanic ships offer none yet.
 */
export function cleanStepsFor(node: Pick<Node, 'raidInterface' | 'biosInterface'>): AvailableCleanStep[] {
  const steps: AvailableCleanStep[] = [];
  const step = (iface: string, name: string): AvailableCleanStep => ({ interface: iface, step: name, priority: 0, abortable: false, requiresRamdisk: false, run: noop });
  if (node.raidInterface === 'fake') steps.push(step('raid', 'create_configuration'), step('raid', 'delete_configuration'));
  if (node.biosInterface === 'fake') steps.push(step('bios', 'apply_configuration'), step('bios', 'factory_reset'));
  return steps;
}
