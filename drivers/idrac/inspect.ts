/**
 * The `idrac-redfish` inspect interface (Ironic's DracRedfishInspect): out-of-band inspection
 * as `redfish` does it, with a port for every NIC the iDRAC lists, whatever state it reports
 * (some iDRAC firmware reports ports' state wrongly; the WSMAN interface it replaced did so).
 */
import type { DriverContext, InspectionResult } from '../interfaces.js';
import { RedfishInspect } from '../redfish/inspect.js';

export class IdracRedfishInspect extends RedfishInspect {
  /** @throws HardwareInspectionFailure | DriverError */
  override async inspectHardware(ctx: DriverContext, existingCapabilities: string | undefined): Promise<InspectionResult> {
    const result = await super.inspectHardware(ctx, existingCapabilities);
    const interfaces = Array.isArray(result.inventory.interfaces) ? (result.inventory.interfaces as Array<Record<string, unknown>>) : [];
    const macs = [...result.macs];
    for (const nic of interfaces) {
      const mac = nic.mac_address;
      if (typeof mac === 'string' && !macs.includes(mac)) macs.push(mac);
    }
    return { ...result, macs };
  }
}
