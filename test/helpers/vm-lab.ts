/**
 * Shared by the VM tests and the real-IPA lab (test/lab/real-ipa.ts): which accelerator boots
 * the test kernel here, the serial console of a QEMU-backed BMC (GET /_sim/vm/console), what the
 * test ramdisk said on it, and a Galvanic with a QEMU-backed BMC, for a suite or started by hand.
 */
import { expect } from 'chai';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { probeKvm } from '../../sim/qemu/index.js';
import { startRedfishSim, type QemuOptions, type RedfishSim } from '../../sim/redfish/index.js';
import { startGalvanicOnFreshDatabase, type GalvanicOnFreshDatabase } from './app.js';
import { freePort } from './net.js';
import { getNode, httpClient, type ApiCall } from './provisioning.js';
import { until } from './until.js';
import { requireVmLab, testRamdisk, type TestRamdisk } from './vm-ramdisk.js';

export type Accel = 'kvm' | 'tcg';

let reported = false;

/**
 * KVM when this host's KVM boots `kernel`, else TCG (the probe runs once per process);
 * GALVANIC_QEMU_ACCEL=kvm|tcg skips the probe.
 */
export async function vmAccel(kernel: string): Promise<{ accel: Accel; detail: string }> {
  const forced = process.env.GALVANIC_QEMU_ACCEL;
  const chosen: { accel: Accel; detail: string } = forced === 'kvm' || forced === 'tcg'
    ? { accel: forced, detail: 'GALVANIC_QEMU_ACCEL' }
    : await probeKvm(kernel).then((p) => ({ accel: p.kvm ? ('kvm' as const) : ('tcg' as const), detail: p.detail }));
  if (!reported) {
    reported = true;
    process.stderr.write(`      VM lab: ${chosen.accel.toUpperCase()} (${chosen.detail})\n`);
  }
  return chosen;
}

export interface VmState {
  running: boolean;
  pid: number | null;
  firmware: 'bios' | 'uefi' | null;
  boot: string | null;
  media: { cd: string | null; usb: string | null };
  mediaFiles: string[];
  macs: [string, string];
  uuid: string;
  /** The 127.0.0.1 port forwarded to the guest's 9999, with `agentPort`. */
  agentPort: number | null;
  serialBytes: number;
  lastError: string | null;
}

export async function vmState(bmcUrl: string): Promise<VmState> {
  const res = await fetch(`${bmcUrl}/_sim/vm`);
  if (!res.ok) throw new Error(`/_sim/vm: ${res.status} ${await res.text()}`);
  return (await res.json()) as VmState;
}

/** The serial console from byte `from`. */
export async function vmConsole(bmcUrl: string, from = 0): Promise<string> {
  const res = await fetch(`${bmcUrl}/_sim/vm/console?from=${from}`);
  if (!res.ok) throw new Error(`/_sim/vm/console: ${res.status} ${await res.text()}`);
  return res.text();
}

/** The console's output since `from` once it matches `re`; on a timeout the error shows its end. */
export async function waitForConsole(bmcUrl: string, re: RegExp, opts: { from?: number; timeoutMs?: number; what?: string } = {}): Promise<string> {
  let text = '';
  return until(
    () => `${opts.what ?? re.source} on the serial console; it ends with:\n${text.slice(-2500)}`,
    async () => {
      text = await vmConsole(bmcUrl, opts.from ?? 0);
      return re.test(text) ? text : null;
    },
    opts.timeoutMs ?? 180_000,
    500,
  );
}

/** What the test ramdisk reported (its `vmlab: ` lines): the last boot's, when given its output. */
export interface RamdiskReport {
  cmdline: string | null;
  /** Kernel parameters by name (the last of each). */
  params: Record<string, string>;
  nic: { name: string; mac: string } | null;
  configDrive: string | null;
  /** Files read from the config drive, decoded; null when missing. */
  files: Record<string, string | null>;
  lookups: string[];
  heartbeats: Array<{ n: number; ok: boolean; text: string }>;
  /** The inventory posted to ipa-inspection-callback-url, when it was taken. */
  inspection: Record<string, unknown> | null;
  inspectionError: string | null;
}

export function ramdiskReport(output: string): RamdiskReport {
  const r: RamdiskReport = { cmdline: null, params: {}, nic: null, configDrive: null, files: {}, lookups: [], heartbeats: [], inspection: null, inspectionError: null };
  for (const raw of output.split('\n')) {
    const at = raw.indexOf('vmlab: ');
    if (at < 0) continue;
    const line = raw.slice(at + 7).trim();
    const [word, ...rest] = line.split(' ');
    if (word === 'cmdline') {
      r.cmdline = rest.join(' ');
      for (const p of rest) {
        const eq = p.indexOf('=');
        if (eq > 0) r.params[p.slice(0, eq)] = p.slice(eq + 1);
      }
    } else if (word === 'nic') {
      r.nic = { name: rest[0], mac: rest[1] };
    } else if (word === 'config-drive') {
      r.configDrive = rest.join(' ');
    } else if (word === 'file') {
      r.files[rest[0]] = rest[1] === 'missing' ? null : Buffer.from(rest[2] ?? '', 'base64').toString('utf8');
    } else if (word === 'lookup') {
      r.lookups.push(rest.join(' '));
    } else if (word === 'inspection') {
      if (rest[0] === 'ok') r.inspection = (JSON.parse(Buffer.from(rest[1], 'base64').toString('utf8')) as { inventory: Record<string, unknown> }).inventory;
      else r.inspectionError = rest.slice(1).join(' ');
    } else if (word === 'heartbeat') {
      r.heartbeats.push({ n: Number(rest[0]), ok: rest[1] === 'ok', text: rest.slice(1).join(' ') });
    }
  }
  return r;
}

/** The console output of the last power on or reset (after the simulator's last mark). */
export function lastBoot(output: string): string {
  const at = output.lastIndexOf('[galvanic-sim]');
  return at < 0 ? output : output.slice(at);
}

/** Every file under `dir`, relative to it (none when it does not exist). */
export async function filesUnder(dir: string): Promise<string[]> {
  const entries = await fs.promises.readdir(dir, { recursive: true, withFileTypes: true }).catch(() => []);
  return entries.filter((e) => e.isFile()).map((e) => path.relative(dir, path.join(e.parentPath, e.name))).sort();
}

export interface VmLabGalvanic {
  readonly galvanic: GalvanicOnFreshDatabase;
  readonly api: ApiCall;
  readonly sim: RedfishSim;
  /** The QEMU-backed BMC. */
  readonly bmc: string;
  readonly ramdisk: TestRamdisk;
  /** Where the test's files are served (`<url>/vmlinuz`, `<url>/initrd.gz`, and what `serve` adds). */
  readonly files: string;
  /** Galvanic's HTTP root. */
  readonly httpRoot: string;
  /** Galvanic's API as the guest reaches it (ipa-api-url). */
  readonly guestApi: string;
  /** Serves `data` at `<files>/<name>`. */
  serve(name: string, data: Buffer): void;
}

export interface VmLabOptions {
  /** `GALVANIC_*` overrides of Galvanic's environment. */
  env?: Record<string, string>;
  /** The machine's memory, disk and agent port forward (sim/qemu's defaults otherwise). */
  machine?: Pick<QemuOptions, 'memoryMiB' | 'diskMiB' | 'agentPort'>;
}

/** A VM lab started outside mocha's hooks: the same parts, stopped by the caller. */
export interface VmLab extends VmLabGalvanic {
  /** The lab's directory: Galvanic's HTTP root and image cache, the machine's directory (`vms/bmc-0`). */
  readonly dir: string;
  readonly accel: Accel;
  /** Serves the file at `file` as `<files>/<name>`, read from disk at each request. */
  serveFile(name: string, file: string): void;
  /**
   * Stops Galvanic (dropping its database), the machines and the file server, and removes the
   * lab's directory unless `keep`: resolves with Galvanic's exit code.
   */
  stop(opts?: { keep?: boolean }): Promise<number | null>;
}

/**
 * A real `galvanic all-in-one` against one QEMU-backed BMC: the test ramdisk built, a file
 * server for it on 127.0.0.1, Galvanic on a fresh database (setUpTestDatabases first) with an
 * HTTP root and image cache in the lab's directory and `[deploy] external_callback_url` the
 * API's address from the guest (10.0.2.2, QEMU's user network), and the simulator.
 */
export async function startVmLab(opts: VmLabOptions = {}): Promise<VmLab> {
  const served = new Map<string, Buffer | string>();
  const ramdisk = await testRamdisk();
  const { accel } = await vmAccel(ramdisk.kernel);
  served.set('vmlinuz', ramdisk.kernel);
  served.set('initrd.gz', ramdisk.initrd);
  const dir = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'vm-lab-'));
  const server = http.createServer((req, res) => void answer(served.get((req.url ?? '').replace(/^\//, '')), req, res));
  let galvanic: GalvanicOnFreshDatabase | undefined;
  let sim: RedfishSim | undefined;
  const stop = async (stopOpts: { keep?: boolean } = {}): Promise<number | null> => {
    try {
      return (await galvanic?.shutdown()) ?? null;
    } finally {
      // The machines go whatever Galvanic's exit was.
      await sim?.stop();
      if (server.listening) {
        server.closeAllConnections();
        await new Promise((resolve) => server.close(resolve));
      }
      if (!stopOpts.keep) await fs.promises.rm(dir, { recursive: true, force: true });
    }
  };
  let files = '';
  let port = 0;
  try {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    files = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    port = await freePort();
    galvanic = await startGalvanicOnFreshDatabase({
      port,
      env: {
        GALVANIC_DEPLOY__HTTP_ROOT: path.join(dir, 'httpboot'),
        GALVANIC_DEPLOY__ISO_MASTER_PATH: path.join(dir, 'cache'),
        GALVANIC_DEPLOY__EXTERNAL_CALLBACK_URL: `http://10.0.2.2:${port}`,
        GALVANIC_CONDUCTOR__SYNC_POWER_STATE_INTERVAL: '0',
        GALVANIC_REDFISH__CONNECTION_RETRY_INTERVAL: '0.1',
        ...opts.env,
      },
    });
    sim = await startRedfishSim({ count: 1, qemu: { accel, workDir: path.join(dir, 'vms'), ...opts.machine } });
  } catch (err) {
    await stop();
    throw err;
  }
  const g = galvanic;
  const s = sim;
  return {
    galvanic: g, sim: s, bmc: s.bmcs[0].url, ramdisk, files, dir, accel,
    httpRoot: path.join(dir, 'httpboot'),
    guestApi: `http://10.0.2.2:${port}`,
    api: httpClient(g.url),
    serve: (name, data) => void served.set(name, data),
    serveFile: (name, file) => void served.set(name, file),
    stop,
  };
}

/** A file server's answer: the bytes, or the file read from disk, or 404. */
function answer(body: Buffer | string | undefined, req: http.IncomingMessage, res: http.ServerResponse): void {
  if (body === undefined) return void res.writeHead(404).end();
  if (Buffer.isBuffer(body)) return void res.writeHead(200, { 'content-length': String(body.length) }).end(req.method === 'HEAD' ? undefined : body);
  fs.promises.stat(body).then((st) => {
    res.writeHead(200, { 'content-length': String(st.size) });
    if (req.method === 'HEAD') return void res.end();
    fs.createReadStream(body).on('error', () => res.destroy()).pipe(res);
  }, () => void res.writeHead(404).end());
}

/**
 * The hooks of a suite that drives a real `galvanic all-in-one` against one QEMU-backed BMC
 * (startVmLab), started in `before` and stopped in `after`, where Galvanic must exit cleanly.
 * Call it inside `describe`.
 */
export function vmLabGalvanic(what: string, env: Record<string, string> = {}): VmLabGalvanic {
  let lab: VmLab | undefined;
  before(async function () {
    requireVmLab(this, what);
    lab = await startVmLab({ env });
  });
  after(async () => {
    if (!lab) return;
    const output = lab.galvanic.output();
    const code = await lab.stop();
    expect(code, output.slice(-3000)).to.equal(0);
  });
  const started = (): VmLab => {
    if (lab === undefined) throw new Error('the VM lab is not started (outside the suite\'s hooks and tests?)');
    return lab;
  };
  return {
    get galvanic() { return started().galvanic; },
    get sim() { return started().sim; },
    get bmc() { return started().bmc; },
    get ramdisk() { return started().ramdisk; },
    get files() { return started().files; },
    get httpRoot() { return started().httpRoot; },
    get guestApi() { return started().guestApi; },
    api: (...args: Parameters<ApiCall>) => started().api(...args),
    serve: (name, data) => started().serve(name, data),
  };
}

/**
 * What a torn-down node leaves, checked: its machine powered off with nothing in its drives
 * and no download kept, the BMC's slots empty, the HTTP root holding no file, the node off.
 */
export async function expectNothingLeft(lab: Pick<VmLabGalvanic, 'api' | 'bmc' | 'httpRoot'>, nodeUuid: string): Promise<void> {
  const off = await until('the machine to be powered off', async () => {
    const s = await vmState(lab.bmc);
    return s.running ? null : s;
  }, 60_000, 500);
  expect(off.media).to.deep.equal({ cd: null, usb: null });
  expect(off.mediaFiles).to.deep.equal([]);
  const auth = { authorization: `Basic ${Buffer.from('admin:password').toString('base64')}` };
  for (const slot of ['Cd', 'USB']) {
    const body = (await (await fetch(`${lab.bmc}/redfish/v1/Managers/BMC/VirtualMedia/${slot}`, { headers: auth })).json()) as { Inserted: boolean; Image: string };
    expect(body, slot).to.deep.include({ Inserted: false, Image: '' });
  }
  expect(await filesUnder(lab.httpRoot)).to.deep.equal([]);
  expect((await getNode(lab.api, nodeUuid)).power_state).to.equal('power off');
}
