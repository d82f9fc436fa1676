/**
 * The `redfish-virtual-media` boot interface, the part a ramdisk deploy uses (Ironic's
 * `RedfishVirtualMediaBoot.prepare_instance` / `clean_up_instance`): eject, sync the boot
 * mode, insert the ISO as a virtual CD (the config drive as a USB stick), boot from it.
 * The ISO URL is handed to the BMC as is (Ironic's `ramdisk_image_download_source = http`).
 */
import { BmcRejected, InvalidParameterValue, VirtualMediaUnavailable } from '../../common/errors.js';
import type { BootInterface, DriverContext, InstanceBootRequest, RamdiskBootRequest, VirtualMediaDevice, VirtualMediaSlot } from '../interfaces.js';
import { NO_AGENT_BOOT_DEFAULTS, agentImage, agentKernelCmdline, type AgentBootDefaults } from '../agent-boot.js';
import { BootImages } from '../image/boot-images.js';
import { decodeConfigdrive } from '../image/configdrive.js';
import { statusError, type RedfishCall, type RedfishClient } from './client.js';
import { patchSystem } from './management.js';
import { isObject, linkPaths, prop, str, type Json } from './odata.js';
import { getSystem } from './system.js';
import { DEFAULT_VMEDIA_RETRY, ejectAll, findCollections, insertImage, slotsFor, readSlots, type MediaType, type Slot, type VirtualMediaRetry } from './vmedia.js';

/** What this interface may leave inserted: the ISO (a CD, or a DVD-only slot) and the config drive. */
const OWN_MEDIA: readonly MediaType[] = ['CD', 'DVD', 'USBStick'];
const REDFISH_BOOT_MODE = { uefi: 'UEFI', bios: 'Legacy' } as const;
const IMAGE_URL = /^(https?|nfs|cifs):\/\//i;

/**
 * The ISO's `ir_pub_id`: Ironic draws a UUID per build; here it names what the ISO is built
 * from, so that it is the same for every node sharing the ISO, and differs between images.
 */
function publisherId(sources: string, cmdline: string): string {
  const h = BootImages.isoKey('ir_pub_id', sources, cmdline);
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
}

/** driver_info external_http_url: the base of the URLs its BMC gets, instead of the conductor's. */
function bmcBaseUrl(driverInfo: Readonly<Record<string, unknown>>): string | undefined {
  const url = driverInfo.external_http_url;
  return typeof url === 'string' && url ? url : undefined;
}

/** Ironic's VMEDIA_DEVICES_MAP_REV (cdrom → CD, disk → USB stick); a CD may go where only DVD is offered. */
const DEVICE_MEDIA: Readonly<Record<VirtualMediaDevice, MediaType>> = { cdrom: 'CD', disk: 'USBStick', floppy: 'Floppy' };
/** What ejecting a device's medium covers: a CD slot may be a DVD-only one (sushy's Cisco workaround). */
const DEVICE_EJECT: Readonly<Record<VirtualMediaDevice, readonly MediaType[]>> = { cdrom: ['CD', 'DVD'], disk: ['USBStick'], floppy: ['Floppy'] };

export function bootOf(body: Json): Json | null {
  const b = prop(body, 'Boot');
  return isObject(b) ? b : null;
}

export function allowed(boot: Json, key: string): string[] | null {
  const v = boot[`${key}@Redfish.AllowableValues`];
  return Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : null;
}

function isSupermicro(system: Json): boolean {
  return /supermicro/i.test(str(prop(system, 'Manufacturer')) ?? '');
}

/**
 * The override target for a virtual CD: `Cd`, or `UsbCd` where the BMC offers only that and
 * on Supermicro, whose virtual CD is attached as USB (sushy system.py, f7c873f).
 */
function cdTarget(call: RedfishCall, system: Json, boot: Json): string {
  const targets = allowed(boot, 'BootSourceOverrideTarget');
  if (targets === null) return 'Cd';
  if (targets.includes('UsbCd') && (isSupermicro(system) || !targets.includes('Cd'))) return 'UsbCd';
  if (targets.includes('Cd')) return 'Cd';
  throw new VirtualMediaUnavailable(`The BMC at ${call.info.origin} does not offer to boot from a virtual CD: BootSourceOverrideTarget allows only ${targets.join(', ')}.`);
}

/** PATCHes BootSourceOverrideMode when the node names a mode the BMC does not have (Ironic's sync_boot_mode). */
export async function syncBootMode(call: RedfishCall, mode: InstanceBootRequest['bootMode']): Promise<void> {
  if (!mode) return;
  const system = await getSystem(call);
  const boot = bootOf(system.body);
  const wanted = REDFISH_BOOT_MODE[mode];
  const current = boot ? str(boot.BootSourceOverrideMode) : null;
  if (!boot || current === wanted) return;
  if (current === null && allowed(boot, 'BootSourceOverrideMode') === null) {
    call.log.info({ bmc: call.info.origin, mode }, 'Redfish system does not expose its boot mode; not syncing it');
    return;
  }
  const r = await patchSystem(call, system, { Boot: { BootSourceOverrideMode: wanted } });
  if (r.status < 200 || r.status >= 300) {
    throw statusError(r, `Setting the boot mode of ${call.info.origin}${system.path} to ${wanted} (the node's boot_mode capability is ${mode})`);
  }
  call.log.info({ bmc: call.info.origin, from: current, to: wanted }, 'Redfish boot mode synced');
}

export class RedfishVirtualMediaBoot implements BootInterface {
  readonly ramdiskBoot = true;

  /**
   * `retry` paces the waits for a slot to eject and the retries of an insert refused with 5xx.
   * `images` builds and publishes the agent's ISO; a process without it (the API) only validates.
   */
  constructor(
    protected readonly client: RedfishClient,
    private readonly retry: VirtualMediaRetry = DEFAULT_VMEDIA_RETRY,
    private readonly agentBoot: AgentBootDefaults = NO_AGENT_BOOT_DEFAULTS,
    private readonly images?: BootImages,
  ) {}

  /** @throws InvalidDriverInfo */
  validate(driverInfo: Readonly<Record<string, unknown>>): void {
    this.client.parse(driverInfo);
  }

  /** The call's budget: the node's redfish_timeout plus the waits the retries may take. */
  private get extraMs(): number {
    return 4 * this.retry.attempts * this.retry.intervalMs;
  }

  /**
   * Ejects the CD/DVD (and the USB stick when a config drive comes), syncs the boot mode,
   * inserts the ISO, attaches the config drive as a USB stick (Ironic's _attach_configdrive),
   * and sets the next boots to the CD. Does not power on. The config drive's image is published
   * and a USB slot found before anything is ejected: a deploy that cannot attach it changes nothing.
   * @throws InvalidParameterValue | VirtualMediaUnavailable | ImageCreationFailed | ImagePublishFailed | BmcRejected | BmcTimeout | BmcUnreachable | BmcAuthFailed
   */
  prepareInstance(ctx: DriverContext, req: InstanceBootRequest): Promise<void> {
    return this.mountAndBoot(ctx, req);
  }

  /**
   * prepareInstance's work; `vendor` (the agent's boot only) is first checked as Ironic's
   * prepare_ramdisk does. An ISO still being made (a promise) is waited for once the BMC has
   * been read, before anything at the node changes.
   */
  private async mountAndBoot(ctx: DriverContext, req: Omit<InstanceBootRequest, 'bootIso'> & { bootIso?: string | Promise<string> }, vendor?: string | null): Promise<void> {
    const checked = (iso: string | undefined): string => {
      if (iso === undefined || !IMAGE_URL.test(iso)) {
        throw new InvalidParameterValue(`instance_info/boot_iso ${JSON.stringify(iso)} is not a URL the BMC can fetch (http, https, nfs or cifs).`);
      }
      return iso;
    };
    if (!(req.bootIso instanceof Promise)) checked(req.bootIso);
    const configdrive = req.configdrive ? await this.configdriveUrl(ctx, req.configdrive) : undefined;
    await this.client.run(ctx, async (call) => {
      if (vendor !== undefined) await this.checkVendor(call, ctx.nodeUuid, vendor);
      const collections = await findCollections(call);
      const iso = checked(await req.bootIso);
      if (!collections.length) {
        throw new VirtualMediaUnavailable(
          `No suitable virtual media device found for node ${ctx.nodeUuid} to mount image ${iso}: the BMC at ${call.info.origin} has no VirtualMedia on the system or its managers.`,
        );
      }
      if (configdrive) {
        const usb = (await Promise.all(collections.map((c) => readSlots(call, c)))).flatMap((slots) => slotsFor(slots, 'USBStick'));
        if (!usb.length) throw new VirtualMediaUnavailable(`Cannot attach configdrive for node ${ctx.nodeUuid}: no suitable virtual USB slot has been found`);
      }
      // The slots read by the eject are still current where it ejected nothing: the insert
      // takes them as read (three GETs fewer per boot on a BMC with a CD and a USB slot).
      const unchanged = new Map<string, Slot[]>();
      await ejectAll(call, collections, configdrive ? OWN_MEDIA : ['CD', 'DVD'], this.retry, unchanged);
      await syncBootMode(call, req.bootMode);
      await insertImage(call, ctx.nodeUuid, collections, 'CD', iso, this.retry, unchanged);
      if (configdrive) await insertImage(call, ctx.nodeUuid, collections, 'USBStick', configdrive, this.retry);
      const system = await this.setCdBoot(call, ctx.nodeUuid, req.forcePersistentBootDevice !== 'Never');
      // Some Supermicro BMCs reset the mode when the device is set (Ironic management.py).
      if (isSupermicro(system)) await syncBootMode(call, req.bootMode);
    }, this.extraMs);
  }

  /** The agent's image is found (driver_info deploy_iso, or a kernel and ramdisk: see agent-boot.ts). @throws MissingParameterValue | InvalidParameterValue */
  validateRamdisk(nodeUuid: string, driverInfo: Readonly<Record<string, unknown>>): void {
    agentImage({ uuid: nodeUuid, driverInfo }, this.agentBoot);
  }

  /**
   * Ironic's prepare_ramdisk: the vendor checked, the agent's ISO (built from a kernel and
   * ramdisk, or given, see agentIsoUrl) inserted and booted once (the boot device is not kept).
   * The ISO is made while the BMC is read (its vendor, its virtual media) and is ready before
   * anything at the node changes: an image that cannot be had changes nothing there. Made first,
   * its downloads checked, its build found and its link into the HTTP root queued behind a
   * thousand others' on the file system's threads, it held the first BMC request of the last
   * nodes of a 1,000-node deploy back by about 0.5 s.
   */
  async prepareRamdisk(ctx: DriverContext, req: RamdiskBootRequest): Promise<void> {
    const iso = this.agentIsoUrl(ctx, req);
    // Awaited by mountAndBoot; a BMC read that fails first leaves it unawaited.
    iso.catch(() => undefined);
    await this.mountAndBoot(ctx, { bootIso: iso, forcePersistentBootDevice: 'Never', ...(req.bootMode ? { bootMode: req.bootMode } : {}) }, req.vendor ?? null);
  }

  /**
   * Ironic's _validate_vendor: an iDRAC before firmware 6 boots the physical drive for a `Cd`
   * override, so a Dell node needs idrac-redfish-virtual-media there.
   * @throws InvalidParameterValue
   */
  protected async checkVendor(call: RedfishCall, nodeUuid: string, vendor: string | null): Promise<void> {
    if (!vendor || !vendor.split(/\s+/).includes('Dell')) return;
    const system = await getSystem(call);
    const links = prop(system.body, 'Links');
    let version: string | null = null;
    for (const path of isObject(links) ? linkPaths(prop(links, 'ManagedBy')) : []) {
      const manager = (await call.get(path)).body;
      if (str(manager.ManagerType) === 'BMC') {
        version = str(manager.FirmwareVersion) ?? '';
        break;
      }
    }
    if (version !== null && Number.parseInt(version.split('.')[0], 10) >= 6) return;
    throw new InvalidParameterValue(
      `The redfish-virtual-media boot interface is not suitable for node ${nodeUuid} with vendor ${vendor} and BMC version ${version ?? 'unknown'}, upgrade to 6.00.00.00 or newer or use idrac-redfish-virtual-media instead`,
    );
  }

  /**
   * The URL the BMC gets for the agent: an ISO built from the kernel and ramdisk and published
   * in the HTTP root (Ironic's prepare_deploy_iso); a given deploy_iso as it is, or, with
   * `ramdisk_image_download_source = local`, published unchanged (Ironic does not re-master it),
   * or with `[deploy] remaster_deploy_iso` re-mastered with the same command line.
   * @throws MissingParameterValue | InvalidParameterValue | ImageDownloadFailed | ImageChecksumError | ImagePublishFailed
   */
  async agentIsoUrl(ctx: DriverContext, req: RamdiskBootRequest): Promise<string> {
    const image = agentImage({ uuid: ctx.nodeUuid, driverInfo: ctx.driverInfo }, this.agentBoot);
    const fetchable = image.kind === 'kernel' || /^https?:/i.test(image.url);
    const remaster = image.kind === 'iso' && fetchable && this.agentBoot.remasterDeployIso;
    if (image.kind === 'iso' && !remaster && (this.agentBoot.downloadSource === 'http' || !fetchable)) return image.url;
    if (!this.images) throw new InvalidParameterValue('This process has no HTTP root to publish the agent ISO in: only a conductor boots the agent.');
    const baseUrl = bmcBaseUrl(ctx.driverInfo);
    if (image.kind === 'iso' && !remaster) return this.images.publishIso(ctx.nodeUuid, { url: image.url }, baseUrl);
    const inputs = image.kind === 'iso' ? { baseIso: { url: image.url } } : { kernel: image.kernel, ramdisk: image.ramdisk };
    const { cmdline, publisherId: pubId } = agentKernelCmdline(
      { nodeUuid: ctx.nodeUuid, driverInfo: ctx.driverInfo, instanceKernelAppendParams: req.instanceKernelAppendParams, purpose: req.purpose ?? 'deploy' },
      this.agentBoot,
      (withoutId) => publisherId(Object.values(inputs).map((r) => r.url).join('\n'), withoutId),
    );
    ctx.log.info({ ...Object.fromEntries(Object.entries(inputs).map(([k, r]) => [k, r.url])), cmdline }, 'publishing the agent ISO');
    return this.images.publishAgentIso(ctx.nodeUuid, {
      ...inputs, cmdline, publisherId: pubId, ...(req.bootMode ? { bootMode: req.bootMode } : {}), ...(baseUrl ? { baseUrl } : {}),
    });
  }

  /** Ironic's clean_up_ramdisk: what prepareRamdisk inserted ejected, the override cleared, the ISO withdrawn. */
  cleanUpRamdisk(ctx: DriverContext): Promise<void> {
    return this.cleanUpInstance(ctx);
  }

  /**
   * Ejects every CD, DVD and USB stick medium and clears the boot override. A BMC that
   * refuses to clear the override only gets a warning: with nothing inserted, a CD boot falls through.
   * @throws VirtualMediaUnavailable | BmcRejected | BmcTimeout | BmcUnreachable | BmcAuthFailed
   */
  async cleanUpInstance(ctx: DriverContext): Promise<void> {
    await this.client.run(ctx, async (call) => {
      await ejectAll(call, await findCollections(call), OWN_MEDIA, this.retry);
      const system = await getSystem(call);
      const boot = bootOf(system.body);
      if (!boot || (str(boot.BootSourceOverrideEnabled) ?? 'Disabled') === 'Disabled') return;
      const patch: Json = { BootSourceOverrideEnabled: 'Disabled' };
      const targets = allowed(boot, 'BootSourceOverrideTarget');
      if (targets === null || targets.includes('None')) patch.BootSourceOverrideTarget = 'None';
      const r = await patchSystem(call, system, { Boot: patch });
      if (r.status < 200 || r.status >= 300) {
        call.log.warn({ bmc: call.info.origin, err: statusError(r, 'PATCH').message }, 'Redfish boot override not cleared');
      }
    }, this.extraMs);
    // Withdrawn once ejected, as Ironic's _eject_all then cleanup_iso_image; an eject that fails leaves it to the sweep.
    await this.withdrawIso(ctx);
  }

  /** Withdraws the node's published ISO, if any (Ironic's cleanup_iso_image). */
  async withdrawIso(ctx: DriverContext): Promise<void> {
    await this.images?.withdraw(ctx.nodeUuid);
  }

  /**
   * Inserts an image as Ironic's RedfishManagement.attach_virtual_media does (insert_vmedia):
   * into the first free slot fit for the device, on the system or its managers.
   * @throws VirtualMediaUnavailable | BmcRejected | BmcTimeout | BmcUnreachable | BmcAuthFailed
   */
  async attachMedia(ctx: DriverContext, device: VirtualMediaDevice, imageUrl: string): Promise<void> {
    await this.client.run(ctx, async (call) => {
      const collections = await findCollections(call);
      if (!collections.length) {
        throw new VirtualMediaUnavailable(`No suitable virtual media device found for node ${ctx.nodeUuid} to mount image ${imageUrl}: the BMC at ${call.info.origin} has no VirtualMedia on the system or its managers.`);
      }
      await insertImage(call, ctx.nodeUuid, collections, DEVICE_MEDIA[device], imageUrl, this.retry);
    }, this.extraMs);
  }

  /** Ejects the devices' media, or every medium when none are named (Ironic's eject_vmedia). */
  async detachMedia(ctx: DriverContext, devices?: readonly VirtualMediaDevice[]): Promise<void> {
    const types: MediaType[] = devices === undefined ? ['CD', 'DVD', 'USBStick', 'Floppy'] : devices.flatMap((d) => DEVICE_EJECT[d]);
    await this.client.run(ctx, async (call) => {
      await ejectAll(call, await findCollections(call), types, this.retry);
    }, this.extraMs);
  }

  /**
   * The slots of the system, or of the first manager that has any (Ironic's _get_vmedia).
   * @throws InvalidParameterValue when the BMC has none
   */
  async getMedia(ctx: DriverContext): Promise<VirtualMediaSlot[]> {
    return this.client.run(ctx, async (call) => {
      for (const collection of await findCollections(call)) {
        const slots = await readSlots(call, collection);
        if (slots.length) return slots.map((slot) => ({ media_types: slot.mediaTypes, inserted: slot.inserted, image: slot.image }));
      }
      throw new InvalidParameterValue('No suitable virtual media device found');
    });
  }


  /**
   * Boots from the virtual CD for every boot (`Continuous`), or for the next one only where
   * the BMC refuses that or the node asks for it (force_persistent_boot_device=Never). As
   * management.ts, `Enabled` is sent only when it changes (always to Supermicro, Ironic 4a7d50ce5).
   */
  protected async setCdBoot(call: RedfishCall, _nodeUuid: string, persistent: boolean): Promise<Json> {
    const system = await getSystem(call);
    const boot = bootOf(system.body);
    if (!boot) throw new BmcRejected(`The system ${call.info.origin}${system.path} has no Boot object: it cannot be set to boot from the virtual CD.`);
    const target = cdTarget(call, system.body, boot);
    const modes = allowed(boot, 'BootSourceOverrideEnabled');
    let enabled = persistent && (modes === null || modes.includes('Continuous')) ? 'Continuous' : 'Once';
    const body = (): Json => {
      const patch: Json = { BootSourceOverrideTarget: target };
      if (isSupermicro(system.body) || str(boot.BootSourceOverrideEnabled) !== enabled) patch.BootSourceOverrideEnabled = enabled;
      return { Boot: patch };
    };
    let r = await patchSystem(call, system, body());
    if (r.status === 400 && enabled === 'Continuous') {
      // Ironic 18a8e2f6e: a BMC that cannot keep an override gets a one-time one.
      call.log.warn({ bmc: call.info.origin, err: statusError(r, 'PATCH').message }, 'Redfish BMC refused a Continuous boot override; setting it Once');
      enabled = 'Once';
      r = await patchSystem(call, await getSystem(call), body());
    }
    if (r.status < 200 || r.status >= 300) throw statusError(r, `Setting ${call.info.origin}${system.path} to boot from ${target} (${enabled})`);
    call.log.info({ bmc: call.info.origin, target, enabled }, 'Redfish boot override set to the virtual CD');
    return system.body;
  }

  /**
   * The URL the BMC gets for the config drive: a URL as it is (as the ISO's); gzip + base64
   * decoded into the raw image, published in the HTTP root (Ironic's prepare_configdrive_image).
   * @throws InvalidParameterValue (no HTTP root) | ImageCreationFailed (not gzip + base64) | ImagePublishFailed
   */
  private async configdriveUrl(ctx: DriverContext, configdrive: string): Promise<string> {
    if (IMAGE_URL.test(configdrive)) return configdrive;
    if (!this.images) throw new InvalidParameterValue('This process has no HTTP root to publish the config drive in: only a conductor deploys.');
    return this.images.publishConfigdrive(ctx.nodeUuid, decodeConfigdrive(configdrive), bmcBaseUrl(ctx.driverInfo));
  }
}
