/**
 * The `idrac` hardware type (Ironic's IDRACHardware, drivers/drac.py): the `redfish` hardware
 * type with Dell's interfaces in place of, or ahead of, the generic ones. `idrac-redfish`
 * power, BIOS and vendor are the `redfish` ones (Ironic keeps them only as names); management,
 * inspect and RAID add what the iDRAC needs (oem.ts), and `idrac-redfish-virtual-media` boots
 * the virtual CD as an iDRAC before firmware 6 requires.
 */
import type { RedfishDriver } from '../redfish/index.js';
import { REDFISH_PROPERTIES } from '../redfish/driver-info.js';
import type { HardwareType } from '../interfaces.js';
import { GENERIC_DEPLOY_INTERFACES } from '../deploy/index.js';
import { IdracRedfishVirtualMediaBoot } from './boot.js';
import { IdracRedfishInspect } from './inspect.js';
import { IdracRedfishManagement } from './management.js';
import { IdracRedfishRaid } from './raid.js';

/** Ironic's interface name for each of Dell's interfaces. */
export const IDRAC_REDFISH = 'idrac-redfish';
export const IDRAC_VIRTUAL_MEDIA = 'idrac-redfish-virtual-media';

export const idracHardware: HardwareType = {
  name: 'idrac',
  supported: {
    bios: [IDRAC_REDFISH, 'redfish', 'no-bios'],
    // Ironic's idrac type inherits redfish's list with its own virtual media in place of redfish's.
    boot: [IDRAC_VIRTUAL_MEDIA, 'ipxe', 'pxe', 'redfish-https'],
    console: ['no-console'],
    deploy: GENERIC_DEPLOY_INTERFACES,
    firmware: ['redfish', 'no-firmware'],
    inspect: [IDRAC_REDFISH, 'agent', 'no-inspect'],
    management: [IDRAC_REDFISH],
    network: ['noop'],
    power: [IDRAC_REDFISH, 'redfish'],
    raid: [IDRAC_REDFISH, 'no-raid', 'agent'],
    rescue: ['no-rescue'],
    storage: ['noop'],
    vendor: [IDRAC_REDFISH, 'redfish', 'no-vendor'],
  },
  properties: REDFISH_PROPERTIES,
};

/** The iDRAC's own interfaces, over the Redfish driver's client. */
export class IdracDriver {
  readonly management: IdracRedfishManagement;
  readonly boot: IdracRedfishVirtualMediaBoot;
  readonly inspect: IdracRedfishInspect;
  readonly raid: IdracRedfishRaid;

  constructor(redfish: RedfishDriver) {
    const client = redfish.client;
    this.management = new IdracRedfishManagement(client);
    this.boot = new IdracRedfishVirtualMediaBoot(client, client.options.vmediaRetry, client.options.agentBoot, redfish.images);
    this.inspect = new IdracRedfishInspect(client);
    this.raid = new IdracRedfishRaid(client);
  }
}
