/**
 * The `agent` inspect interface: in-band inspection (Ironic's inspector.AgentInspect). The
 * conductor boots the agent ISO over virtual media and leaves the node in `inspect wait`; the
 * agent posts its inventory to `/v1/continue_inspection`, and the configured inspection hooks
 * decide what it changes. Validation of the boot it needs is in validate-node.ts.
 */
import { HardwareInspectionFailure, UnsupportedDriverExtension } from '../common/errors.js';
import type { InspectInterface } from './interfaces.js';
import { runInspectionHooks, type ExistingPort, type HookOptions, type HooksOutcome } from './inspection-hooks.js';

export class AgentInspect implements InspectInterface {
  readonly inBand = true;

  constructor(private readonly options: HookOptions) {}

  validate(): void {}

  inspectHardware(): Promise<null> {
    return Promise.reject(new UnsupportedDriverExtension('The agent inspect interface inspects in-band: the agent posts its inventory to /v1/continue_inspection.'));
  }

  /** @throws HardwareInspectionFailure with Ironic's "failed to run inspection hooks" message */
  processInventory(
    node: { uuid: string; properties: Readonly<Record<string, unknown>> },
    inventory: Record<string, unknown>,
    pluginData: Record<string, unknown>,
    ports: readonly ExistingPort[],
  ): HooksOutcome {
    try {
      return runInspectionHooks(node, inventory, pluginData, ports, this.options);
    } catch (err) {
      throw new HardwareInspectionFailure(`Failed to inspect hardware. Reason: failed to run inspection hooks: ${(err as Error).message}`);
    }
  }
}
