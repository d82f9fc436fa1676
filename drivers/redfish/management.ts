/**
 * The `redfish` management interface: boot device through the system's Boot override
 * (BootSourceOverrideTarget / BootSourceOverrideEnabled), with the targets the BMC advertises,
 * a PATCH that carries If-Match when the BMC gave an ETag (and retries once with a fresh one
 * on 412/428), and sensor data (sensors.ts).
 */
import { BmcRejected, InvalidParameterValue } from '../../common/errors.js';
import type { BootDevice, DriverContext, ManagementInterface, SensorData } from '../interfaces.js';
import { statusError, type RedfishCall, type RedfishClient, type Reply, type Resource } from './client.js';
import { isObject, prop, str, type Json } from './odata.js';
import { readSensors } from './sensors.js';
import { getSystem, TOPOLOGY_TTL_MS } from './system.js';
import { readNics } from './inventory.js';

/** Ironic's BOOT_DEVICE_MAP (drivers/modules/redfish/management.py). */
const TO_IRONIC: Readonly<Record<string, string>> = {
  Pxe: 'pxe',
  Hdd: 'disk',
  Cd: 'cdrom',
  BiosSetup: 'bios',
  UefiHttp: 'uefi-http',
  Usb: 'usb',
};
const TO_REDFISH: Readonly<Record<string, string>> = Object.fromEntries(Object.entries(TO_IRONIC).map(([k, v]) => [v, k]));

function bootOf(body: Json): Json | null {
  const b = prop(body, 'Boot');
  return isObject(b) ? b : null;
}

/** Ironic names of the targets a Boot object allows (all mapped ones when it does not say). */
function supportedDevices(boot: Json | null): string[] {
  if (!boot) return [];
  const allowed = boot['BootSourceOverrideTarget@Redfish.AllowableValues'];
  if (!Array.isArray(allowed)) return Object.values(TO_IRONIC);
  const out: string[] = [];
  for (const t of allowed) {
    const d = typeof t === 'string' ? TO_IRONIC[t] : undefined;
    if (d && !out.includes(d)) out.push(d);
  }
  return out;
}

/**
 * PATCHes the system with If-Match when the BMC gave an ETag, reading it again once for a
 * fresh one on 412/428. Returns the answer; the caller decides what a status means.
 */
export async function patchSystem(call: RedfishCall, system: Resource, body: Json): Promise<Reply> {
  const send = (etag: string | null): Promise<Reply> => call.send('PATCH', system.path, { body, headers: etag ? { 'if-match': etag } : {} });
  const r = await send(system.etag);
  if (r.status !== 412 && r.status !== 428) return r;
  // Stale ETag (someone changed the system since our GET) or one required: read it again, once.
  const fresh = await getSystem(call);
  return send(fresh.etag ?? '*');
}

export class RedfishManagement implements ManagementInterface {
  constructor(protected readonly client: RedfishClient) {}

  validate(driverInfo: Readonly<Record<string, unknown>>): void {
    this.client.parse(driverInfo);
  }

  /** @throws BmcTimeout | BmcUnreachable | BmcAuthFailed | BmcRejected | BmcBadResponse */
  async getBootDevice(ctx: DriverContext): Promise<BootDevice> {
    const boot = bootOf((await this.client.run(ctx, getSystem)).body);
    if (!boot) return { bootDevice: null, persistent: null };
    const target = str(boot.BootSourceOverrideTarget);
    const enabled = str(boot.BootSourceOverrideEnabled);
    return {
      bootDevice: target === null ? null : (TO_IRONIC[target] ?? null),
      persistent: enabled === 'Continuous' ? true : enabled === 'Once' ? false : null,
    };
  }

  /**
   * The MACs of the system's enabled EthernetInterfaces (Ironic's redfish get_mac_addresses),
   * lower-case. @throws BmcTimeout | BmcUnreachable | BmcAuthFailed | BmcRejected | BmcBadResponse
   */
  async getMacAddresses(ctx: DriverContext): Promise<string[]> {
    const nics = await this.client.run(ctx, async (call) => readNics(call, (await getSystem(call)).body));
    return nics.filter((n) => n.state === 'Enabled' && n.mac && /^([0-9a-f]{2}[-:]){5}[0-9a-f]{2}$/i.test(n.mac))
      .map((n) => (n.mac as string).toLowerCase().replace(/-/g, ':'));
  }

  /** The advertised targets, remembered per BMC (they change only with its firmware). */
  async getSupportedBootDevices(ctx: DriverContext): Promise<string[]> {
    const devices = await this.client.run(ctx, (call) =>
      call.endpoint.memo(`sys:${call.info.systemId ?? ''}:boot-devices`, TOPOLOGY_TTL_MS, async (c) => supportedDevices(bootOf((await getSystem(c)).body)), call),
    );
    return [...devices];
  }

  /**
   * Sets the boot override once (`persistent` false) or for every boot.
   * @throws InvalidParameterValue for a device the BMC does not offer; BmcRejected when the system has no Boot override
   */
  async setBootDevice(ctx: DriverContext, device: string, persistent: boolean): Promise<void> {
    const target = TO_REDFISH[device];
    if (!target) throw new InvalidParameterValue(`Redfish: boot device ${device} is not supported; valid boot devices are: ${Object.values(TO_IRONIC).join(', ')}.`);
    await this.client.run(ctx, (call) => this.patchBoot(call, device, target, persistent));
  }

  private async patchBoot(call: RedfishCall, device: string, target: string, persistent: boolean): Promise<void> {
    const system = await getSystem(call);
    const boot = bootOf(system.body);
    if (!boot) throw new BmcRejected(`The system ${call.info.origin}${system.path} has no Boot object: its boot device cannot be set.`);
    const supported = supportedDevices(boot);
    if (!supported.includes(device)) {
      throw new InvalidParameterValue(`Redfish: the BMC at ${call.info.origin} does not offer boot device ${device}; valid boot devices are: ${supported.join(', ')}.`);
    }
    const enabled = persistent ? 'Continuous' : 'Once';
    const patch: Json = { BootSourceOverrideTarget: target };
    // As Ironic: only send Enabled when it changes; some BMCs reject a no-op change of it.
    if (str(boot.BootSourceOverrideEnabled) !== enabled) patch.BootSourceOverrideEnabled = enabled;
    const r = await patchSystem(call, system, { Boot: patch });
    if (r.status < 200 || r.status >= 300) throw statusError(r, `Redfish PATCH ${call.info.origin}${system.path}`);
    call.log.debug({ bmc: call.info.origin, target, enabled }, 'Redfish boot override set');
  }

  /** Ironic's detect_vendor: the system's Manufacturer. @throws BmcTimeout | BmcUnreachable | BmcAuthFailed | BmcRejected | BmcBadResponse */
  async detectVendor(ctx: DriverContext): Promise<string | null> {
    return str((await this.client.run(ctx, getSystem)).body.Manufacturer)?.trim() || null;
  }

  /** @throws BmcTimeout | BmcUnreachable | BmcAuthFailed | BmcRejected | BmcBadResponse */
  getSensorDataAsync(ctx: DriverContext): Promise<SensorData> {
    return this.client.run(ctx, readSensors);
  }
}
