/**
 * The synthetic BMC's Redfish model for a QEMU-backed host: the same resources, but the host
 * starts powered off, as a virtual machine that nothing has started yet.
 */
import { defaultBoot } from '../redfish/model.js';
import { SyntheticModel } from '../redfish/model-synthetic.js';
import type { SystemState } from '../redfish/state.js';

export class QemuModel extends SyntheticModel {
  override initialSystem(): SystemState {
    return { power: 'Off', boot: defaultBoot(), version: 1, running: null };
  }
}
