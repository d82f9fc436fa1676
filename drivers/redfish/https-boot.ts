/**
 * The `redfish-https` boot interface (Ironic's RedfishHttpsBoot, 2024.1): the node's UEFI
 * firmware boots the ISO over HTTP(S) itself, no virtual media involved. The boot override is
 * `BootSourceOverrideTarget: UefiHttp` with `HttpBootUri` naming the ISO: once for the agent,
 * always for a ramdisk deploy's instance. Nothing is inserted, so there is no place for a
 * config drive; a BMC that does not offer UefiHttp cannot be used.
 */
import { InvalidParameterValue, UnsupportedHardwareFeature } from '../../common/errors.js';
import type { BootInterface, DriverContext, InstanceBootRequest, RamdiskBootRequest } from '../interfaces.js';
import { allowed, bootOf, syncBootMode, type RedfishVirtualMediaBoot } from './boot.js';
import { statusError, type RedfishCall, type RedfishClient } from './client.js';
import { patchSystem } from './management.js';
import { str, type Json } from './odata.js';
import { getSystem } from './system.js';

const UEFI_HTTP = 'UefiHttp';
const HTTP_URL = /^https?:\/\//i;

export class RedfishHttpsBoot implements BootInterface {
  readonly ramdiskBoot = true;

  /** `isos`: where the agent's ISO comes from, the one virtual media would insert (built and published by the conductor, or given). */
  constructor(
    private readonly client: RedfishClient,
    private readonly isos: Pick<RedfishVirtualMediaBoot, 'agentIsoUrl' | 'validateRamdisk' | 'withdrawIso'>,
  ) {}

  /** @throws InvalidDriverInfo */
  validate(driverInfo: Readonly<Record<string, unknown>>): void {
    this.client.parse(driverInfo);
  }

  /** The agent's image is found (driver_info deploy_iso, or a kernel and ramdisk: see agent-boot.ts). @throws MissingParameterValue | InvalidParameterValue */
  validateRamdisk(nodeUuid: string, driverInfo: Readonly<Record<string, unknown>>): void {
    this.isos.validateRamdisk(nodeUuid, driverInfo);
  }

  /** Ironic's prepare_ramdisk: the agent's ISO ready (prepare_deploy_iso), the boot mode synced, the ISO booted once over HTTP. */
  async prepareRamdisk(ctx: DriverContext, req: RamdiskBootRequest): Promise<void> {
    const iso = await this.isos.agentIsoUrl(ctx, req);
    await this.client.run(ctx, async (call) => {
      await syncBootMode(call, req.bootMode);
      await this.setHttpBoot(call, ctx.nodeUuid, iso, false);
    });
  }

  /**
   * Ironic's prepare_instance for a ramdisk deploy: the boot mode synced, the instance's ISO
   * booted over HTTP at every boot. A config drive cannot be handed to the firmware this way.
   * @throws InvalidParameterValue | UnsupportedHardwareFeature | DriverError
   */
  async prepareInstance(ctx: DriverContext, req: InstanceBootRequest): Promise<void> {
    const iso = req.bootIso;
    if (iso === undefined || !HTTP_URL.test(iso)) {
      throw new InvalidParameterValue(`instance_info/boot_iso ${JSON.stringify(iso)} is not a URL the node's firmware can boot over HTTP (http or https).`);
    }
    if (req.configdrive) ctx.log.warn({ node: ctx.nodeUuid }, 'The redfish-https boot interface inserts no media: the config drive is not attached');
    await this.client.run(ctx, async (call) => {
      await syncBootMode(call, req.bootMode);
      await this.setHttpBoot(call, ctx.nodeUuid, iso, req.forcePersistentBootDevice !== 'Never');
    });
  }

  /** Ironic's clean_up_ramdisk, which has nothing inserted to take out; an HTTP boot override still set is cleared. */
  cleanUpRamdisk(ctx: DriverContext): Promise<void> {
    return this.cleanUpInstance(ctx);
  }

  /**
   * Clears a UefiHttp override this interface set, so that the node no longer boots the ISO
   * (what ejecting it is to virtual media), and withdraws a published ISO. Any other override
   * is left alone.
   */
  async cleanUpInstance(ctx: DriverContext): Promise<void> {
    await this.client.run(ctx, async (call) => {
      const system = await getSystem(call);
      const boot = bootOf(system.body);
      if (!boot || str(boot.BootSourceOverrideTarget) !== UEFI_HTTP || (str(boot.BootSourceOverrideEnabled) ?? 'Disabled') === 'Disabled') return;
      const targets = allowed(boot, 'BootSourceOverrideTarget');
      const patch: Json = { BootSourceOverrideEnabled: 'Disabled', HttpBootUri: null };
      if (targets === null || targets.includes('None')) patch.BootSourceOverrideTarget = 'None';
      const r = await patchSystem(call, system, { Boot: patch });
      if (r.status < 200 || r.status >= 300) call.log.warn({ bmc: call.info.origin, err: statusError(r, 'PATCH').message }, 'Redfish HTTP boot override not cleared');
    });
    await this.isos.withdrawIso(ctx);
  }

  /**
   * The UefiHttp override with its URI (sushy's set_system_boot_options with http_boot_uri);
   * `Enabled` sent only when it changes, and Once where Continuous is refused, as the
   * management interface does.
   * @throws UnsupportedHardwareFeature when the BMC does not offer UefiHttp; DriverError
   */
  private async setHttpBoot(call: RedfishCall, nodeUuid: string, url: string, persistent: boolean): Promise<void> {
    const system = await getSystem(call);
    const boot = bootOf(system.body);
    // Ironic's _validate_hardware: the BMC must list UefiHttp among its targets.
    const targets = boot ? allowed(boot, 'BootSourceOverrideTarget') : null;
    if (!boot || (targets !== null && !targets.includes(UEFI_HTTP))) throw new UnsupportedHardwareFeature(nodeUuid, 'UefiHttp boot');
    let enabled = persistent ? 'Continuous' : 'Once';
    const body = (current: Json | null): Json => {
      const patch: Json = { BootSourceOverrideTarget: UEFI_HTTP, HttpBootUri: url };
      if (str(current?.BootSourceOverrideEnabled) !== enabled) patch.BootSourceOverrideEnabled = enabled;
      return { Boot: patch };
    };
    let r = await patchSystem(call, system, body(boot));
    if (r.status === 400 && enabled === 'Continuous') {
      call.log.warn({ bmc: call.info.origin, err: statusError(r, 'PATCH').message }, 'Redfish BMC refused a Continuous boot override; setting it Once');
      enabled = 'Once';
      const fresh = await getSystem(call);
      r = await patchSystem(call, fresh, body(bootOf(fresh.body)));
    }
    if (r.status < 200 || r.status >= 300) throw statusError(r, `Setting ${call.info.origin}${system.path} to boot ${url} over HTTP (${enabled})`);
    call.log.info({ bmc: call.info.origin, url, enabled }, 'Redfish boot override set to UEFI HTTP boot');
  }
}
