/**
 * The `pxe` and `ipxe` boot interfaces (Ironic's PXEBoot and iPXEBoot, PXEBaseMixin): a node
 * boots from the network. DHCP (the `[dhcp]` provider) hands its firmware a boot loader from the
 * TFTP server; the loader finds the node's configuration by MAC and boots what it names:
 *
 * - `ipxe`: the firmware loads iPXE (undionly.kpxe, snponly.efi), which asks DHCP again, gets
 *   `<http_url>/boot.ipxe`, chains to `pxelinux.cfg/<mac>` and boots the node's script, over
 *   HTTP from `[deploy] http_root`;
 * - `pxe`: the firmware loads PXELINUX (BIOS) or GRUB (UEFI) and its configuration, kernel and
 *   ramdisk over TFTP from `[pxe] tftp_root`.
 *
 * The files are Ironic's, under Ironic's names (layout.ts), written atomically; the node's
 * boot device is set through its management interface (`chassis bootdev pxe`, Redfish `Pxe`).
 * A boot phase that ends (clean_up_ramdisk, clean_up_instance) removes the node's files and
 * withdraws its DHCP entries; a preparation that fails takes back what it wrote.
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { bootModeOf } from '../../common/capabilities.js';
import { BootFilesFailed, InvalidParameterValue, MissingParameterValue } from '../../common/errors.js';
import { removeFile, symlinkAtomic, writeFileAtomic } from '../../common/atomic-file.js';
import type { DhcpProvider } from '../dhcp.js';
import type {
  BootInterface, BootNodeView, BootPort, BootValidation, DriverContext, InstanceBootRequest, NodeAccess, RamdiskBootRequest,
} from '../interfaces.js';
import { bootFileOf, dhcpOptions, type BootFiles } from './dhcp-options.js';
import type { BootImageSource } from './images.js';
import type { ImageRef } from '../image/image-cache.js';
import { agentKernelAndRamdisk, inspectionCallback, kernelAppendParams, type AgentBootDefaults } from '../agent-boot.js';
import { BootLayout, type ImageLabel } from './layout.js';
import type { Template } from './template.js';

/** The templates a node's configuration is rendered from. */
export interface NetbootTemplates {
  pxe: Template;
  uefiPxe: Template;
  ipxe: Template;
  bootScript: Template;
}

/** What both interfaces read of the configuration (`[pxe]`, `[deploy]`, `[conductor]`, `[DEFAULT]`). */
export interface NetbootOptions {
  httpRoot: string;
  /** `[deploy] http_url`, or the embedded server's URL once known. */
  httpUrl: () => string;
  tftpRoot: string;
  tftpServer: string;
  subdir: string;
  bootFiles: BootFiles;
  templates: NetbootTemplates;
  fallbackScript: string;
  ipxeTimeoutS: number;
  /** `[pxe] kernel_append_params`. */
  kernelAppendParams: string;
  /** Where the agent's kernel and ramdisk come from, the API's URL, `[DEFAULT] debug`. */
  agentBoot: AgentBootDefaults;
  dhcp: DhcpProvider;
  /** Absent where no conductor runs (the API only validates). */
  images?: BootImageSource;
}

/** The boot loader configuration's labels (Ironic's switch_pxe_config targets). */
type BootTarget = 'deploy' | 'boot_ramdisk' | 'boot_whole_disk';

/** This machine's first non-loopback IPv4 address (Ironic's $my_ip), for an unset `[pxe] tftp_server`. */
export function myIp(): string {
  for (const addrs of Object.values(os.networkInterfaces())) {
    for (const a of addrs ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  }
  return '127.0.0.1';
}

function field(info: Readonly<Record<string, unknown>>, name: string): unknown {
  const v = info[name];
  return v === undefined || v === null || v === '' ? undefined : v;
}

function access(ctx: DriverContext): NodeAccess {
  if (!ctx.access) throw new InvalidParameterValue(`Network boot of node ${ctx.nodeUuid} needs the conductor's view of the node (its ports), which this caller does not give.`);
  return ctx.access;
}

function reason(err: unknown): string {
  const e = err as NodeJS.ErrnoException;
  return e.code ? `${e.code}: ${e.message}` : String(err);
}

export class NetworkBoot implements BootInterface {
  readonly ramdiskBoot = true;
  readonly bootsKernel = true;
  private readonly layout: BootLayout;

  constructor(
    /** `ipxe` (HTTP root, iPXE scripts) or `pxe` (TFTP root, PXELINUX/GRUB). */
    readonly ipxe: boolean,
    private readonly opts: NetbootOptions,
  ) {
    this.layout = new BootLayout(ipxe ? opts.httpRoot : opts.tftpRoot, ipxe, opts.subdir, opts.tftpRoot);
  }

  /** Ironic's check that iPXE has somewhere to serve from. @throws MissingParameterValue | InvalidParameterValue */
  validate(driverInfo: Readonly<Record<string, unknown>>): void {
    if (this.ipxe && (!this.opts.httpUrl() || !this.opts.httpRoot)) {
      throw new MissingParameterValue('iPXE boot is enabled but no HTTP URL or HTTP root was specified');
    }
    const append = driverInfo.kernel_append_params;
    if (append !== undefined && append !== null && typeof append !== 'string') {
      throw new InvalidParameterValue(`driver_info kernel_append_params must be a string, got ${JSON.stringify(append)}.`);
    }
  }

  /**
   * Ironic's _validate_common with the node's ports: a port to boot from (and, beyond Ironic,
   * one with pxe_enabled, since no other MAC gets a boot offer), a valid boot mode, not both an
   * image_source and a boot_iso.
   * @throws MissingParameterValue | InvalidParameterValue
   */
  validateNode(node: BootValidation): void {
    if (node.ports !== undefined) checkPorts(node.uuid, node.ports);
    const mode = bootModeOf(node);
    if (mode !== 'uefi' && mode !== 'bios') {
      throw new InvalidParameterValue(`Invalid boot_mode parameter '${mode}'. Supported boot modes are: bios, uefi.`);
    }
    if (field(node.instanceInfo, 'image_source') && field(node.instanceInfo, 'boot_iso')) {
      throw new InvalidParameterValue("An 'image_source' and 'boot_iso' parameter may not be specified at the same time");
    }
  }

  /** Ironic's pxe_utils.parse_driver_info: the agent's kernel and ramdisk are found. @throws MissingParameterValue */
  validateRamdisk(nodeUuid: string, driverInfo: Readonly<Record<string, unknown>>): void {
    this.agentImages(nodeUuid, driverInfo);
  }

  /** Ironic's get_agent_kernel_ramdisk with pxe_utils.parse_driver_info's message. */
  private agentImages(nodeUuid: string, driverInfo: Readonly<Record<string, unknown>>): Partial<Record<ImageLabel, ImageRef>> {
    const pair = agentKernelAndRamdisk({ uuid: nodeUuid, driverInfo }, this.opts.agentBoot,
      "Cannot validate PXE bootloader. Some parameters were missing in node's driver_info and configuration");
    return { deploy_kernel: pair.kernel, deploy_ramdisk: pair.ramdisk };
  }

  /**
   * Ironic's prepare_ramdisk: the agent's kernel and ramdisk in the node's directory, its
   * configuration (booting `deploy`) linked from each PXE MAC, the DHCP entries, and the next
   * boot from the network. Everything is ready before the BMC is touched; a failure takes back
   * what was written.
   * @throws MissingParameterValue | InvalidParameterValue | BootFilesFailed | DhcpUpdateFailed | DriverError
   */
  async prepareRamdisk(ctx: DriverContext, req: RamdiskBootRequest): Promise<void> {
    const a = access(ctx);
    const node = a.node;
    const ports = await a.ports();
    checkPorts(node.uuid, ports);
    const mode = this.bootMode(node);
    const images = this.agentImages(node.uuid, node.driverInfo);
    await this.checkLoader(node.uuid, mode);
    await this.prepare(ctx, a, ports, mode, images, 'deploy', () => ({
      ...this.deployPxeOptions(node.uuid), ...this.instancePxeOptions(node), ...this.extraPxeOptions(node, req),
    }), false);
    ctx.log.info({ node: node.uuid, ipxe: this.ipxe, bootMode: mode }, 'network boot of the agent prepared');
  }

  /**
   * The images placed, the configuration written and pointed at `target`, the DHCP entries
   * written, the boot device set. A failure takes back what this call did: the files, and the
   * DHCP entries once they were written (the provider takes back its own partial write).
   */
  private async prepare(
    ctx: DriverContext, a: NodeAccess, ports: readonly BootPort[], mode: 'uefi' | 'bios', images: Partial<Record<ImageLabel, ImageRef>>,
    target: BootTarget, pxeOptions: () => Record<string, unknown>, persistent: boolean | null,
  ): Promise<void> {
    let dhcpWritten = false;
    try {
      await this.placeImages(a.node.uuid, images);
      await this.writeConfig(a.node, mode, ports, pxeOptions(), target);
      await this.opts.dhcp.update(a, this.dhcpOptions(mode));
      dhcpWritten = true;
      if (persistent !== null) await a.setBootDevice('pxe', persistent, mode);
    } catch (err) {
      await this.removeFiles(a, ports).catch((e: unknown) => ctx.log.warn({ err: reason(e) }, 'network boot files left after a failed preparation'));
      if (dhcpWritten) await this.opts.dhcp.clean(a).catch((e: unknown) => ctx.log.warn({ err: reason(e) }, 'DHCP entries left after a failed preparation'));
      throw err;
    }
  }

  /** Ironic's clean_up_ramdisk, and the node's DHCP entries withdrawn: its boot phase is over. */
  async cleanUpRamdisk(ctx: DriverContext): Promise<void> {
    const a = access(ctx);
    await this.removeEverything(a, await a.ports());
  }

  /**
   * Ironic's prepare_instance for the ramdisk deploy: the ISO (booted by iPXE's sanboot) or the
   * kernel and ramdisk in the node's directory, its configuration booting `boot_ramdisk`, the
   * DHCP entries, and every boot from the network (persistent). Does not power on.
   * @throws InvalidParameterValue | BootFilesFailed | DhcpUpdateFailed | DriverError
   */
  async prepareInstance(ctx: DriverContext, req: InstanceBootRequest): Promise<void> {
    const a = access(ctx);
    const node = a.node;
    const ports = await a.ports();
    checkPorts(node.uuid, ports);
    const mode = req.bootMode ?? this.bootMode(node);
    const images = this.instanceImages(req);
    await this.checkLoader(node.uuid, mode);
    // A service configuration: the instance's images only, nothing of the agent's. The boot
    // device of a node already active (a take-over) is left as it is, as Ironic leaves it.
    const takeOver = node.provisionState === 'active' || node.provisionState === 'adopting';
    await this.prepare(ctx, a, ports, mode, images, 'boot_ramdisk', () => ({ ...this.instancePxeOptions(node, req), ...this.extraPxeOptions(node, {}) }), takeOver ? null : true);
  }

  /** Ironic's clean_up_instance (its files and links), and the node's DHCP entries withdrawn. */
  async cleanUpInstance(ctx: DriverContext): Promise<void> {
    const a = access(ctx);
    await this.removeEverything(a, await a.ports());
  }

  private bootMode(node: BootNodeView): 'uefi' | 'bios' {
    return bootModeOf(node) === 'bios' ? 'bios' : 'uefi';
  }

  /** The instance's images of a ramdisk deploy (Ironic's get_instance_image_info): an ISO, or a kernel and ramdisk. */
  private instanceImages(req: InstanceBootRequest): Partial<Record<ImageLabel, ImageRef>> {
    if (req.bootIso) return { boot_iso: { url: req.bootIso } };
    if (req.kernel && req.ramdisk) return { kernel: { url: req.kernel }, ramdisk: { url: req.ramdisk } };
    throw new MissingParameterValue("Some parameters were missing in node's instance_info. Missing are: ['boot_iso']");
  }

  /**
   * The loader DHCP names must be in the TFTP root, or the node's firmware gets a name it
   * cannot load and the boot ends there, silently. Checked where Galvanic writes the DHCP
   * options (dnsmasq); a DHCP server set up by hand may serve its loaders from elsewhere.
   * @throws BootFilesFailed
   */
  private async checkLoader(nodeUuid: string, mode: string): Promise<void> {
    if (this.opts.dhcp.name === 'none') return;
    const file = bootFileOf(this.opts.bootFiles, this.ipxe, mode);
    const where = path.join(this.opts.tftpRoot, file);
    try {
      await fs.access(where, fs.constants.R_OK);
    } catch {
      const option = `${mode === 'uefi' ? 'uefi_' : ''}${this.ipxe ? 'ipxe' : 'pxe'}_bootfile_name`;
      throw new BootFilesFailed(
        `The boot loader ${file} that DHCP hands to node ${nodeUuid} (${mode}, ${this.ipxe ? 'ipxe' : 'pxe'} boot) is not in [pxe] tftp_root ${this.opts.tftpRoot}: ` +
        `put it there (${where}) or name another one in [pxe] ${option}.`,
      );
    }
  }

  private async placeImages(nodeUuid: string, images: Partial<Record<ImageLabel, ImageRef>>): Promise<void> {
    const source = this.opts.images;
    if (!source) throw new BootFilesFailed(`Node ${nodeUuid} cannot boot from the network through this process: it has no image cache (only a conductor has).`);
    await this.mkdir(this.layout.nodeDir(nodeUuid));
    for (const [label, ref] of Object.entries(images) as Array<[ImageLabel, ImageRef]>) {
      await source.place(ref, this.layout.imagePath(nodeUuid, label));
    }
  }

  private async mkdir(dir: string): Promise<void> {
    try {
      await fs.mkdir(dir, { recursive: true, mode: 0o755 });
    } catch (err) {
      throw new BootFilesFailed(`Failed to create ${dir} for network boot: ${reason(err)}`);
    }
  }

  /** Ironic's build_deploy_pxe_options: where the agent's kernel and ramdisk are fetched from. */
  private deployPxeOptions(nodeUuid: string): Record<string, unknown> {
    if (this.ipxe) {
      const base = `${this.httpUrl()}/${nodeUuid}`;
      return { deployment_aki_path: `${base}/deploy_kernel`, deployment_ari_path: `${base}/deploy_ramdisk`, initrd_filename: 'deploy_ramdisk' };
    }
    return { deployment_aki_path: this.layout.tftpPath(nodeUuid, 'deploy_kernel'), deployment_ari_path: this.layout.tftpPath(nodeUuid, 'deploy_ramdisk') };
  }

  /** Ironic's build_instance_pxe_options: the instance's kernel and ramdisk, or placeholders; the ISO's URL. */
  private instancePxeOptions(node: BootNodeView, req?: InstanceBootRequest): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    if (req?.kernel && req.ramdisk) {
      out.aki_path = this.ipxe ? `${this.httpUrl()}/${node.uuid}/kernel` : this.layout.tftpPath(node.uuid, 'kernel');
      out.ari_path = this.ipxe ? `${this.httpUrl()}/${node.uuid}/ramdisk` : this.layout.tftpPath(node.uuid, 'ramdisk');
    } else {
      out.aki_path = 'no_kernel';
      out.ari_path = 'no_ramdisk';
    }
    const ramdiskOpts = node.instanceInfo.ramdisk_kernel_arguments;
    if (ramdiskOpts !== undefined) out.ramdisk_opts = ramdiskOpts;
    if (field(node.instanceInfo, 'boot_iso')) out.boot_iso_url = `${this.httpUrl()}/${node.uuid}/boot_iso`;
    return out;
  }

  /**
   * Ironic's build_extra_pxe_options: the kernel's command line (instance_info or driver_info
   * kernel_append_params, else `[pxe] kernel_append_params`; `ipa-debug` with `[DEFAULT]
   * debug`; the agent's parameters), the TFTP server, iPXE's timeout in ms.
   */
  private extraPxeOptions(node: BootNodeView, req: Partial<RamdiskBootRequest>): Record<string, unknown> {
    let append = kernelAppendParams({ driverInfo: node.driverInfo, instanceKernelAppendParams: node.instanceInfo.kernel_append_params }, this.opts.kernelAppendParams);
    if (this.opts.agentBoot.debug && !append.includes('ipa-debug')) append += ' ipa-debug=1';
    const params = this.ramdiskParams(req);
    if (params.length) append += ` ${params.join(' ')}`;
    return { pxe_append_params: append, tftp_server: this.opts.tftpServer, ipxe_timeout: this.opts.ipxeTimeoutS * 1000 };
  }

  /**
   * What the agent is told (Ironic's build_agent_options, or managed inspection's callback);
   * nothing for an instance.
   */
  private ramdiskParams(req: Partial<RamdiskBootRequest>): string[] {
    if (req.purpose === undefined) return [];
    const api = (this.opts.agentBoot.apiUrl || this.opts.agentBoot.externalCallbackUrl).replace(/\/+$/, '');
    if (!api) {
      throw new InvalidParameterValue("Couldn't get the URL of the bare metal API service from the configuration: set [deploy] external_callback_url or [api] public_endpoint (the agent calls it back).");
    }
    return [req.purpose === 'inspect' ? `ipa-inspection-callback-url=${inspectionCallback(api)}` : `ipa-api-url=${api}`];
  }

  private httpUrl(): string {
    return this.opts.httpUrl().replace(/\/+$/, '');
  }

  private dhcpOptions(mode: string) {
    return dhcpOptions({
      ipxe: this.ipxe, ipxeTag: this.opts.dhcp.supportsIpxeTag, bootFile: bootFileOf(this.opts.bootFiles, this.ipxe, mode),
      tftpServer: this.opts.tftpServer, ipxeScriptUrl: `${this.httpUrl()}/boot.ipxe`,
    });
  }

  /**
   * Ironic's create_pxe_config + switch_pxe_config: the node's configuration rendered and
   * pointed at `target`, and each PXE MAC's names linked to it (GRUB's per-address names too,
   * in UEFI with the pxe interface). For iPXE, boot.ipxe is (re)written first when it differs.
   */
  private async writeConfig(node: BootNodeView, mode: string, ports: readonly BootPort[], pxeOptions: Record<string, unknown>, target: BootTarget): Promise<void> {
    const grub = mode === 'uefi' && !this.ipxe;
    const template = this.ipxe ? this.opts.templates.ipxe : grub ? this.opts.templates.uefiPxe : this.opts.templates.pxe;
    const values = grub
      ? { pxe_options: { ...pxeOptions, linux_cmd: 'linux', initrd_cmd: 'initrd' }, ROOT: '(( ROOT ))', DISK_IDENTIFIER: '(( DISK_IDENTIFIER ))' }
      : { pxe_options: pxeOptions, ROOT: '{{ ROOT }}', DISK_IDENTIFIER: '{{ DISK_IDENTIFIER }}' };
    const text = switchTarget(template.render(values), target, grub, this.ipxe);
    if (this.ipxe) await this.writeBootScript();
    await this.mkdir(this.layout.nodeDir(node.uuid));
    await this.mkdir(this.layout.macDir());
    const config = this.layout.configPath(node.uuid);
    await this.fileOp(config, () => writeFileAtomic(config, text));
    for (const port of ports) {
      if (!port.pxeEnabled) continue;
      for (const link of [this.layout.macPath(port.address, port.clientId), ...this.layout.grubMacPaths(port.address)]) {
        await this.fileOp(link, () => symlinkAtomic(this.layout.linkTarget(node.uuid, link), link));
      }
    }
    if (grub) {
      // GRUB may ask by its leased address; without a lease yet there is nothing to link (Ironic warns likewise).
      for (const ip of await this.opts.dhcp.ipAddresses(ports)) {
        const link = this.layout.ipAddressPath(ip);
        await this.fileOp(link, () => symlinkAtomic(this.layout.linkTarget(node.uuid, link), link));
      }
    }
  }

  /** Ironic's create_ipxe_boot_script: `<http_root>/boot.ipxe`, written only when it differs. */
  private async writeBootScript(): Promise<void> {
    const file = path.join(this.opts.httpRoot, 'boot.ipxe');
    const text = this.opts.templates.bootScript.render({
      ipxe_for_mac_uri: `${this.opts.subdir}/`, ipxe_fallback_script: this.opts.fallbackScript || null,
    });
    const current = await fs.readFile(file, 'utf8').catch(() => null);
    if (current === text) return;
    await this.mkdir(this.opts.httpRoot);
    await this.fileOp(file, () => writeFileAtomic(file, text));
  }

  private async fileOp(file: string, op: () => Promise<void>): Promise<void> {
    try {
      await op();
    } catch (err) {
      throw new BootFilesFailed(`Failed to write ${file} for network boot: ${reason(err)}`);
    }
  }

  /** removeFiles, and the DHCP entries withdrawn. */
  private async removeEverything(a: NodeAccess, ports: readonly BootPort[]): Promise<void> {
    await this.removeFiles(a, ports);
    await this.opts.dhcp.clean(a);
  }

  /**
   * Ironic's clean_up_pxe_config: every port's names, the per-address names in UEFI with pxe,
   * the node's directory with its images. Names that still point at the node's configuration
   * but belong to a port deleted meanwhile go too.
   */
  private async removeFiles(a: NodeAccess, ports: readonly BootPort[]): Promise<void> {
    const uuid = a.node.uuid;
    const links = new Set<string>();
    for (const port of ports) {
      links.add(this.layout.macPath(port.address, port.clientId));
      for (const p of this.layout.grubMacPaths(port.address)) links.add(p);
    }
    if (!this.ipxe && this.bootMode(a.node) === 'uefi') {
      for (const ip of await this.opts.dhcp.ipAddresses(ports).catch(() => [])) links.add(this.layout.ipAddressPath(ip));
    }
    for (const link of await this.linksTo(uuid)) links.add(link);
    for (const link of links) await removeFile(link);
    await fs.rm(this.layout.nodeDir(uuid), { recursive: true, force: true });
  }

  /** The links in the MAC directory and the root that point at the node's configuration. */
  private async linksTo(nodeUuid: string): Promise<string[]> {
    const out: string[] = [];
    const config = this.layout.configPath(nodeUuid);
    for (const dir of [this.layout.macDir(), this.layout.root]) {
      const names = await fs.readdir(dir).catch(() => [] as string[]);
      for (const name of names) {
        const link = path.join(dir, name);
        const target = await fs.readlink(link).catch(() => null);
        if (target !== null && path.resolve(dir, target) === config) out.push(link);
      }
    }
    return out;
  }
}

/** A port to boot from, and a PXE-enabled one. @throws MissingParameterValue | InvalidParameterValue */
function checkPorts(nodeUuid: string, ports: readonly BootPort[]): void {
  if (!ports.length) throw new MissingParameterValue(`Node ${nodeUuid} does not have any port associated with it`);
  if (!ports.some((p) => p.pxeEnabled)) {
    throw new InvalidParameterValue(`Node ${nodeUuid} has no port with pxe_enabled set: no MAC address of it would be offered a network boot.`);
  }
}

/**
 * Ironic's _replace_boot_line: the configuration's default entry set to `target` (`goto` in
 * iPXE, `default` in PXELINUX, `set default=` in GRUB).
 */
export function switchTarget(config: string, target: BootTarget, grub: boolean, ipxe: boolean): string {
  if (target === 'deploy') return config;
  if (grub) return config.replace(/^((set )?default)=.*$/gm, `$1=${target}`);
  const cmd = ipxe ? 'goto' : 'default';
  return config.replace(new RegExp(`^${cmd} .*$`, 'gm'), `${cmd} ${target}`);
}
