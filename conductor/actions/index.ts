import { consoleAction } from './console.js';
import { getBootDeviceAction, getSupportedBootDevicesAction, maintenanceAction, setBootDeviceAction } from './management.js';
import { getPowerStateAction, powerAction } from './power.js';
import { provisionAction } from './provision.js';
import { agentContinueAction } from './agent-continue.js';
import { provisionStepAction } from './provision-step.js';
import type { Action } from './types.js';
import { attachVirtualMediaAction, detachVirtualMediaAction, getVirtualMediaAction } from './vmedia.js';

/** Actions by intent kind. */
export const ACTIONS: Record<string, Action> = {
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
};

/**
 * Kinds safe to run again when a conductor died mid-way (reboots excepted, see
 * recoverConductorLeftovers). Provision transitions are not: a half-done one needs a look.
 */
export const IDEMPOTENT_KINDS = ['power', 'get_power_state', 'set_boot_device', 'get_boot_device', 'get_supported_boot_devices', 'maintenance', 'console',
  'attach_virtual_media', 'detach_virtual_media', 'get_virtual_media'];
