/**
 * Where network boot's files go, as Ironic's pxe_utils puts them, under the TFTP root (`pxe`)
 * or the HTTP root (`ipxe`):
 *
 *   <root>/<node uuid>/config                   the node's boot loader configuration
 *   <root>/<node uuid>/deploy_kernel, …         the images it boots (deploy_kernel, deploy_ramdisk,
 *                                               kernel, ramdisk, boot_iso)
 *   <root>/pxelinux.cfg/01-aa-bb-cc-dd-ee-ff    PXELINUX's name for a MAC (20- for InfiniBand), a
 *                                               link to ../<uuid>/config; iPXE's is aa-bb-cc-dd-ee-ff
 *   <root>/grub.cfg-01-aa-bb-cc-dd-ee-ff        GRUB's names for a MAC, links to <uuid>/config
 *   <root>/aa:bb:cc:dd:ee:ff.conf
 *   <tftp root>/<ip>.conf                       GRUB's name for a leased address (UEFI, pxe)
 *   <http root>/boot.ipxe                       the script DHCP hands to iPXE (ipxe)
 */
import path from 'node:path';

/** The image labels Ironic caches for a node. */
export type ImageLabel = 'deploy_kernel' | 'deploy_ramdisk' | 'kernel' | 'ramdisk' | 'boot_iso';

export class BootLayout {
  /**
   * `root`: the TFTP root for pxe, the HTTP root for ipxe; `tftpRoot` is where GRUB looks for
   * per-address configurations whatever the interface.
   */
  constructor(
    readonly root: string,
    readonly ipxe: boolean,
    readonly subdir: string,
    readonly tftpRoot: string,
  ) {}

  nodeDir(nodeUuid: string): string {
    return path.join(this.root, nodeUuid);
  }

  /** Ironic's get_pxe_config_file_path. */
  configPath(nodeUuid: string): string {
    return path.join(this.root, nodeUuid, 'config');
  }

  imagePath(nodeUuid: string, label: ImageLabel): string {
    return path.join(this.root, nodeUuid, label);
  }

  /** The image's path as the boot loader names it over TFTP: relative to the TFTP root. */
  tftpPath(nodeUuid: string, label: ImageLabel): string {
    return path.relative(this.root, this.imagePath(nodeUuid, label));
  }

  macDir(): string {
    return path.join(this.root, this.subdir);
  }

  /** Ironic's _get_pxe_mac_path: `01-<mac>` (or `20-` for InfiniBand) for PXELINUX, `<mac>` for iPXE. */
  macPath(mac: string, clientId?: string): string {
    const name = mac.replace(/:/g, '-').toLowerCase();
    if (this.ipxe) return path.join(this.macDir(), name);
    return path.join(this.macDir(), `${clientId ? '20' : '01'}-${name}`);
  }

  /** Ironic's _get_pxe_grub_mac_path: written for both interfaces. */
  grubMacPaths(mac: string): string[] {
    return [path.join(this.root, `grub.cfg-01-${mac.replace(/:/g, '-').toLowerCase()}`), path.join(this.root, `${mac}.conf`)];
  }

  /** Ironic's _get_pxe_ip_address_path. */
  ipAddressPath(ip: string): string {
    return path.join(this.tftpRoot, `${ip}.conf`);
  }

  /** What a link at `link` holds to point at the node's configuration (relative, as Ironic's). */
  linkTarget(nodeUuid: string, link: string): string {
    return path.relative(path.dirname(link), this.configPath(nodeUuid));
  }
}
