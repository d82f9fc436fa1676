/**
 * A machine that boots from the network, as its firmware and boot loaders would: DHCP (what a
 * dnsmasq configured as etc/dnsmasq.conf.sample offers, read from its host and option files),
 * the loader over TFTP (a file of the TFTP root), then iPXE (DHCP again as iPXE, its script
 * over HTTP), PXELINUX or GRUB (their configuration over TFTP), and the kernel and initrd they
 * name, fetched for real. The kernel's command line says what runs: the agent
 * (`ipa-api-url`, `ipa-inspection-callback-url`) in the simulated ironic-python-agent, or the
 * instance (an ISO booted by `sanboot`, the disk). Nothing is taken on trust from Galvanic: a
 * file it forgot, a link that points nowhere, a DHCP entry that says `ignore`, and the agent
 * never starts. Who powers the machine on (an IPMI BMC simulator) calls `boot` and `stop`.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { request, type Dispatcher } from 'undici';
import { agentUrls, kernelParams, type AgentFleet, type AgentHost, type HostFacts } from '../agent/index.js';
import { dnsmasqOffer, type DnsmasqDirs } from './dnsmasq.js';
import { IpxeRunner, type IpxeOutcome } from './ipxe.js';
import { grubEntry, pxelinuxEntry, type LoaderOutcome } from './loaders.js';

/** The provisioning network as the machine meets it. */
export interface NetbootNetwork {
  dnsmasq: DnsmasqDirs;
  /** The TFTP server's root (dnsmasq's tftp-root). */
  tftpRoot: string;
  dispatcher?: Dispatcher;
}

export interface NetbootHostOptions {
  /** The system's UUID: its agent's path on the agents' server. */
  id: string;
  /** Its NICs' MACs, in boot order, lower case. */
  macs: string[];
  bootMode: 'uefi' | 'bios';
  network: NetbootNetwork;
  facts: HostFacts;
  /** The machine asks its BMC to power it off or restart (its OS shutting down, the agent's power_off). */
  power(type: 'ForceOff' | 'ForceRestart'): void;
}

/** What one boot did, step by step, and how it ended. */
export interface BootRecord {
  device: string;
  steps: string[];
  outcome: 'agent' | 'iso' | 'disk' | 'nothing' | 'failed' | 'poweroff';
  /** The agent's or instance's kernel command line, when one booted. */
  cmdline?: string;
  /** The NIC that booted. */
  mac?: string;
  reason?: string;
}

type Ending = IpxeOutcome | LoaderOutcome;

function isIpxe(file: string): boolean {
  return /ipxe|\.kpxe$|snponly/i.test(path.basename(file));
}

function isPxelinux(file: string): boolean {
  return /pxelinux\.0$/i.test(file);
}

function isGrub(file: string): boolean {
  return /(bootx64|grubx64|grubnetx64|shimx64)\.efi$/i.test(file);
}

export class NetbootHost {
  readonly agent: AgentHost;
  /** Every boot, oldest first. */
  readonly boots: BootRecord[] = [];
  private generation = 0;

  constructor(fleet: AgentFleet, private readonly opts: NetbootHostOptions) {
    this.agent = fleet.attach(opts.id, { event: () => undefined, power: (type) => opts.power(type) }, opts.facts);
  }

  get lastBoot(): BootRecord | undefined {
    return this.boots[this.boots.length - 1];
  }

  /** The machine stopped (powered off, reset): whatever ran on it is gone, a boot in progress ends. */
  stop(): void {
    this.generation++;
    this.agent.stopped();
  }

  /**
   * The machine powers on (or restarts) with its BMC's boot device: `pxe` boots from the
   * network, anything else from the disk.
   */
  async boot(device: string): Promise<BootRecord> {
    this.stop();
    const gen = this.generation;
    const rec: BootRecord = { device, steps: [], outcome: 'nothing' };
    this.boots.push(rec);
    if (device !== 'pxe') {
      rec.outcome = 'disk';
      this.agent.bootDisk();
      return rec;
    }
    for (const mac of this.opts.macs) {
      const ending = await this.networkBoot(mac, rec);
      if (ending === null) continue;
      if (gen !== this.generation) {
        rec.steps.push('stopped while booting');
        return rec;
      }
      rec.mac = mac;
      this.finish(ending, rec);
      return rec;
    }
    rec.steps.push('no NIC got a boot offer');
    return rec;
  }

  private finish(ending: Ending, rec: BootRecord): void {
    switch (ending.kind) {
      case 'kernel': {
        const params = kernelParams(ending.cmdline);
        rec.cmdline = ending.cmdline;
        const urls = agentUrls(params);
        if (!urls.apiUrl && !urls.inspectionUrl) {
          rec.outcome = 'failed';
          rec.reason = 'the kernel booted, but its command line tells the agent neither ipa-api-url nor ipa-inspection-callback-url';
          return;
        }
        const bootif = params.get('BOOTIF');
        const boot = this.opts.facts.inventory.boot as Record<string, unknown> | undefined;
        if (boot) boot.pxe_interface = bootif ?? null;
        rec.outcome = 'agent';
        this.agent.bootRamdisk(urls);
        return;
      }
      case 'sanboot':
        rec.outcome = 'iso';
        rec.steps.push(`booted the ISO ${ending.url}`);
        return;
      case 'local':
        rec.outcome = 'disk';
        this.agent.bootDisk();
        return;
      case 'poweroff':
        rec.outcome = 'poweroff';
        this.opts.power('ForceOff');
        return;
      case 'reboot':
        rec.outcome = 'nothing';
        rec.reason = 'the boot script rebooted the machine';
        return;
      case 'failed':
        rec.outcome = 'failed';
        rec.reason = ending.reason;
    }
  }

  /** The firmware's PXE boot from one NIC; null when DHCP offers it nothing. */
  private async networkBoot(mac: string, rec: BootRecord): Promise<Ending | null> {
    const net = this.opts.network;
    const offer = await dnsmasqOffer(net.dnsmasq, mac, this.opts.bootMode === 'uefi' ? ['efi'] : []);
    if (!offer?.bootFile) {
      rec.steps.push(`DHCP ${mac}: ${offer ? 'an address, no boot file' : 'no answer'}`);
      return null;
    }
    rec.steps.push(`DHCP ${mac}: boot file ${offer.bootFile} from ${offer.tftpServer ?? '(no TFTP server)'}`);
    if (!offer.tftpServer) return { kind: 'failed', reason: 'DHCP named no TFTP server' };
    if (!(await this.tftp(offer.bootFile, rec))) return { kind: 'failed', reason: `TFTP ${offer.bootFile}: not found` };
    if (isIpxe(offer.bootFile)) {
      const again = await dnsmasqOffer(net.dnsmasq, mac, ['ipxe', ...(this.opts.bootMode === 'uefi' ? ['efi'] : [])]);
      if (!again?.bootFile) return { kind: 'failed', reason: 'iPXE got no boot file from DHCP' };
      rec.steps.push(`iPXE DHCP ${mac}: ${again.bootFile}`);
      if (!/^https?:\/\//.test(again.bootFile)) return { kind: 'failed', reason: `iPXE was handed ${again.bootFile}, not a script URL` };
      const runner = new IpxeRunner({
        mac, nics: this.opts.macs, log: (l) => rec.steps.push(`iPXE: ${l}`),
        fetchText: (u) => this.httpText(u), fetchImage: (u) => this.httpImage(u),
      });
      return runner.run(again.bootFile);
    }
    const hyph = mac.replace(/:/g, '-');
    if (isPxelinux(offer.bootFile)) {
      const config = (await this.tftpText(`pxelinux.cfg/01-${hyph}`, rec)) ?? (await this.tftpText('pxelinux.cfg/default', rec));
      if (config === null) return { kind: 'failed', reason: 'PXELINUX found no configuration' };
      return this.loadKernel(pxelinuxEntry(config, mac), rec);
    }
    if (isGrub(offer.bootFile)) {
      const config = await this.tftpText(`grub.cfg-01-${hyph}`, rec);
      if (config === null) return { kind: 'failed', reason: 'GRUB found no configuration' };
      return this.loadKernel(grubEntry(config), rec);
    }
    return { kind: 'failed', reason: `${offer.bootFile} is no boot loader this machine knows` };
  }

  /** A loader's kernel and initrds, fetched over TFTP. */
  private async loadKernel(entry: LoaderOutcome, rec: BootRecord): Promise<LoaderOutcome> {
    if (entry.kind !== 'kernel') return entry;
    for (const file of [entry.kernel, ...entry.initrds]) {
      if (!(await this.tftp(file, rec))) return { kind: 'failed', reason: `TFTP ${file}: not found` };
    }
    return entry;
  }

  /** The TFTP server's view: a file under its root (links followed, never out of the root). */
  private async tftpPath(file: string): Promise<string | null> {
    const root = await fs.realpath(this.opts.network.tftpRoot).catch(() => null);
    if (!root) return null;
    const real = await fs.realpath(path.join(root, file.replace(/^\/+/, ''))).catch(() => null);
    return real && (real === root || real.startsWith(`${root}${path.sep}`)) ? real : null;
  }

  private async tftp(file: string, rec: BootRecord): Promise<boolean> {
    const p = await this.tftpPath(file);
    const ok = p !== null && (await fs.stat(p).catch(() => null))?.isFile() === true;
    rec.steps.push(`TFTP ${file}: ${ok ? 'read' : 'not found'}`);
    return ok;
  }

  private async tftpText(file: string, rec: BootRecord): Promise<string | null> {
    const p = await this.tftpPath(file);
    const text = p ? await fs.readFile(p, 'utf8').catch(() => null) : null;
    rec.steps.push(`TFTP ${file}: ${text === null ? 'not found' : 'read'}`);
    return text;
  }

  private async httpText(url: string): Promise<string | null> {
    try {
      const res = await request(url, this.opts.network.dispatcher ? { dispatcher: this.opts.network.dispatcher } : {});
      if (res.statusCode !== 200) {
        await res.body.dump();
        return null;
      }
      return await res.body.text();
    } catch {
      return null;
    }
  }

  private async httpImage(url: string): Promise<boolean> {
    try {
      const res = await request(url, this.opts.network.dispatcher ? { dispatcher: this.opts.network.dispatcher } : {});
      await res.body.dump({ limit: Number.MAX_SAFE_INTEGER });
      return res.statusCode === 200;
    } catch {
      return false;
    }
  }
}
