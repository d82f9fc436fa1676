/**
 * The DHCP options of a network-booting node, as Ironic's pxe_utils.dhcp_options_for_instance
 * lists them for IPv4 and IPv6 (both are handed to the provider, which writes them all), with
 * the boot file chosen as deploy_utils.get_pxe_boot_file / get_ipxe_boot_file choose it.
 */
import { InvalidParameterValue } from '../../common/errors.js';
import type { DhcpOption } from '../dhcp.js';

/** rfc2132 / rfc5970 / rfc5859 option numbers, and dnsmasq's server-ip-address. */
const BOOTFILE_NAME = '67';
const DHCPV6_BOOTFILE_NAME = '59';
const TFTP_SERVER_NAME = '66';
const TFTP_SERVER_ADDRESS = '150';
const IPXE_ENCAP_OPTS = '175';
const SERVER_IP_ADDRESS = '255';

/** `[pxe]` boot file names. */
export interface BootFiles {
  pxe: string;
  uefiPxe: string;
  ipxe: string;
  uefiIpxe: string;
}

/** The loader DHCP hands to the node's firmware. */
export function bootFileOf(files: BootFiles, ipxe: boolean, bootMode: string): string {
  if (ipxe) return bootMode === 'uefi' ? files.uefiIpxe : files.ipxe;
  return bootMode === 'uefi' ? files.uefiPxe : files.pxe;
}

export interface DhcpOptionsInput {
  ipxe: boolean;
  /** Whether the provider tags iPXE's requests `ipxe` (dnsmasq does). */
  ipxeTag: boolean;
  bootFile: string;
  tftpServer: string;
  /** `<http_url>/boot.ipxe`. */
  ipxeScriptUrl: string;
}

/** An IPv6 address in a URL goes in brackets (oslo's escape_ipv6). */
function urlHost(host: string): string {
  return host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
}

/**
 * The options for one IP version. IPv6 always boots from a URL (tftp://), IPv4 from a file
 * name plus the TFTP server's address.
 * @throws InvalidParameterValue when the boot file or URL is longer than 64 characters (Ironic's limit)
 */
export function dhcpOptionsFor(input: DhcpOptionsInput, ipVersion: 4 | 6): DhcpOption[] {
  const urlBoot = ipVersion === 6;
  const bootFileParam = ipVersion === 4 ? BOOTFILE_NAME : DHCPV6_BOOTFILE_NAME;
  const bootFile = urlBoot ? `tftp://${urlHost(input.tftpServer)}/${input.bootFile}` : input.bootFile;
  if (bootFile.length > 64) {
    throw new InvalidParameterValue('The resulting boot file or URL length exceeds Neutron limitations. Please explore shorter file names or hostnames.');
  }
  const opts: Array<[string, string]> = [];
  if (input.ipxe) {
    if (input.ipxeTag) {
      const tag = ipVersion === 6 ? 'ipxe6' : 'ipxe';
      opts.push([`tag:!${tag},${bootFileParam}`, bootFile], [`tag:${tag},${bootFileParam}`, input.ipxeScriptUrl]);
    } else {
      // Option 175 is what iPXE sends: its absence marks the firmware's own PXE.
      opts.push([`!${IPXE_ENCAP_OPTS},${bootFileParam}`, bootFile], [bootFileParam, input.ipxeScriptUrl]);
    }
  } else {
    opts.push([bootFileParam, bootFile]);
  }
  if (!urlBoot) {
    // dnsmasq sets siaddr to itself unless told: PXE clients take siaddr for the TFTP server.
    opts.push([TFTP_SERVER_NAME, input.tftpServer], [TFTP_SERVER_ADDRESS, input.tftpServer], [SERVER_IP_ADDRESS, input.tftpServer]);
  }
  return opts.map(([optName, optValue]) => ({ optName, optValue, ipVersion }));
}

/** IPv4's options, then IPv6's, as Ironic's prepare_ramdisk and prepare_instance hand them over. */
export function dhcpOptions(input: DhcpOptionsInput): DhcpOption[] {
  return [...dhcpOptionsFor(input, 4), ...dhcpOptionsFor(input, 6)];
}
