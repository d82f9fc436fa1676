import { InvalidParameterValue, UnsupportedDriverExtension } from '../../common/errors.js';
import { maintenanceChanges } from '../../db/nodes.js';
import { argsOf } from '../../common/intent-kinds.js';
import type { Action, ActionContext } from './types.js';

function managementOf(ctx: ActionContext) {
  const m = ctx.registry.management(ctx.node.managementInterface ?? '');
  if (!m) throw new UnsupportedDriverExtension(`Management interface ${ctx.node.managementInterface} is not enabled on this conductor.`);
  m.validate(ctx.node.driverInfo);
  return m;
}

export const setBootDeviceAction: Action = {
  async run(ctx) {
    const { boot_device: device, persistent = false } = argsOf(ctx.intent, 'set_boot_device');
    const m = managementOf(ctx);
    const supported = await m.getSupportedBootDevices(ctx.driver);
    if (!supported.includes(device)) {
      throw new InvalidParameterValue(`Invalid boot device ${device} specified, valid boot devices are: ${supported.join(', ')}.`);
    }
    await m.setBootDevice(ctx.driver, device, persistent);
    return {
      result: { boot_device: device, persistent },
      history: { severity: 'INFO', eventType: 'management', event: `Boot device set to ${device} (persistent: ${persistent}).` },
    };
  },
};

export const getBootDeviceAction: Action = {
  async run(ctx) {
    const b = await managementOf(ctx).getBootDevice(ctx.driver);
    return { result: { boot_device: b.bootDevice, persistent: b.persistent } };
  },
};

export const getSupportedBootDevicesAction: Action = {
  async run(ctx) {
    return { result: { supported_boot_devices: await managementOf(ctx).getSupportedBootDevices(ctx.driver) } };
  },
};

/** Maintenance touches no BMC; it is an intent so that it keeps its place in the node's queue. */
export const maintenanceAction: Action = {
  notification: { prefix: 'baremetal.node.maintenance_set', payloadName: 'NodePayload', extra: () => ({}) },
  async run(ctx) {
    const { maintenance, reason } = argsOf(ctx.intent, 'maintenance');
    return {
      changes: maintenanceChanges(maintenance, reason ?? null),
      history: { severity: 'INFO', eventType: 'maintenance', event: maintenance ? `Maintenance set${reason ? `: ${reason}` : ''}.` : 'Maintenance unset.' },
    };
  },
};
