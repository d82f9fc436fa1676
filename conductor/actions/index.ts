import { consoleAction } from './console.js';
import { getBootDeviceAction, getSupportedBootDevicesAction, maintenanceAction, setBootDeviceAction } from './management.js';
import { getPowerStateAction, powerAction } from './power.js';
import { provisionAction } from './provision.js';
import { agentContinueAction } from './agent-continue.js';
import { provisionStepAction } from './provision-step.js';
import type { Action } from './types.js';
import type { IntentKind } from '../../common/intent-kinds.js';
import { vendorPassthruAction } from './vendor.js';
import { attachVirtualMediaAction, detachVirtualMediaAction, getVirtualMediaAction } from './vmedia.js';

/** Actions by intent kind: one for each kind of the contract (common/intent-kinds.ts). */
export const ACTIONS: Readonly<Record<IntentKind, Action>> & Readonly<Record<string, Action | undefined>> = {
  power: powerAction,
  get_power_state: getPowerStateAction,
  set_boot_device: setBootDeviceAction,
  get_boot_device: getBootDeviceAction,
  get_supported_boot_devices: getSupportedBootDevicesAction,
  maintenance: maintenanceAction,
  provision: provisionAction,
  provision_step: provisionStepAction,
  agent_continue: agentContinueAction,
  console: consoleAction,
  attach_virtual_media: attachVirtualMediaAction,
  detach_virtual_media: detachVirtualMediaAction,
  get_virtual_media: getVirtualMediaAction,
  vendor_passthru: vendorPassthruAction,
};
