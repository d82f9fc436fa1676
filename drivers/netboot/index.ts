/**
 * The `ipxe` and `pxe` boot interfaces of a process, built from its configuration: `[pxe]`,
 * `[deploy] http_root` / `http_url`, `[dhcp]` and `[dnsmasq]`, `[conductor] deploy_kernel` /
 * `deploy_ramdisk` and the API's URL (found as virtual media's agent boot finds them). Templates
 * named in `[pxe]` are read here, once, so that a broken one stops the start instead of a
 * node's boot.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { Config } from '../../common/config.js';
import { ConfigError, GalvanicError } from '../../common/errors.js';
import { dhcpProvider, type DhcpProvider } from '../dhcp.js';
import type { BootImageSource } from './images.js';
import { agentBootDefaults } from '../agent-boot.js';
import { NetworkBoot, myIp, type NetbootOptions } from './pxe-boot.js';
import { Template } from './template.js';
import { BOOT_IPXE, GRUB_CONFIG, IPXE_CONFIG, PXELINUX_CONFIG } from './templates.js';

export { NetworkBoot } from './pxe-boot.js';

/** A `[pxe]` template option: its file, or Galvanic's template when empty. @throws ConfigError */
function template(option: string, file: string, builtIn: string): Template {
  if (!file) return new Template(`(built-in ${option})`, builtIn);
  try {
    return new Template(file, readFileSync(file, 'utf8'));
  } catch (err) {
    const why = err instanceof GalvanicError ? err.message : (err as Error).message;
    throw new ConfigError([`[pxe] ${option}: ${why}`]);
  }
}

/** `[deploy] http_url`, else the embedded server's address. */
function httpUrl(config: Readonly<Config>): string {
  const d = config.deploy;
  if (d.http_url) return d.http_url;
  const host = d.http_server_host.includes(':') ? `[${d.http_server_host}]` : d.http_server_host;
  return `http://${host}:${d.http_server_port}`;
}

/** What a conductor gives network boot: its image cache, and its HTTP root's URL once its server listens. */
export interface NetbootDeps {
  dhcp?: DhcpProvider;
  images?: BootImageSource;
  httpUrl?: () => string;
}

/** The options both interfaces share. */
export function netbootOptions(config: Readonly<Config>, deps: NetbootDeps = {}): NetbootOptions {
  const p = config.pxe;
  return {
    httpRoot: path.resolve(config.deploy.http_root),
    httpUrl: deps.httpUrl ?? (() => httpUrl(config)),
    tftpRoot: path.resolve(p.tftp_root),
    tftpServer: p.tftp_server || myIp(),
    subdir: p.pxe_config_subdir,
    bootFiles: { pxe: p.pxe_bootfile_name, uefiPxe: p.uefi_pxe_bootfile_name, ipxe: p.ipxe_bootfile_name, uefiIpxe: p.uefi_ipxe_bootfile_name },
    templates: {
      pxe: template('pxe_config_template', p.pxe_config_template, PXELINUX_CONFIG),
      uefiPxe: template('uefi_pxe_config_template', p.uefi_pxe_config_template, GRUB_CONFIG),
      ipxe: template('ipxe_config_template', p.ipxe_config_template, IPXE_CONFIG),
      bootScript: template('ipxe_boot_script', p.ipxe_boot_script, BOOT_IPXE),
    },
    fallbackScript: p.ipxe_fallback_script,
    ipxeTimeoutS: p.ipxe_timeout,
    kernelAppendParams: p.kernel_append_params,
    agentBoot: agentBootDefaults(config),
    dhcp: deps.dhcp ?? dhcpProvider(config),
    ...(deps.images ? { images: deps.images } : {}),
  };
}

/** `ipxe` and `pxe`, sharing their options. */
export function netbootInterfaces(config: Readonly<Config>, deps: NetbootDeps = {}): { ipxe: NetworkBoot; pxe: NetworkBoot } {
  const opts = netbootOptions(config, deps);
  return { ipxe: new NetworkBoot(true, opts), pxe: new NetworkBoot(false, opts) };
}
