/**
 * A provisioning network for real VMs that boot from the network, inside a network namespace
 * the test creates (every address lives in it; the host's own network is untouched):
 *
 *   namespace ─ bridge nbbr0 10.89.0.1/24 ─┬─ tap nbtap0 ── QEMU (SeaBIOS, its NIC's iPXE ROM)
 *                                          └─ dnsmasq from Debian (DHCP, TFTP), configured
 *                                             from etc/dnsmasq.conf.sample
 *   10.89.0.1:<port> ─ relays over unix sockets ─ 127.0.0.1:<port> in the host's namespace:
 *                      Galvanic's API and its HTTP root, as a router would forward them
 *
 * The machine sits behind an ipmi_sim BMC: each IPMI chassis action ipmi_sim logs starts QEMU
 * with the boot device it holds (pxe: the NIC first, else the disk), resets or stops it.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Machine, type MachineSpec } from '../../sim/qemu/machine.js';
import { onPath } from './baremetal.js';
import { ChassisFollower } from './ipmi-netboot.js';
import { SimBmc, missingIpmiTools } from './ipmi-sim.js';
import { freePort } from './net.js';
import { until } from './until.js';
import { vmLabMissing } from './vm-ramdisk.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const GATEWAY = '10.89.0.1';
const BRIDGE = 'nbbr0';
const TAP = 'nbtap0';
/** Debian's ipxe package: the loaders dnsmasq's options name (iPXE ROMs never fetch them, but an operator's firmware would). */
const LOADERS = ['/usr/lib/ipxe/undionly.kpxe', '/usr/lib/ipxe/snponly.efi'];
export const MARK = '[galvanic-sim]';

/** Why this lab cannot run here, or null. */
export function netbootVmLabMissing(): string | null {
  const vm = vmLabMissing();
  if (vm) return vm;
  const ipmi = missingIpmiTools();
  if (ipmi.length) return `${ipmi.join(', ')} not on PATH`;
  for (const tool of ['dnsmasq', 'ip']) if (!onPath(tool) && !onPath(`/usr/sbin/${tool}`)) return `${tool} not on PATH`;
  for (const f of LOADERS) if (spawnSync('test', ['-f', f]).status !== 0) return `${f} is missing`;
  if (process.getuid?.() !== 0) return 'network namespaces need root';
  return null;
}

/** Skips the suite when the lab cannot run, or fails it under CI. */
export function requireNetbootVmLab(ctx: Mocha.Context, what: string): void {
  const missing = netbootVmLabMissing();
  if (!missing) return;
  const msg = `${missing} (apt-get install dnsmasq ipxe ipxe-qemu iproute2 qemu-system-x86 openipmi ipmitool, and run as root)`;
  if (process.env.CI === 'true') throw new Error(`${msg}; CI=true, so this is a failure, not a skip`);
  process.stderr.write(`      skipping the ${what}: ${msg}.\n`);
  ctx.skip();
}

function sh(cmd: string, args: string[]): void {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')}: ${r.stderr || r.stdout}`);
}

/** A long-lived process that dies with us. */
function daemon(args: string[], log: string): ChildProcess {
  const argv = onPath('setpriv') ? ['setpriv', '--pdeathsig', 'KILL', '--', ...args] : args;
  return spawn(argv[0], argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] }).on('error', (err) => void fs.appendFile(log, `spawn: ${err.message}\n`));
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function stopChild(p: ChildProcess): Promise<void> {
  if (p.exitCode !== null || p.signalCode !== null) return;
  const exited = new Promise((r) => p.once('exit', r));
  p.kill('SIGTERM');
  const t = setTimeout(() => p.kill('SIGKILL'), 3000);
  await exited;
  clearTimeout(t);
}

/** The namespace side of a relay: TCP on the gateway address to the host's unix socket. */
const RELAY = `
const net = require('node:net');
const [sock, host, port] = process.argv.slice(1);
net.createServer((c) => { const u = net.connect(sock); c.pipe(u).pipe(c); c.on('error', () => u.destroy()); u.on('error', () => c.destroy()); })
  .listen(Number(port), host, () => console.log('ready'));
`;

export interface VmNetbootLab {
  netns: string;
  gateway: string;
  dirs: { root: string; httpRoot: string; tftpRoot: string; hostsDir: string; optsDir: string; leaseFile: string; dnsmasqLog: string; vm: string };
  bmc: SimBmc;
  macs: [string, string];
  /** The VM's serial console so far (each power on starts with a MARK line). */
  console(): Promise<string>;
  /** Whether QEMU runs. */
  vmRunning(): boolean;
  /** GALVANIC_* options for this network; the API and HTTP root ports are the relayed ones. */
  env: Record<string, string>;
  apiPort: number;
  httpPort: number;
  stop(): Promise<void>;
}

/** Starts the namespace, dnsmasq, the relays, the BMC and its machine's follower. */
export async function startVmNetbootLab(opts: { accel: 'kvm' | 'tcg' }): Promise<VmNetbootLab> {
  const root = await fs.mkdtemp(path.join(os.tmpdir(), 'galvanic-vm-netboot-'));
  const dirs = {
    root, httpRoot: path.join(root, 'httpboot'), tftpRoot: path.join(root, 'tftpboot'), hostsDir: path.join(root, 'hostsdir.d'),
    optsDir: path.join(root, 'optsdir.d'), leaseFile: path.join(root, 'dnsmasq.leases'), dnsmasqLog: path.join(root, 'dnsmasq.log'), vm: path.join(root, 'vm'),
  };
  for (const d of [dirs.httpRoot, dirs.tftpRoot, dirs.hostsDir, dirs.optsDir, dirs.vm]) await fs.mkdir(d, { recursive: true });
  for (const f of LOADERS) await fs.copyFile(f, path.join(dirs.tftpRoot, path.basename(f)));
  // A run that crashed left its namespace (the processes in it died with it): gone now.
  for (const line of spawnSync('ip', ['netns', 'list'], { encoding: 'utf8' }).stdout.split('\n')) {
    const pid = /^galvnb(\d+)\b/.exec(line)?.[1];
    if (pid && !alive(Number(pid))) spawnSync('ip', ['netns', 'del', `galvnb${pid}`]);
  }
  const netns = `galvnb${process.pid}`;
  const cleanups: Array<() => Promise<void>> = [() => fs.rm(root, { recursive: true, force: true })];
  const stop = async () => {
    for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
  };
  try {
    sh('ip', ['netns', 'add', netns]);
    cleanups.push(async () => sh('ip', ['netns', 'del', netns]));
    const inNs = (...args: string[]) => sh('ip', ['netns', 'exec', netns, ...args]);
    inNs('ip', 'link', 'set', 'lo', 'up');
    inNs('ip', 'link', 'add', BRIDGE, 'type', 'bridge');
    inNs('ip', 'addr', 'add', `${GATEWAY}/24`, 'dev', BRIDGE);
    inNs('ip', 'link', 'set', BRIDGE, 'up');
    inNs('ip', 'tuntap', 'add', 'dev', TAP, 'mode', 'tap');
    inNs('ip', 'link', 'set', TAP, 'master', BRIDGE);
    inNs('ip', 'link', 'set', TAP, 'up');

    // dnsmasq as the shipped sample configures it, pointed at this lab.
    const sample = await fs.readFile(path.join(ROOT, 'etc/dnsmasq.conf.sample'), 'utf8');
    const conf = sample
      .replace(/^interface=.*$/m, `interface=${BRIDGE}`)
      .replace(/^dhcp-range=.*$/m, 'dhcp-range=10.89.0.100,10.89.0.200,255.255.255.0,10m')
      .replace(/^dhcp-leasefile=.*$/m, `dhcp-leasefile=${dirs.leaseFile}`)
      .replace(/^dhcp-hostsdir=.*$/m, `dhcp-hostsdir=${dirs.hostsDir}`)
      .replace(/^dhcp-optsdir=.*$/m, `dhcp-optsdir=${dirs.optsDir}`)
      .replace(/^tftp-root=.*$/m, `tftp-root=${dirs.tftpRoot}`)
      .replace(/^#log-dhcp$/m, 'log-dhcp')
      + `log-facility=${dirs.dnsmasqLog}\npid-file=${path.join(root, 'dnsmasq.pid')}\nuser=root\ngroup=root\n`;
    const confFile = path.join(root, 'dnsmasq.conf');
    await fs.writeFile(confFile, conf);
    const dnsmasq = daemon(['ip', 'netns', 'exec', netns, 'dnsmasq', '--keep-in-foreground', `--conf-file=${confFile}`], dirs.dnsmasqLog);
    cleanups.push(() => stopChild(dnsmasq));
    await until('dnsmasq to start', async () => /started, version/.test(await fs.readFile(dirs.dnsmasqLog, 'utf8').catch(() => '')) || dnsmasq.exitCode !== null, 10_000, 100);
    if (dnsmasq.exitCode !== null) throw new Error(`dnsmasq exited: ${await fs.readFile(dirs.dnsmasqLog, 'utf8').catch(() => '')}`);

    // Galvanic's API and HTTP root, reached from the namespace at the gateway's address.
    const apiPort = await freePort();
    const httpPort = await freePort();
    for (const port of [apiPort, httpPort]) {
      const sock = path.join(root, `relay-${port}.sock`);
      const server = net.createServer((c) => {
        const t = net.connect(port, '127.0.0.1');
        c.pipe(t).pipe(c);
        c.on('error', () => t.destroy());
        t.on('error', () => c.destroy());
      });
      await new Promise<void>((r) => server.listen(sock, r));
      cleanups.push(() => new Promise((r) => server.close(() => r())));
      const relay = daemon(['ip', 'netns', 'exec', netns, process.execPath, '-e', RELAY, sock, GATEWAY, String(port)], path.join(root, 'relay.log'));
      cleanups.push(() => stopChild(relay));
      await new Promise<void>((resolve, reject) => {
        relay.stdout!.once('data', () => resolve());
        relay.once('exit', (code) => reject(new Error(`the relay of port ${port} exited (${code})`)));
      });
    }

    const bmc = await SimBmc.start(0, { power: 0 });
    cleanups.push(() => bmc.stop());
    const macs: [string, string] = ['52:54:00:89:00:01', '52:54:00:89:00:02'];
    const spec: MachineSpec = {
      name: 'netboot-vm', dir: dirs.vm, qemu: 'qemu-system-x86_64', accel: opts.accel, memoryMiB: 512, cpus: 1,
      uuid: '7e1c0000-0000-4000-8000-000000000089', serial: 'NETBOOT-VM', macs, diskBytes: 256 * 1024 * 1024,
      ovmfCode: '/usr/share/OVMF/OVMF_CODE.fd', ovmfVars: '/usr/share/OVMF/OVMF_VARS.fd', tap: { netns, ifname: TAP },
    };
    let machine: Machine | null = null;
    const serial = path.join(dirs.vm, 'serial.log');
    const quit = async () => {
      const m = machine;
      machine = null;
      await m?.quit();
    };
    const follower = new ChassisFollower(bmc);
    follower.start({
      async boot(device) {
        await quit();
        await fs.appendFile(serial, `\n${MARK} power on, boot device ${device}\n`);
        machine = await Machine.start(spec, { firmware: 'bios', first: device === 'pxe' ? 'nic0' : 'disk', media: { cd: null, usb: null } });
        // The guest powering itself off turns the BMC's power off, behind IPMI's back.
        machine.once('exit', (e) => { if (!e.asked) void bmc.setPower(0); });
      },
      stop: quit,
    });
    cleanups.push(async () => { follower.stop(); await quit(); });

    const env: Record<string, string> = {
      GALVANIC_API__PUBLIC_ENDPOINT: `http://${GATEWAY}:${apiPort}`,
      GALVANIC_DHCP__DHCP_PROVIDER: 'dnsmasq',
      GALVANIC_DNSMASQ__DHCP_HOSTSDIR: dirs.hostsDir,
      GALVANIC_DNSMASQ__DHCP_OPTSDIR: dirs.optsDir,
      GALVANIC_DNSMASQ__DHCP_LEASEFILE: dirs.leaseFile,
      GALVANIC_DEPLOY__HTTP_ROOT: dirs.httpRoot,
      GALVANIC_DEPLOY__HTTP_URL: `http://${GATEWAY}:${httpPort}`,
      GALVANIC_DEPLOY__HTTP_SERVER_HOST: '127.0.0.1',
      GALVANIC_DEPLOY__HTTP_SERVER_PORT: String(httpPort),
      GALVANIC_DEPLOY__ISO_MASTER_PATH: path.join(root, 'image-cache'),
      GALVANIC_PXE__TFTP_ROOT: dirs.tftpRoot,
      GALVANIC_PXE__TFTP_SERVER: GATEWAY,
      GALVANIC_IPMI__MIN_COMMAND_INTERVAL: '0.05',
    };
    return {
      netns, gateway: GATEWAY, dirs, bmc, macs, env, apiPort, httpPort, stop,
      console: () => fs.readFile(serial, 'utf8').catch(() => ''),
      vmRunning: () => machine?.running === true,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
