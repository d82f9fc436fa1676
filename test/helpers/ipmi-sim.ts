/**
 * Real IPMI BMCs for tests: one `ipmi_sim` (Debian's openipmi) per BMC on a free UDP port of
 * 127.0.0.1, configured from test/fixtures/ipmi-sim/ (trimmed copies of ../shared/ipmi-sim/).
 * Power, boot device and resets land in plain files of the BMC's directory, and every
 * IPMI-driven action is appended, timestamped, to its chassis.log.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import dgram from 'node:dgram';
import net from 'node:net';
import { accessSync, constants, readdirSync, readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';

const run = promisify(execFile);
/** The package root (this file runs as dist/test/helpers/ipmi-sim.js); fixtures stay in the source tree. */
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
export const IPMI_SIM_FIXTURES = path.join(ROOT, 'test/fixtures/ipmi-sim');
const TOOLS = ['ipmi_sim', 'sdrcomp', 'ipmitool'];

/** The tools of `TOOLS` missing from PATH. */
export function missingIpmiTools(): string[] {
  const dirs = (process.env.PATH ?? '').split(path.delimiter).filter(Boolean);
  return TOOLS.filter((tool) => !dirs.some((d) => {
    try {
      accessSync(path.join(d, tool), constants.X_OK);
      return true;
    } catch {
      return false;
    }
  }));
}

/**
 * Skips the calling suite when ipmi_sim or ipmitool is missing, saying how to install them;
 * in CI (CI=true) a missing tool is a failure instead, so the suite cannot silently vanish.
 */
export function requireIpmiSim(ctx: Mocha.Context): void {
  const missing = missingIpmiTools();
  if (missing.length === 0) return;
  const msg = `IPMI tests need ${missing.join(', ')} (apt-get install ipmitool openipmi)`;
  if (process.env.CI === 'true') throw new Error(`${msg}; CI=true, so this is a failure, not a skip`);
  console.warn(`      skipped: ${msg}`);
  ctx.skip();
}

/** A UDP port of 127.0.0.1 nobody was bound to a moment ago. */
export function freeUdpPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const sock = dgram.createSocket('udp4');
    sock.once('error', reject);
    sock.bind(0, '127.0.0.1', () => {
      const { port } = sock.address();
      sock.close(() => resolve(port));
    });
  });
}

export interface ChassisEvent {
  /** Wall-clock seconds (date +%s.%N in chassis-control.sh). */
  t: number;
  /** e.g. "set power 1", "set boot pxe", "set shutdown 1". */
  action: string;
}

export interface SimBmcOptions {
  username?: string;
  password?: string;
  /** Initial power state. */
  power?: 0 | 1;
  /** Give the BMC a serial port for Serial-over-LAN (a SerialHost in this process). */
  sol?: boolean;
}

/**
 * The host side of a BMC's serial port: ipmi_sim connects here (its `sol "tcp:…"` line).
 * What a test writes goes out on the serial line (and so to a `sol activate` client); what
 * the SOL client types arrives here.
 */
export class SerialHost {
  private bmcSocket?: net.Socket;
  private rx = '';
  private constructor(private readonly server: net.Server, readonly port: number) {
    server.on('connection', (sock) => {
      this.bmcSocket?.destroy();
      this.bmcSocket = sock;
      sock.on('data', (d: Buffer) => { this.rx += d.toString('latin1'); });
      sock.on('error', () => undefined);
    });
  }

  static async start(): Promise<SerialHost> {
    const server = net.createServer();
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    return new SerialHost(server, (server.address() as net.AddressInfo).port);
  }

  get connected(): boolean {
    return this.bmcSocket !== undefined && !this.bmcSocket.destroyed;
  }

  /** Prints on the serial line (false when the BMC has not connected yet). */
  write(text: string): boolean {
    if (!this.connected) return false;
    this.bmcSocket!.write(Buffer.from(text, 'latin1'));
    return true;
  }

  /** Everything the SOL client typed so far. */
  received(): string {
    return this.rx;
  }

  async close(): Promise<void> {
    this.bmcSocket?.destroy();
    await new Promise((r) => this.server.close(r));
  }
}

/** One running ipmi_sim. */
export class SimBmc {
  private constructor(
    readonly name: string,
    readonly port: number,
    readonly username: string,
    readonly password: string,
    readonly dir: string,
    private readonly proc: ChildProcess,
    /** The serial port, when started with `sol: true`. */
    readonly serial?: SerialHost,
  ) {}

  readonly host = '127.0.0.1';

  get pid(): number {
    return this.proc.pid ?? -1;
  }

  /** Starts a BMC; resolves once it answers `mc guid` over lanplus. */
  static async start(index: number, opts: SimBmcOptions = {}): Promise<SimBmc> {
    if (/\s/.test(IPMI_SIM_FIXTURES)) throw new Error(`ipmi_sim cannot use a config path with spaces: ${IPMI_SIM_FIXTURES}`);
    const username = opts.username ?? 'admin';
    const password = opts.password ?? 'password';
    const name = `bmc${index}`;
    let lastError: unknown;
    // A free port can be taken between the probe and ipmi_sim's bind: try a few.
    for (let attempt = 0; attempt < 3; attempt++) {
      const port = await freeUdpPort();
      const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'galvanic-ipmi-sim-'));
      // Listening before ipmi_sim starts: it connects at start and retries only every 10 s.
      const serial = opts.sol ? await SerialHost.start() : undefined;
      try {
        const proc = await launch(name, index, port, username, password, dir, opts.power ?? 0, serial?.port);
        const bmc = new SimBmc(name, port, username, password, dir, proc, serial);
        live.add(bmc);
        await bmc.waitReady();
        return bmc;
      } catch (err) {
        lastError = err;
        await serial?.close();
        for (const b of live) if (b.dir === dir) await b.stop();
        await fs.rm(dir, { recursive: true, force: true });
      }
    }
    throw lastError;
  }

  /** driver_info of a node on this BMC (cipher suite 3: ipmi_sim lacks "Get Channel Cipher Suites"). */
  driverInfo(extra: Record<string, unknown> = {}): Record<string, unknown> {
    return {
      ipmi_address: this.host,
      ipmi_port: this.port,
      ipmi_username: this.username,
      ipmi_password: this.password,
      ipmi_cipher_suite: 3,
      ...extra,
    };
  }

  /** The power state ipmi_sim's chassis control holds. */
  async power(): Promise<0 | 1> {
    return (await fs.readFile(path.join(this.dir, 'power'), 'utf8')).trim() === '1' ? 1 : 0;
  }

  /** Sets the power state behind the BMC's back (someone pressed the button). */
  async setPower(p: 0 | 1): Promise<void> {
    await fs.writeFile(path.join(this.dir, 'power'), `${p}\n`);
  }

  async bootDevice(): Promise<string> {
    return (await fs.readFile(path.join(this.dir, 'boot'), 'utf8')).trim();
  }

  async chassisLog(): Promise<ChassisEvent[]> {
    const text = await fs.readFile(path.join(this.dir, 'chassis.log'), 'utf8').catch(() => '');
    return text
      .split('\n')
      .filter(Boolean)
      .map((line) => {
        const i = line.indexOf(' ');
        return { t: Number(line.slice(0, i)), action: line.slice(i + 1) };
      });
  }

  /** SIGKILL, for process exit (synchronous). */
  killNow(): void {
    this.proc.kill('SIGKILL');
  }

  async stop(): Promise<void> {
    live.delete(this);
    const p = this.proc;
    if (p.exitCode === null && p.signalCode === null) {
      const exited = new Promise((r) => p.once('exit', r));
      p.kill('SIGTERM');
      const timer = setTimeout(() => p.kill('SIGKILL'), 3000);
      await exited;
      clearTimeout(timer);
    }
    await this.serial?.close();
    await fs.rm(this.dir, { recursive: true, force: true });
  }

  private async waitReady(): Promise<void> {
    const deadline = Date.now() + 15_000;
    let last = '';
    while (Date.now() < deadline) {
      if (this.proc.exitCode !== null || this.proc.signalCode !== null) break;
      try {
        await run('ipmitool', ['-I', 'lanplus', '-C', '3', '-H', this.host, '-p', String(this.port), '-U', this.username, '-E', '-R', '1', '-N', '1', 'mc', 'guid'], {
          env: { PATH: process.env.PATH, IPMI_PASSWORD: this.password },
          timeout: 5000,
        });
        return;
      } catch (err) {
        last = String((err as { stderr?: string }).stderr ?? err);
        await sleep(100);
      }
    }
    const out = await fs.readFile(path.join(this.dir, 'ipmi_sim.out'), 'utf8').catch(() => '');
    throw new Error(`${this.name} (UDP ${this.port}) did not come up: ${last.trim()}\nipmi_sim output:\n${out}`);
  }
}

const live = new Set<SimBmc>();
// A crashed test run must not leave simulators behind.
process.once('exit', () => {
  for (const b of live) b.killNow();
});

async function launch(name: string, index: number, port: number, username: string, password: string, dir: string, power: 0 | 1, solPort?: number): Promise<ChildProcess> {
  const fill = (text: string, vars: Record<string, string>): string => text.replace(/@([A-Z_]+)@/g, (m, k: string) => vars[k] ?? m);
  const vars = {
    NAME: name,
    IPMI_PORT: String(port),
    USER: username,
    PASSWORD: password,
    GUID: `b3c0${index.toString(16).padStart(4, '0')}${'0'.repeat(16)}${port.toString(16).padStart(8, '0')}`,
    FIXTURES: IPMI_SIM_FIXTURES,
    DIR: dir,
    PRODUCT: `0x${(0x0f00 + (index % 256)).toString(16).padStart(4, '0')}`,
    SOL: solPort === undefined ? '' : `sol "tcp:127.0.0.1:${solPort}" 115200 history=65536`,
  };
  await fs.mkdir(path.join(dir, 'sensors'));
  await fs.writeFile(path.join(dir, 'boot'), 'default\n');
  await fs.writeFile(path.join(dir, 'reset'), '0\n');
  // Seeds the sensor files to match the power state, then starts an empty log.
  await run('/bin/sh', [path.join(IPMI_SIM_FIXTURES, 'chassis-control.sh'), dir, 'set', 'power', String(power)]);
  await fs.writeFile(path.join(dir, 'chassis.log'), '');
  await fs.writeFile(path.join(dir, 'lan.conf'), fill(await fs.readFile(path.join(IPMI_SIM_FIXTURES, 'lan.conf.in'), 'utf8'), vars), { mode: 0o600 });
  await fs.writeFile(path.join(dir, 'bmc.emu'), fill(await fs.readFile(path.join(IPMI_SIM_FIXTURES, 'bmc.emu.in'), 'utf8'), vars));
  // ipmi_sim reads its SDR repository from <state>/ipmi_sim/<name>/sdr.20.main; -8 keeps
  // all-caps names such as "FAN1" readable.
  const sdrDir = path.join(dir, 'state/ipmi_sim', name);
  await fs.mkdir(sdrDir, { recursive: true });
  await run('sdrcomp', ['-8', '-o', path.join(sdrDir, 'sdr.20.main'), path.join(IPMI_SIM_FIXTURES, 'bmc.sdrs')]);
  const out = await fs.open(path.join(dir, 'ipmi_sim.out'), 'w');
  try {
    // -n: no command console on stdin/stdout.
    const proc = spawn('ipmi_sim', ['-c', path.join(dir, 'lan.conf'), '-f', path.join(dir, 'bmc.emu'), '-s', path.join(dir, 'state'), '-n'], {
      cwd: dir,
      stdio: ['ignore', out.fd, out.fd],
    });
    // A failed spawn shows up in waitReady as a dead process.
    proc.on('error', (err) => void fs.appendFile(path.join(dir, 'ipmi_sim.out'), `spawn failed: ${err.message}\n`).catch(() => undefined));
    return proc;
  } finally {
    await out.close();
  }
}

/** Starts `count` BMCs at once. */
export async function startSimBmcs(count: number, opts: SimBmcOptions = {}): Promise<SimBmc[]> {
  const started = await Promise.allSettled(Array.from({ length: count }, (_, i) => SimBmc.start(i, opts)));
  const ok = started.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  const failed = started.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) {
    await Promise.all(ok.map((b) => b.stop()));
    throw failed.reason;
  }
  return ok;
}

export async function stopSimBmcs(bmcs: readonly SimBmc[]): Promise<void> {
  await Promise.all(bmcs.map((b) => b.stop()));
}

/** ipmitool processes whose parent is this process (the driver's workers spawn them). */
export async function childIpmitools(): Promise<number[]> {
  const pids: number[] = [];
  for (const entry of await fs.readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await fs.readFile(`/proc/${entry}/stat`, 'utf8').catch(() => '');
    const close = stat.lastIndexOf(')');
    if (close < 0) continue;
    const comm = stat.slice(stat.indexOf('(') + 1, close);
    const ppid = Number(stat.slice(close + 2).split(' ')[1]);
    if (comm === 'ipmitool' && ppid === process.pid) pids.push(Number(entry));
  }
  return pids;
}

/**
 * Every process's argv as one string, by pid (processes that vanish meanwhile are skipped).
 * Synchronous on purpose: a scan must be quick to catch short-lived processes.
 */
export function allCommandLines(): Map<number, string> {
  const out = new Map<number, string>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const raw = readFileSync(`/proc/${entry}/cmdline`);
      if (raw.length) out.set(Number(entry), raw.toString('utf8').replace(/\0/g, ' '));
    } catch {
      // gone already
    }
  }
  return out;
}
