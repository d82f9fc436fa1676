/**
 * The `redfish` hardware type: power and management `redfish`, boot `redfish-virtual-media` (or network
 * boot, `ipxe` and `pxe`: Ironic lists those first, Galvanic keeps virtual media its default, or
 * `redfish-https`), inspect, vendor, BIOS, RAID and firmware `redfish` (the last three where enabled).
 * `RedfishDriver` owns the client shared by both interfaces; constructing it opens nothing
 * (connections and sessions appear on the first call to a BMC), `close()` logs out and closes.
 */
import type { Logger } from 'pino';
import type { Config } from '../../common/config.js';
import type { BmcBudget } from '../bmc-budget.js';
import type { HardwareType } from '../interfaces.js';
import { RedfishVirtualMediaBoot } from './boot.js';
import { RedfishHttpsBoot } from './https-boot.js';
import { RedfishClient, type RedfishOptions } from './client.js';
import { REDFISH_PROPERTIES } from './driver-info.js';
import { DEFAULT_FIRMWARE_OPTIONS, RedfishFirmware } from './firmware.js';
import { RedfishInspect } from './inspect.js';
import { RedfishBios } from './bios.js';
import { RedfishManagement } from './management.js';
import { RedfishPower } from './power.js';
import { RedfishVendor } from './vendor.js';
import { RedfishRaid } from './raid.js';
import { agentBootDefaults } from '../agent-boot.js';
import type { BootImages } from '../image/boot-images.js';
import { GENERIC_DEPLOY_INTERFACES } from '../deploy/index.js';

export type { RedfishOptions } from './client.js';

export const redfishHardware: HardwareType = {
  name: 'redfish',
  supported: {
    bios: ['redfish', 'no-bios'], boot: ['redfish-virtual-media', 'ipxe', 'pxe', 'redfish-https'], console: ['no-console'], deploy: GENERIC_DEPLOY_INTERFACES, firmware: ['redfish', 'no-firmware'],
    inspect: ['redfish', 'agent', 'no-inspect'], management: ['redfish'], network: ['noop'], power: ['redfish'], raid: ['redfish', 'no-raid', 'agent'],
    rescue: ['no-rescue'], storage: ['noop'], vendor: ['redfish', 'no-vendor'],
  },
  properties: REDFISH_PROPERTIES,
};

/** The [redfish] section as client options (durations in ms). */
export function redfishOptions(config: Readonly<Config>): RedfishOptions {
  const r = config.redfish;
  return {
    connectionAttempts: r.connection_attempts,
    retryIntervalMs: r.connection_retry_interval * 1000,
    cacheSize: r.connection_cache_size,
    maxConcurrentPerBmc: r.max_concurrent_requests_per_bmc,
    authType: r.auth_type,
    timeoutMs: r.request_timeout * 1000,
    powerStateChangeTimeoutMs: r.power_state_change_timeout * 1000,
    agentBoot: agentBootDefaults(config),
    firmware: { statusIntervalMs: r.firmware_update_status_interval * 1000, overallTimeoutMs: r.firmware_update_overall_timeout * 1000 },
  };
}

export class RedfishDriver {
  readonly client: RedfishClient;
  readonly power: RedfishPower;
  readonly management: RedfishManagement;
  /** `redfish-virtual-media`. */
  readonly boot: RedfishVirtualMediaBoot;
  /** `redfish-https`. */
  readonly httpsBoot: RedfishHttpsBoot;
  /** `redfish` (out-of-band). */
  readonly inspect: RedfishInspect;
  /** `redfish` (event subscriptions). */
  readonly vendor: RedfishVendor;
  /** `redfish`: settings through the Bios resource and its registry. */
  readonly bios: RedfishBios;
  readonly raid: RedfishRaid;
  readonly firmware: RedfishFirmware;
  /** The conductor's agent ISOs, for the boot interfaces built on this driver (iDRAC's). */
  readonly images?: BootImages;

  /** `images`: the conductor's agent ISOs (absent in the API, which only validates). */
  constructor(options: RedfishOptions, log: Logger, budget?: BmcBudget, images?: BootImages) {
    this.client = new RedfishClient(options, log.child({ driver: 'redfish' }), budget);
    this.power = new RedfishPower(this.client);
    this.management = new RedfishManagement(this.client);
    this.images = images;
    this.boot = new RedfishVirtualMediaBoot(this.client, options.vmediaRetry, options.agentBoot, images);
    // The ISO it boots over HTTP is the one virtual media would insert.
    this.httpsBoot = new RedfishHttpsBoot(this.client, this.boot);
    this.inspect = new RedfishInspect(this.client);
    this.vendor = new RedfishVendor(this.client);
    this.bios = new RedfishBios(this.client);
    this.raid = new RedfishRaid(this.client);
    this.firmware = new RedfishFirmware(this.client, options.firmware ?? DEFAULT_FIRMWARE_OPTIONS);
  }

  /** Logs out every cached session and closes every connection pool. */
  close(): Promise<void> {
    return this.client.close();
  }
}
