/**
 * DHCP providers (Ironic's ironic/dhcp/): who tells a network-booting node where to boot from.
 * `none` writes nothing (a DHCP server set up by hand); `dnsmasq` writes files an external
 * dnsmasq reads without a restart (its dhcp-hostsdir and dhcp-optsdir), as Ironic's
 * DnsmasqDHCPApi does:
 *
 * - `<dhcp_hostsdir>/ironic-<mac>.conf`: `<mac>,set:<tag>,set:ironic` while the node boots from
 *   the network, `<mac>,ignore` after (dnsmasq drops nothing it read from these directories
 *   until a SIGHUP, so an entry is overwritten, never deleted);
 * - `<dhcp_optsdir>/ironic-<node uuid>.conf`: one `tag:<tag>,<option>,<value>` line per option,
 *   removed after (its tag is no longer set on anyone).
 *
 * The tag is the node's for one boot phase, kept in driver_internal_info `dnsmasq_tag` (saved
 * before any file names it) and dropped at the clean-up. Every file is written atomically.
 */
import { randomUUID } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { Config } from '../common/config.js';
import { DhcpCleanFailed, DhcpUpdateFailed } from '../common/errors.js';
import { removeFile, writeFileAtomic } from '../common/atomic-file.js';
import type { BootPort, NodeAccess } from './interfaces.js';

/** One DHCP option for a node, as Ironic's pxe_utils.dhcp_options_for_instance lists them. */
export interface DhcpOption {
  /** The option, with any tag conditions before it: `67`, `tag:!ipxe,67`, `tag:ipxe6,59`. */
  optName: string;
  optValue: string;
  ipVersion: 4 | 6;
}

/** What a provider needs of its node: its ports and its driver_internal_info, through the conductor. */
export type DhcpTarget = Pick<NodeAccess, 'node' | 'ports' | 'saveInternalInfo'>;

export interface DhcpProvider {
  readonly name: 'none' | 'dnsmasq';
  /**
   * Whether iPXE's own DHCP requests get the `ipxe` tag (dnsmasq: `dhcp-match=set:ipxe,175` in
   * its configuration), so that options can tell iPXE from the firmware's PXE.
   */
  readonly supportsIpxeTag: boolean;
  /** Ironic's update_dhcp_opts: the node's PXE-enabled MACs get `options`. @throws DhcpUpdateFailed */
  update(target: DhcpTarget, options: readonly DhcpOption[]): Promise<void>;
  /** Ironic's clean_dhcp_opts: the node's MACs no longer get a boot offer. @throws DhcpCleanFailed */
  clean(target: DhcpTarget): Promise<void>;
  /** The IP addresses the node's PXE-enabled ports leased; [] when unknown. */
  ipAddresses(ports: readonly BootPort[]): Promise<string[]>;
}

/** Ironic's NoneDHCPApi. */
export class NoDhcp implements DhcpProvider {
  readonly name = 'none';
  readonly supportsIpxeTag = false;
  async update(): Promise<void> {}
  async clean(): Promise<void> {}
  async ipAddresses(): Promise<string[]> {
    return [];
  }
}

export const DNSMASQ_TAG_KEY = 'dnsmasq_tag';

/** A port row as network boot sees it (Ironic reads extra `client-id` for InfiniBand). */
export function bootPort(port: { address: string; pxeEnabled: boolean; extra: Readonly<Record<string, unknown>> }): BootPort {
  const clientId = port.extra['client-id'];
  return { address: port.address.toLowerCase(), pxeEnabled: port.pxeEnabled, ...(typeof clientId === 'string' && clientId ? { clientId } : {}) };
}

function pxeMacs(ports: readonly BootPort[]): string[] {
  return [...new Set(ports.filter((p) => p.pxeEnabled).map((p) => p.address))];
}

function reason(err: unknown): string {
  const e = err as NodeJS.ErrnoException;
  return e.code ? `${e.code}: ${e.message}` : String(err);
}

/** Where the dnsmasq provider writes; `[dnsmasq]` in the config. */
export interface DnsmasqDirs {
  hostsDir: string;
  optsDir: string;
  leaseFile: string;
}

/** Ironic's DnsmasqDHCPApi. */
export class DnsmasqDhcp implements DhcpProvider {
  readonly name = 'dnsmasq';
  readonly supportsIpxeTag = true;

  constructor(private readonly dirs: DnsmasqDirs) {}

  hostFile(mac: string): string {
    return path.join(this.dirs.hostsDir, `ironic-${mac}.conf`);
  }

  optsFile(nodeUuid: string): string {
    return path.join(this.dirs.optsDir, `ironic-${nodeUuid}.conf`);
  }

  /**
   * Writes the options file, then each MAC's host entry. A write that fails takes back what
   * this call wrote (the options file removed, the entries already written set to `ignore`),
   * so a node is either offered its boot or not at all.
   */
  async update(target: DhcpTarget, options: readonly DhcpOption[]): Promise<void> {
    const node = target.node;
    let tag = node.driverInternalInfo?.[DNSMASQ_TAG_KEY];
    const fresh = typeof tag !== 'string' || tag === '';
    if (fresh) {
      tag = randomUUID();
      await target.saveInternalInfo({ [DNSMASQ_TAG_KEY]: tag });
    }
    const macs = pxeMacs(await target.ports());
    const lines = options.map((o) => `tag:${tag as string},${o.optName},${o.optValue}`);
    const optsFile = this.optsFile(node.uuid);
    const written: string[] = [];
    let file = optsFile;
    try {
      await writeFileAtomic(optsFile, `${lines.join('\n')}\n`);
      for (const mac of macs) {
        file = this.hostFile(mac);
        await writeFileAtomic(file, `${mac},set:${tag as string},set:ironic\n`);
        written.push(mac);
      }
    } catch (err) {
      await this.withdraw(node.uuid, written).catch(() => undefined);
      if (fresh) await target.saveInternalInfo({ [DNSMASQ_TAG_KEY]: null });
      throw new DhcpUpdateFailed(`Failed to write the DHCP options of node ${node.uuid} for dnsmasq to ${file}: ${reason(err)}`);
    }
  }

  /** Each MAC's entry set to `ignore`, the options file removed, the tag dropped. */
  async clean(target: DhcpTarget): Promise<void> {
    const node = target.node;
    try {
      await this.withdraw(node.uuid, pxeMacs(await target.ports()));
    } catch (err) {
      throw new DhcpCleanFailed(`Failed to clean up the DHCP options of node ${node.uuid} for dnsmasq: ${reason(err)}`);
    }
    if (node.driverInternalInfo?.[DNSMASQ_TAG_KEY] !== undefined) await target.saveInternalInfo({ [DNSMASQ_TAG_KEY]: null });
  }

  private async withdraw(nodeUuid: string, macs: readonly string[]): Promise<void> {
    for (const mac of macs) await writeFileAtomic(this.hostFile(mac), `${mac},ignore\n`);
    await removeFile(this.optsFile(nodeUuid));
  }

  /** Ironic's get_ip_addresses: the lease file's lines `<expiry> <mac> <ip> …` for the node's MACs. */
  async ipAddresses(ports: readonly BootPort[]): Promise<string[]> {
    const macs = new Set(pxeMacs(ports));
    let text: string;
    try {
      text = await fs.readFile(this.dirs.leaseFile, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw new DhcpUpdateFailed(`Failed to read dnsmasq's lease file ${this.dirs.leaseFile}: ${reason(err)}`);
    }
    return text.split('\n').map((l) => l.trim().split(/\s+/)).filter((f) => f.length >= 3 && macs.has(f[1].toLowerCase())).map((f) => f[2]);
  }
}

/** The provider `[dhcp] dhcp_provider` names. */
export function dhcpProvider(config: Pick<Readonly<Config>, 'dhcp' | 'dnsmasq'>): DhcpProvider {
  if (config.dhcp.dhcp_provider === 'dnsmasq') {
    const d = config.dnsmasq;
    return new DnsmasqDhcp({ hostsDir: d.dhcp_hostsdir, optsDir: d.dhcp_optsdir, leaseFile: d.dhcp_leasefile });
  }
  return new NoDhcp();
}
