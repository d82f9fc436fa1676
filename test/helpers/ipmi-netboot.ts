/**
 * A lab of machines that boot from the network behind real IPMI BMCs: one ipmi_sim per
 * machine (test/helpers/ipmi-sim.ts), a simulated network-booting machine behind it
 * (sim/netboot: DHCP from dnsmasq's files, TFTP, iPXE/PXELINUX/GRUB, the agent), the
 * directories Galvanic writes (dnsmasq's hosts and options, the TFTP and HTTP roots, with the
 * loaders a distribution ships in the TFTP root); Galvanic's own server serves the HTTP root on
 * a port chosen here.
 *
 * The machine follows its BMC: every IPMI chassis action ipmi_sim carries out is appended to
 * the BMC's chassis.log by its chassis-control hook; the lab reads each new line and does what
 * the machine would: `set power 1` from off boots with the boot device the BMC holds then,
 * `set reset` reboots, `set power 0` and `set shutdown` stop it. When the machine's own OS
 * powers it off (the agent's power_off), the BMC's power state changes behind IPMI's back, as
 * it does for a real host.
 */
import fs from 'node:fs/promises';
import { watch, type FSWatcher } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { AgentFleet } from '../../sim/agent/index.js';
import { NetbootHost, netbootFacts, type BootRecord } from '../../sim/netboot/index.js';
import { SimBmc, type ChassisEvent } from './ipmi-sim.js';
import { freePort } from './net.js';

export const LOADERS = ['undionly.kpxe', 'snponly.efi', 'ipxe.efi', 'pxelinux.0', 'bootx64.efi'];

export interface LabDirs {
  root: string;
  httpRoot: string;
  tftpRoot: string;
  hostsDir: string;
  optsDir: string;
  leaseFile: string;
}

export interface LabMachine {
  bmc: SimBmc;
  host: NetbootHost;
  macs: string[];
  uuid: string;
  /** Resolves when the machine has handled every chassis action logged so far. */
  settled(): Promise<void>;
}

export interface IpmiNetbootLab {
  dirs: LabDirs;
  machines: LabMachine[];
  fleet: AgentFleet;
  /** The HTTP root's URL (`[deploy] http_url`). */
  httpUrl: string;
  /** Galvanic's options for this lab (GALVANIC_* variables). */
  env: Record<string, string>;
  stop(): Promise<void>;
}

export interface LabOptions {
  count?: number;
  bootMode?: 'uefi' | 'bios';
  /** The agents' boot delay (s). */
  bootSeconds?: [number, number];
  heartbeatMinGapMs?: number;
}

/** A machine behind a BMC: what powering it on with a boot device, and off, does. */
export interface ChassisMachine {
  boot(device: string): Promise<unknown>;
  stop(): void | Promise<unknown>;
}

/**
 * Follows one BMC's chassis.log and drives its machine. Lines are handled one at a time, in
 * order: a boot finishes (or is stopped) before the next action is looked at.
 */
export class ChassisFollower {
  private seen = 0;
  private chain: Promise<void> = Promise.resolve();
  private watcher?: FSWatcher;
  private poll?: NodeJS.Timeout;
  private on = false;
  private host!: ChassisMachine;

  constructor(private readonly bmc: SimBmc) {}

  start(host: ChassisMachine): void {
    this.host = host;
    const file = path.join(this.bmc.dir, 'chassis.log');
    this.watcher = watch(file, () => this.read());
    // inotify can coalesce or miss a write; a slow poll is the safety net.
    this.poll = setInterval(() => this.read(), 100);
    this.poll.unref();
  }

  stop(): void {
    this.watcher?.close();
    if (this.poll) clearInterval(this.poll);
  }

  settled(): Promise<void> {
    this.read();
    return this.chain;
  }

  private read(): void {
    this.chain = this.chain.then(async () => {
      const events = await this.bmc.chassisLog();
      for (const e of events.slice(this.seen)) {
        this.seen++;
        await this.handle(e);
      }
    }).catch(() => undefined);
  }

  private async handle(e: ChassisEvent): Promise<void> {
    const [, what, value] = e.action.split(' ');
    if (what === 'power') {
      if (value === '1' && !this.on) {
        this.on = true;
        await this.host.boot(await this.bmc.bootDevice());
      } else if (value === '0') {
        this.on = false;
        await this.host.stop();
      }
    } else if (what === 'shutdown') {
      this.on = false;
      await this.host.stop();
    } else if (what === 'reset' && this.on) {
      await this.host.boot(await this.bmc.bootDevice());
    }
  }

  /** The machine's own OS powered it off or restarted it (not an IPMI action: nothing is logged). */
  async osPower(type: 'ForceOff' | 'ForceRestart'): Promise<void> {
    if (type === 'ForceOff') {
      this.on = false;
      await this.host.stop();
      await this.bmc.setPower(0);
    } else if (this.on) {
      await this.host.boot(await this.bmc.bootDevice());
    }
  }
}

/** Starts the lab; `stop` ends everything it started. */
export async function startIpmiNetbootLab(opts: LabOptions = {}): Promise<IpmiNetbootLab> {
  const root = await fs.mkdtemp(path.join(os.tmpdir(), 'galvanic-netboot-lab-'));
  const dirs: LabDirs = {
    root, httpRoot: path.join(root, 'httpboot'), tftpRoot: path.join(root, 'tftpboot'),
    hostsDir: path.join(root, 'dnsmasq', 'hostsdir.d'), optsDir: path.join(root, 'dnsmasq', 'optsdir.d'), leaseFile: path.join(root, 'dnsmasq', 'dnsmasq.leases'),
  };
  for (const d of [dirs.httpRoot, dirs.tftpRoot, dirs.hostsDir, dirs.optsDir]) await fs.mkdir(d, { recursive: true });
  for (const loader of LOADERS) await fs.writeFile(path.join(dirs.tftpRoot, loader), `${loader} (a boot loader as the distribution ships it)`);
  const cleanups: Array<() => Promise<void>> = [() => fs.rm(root, { recursive: true, force: true })];
  const stop = async () => {
    for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
  };
  try {
    const httpPort = await freePort();
    const fleet = await AgentFleet.start({
      apiUrl: '', bootSeconds: opts.bootSeconds ?? [0.2, 0.5], heartbeatMinGapMs: opts.heartbeatMinGapMs ?? 200, lookupRetryMs: 300,
    }, null, '127.0.0.1', () => undefined);
    cleanups.push(() => fleet.stop());
    const machines: LabMachine[] = [];
    for (let i = 0; i < (opts.count ?? 1); i++) {
      const bmc = await SimBmc.start(i, { power: 0 });
      cleanups.push(() => bmc.stop());
      const macs = [`52:54:00:0${i}:00:01`, `52:54:00:0${i}:00:02`];
      const uuid = `7e1c0000-0000-4000-8000-${(0x900 + i).toString(16).padStart(12, '0')}`;
      const bootMode = opts.bootMode ?? 'uefi';
      const follower = new ChassisFollower(bmc);
      const host = new NetbootHost(fleet, {
        id: uuid, macs, bootMode, facts: netbootFacts({ uuid, macs, bootMode, bmcAddress: bmc.host, index: i }),
        network: { dnsmasq: { hostsDir: dirs.hostsDir, optsDir: dirs.optsDir }, tftpRoot: dirs.tftpRoot },
        power: (type) => void follower.osPower(type),
      });
      follower.start(host);
      cleanups.push(async () => { follower.stop(); host.stop(); });
      machines.push({ bmc, host, macs, uuid, settled: () => follower.settled() });
    }
    const env: Record<string, string> = {
      GALVANIC_DHCP__DHCP_PROVIDER: 'dnsmasq',
      GALVANIC_DNSMASQ__DHCP_HOSTSDIR: dirs.hostsDir,
      GALVANIC_DNSMASQ__DHCP_OPTSDIR: dirs.optsDir,
      GALVANIC_DNSMASQ__DHCP_LEASEFILE: dirs.leaseFile,
      GALVANIC_DEPLOY__HTTP_ROOT: dirs.httpRoot,
      GALVANIC_DEPLOY__HTTP_SERVER_HOST: '127.0.0.1',
      GALVANIC_DEPLOY__HTTP_SERVER_PORT: String(httpPort),
      GALVANIC_DEPLOY__ISO_MASTER_PATH: path.join(root, 'image-cache'),
      GALVANIC_PXE__TFTP_ROOT: dirs.tftpRoot,
      GALVANIC_PXE__TFTP_SERVER: '127.0.0.1',
      // ipmi_sim answers at once; Ironic's 1 s between commands only slows the test.
      GALVANIC_IPMI__MIN_COMMAND_INTERVAL: '0.05',
    };
    return { dirs, machines, fleet, httpUrl: `http://127.0.0.1:${httpPort}`, env, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** A boot's steps as one string, for assertion messages. */
export function describeBoot(rec: BootRecord | undefined): string {
  return rec ? `${rec.device} → ${rec.outcome}${rec.reason ? ` (${rec.reason})` : ''}:\n  ${rec.steps.join('\n  ')}` : '(no boot)';
}
