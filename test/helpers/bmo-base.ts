/**
 * The plumbing of the BMO provisioner re-told in bmo.ts: what BMO is told (the host's spec, its
 * BMC, its settings), clients.NodeUpdater's JSON patches, and the calls every provisioner method
 * makes over gophercloud (the node, its update, its provision and power state changes,
 * maintenance), with the controller's requeue loop.
 */
import { expect } from 'chai';
import { setTimeout as sleep } from 'node:timers/promises';
import { GopherClient, NODE, PORT, VERSION_DOC, type GoCall } from './gophercloud.js';

/** What Metal3's ironic-image enables, of what Galvanic has (its ironic.conf's enabled_*_interfaces). */
export const METAL3_ENV: Record<string, string> = {
  GALVANIC_DEFAULT__ENABLED_BIOS_INTERFACES: 'no-bios,redfish',
  GALVANIC_DEFAULT__ENABLED_BOOT_INTERFACES: 'pxe,fake,redfish-virtual-media',
  GALVANIC_DEFAULT__ENABLED_DEPLOY_INTERFACES: 'direct,fake,ramdisk,custom-agent',
  GALVANIC_DEFAULT__DEFAULT_DEPLOY_INTERFACE: 'direct',
  GALVANIC_DEFAULT__ENABLED_FIRMWARE_INTERFACES: 'no-firmware,fake,redfish',
  GALVANIC_DEFAULT__ENABLED_INSPECT_INTERFACES: 'agent,fake,redfish,no-inspect',
  GALVANIC_DEFAULT__ENABLED_RAID_INTERFACES: 'no-raid,fake,redfish',
  GALVANIC_DEFAULT__ENABLED_VENDOR_INTERFACES: 'no-vendor,redfish,fake',
  // Metal3 erases metadata only in automated cleaning.
  GALVANIC_DEPLOY__ERASE_DEVICES_PRIORITY: '0',
  GALVANIC_DEPLOY__ERASE_DEVICES_METADATA_PRIORITY: '10',
};

export type Json = Record<string, unknown>;
export type IronicNode = Json & {
  uuid: string; name: string | null; provision_state: string; target_provision_state: string | null; power_state: string | null;
  target_power_state: string | null; last_error: string | null; maintenance: boolean; fault: string | null; instance_uuid: string | null;
  instance_info: Json; driver_info: Json; properties: Json; deploy_interface: string; inspect_interface: string; raid_interface: string;
  automated_clean: boolean | null; disable_power_off: boolean;
};

/** provisioner.Result. */
export interface Result {
  dirty: boolean;
  errorMessage?: string;
}
export const complete = (): Result => ({ dirty: false });
export const continuing = (): Result => ({ dirty: true });
export const failed = (errorMessage: string): Result => ({ dirty: false, errorMessage });

/** What BMO's host spec says, the parts the provisioner reads (ManagementAccessData and friends). */
export interface HostData {
  bootMode: 'UEFI' | 'legacy';
  automatedCleaning: boolean;
  inspectionMode: 'agent' | 'fast';
  /** The image to provision; `liveIso` makes it a live ISO (ramdisk deploy). */
  image?: { url: string; checksum?: string; checksumType?: 'sha256' | 'md5'; diskFormat?: string; liveIso?: boolean };
  /** spec.customDeploy.method. */
  customDeploy?: string;
  userData?: string;
  networkData?: Json;
  /** spec.raid.hardwareRAIDVolumes as logical disks (size_gb null means MAX). */
  raidVolumes?: Array<{ sizeGibibytes: number | null; level: string; name?: string }>;
  /** HostFirmwareSettings spec: name → value (a number for integer settings, as intstr). */
  biosSettings?: Record<string, string | number>;
  /** HostFirmwareComponents spec.updates. */
  firmwareUpdates?: Array<{ component: string; url: string }>;
}

export interface HostIdentity {
  namespace: string;
  name: string;
  /** The BareMetalHost's metadata.uid, which BMO makes the node's instance_uuid. */
  uid: string;
  /** `redfish-virtualmedia+http://host:port/redfish/v1/Systems/<id>`. */
  bmcAddress: string;
  username: string;
  password: string;
  bootMACAddress?: string;
}

/** The provisioner's settings from BMO's environment (DEPLOY_ISO_URL, no PreprovisioningImage builder). */
export interface BmoConfig {
  deployIsoUrl: string;
  /** Requeue delays (BMO: 3 s and 10 s). */
  shortDelayMs: number;
  longDelayMs: number;
}

export const CAPABILITIES: Record<HostData['bootMode'], string> = { UEFI: 'boot_mode:uefi', legacy: 'boot_mode:bios' };

/** bmc.redfishVirtualMediaAccessDetails.DriverInfo. */
export function driverInfoOf(host: HostIdentity): Json {
  const url = new URL(host.bmcAddress.replace(/^redfish-virtualmedia\+/, ''));
  const info: Json = { redfish_username: host.username, redfish_password: host.password, redfish_address: `${url.protocol}//${url.host}` };
  const trimmed = url.pathname.replace(/^\/+|\/+$/g, '');
  if (trimmed !== '' && trimmed !== 'redfish/v1') info.redfish_system_id = url.pathname;
  return info;
}

/** clients.NodeUpdater: JSON patch operations for the values that differ (add also replaces; null removes). */
export class Updater {
  readonly ops: Json[] = [];
  section(current: Json | null | undefined, settings: Json, base: string): this {
    for (const [name, desired] of Object.entries(settings)) this.top(name, desired, current ?? {}, base);
    return this;
  }
  top(name: string, desired: unknown, current: Json, base = ''): this {
    const present = name in current;
    const path = `${base}/${name}`;
    if (desired !== null && desired !== undefined) {
      if (!(present && JSON.stringify(current[name]) === JSON.stringify(desired))) this.ops.push({ op: 'add', path, value: desired });
    } else if (present) {
      this.ops.push({ op: 'remove', path });
    }
    return this;
  }
}

/** A host as BMO's provisioner sees it: its node's UUID once registered, and the calls to Ironic. */
export class BmoBase {
  nodeId = '';
  readonly client: GopherClient;

  constructor(apiUrl: string, readonly host: HostIdentity, readonly config: BmoConfig) {
    this.client = new GopherClient(`${apiUrl}/v1/`);
  }

  /** clients.GetAvailableFeatures + ChooseMicroversion: the versioned endpoint's document, read at BMO's baseline. */
  async discover(): Promise<string> {
    const doc = await this.client.expectOk<{ version: { id: string; status: string; version: string; min_version: string } }>({ method: 'GET', path: '', ok: [200, 300], decode: VERSION_DOC });
    expect(doc.version.id).to.match(/^v?\d+(\.\d+)?$/);
    expect(['CURRENT', 'STABLE', 'SUPPORTED', 'DEPRECATED', '']).to.include(doc.version.status.toUpperCase());
    const [major, minor] = doc.version.version.split('.').map(Number);
    expect(major).to.equal(1);
    expect(minor, 'BMO needs 1.89 at least').to.be.at.least(89);
    const chosen = minor >= 110 ? '1.110' : minor >= 109 ? '1.109' : minor >= 95 ? '1.95' : minor >= 93 ? '1.93' : '1.89';
    this.client.microversion = chosen;
    return chosen;
  }

  protected call(c: GoCall) {
    return this.client.request(c);
  }

  /** getNode: the node by its UUID (BMO caches it for one reconcile; each call here is a reconcile). */
  async getNode(): Promise<IronicNode> {
    return this.client.expectOk<IronicNode>({ method: 'GET', path: `nodes/${this.nodeId}`, decode: NODE });
  }

  protected async ports(query: string): Promise<Array<{ uuid: string; address: string; node_uuid: string }>> {
    const page = await this.client.expectOk<{ ports: Array<{ uuid: string; address: string; node_uuid: string }> }>({
      method: 'GET', path: `ports?${query}fields=node_uuid%2Cuuid%2Caddress`, decode: { struct: { ports: { list: PORT } } },
    });
    return page.ports;
  }

  /** buildCapabilitiesValue: the node's capabilities with boot_mode (and secure_boot) replaced. */
  protected capabilities(node: IronicNode | null, data: HostData): string {
    const existing = node?.properties.capabilities;
    if (typeof existing !== 'string' || existing === '') return CAPABILITIES[data.bootMode];
    const kept = existing.split(',').filter((c) => !c.startsWith('boot_mode:') && !c.startsWith('secure_boot:'));
    return [...kept, CAPABILITIES[data.bootMode]].join(',');
  }

  /** tryUpdateNode: PATCH when there is something to change; 409 means later. */
  protected async tryUpdate(node: IronicNode, updater: Updater): Promise<IronicNode | null> {
    if (updater.ops.length === 0) return node;
    const res = await this.call({ method: 'PATCH', path: `nodes/${node.uuid}`, body: updater.ops, ok: [200], decode: NODE });
    if (res.status === 409) return null;
    expect(res.ok, `PATCH ${JSON.stringify(updater.ops)}: ${res.status} ${res.text}`).to.equal(true);
    return res.body as IronicNode;
  }

  /** tryChangeNodeProvisionState: not with a fault; out of maintenance first; 409 means later. */
  protected async changeProvisionState(node: IronicNode, opts: Json): Promise<Result> {
    if (node.fault) return continuing();
    if (node.maintenance) return this.setMaintenance(node, false);
    const res = await this.call({ method: 'PUT', path: `nodes/${node.uuid}/states/provision`, body: opts, ok: [202] });
    if (res.status === 409) return continuing();
    expect(res.ok, `provision ${JSON.stringify(opts)}: ${res.status} ${res.text}`).to.equal(true);
    return continuing();
  }

  protected async setMaintenance(node: IronicNode, on: boolean, reason?: string): Promise<Result> {
    const res = on
      ? await this.call({ method: 'PUT', path: `nodes/${node.uuid}/maintenance`, body: reason ? { reason } : {}, ok: [202] })
      : await this.call({ method: 'DELETE', path: `nodes/${node.uuid}/maintenance`, ok: [202] });
    expect(res.ok, `maintenance ${on}: ${res.status} ${res.text}`).to.equal(true);
    return continuing();
  }

  /** changePower: not while a provision state change is under way. */
  protected async changePower(node: IronicNode, target: string): Promise<Result> {
    if (node.target_provision_state) return continuing();
    const res = await this.call({ method: 'PUT', path: `nodes/${node.uuid}/states/power`, body: target === 'soft power off' ? { target, timeout: 180 } : { target }, ok: [202] });
    if (res.status === 409) return continuing();
    expect(res.ok, `power ${target}: ${res.status} ${res.text}`).to.equal(true);
    return continuing();
  }

  /**
   * Calls one provisioner method until it is no longer dirty, as the controller requeues it;
   * an error message (a failed host) fails the test unless `allowFailure`.
   */
  async reconcile<R extends Result>(what: string, step: () => Promise<R>, opts: { timeoutMs?: number; long?: boolean; allowFailure?: boolean } = {}): Promise<R> {
    const deadline = Date.now() + (opts.timeoutMs ?? 30_000);
    for (;;) {
      const r = await step();
      if (!r.dirty) {
        if (!opts.allowFailure) expect(r.errorMessage, `${what} failed`).to.equal(undefined);
        return r;
      }
      if (Date.now() > deadline) throw new Error(`${what} still dirty after ${opts.timeoutMs ?? 30_000} ms: ${JSON.stringify(await this.getNode().catch(() => null))}`);
      await sleep(opts.long ? this.config.longDelayMs : this.config.shortDelayMs);
    }
  }
}
