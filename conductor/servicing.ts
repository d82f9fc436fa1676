/**
 * Servicing (API 1.87, Ironic's conductor/servicing.py): steps run on an active node, which
 * returns to active, or goes to `service failed` when a step fails.
 *
 * The interfaces Galvanic ships offer no service step of their own (Ironic's are in-band, or
 * belong to the redfish BIOS, RAID and firmware interfaces Galvanic does not have), so a step
 * is valid only when it is one of the flow steps Ironic's conductor resolves itself:
 * `power_on`, `power_off` and `reboot`, run through the node's power interface. `hold` and
 * `wait` need a ramdisk's call-back and are refused as not supported.
 */
import { InvalidParameterValue, PowerOffDisabled, UnsupportedDriverExtension } from '../common/errors.js';
import type { NodeChanges } from '../db/nodes.js';
import type { PowerTarget } from '../drivers/interfaces.js';
import type { CleanStep } from './clean-steps.js';
import type { ActionContext } from './actions/types.js';

const FLOW_POWER: Readonly<Record<string, PowerTarget>> = { power_on: 'power on', power_off: 'power off', reboot: 'rebooting' };

/** Python's repr of a value, as Ironic's messages show steps. */
function pyRepr(v: unknown): string {
  if (v === null || v === undefined) return 'None';
  if (typeof v === 'boolean') return v ? 'True' : 'False';
  if (typeof v === 'string') return `'${v}'`;
  if (Array.isArray(v)) return `[${v.map(pyRepr).join(', ')}]`;
  if (typeof v === 'object') return `{${Object.entries(v).map(([k, x]) => `'${k}': ${pyRepr(x)}`).join(', ')}}`;
  return String(v);
}

/** A step in the order Ironic's API builds it (interface, step, args, priority). */
function repr(step: CleanStep): string {
  const ordered: Record<string, unknown> = { interface: step.interface, step: step.step };
  if (step.args !== undefined) ordered.args = step.args;
  if (step.priority !== undefined) ordered.priority = step.priority;
  return pyRepr(ordered);
}

/** Checks every step before any runs (Ironic's _validate_user_steps), then runs them in order. */
export async function runServiceSteps(ctx: ActionContext, steps: readonly CleanStep[]): Promise<NodeChanges> {
  const errors = steps.filter((s) => !Object.hasOwn(FLOW_POWER, s.step)).map((s) => `node does not support this service step: ${repr(s)}`);
  if (errors.length) throw new InvalidParameterValue(errors.join('; '));
  const power = ctx.registry.impl('power', ctx.node.powerInterface);
  if (!power) throw new UnsupportedDriverExtension(`Power interface ${ctx.node.powerInterface} is not enabled on this conductor.`);
  const changes: NodeChanges = {};
  for (const step of steps) {
    const target = FLOW_POWER[step.step];
    if (target === 'power off' && ctx.node.disablePowerOff) throw new PowerOffDisabled(target);
    await power.setPowerState(ctx.driver, target);
    changes.powerState = target === 'power off' ? 'power off' : 'power on';
  }
  return changes;
}
