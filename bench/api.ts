/**
 * API benchmark (not a test): starts a real `galvanic api` process on a fresh database and
 * measures node creation, detailed listing and lookups by name over HTTP.
 *
 *   npm run bench:api -- [--nodes N] [--concurrency C] [--passes R] [--gets M] ...
 *
 * The database is an embedded Postgres in a temporary directory, or, when DATABASE_URL is
 * set, a uniquely named database created (and dropped afterwards) on that server. Results go
 * to stdout as a table and to bench/results/api-<timestamp>.json and api-latest.json.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { Knex } from 'knex';
import { createKnex } from '../db/connection.js';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../db/embedded.js';
import { migrateLatest } from '../db/migrate.js';

/** The package root, from dist/bench/. */
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const RESULTS_DIR = path.join(ROOT, 'bench/results');
const API_VERSION = '1.78';
const SERVER_LOG_LEVEL = 'warn';

const TARGETS = {
  createsPerSecond: 1000,
  listPageP50Ms: 50,
};

/** Debian's Ironic 21.4 on this kind of machine, measured elsewhere; for comparison only. */
const REFERENCE = {
  system: "Debian's OpenStack Ironic 21.4 (bookworm packages), same class of machine",
  createMsPerNodeOneClient: 18,
  createsPerSecondOneClient: Math.round(1000 / 18),
  listDetailPageMsAt10000Nodes: 385,
  note: 'Creation: one client, sequential POST /v1/nodes. List: GET /v1/nodes?detail=true&limit=1000 with 10,000 nodes.',
};

// ---------------------------------------------------------------------------------------------
// Options

interface Options {
  nodes: number;
  concurrency: number;
  passes: number;
  gets: number;
  pageLimit: number;
  serialCreates: number;
  command: 'api' | 'all-in-one';
  poolMax: number | undefined;
  pgFast: boolean;
  renderCache: boolean;
  serverCpuProf: string | undefined;
  strict: boolean;
}

const USAGE = `Usage: node dist/bench/api.js [options]

  --nodes N            nodes to create in phase 1 (default 10000)
  --concurrency C      concurrent clients in phases 1 and 3 (default 32)
  --passes R           full list passes in phase 2 (default 10)
  --gets M             GET /v1/nodes/<name> requests in phase 3 (default 10000)
  --page-limit L       limit= of the list requests (default 1000)
  --serial-creates K   extra creations with one client, for comparison with Ironic (default 1000; 0 skips)
  --command CMD        api (default) or all-in-one
  --pool N             GALVANIC_DATABASE__MAX_POOL_SIZE for the server (default: the config's)
  --no-render-cache    [api] node_render_cache_bytes = 0: every list page renders every node
  --pg-fast            embedded Postgres without fsync/synchronous_commit (default: durable)
  --server-cpu-prof D  run the server with --cpu-prof, profiles written to directory D
  --strict             exit 1 when a target is missed (default: only on errors)

Environment: DATABASE_URL=postgres://... uses that server instead of an embedded one.`;

function positiveInt(name: string, raw: string | undefined, dflt: number, allowZero = false): number {
  if (raw === undefined) return dflt;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < (allowZero ? 0 : 1)) throw new Error(`--${name} must be a ${allowZero ? 'non-negative' : 'positive'} integer, not "${raw}"`);
  return n;
}

function parseOptions(argv: string[]): Options | undefined {
  const { values } = parseArgs({
    args: argv,
    options: {
      nodes: { type: 'string' },
      concurrency: { type: 'string' },
      passes: { type: 'string' },
      gets: { type: 'string' },
      'page-limit': { type: 'string' },
      'serial-creates': { type: 'string' },
      command: { type: 'string' },
      pool: { type: 'string' },
      'pg-fast': { type: 'boolean' },
      'no-render-cache': { type: 'boolean' },
      'server-cpu-prof': { type: 'string' },
      strict: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return undefined;
  }
  const command = values.command ?? 'api';
  if (command !== 'api' && command !== 'all-in-one') throw new Error(`--command must be api or all-in-one, not "${command}"`);
  return {
    nodes: positiveInt('nodes', values.nodes, 10_000),
    concurrency: positiveInt('concurrency', values.concurrency, 32),
    passes: positiveInt('passes', values.passes, 10),
    gets: positiveInt('gets', values.gets, 10_000),
    pageLimit: positiveInt('page-limit', values['page-limit'], 1000),
    serialCreates: positiveInt('serial-creates', values['serial-creates'], 1000, true),
    command,
    poolMax: values.pool === undefined ? undefined : positiveInt('pool', values.pool, 10),
    pgFast: values['pg-fast'] ?? false,
    renderCache: !(values['no-render-cache'] ?? false),
    serverCpuProf: values['server-cpu-prof'] === undefined ? undefined : path.resolve(values['server-cpu-prof']),
    strict: values.strict ?? false,
  };
}

// ---------------------------------------------------------------------------------------------
// Cleanup: every resource registers how to release it; released in reverse, also on failure.

const cleanups: Array<{ name: string; run: () => Promise<void> }> = [];
let cleaning: Promise<void> | undefined;

function onCleanup(name: string, run: () => Promise<void>): void {
  cleanups.push({ name, run });
}

function cleanupAll(): Promise<void> {
  cleaning ??= (async () => {
    while (cleanups.length) {
      const step = cleanups.pop()!;
      try {
        await step.run();
      } catch (err) {
        process.stderr.write(`bench: cleanup step "${step.name}" failed: ${(err as Error).message}\n`);
      }
    }
  })();
  return cleaning;
}

// ---------------------------------------------------------------------------------------------
// Small helpers

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

function databaseUrl(serverUrl: string, database: string): string {
  const url = new URL(serverUrl);
  url.pathname = `/${database}`;
  return url.toString();
}

function redactUrl(raw: string): string {
  const url = new URL(raw);
  if (url.password) url.password = '***';
  return url.toString();
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

interface LatencySummary {
  count: number;
  meanMs: number;
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
  maxMs: number;
}

/** Nearest-rank percentiles. */
function summarize(samples: number[]): LatencySummary {
  const s = Float64Array.from(samples).sort();
  const at = (p: number) => (s.length ? s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))] : NaN);
  const sum = s.reduce((a, b) => a + b, 0);
  const r = (x: number) => Math.round(x * 100) / 100;
  return {
    count: s.length,
    meanMs: r(s.length ? sum / s.length : NaN),
    p50Ms: r(at(50)),
    p90Ms: r(at(90)),
    p99Ms: r(at(99)),
    maxMs: r(s.length ? s[s.length - 1] : NaN),
  };
}

/** Which code was measured: the commit, and the files changed on top of it. */
function gitState(): { commit: string; modifiedFiles: string[] } | undefined {
  try {
    const git = (...args: string[]) => execFileSync('git', args, { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
    const modifiedFiles = git('status', '--porcelain').split('\n').filter(Boolean).map((l) => l.slice(3));
    return { commit: git('rev-parse', 'HEAD').trim(), modifiedFiles };
  } catch {
    return undefined;
  }
}

// ---------------------------------------------------------------------------------------------
// Process metrics from /proc

const CLK_TCK = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

function rssKiB(pid: number): number | undefined {
  try {
    const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

/** utime + stime of a process in seconds, and its command name. */
function cpuOf(pid: number): { comm: string; cpuS: number } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // fields[0] is field 3 (state); utime and stime are fields 14 and 15.
    return { comm, cpuS: (Number(fields[11]) + Number(fields[12])) / CLK_TCK };
  } catch {
    return undefined;
  }
}

/** Pids of the Postgres backends serving `database`: their process title names it. */
function backendsOf(database: string): number[] {
  const pids: number[] = [];
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return pids;
  }
  for (const e of entries) {
    if (!/^\d+$/.test(e)) continue;
    try {
      // "postgres: user database host(port) state"
      const title = readFileSync(`/proc/${e}/cmdline`, 'utf8');
      if (title.startsWith('postgres: ') && title.includes(` ${database} `)) pids.push(Number(e));
    } catch {
      // Gone meanwhile, or not ours to read.
    }
  }
  return pids;
}

/**
 * CPU time of the Postgres backends serving one database, so other databases and servers on
 * the host (tests, other benchmarks) are not counted. Backends come and go (the server's pool
 * closes idle connections), so each is followed by pid: its last reading minus its reading
 * when first seen (zero for one born during the phase). Shared background work (WAL writer,
 * checkpointer) is not included.
 */
class BackendCpu {
  private readonly first = new Map<number, number>();
  private readonly last = new Map<number, number>();

  constructor(private readonly database: string) {
    for (const pid of backendsOf(database)) {
      const c = cpuOf(pid)?.cpuS;
      if (c === undefined) continue;
      this.first.set(pid, c);
      this.last.set(pid, c);
    }
  }

  /** Reads the known backends; with `rescan`, also looks for new ones. */
  poll(rescan: boolean): void {
    if (rescan) {
      for (const pid of backendsOf(this.database)) if (!this.first.has(pid)) this.first.set(pid, 0);
    }
    for (const pid of this.first.keys()) {
      const c = cpuOf(pid);
      // A pid reused by another process would read lower (or not be postgres at all).
      if (c !== undefined && c.comm === 'postgres' && c.cpuS >= (this.last.get(pid) ?? 0)) this.last.set(pid, c.cpuS);
    }
  }

  totalS(): number {
    let total = 0;
    for (const [pid, start] of this.first) total += (this.last.get(pid) ?? start) - start;
    return total;
  }
}

interface PhaseResources {
  serverMaxRssMiB: number;
  serverRssEndMiB: number;
  serverCpuS: number;
  /** CPU of this database's Postgres backends (see BackendCpu). */
  postgresCpuS: number;
  benchClientCpuS: number;
  /** Server + backends + bench CPU time as a share of the machine's CPU capacity over the phase. */
  cpuSharePct?: number;
  /** CLOCK_MONOTONIC µs at start and end, to cut this phase out of a --server-cpu-prof profile. */
  monotonicWindowUs: [number, number];
}

/**
 * Samples the server's RSS every 50 ms and measures CPU used between start and stop: the
 * server's, its database backends' and this process's.
 */
function watchResources(serverPid: number, database: string): { stop(): PhaseResources } {
  let max = rssKiB(serverPid) ?? 0;
  const pg = new BackendCpu(database);
  let ticks = 0;
  const timer = setInterval(() => {
    const v = rssKiB(serverPid);
    if (v !== undefined && v > max) max = v;
    ticks += 1;
    if (ticks % 4 === 0) pg.poll(ticks % 20 === 0);
  }, 50);
  const server0 = cpuOf(serverPid)?.cpuS ?? NaN;
  const client0 = process.cpuUsage();
  const m0 = Number(process.hrtime.bigint() / 1000n);
  return {
    stop() {
      clearInterval(timer);
      const m1 = Number(process.hrtime.bigint() / 1000n);
      const end = rssKiB(serverPid) ?? 0;
      if (end > max) max = end;
      const serverCpu = cpuOf(serverPid)?.cpuS ?? NaN;
      pg.poll(true);
      const client = process.cpuUsage(client0);
      const r = (x: number) => Math.round(x * 100) / 100;
      return {
        serverMaxRssMiB: r(max / 1024),
        serverRssEndMiB: r(end / 1024),
        serverCpuS: r(serverCpu - server0),
        postgresCpuS: r(pg.totalS()),
        benchClientCpuS: r((client.user + client.system) / 1e6),
        monotonicWindowUs: [m0, m1],
      };
    },
  };
}

// ---------------------------------------------------------------------------------------------
// HTTP client: node:http with a keep-alive agent, one socket per concurrent client.

interface Response {
  status: number;
  body: string;
  ms: number;
}

class Client {
  readonly agent: http.Agent;

  constructor(readonly port: number, sockets: number) {
    this.agent = new http.Agent({ keepAlive: true, maxSockets: sockets });
  }

  request(method: string, urlPath: string, body?: string): Promise<Response> {
    return new Promise((resolve, reject) => {
      const headers: Record<string, string | number> = {
        'X-OpenStack-Ironic-API-Version': API_VERSION,
        Accept: 'application/json',
      };
      if (body !== undefined) {
        headers['Content-Type'] = 'application/json';
        headers['Content-Length'] = Buffer.byteLength(body);
      }
      const t0 = performance.now();
      const req = http.request({ host: '127.0.0.1', port: this.port, method, path: urlPath, agent: this.agent, headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8'), ms: performance.now() - t0 }));
      });
      req.setTimeout(120_000, () => req.destroy(new Error(`${method} ${urlPath}: no response within 120 s`)));
      req.on('error', reject);
      req.end(body);
    });
  }

  close(): void {
    this.agent.destroy();
  }
}

/** Runs `total` jobs on `concurrency` workers; job i gets index i. */
async function runConcurrently(total: number, concurrency: number, job: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    for (;;) {
      const i = next++;
      if (i >= total) return;
      await job(i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, total) }, worker));
}

class Errors {
  count = 0;
  readonly samples: string[] = [];
  add(what: string): void {
    this.count += 1;
    if (this.samples.length < 5) this.samples.push(what.slice(0, 300));
  }
}

// ---------------------------------------------------------------------------------------------
// Realistic node bodies

function nodeName(i: number): string {
  return `bench-node-${String(i).padStart(6, '0')}`;
}

function nodeBody(i: number, runTag: string): string {
  const rack = Math.floor(i / 40);
  const slot = i % 40;
  const ip = `10.${(rack >> 8) & 255}.${rack & 255}.${slot + 10}`;
  const classes = ['baremetal.small', 'baremetal.medium', 'baremetal.large', 'baremetal.gpu'];
  const rc = classes[i % classes.length];
  const cpus = [16, 32, 64, 96][i % 4];
  return JSON.stringify({
    name: nodeName(i),
    driver: 'fake-hardware',
    driver_info: {
      redfish_address: `https://${ip}`,
      redfish_system_id: '/redfish/v1/Systems/1',
      redfish_username: 'admin',
      redfish_password: randomBytes(9).toString('base64'),
      redfish_verify_ca: false,
      deploy_kernel: 'http://images.example.net/ipa/ipa.kernel',
      deploy_ramdisk: 'http://images.example.net/ipa/ipa.initramfs',
    },
    properties: {
      cpus,
      cpu_arch: 'x86_64',
      memory_mb: cpus * 8192,
      local_gb: [480, 960, 1920, 3840][(i >> 2) % 4],
      capabilities: 'boot_mode:uefi,secure_boot:true',
      vendor: 'Example Computers',
      root_device: { serial: `S3YJNX0K${String(i).padStart(6, '0')}` },
    },
    resource_class: rc,
    extra: { rack: `r${String(rack).padStart(3, '0')}`, slot, bench_run: runTag },
    description: `Benchmark node ${i} in rack ${rack}, slot ${slot}`,
  });
}

// ---------------------------------------------------------------------------------------------
// Database and server

interface DatabaseSetup {
  kind: 'embedded' | 'external';
  url: string;
  serverInfo: Record<string, string>;
}

async function setUpDatabase(opts: Options, log: (m: string) => void): Promise<DatabaseSetup> {
  let serverUrl = process.env.DATABASE_URL;
  let kind: DatabaseSetup['kind'] = 'external';
  if (serverUrl === undefined || serverUrl === '') {
    kind = 'embedded';
    const tempDir = await fs.mkdtemp(path.join(os.tmpdir(), 'galvanic-bench-'));
    onCleanup('temporary directory', () => fs.rm(tempDir, { recursive: true, force: true }));
    // mkdtemp makes it 0700; as root, Postgres runs as 'postgres' and must reach pg/ below.
    await fs.chmod(tempDir, 0o711);
    const pgTail: string[] = [];
    log(`starting embedded Postgres in ${tempDir}`);
    let embedded: EmbeddedPostgres;
    try {
      embedded = await startEmbeddedPostgres({
        dataDir: path.join(tempDir, 'pg'),
        port: await freePort(),
        log: (m) => {
          pgTail.push(m);
          if (pgTail.length > 30) pgTail.shift();
        },
        extraFlags: opts.pgFast ? ['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off'] : [],
      });
    } catch (err) {
      process.stderr.write(`${pgTail.join('\n')}\n`);
      throw err;
    }
    onCleanup('embedded Postgres', () => embedded.stop());
    serverUrl = embedded.connectionString;
  }

  const admin = createKnex(serverUrl, { poolMax: 2, applicationName: 'galvanic-bench-admin' });
  onCleanup('admin pool', () => admin.destroy());
  const name = `galvanic_bench_${process.pid}_${randomBytes(3).toString('hex')}`;
  await admin.raw('create database ??', [name]);
  onCleanup(`database ${name}`, async () => {
    // WITH (FORCE): the server under test may have left connections behind if it was killed.
    await admin.raw('drop database if exists ?? with (force)', [name]);
  });
  const url = databaseUrl(serverUrl, name);
  const knex: Knex = createKnex(url, { poolMax: 2, applicationName: 'galvanic-bench-migrate' });
  try {
    const applied = await migrateLatest(knex);
    log(`database ${name} created and migrated (${applied.length} migration(s))`);
  } finally {
    await knex.destroy();
  }
  const serverInfo: Record<string, string> = {};
  const version = (await admin.raw('select version() as v')) as { rows: Array<{ v: string }> };
  serverInfo.version = version.rows[0].v;
  for (const setting of ['fsync', 'synchronous_commit', 'full_page_writes', 'shared_buffers', 'max_connections']) {
    const r = (await admin.raw(`show ${setting}`)) as { rows: Array<Record<string, string>> };
    serverInfo[setting] = r.rows[0][setting];
  }
  return { kind, url, serverInfo };
}

interface Server {
  pid: number;
  /** The database's name, to find its Postgres backends. */
  database: string;
  port: number;
  output(): string;
}

async function startServer(opts: Options, dbUrl: string, log: (m: string) => void): Promise<Server> {
  const port = await freePort();
  const nodeArgs: string[] = [];
  if (opts.serverCpuProf) {
    await fs.mkdir(opts.serverCpuProf, { recursive: true });
    nodeArgs.push('--cpu-prof', '--cpu-prof-dir', opts.serverCpuProf);
  }
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    GALVANIC_DATABASE__CONNECTION: dbUrl,
    GALVANIC_API__PORT: String(port),
    GALVANIC_LOG_LEVEL: SERVER_LOG_LEVEL,
  };
  if (opts.poolMax !== undefined) env.GALVANIC_DATABASE__MAX_POOL_SIZE = String(opts.poolMax);
  if (!opts.renderCache) env.GALVANIC_API__NODE_RENDER_CACHE_BYTES = '0';
  const args = [...nodeArgs, path.join(ROOT, 'dist/cli/main.js'), opts.command, '--config', path.join(ROOT, 'etc/galvanic.conf.sample')];
  const proc: ChildProcess = spawn(process.execPath, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let tail: string[] = [];
  let lines = 0;
  const collect = (d: Buffer) => {
    for (const line of d.toString('utf8').split('\n')) {
      if (line === '') continue;
      lines += 1;
      tail.push(line);
    }
    if (tail.length > 50) tail = tail.slice(-50);
  };
  proc.stdout!.on('data', collect);
  proc.stderr!.on('data', collect);
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  onCleanup('galvanic server', async () => {
    if (proc.exitCode !== null || proc.signalCode !== null) return;
    proc.kill('SIGTERM');
    const done = await Promise.race([exited.then(() => true), sleep(20_000).then(() => false)]);
    if (!done) {
      process.stderr.write('bench: the server did not stop within 20 s of SIGTERM; killing it\n');
      proc.kill('SIGKILL');
      await exited;
    }
  });
  const output = () => `(${lines} line(s) of server output; last ${tail.length})\n${tail.join('\n')}`;

  const probe = new Client(port, 1);
  try {
    const deadline = Date.now() + 60_000;
    for (;;) {
      if (proc.exitCode !== null) throw new Error(`galvanic ${opts.command} exited early (${proc.exitCode}):\n${output()}`);
      try {
        const res = await probe.request('GET', '/');
        if (res.status === 200) break;
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline) throw new Error(`galvanic ${opts.command} did not answer within 60 s:\n${output()}`);
      await sleep(100);
    }
  } finally {
    probe.close();
  }
  log(`galvanic ${opts.command} (pid ${proc.pid}) listening on 127.0.0.1:${port}, log level ${SERVER_LOG_LEVEL}`);
  return { pid: proc.pid!, database: new URL(dbUrl).pathname.slice(1), port, output };
}

// ---------------------------------------------------------------------------------------------
// Phases

interface PhaseResult {
  requests: number;
  errors: number;
  errorSamples: string[];
  wallS: number;
  perSecond: number;
  latency: LatencySummary;
  resources: PhaseResources;
  [extra: string]: unknown;
}

function phaseResult(latencies: number[], errors: Errors, wallMs: number, resources: PhaseResources, requests = latencies.length): PhaseResult {
  // How much of the machine this benchmark's own processes got: near 100% for a CPU-bound phase
  // on an otherwise idle machine; far less when other work competes for the CPUs.
  const ours = resources.serverCpuS + resources.postgresCpuS + resources.benchClientCpuS;
  resources.cpuSharePct = Math.round((ours / ((wallMs / 1000) * os.cpus().length)) * 1000) / 10;
  return {
    requests,
    errors: errors.count,
    errorSamples: errors.samples,
    wallS: Math.round(wallMs) / 1000,
    perSecond: Math.round((requests / (wallMs / 1000)) * 10) / 10,
    latency: summarize(latencies),
    resources,
  };
}

async function createPhase(server: Server, count: number, first: number, concurrency: number, runTag: string, created: string[]): Promise<PhaseResult> {
  const client = new Client(server.port, concurrency);
  const errors = new Errors();
  const latencies: number[] = [];
  const watch = watchResources(server.pid, server.database);
  const t0 = performance.now();
  try {
    await runConcurrently(count, concurrency, async (k) => {
      const i = first + k;
      try {
        const res = await client.request('POST', '/v1/nodes', nodeBody(i, runTag));
        latencies.push(res.ms);
        if (res.status === 201) created.push(nodeName(i));
        else errors.add(`POST ${nodeName(i)}: HTTP ${res.status} ${res.body}`);
      } catch (err) {
        errors.add(`POST ${nodeName(i)}: ${(err as Error).message}`);
      }
    });
  } finally {
    client.close();
  }
  const wall = performance.now() - t0;
  return phaseResult(latencies, errors, wall, watch.stop(), count);
}

async function listPhase(server: Server, passes: number, pageLimit: number, expected: number): Promise<PhaseResult> {
  const client = new Client(server.port, 1);
  const errors = new Errors();
  const latencies: number[] = [];
  const passMs: number[] = [];
  // The first pass renders every node; later ones find them already rendered (unchanged nodes).
  const firstPass: number[] = [];
  const counts: number[] = [];
  let bytes = 0;
  const watch = watchResources(server.pid, server.database);
  const t0 = performance.now();
  try {
    for (let pass = 0; pass < passes; pass++) {
      const p0 = performance.now();
      let count = 0;
      let next: string | undefined = `/v1/nodes?detail=true&limit=${pageLimit}`;
      while (next !== undefined) {
        const res = await client.request('GET', next);
        latencies.push(res.ms);
        if (pass === 0) firstPass.push(res.ms);
        bytes += res.body.length;
        if (res.status !== 200) {
          errors.add(`GET ${next}: HTTP ${res.status} ${res.body}`);
          break;
        }
        const page = JSON.parse(res.body) as { nodes: Array<{ driver_info?: Record<string, unknown> }>; next?: string };
        count += page.nodes.length;
        if (pass === 0 && count === page.nodes.length && page.nodes[0]?.driver_info?.redfish_password !== '******') {
          errors.add('driver_info.redfish_password is not masked in the list');
        }
        if (page.next === undefined) {
          next = undefined;
        } else {
          const u = new URL(page.next);
          next = `${u.pathname}${u.search}`;
        }
      }
      passMs.push(performance.now() - p0);
      counts.push(count);
      if (count !== expected) errors.add(`pass ${pass + 1}: listed ${count} nodes, expected ${expected}`);
    }
  } finally {
    client.close();
  }
  const wall = performance.now() - t0;
  const result = phaseResult(latencies, errors, wall, watch.stop());
  result.pagesPerPass = latencies.length / passes;
  result.countsPerPass = counts;
  result.countOk = counts.every((c) => c === expected);
  result.fullPassMs = summarize(passMs);
  result.firstPassPageMs = summarize(firstPass);
  result.meanPageBytes = Math.round(bytes / Math.max(1, latencies.length));
  return result;
}

async function getPhase(server: Server, total: number, concurrency: number, names: string[]): Promise<PhaseResult> {
  const client = new Client(server.port, concurrency);
  const errors = new Errors();
  const latencies: number[] = [];
  const watch = watchResources(server.pid, server.database);
  const t0 = performance.now();
  try {
    await runConcurrently(total, concurrency, async () => {
      const name = names[Math.floor(Math.random() * names.length)];
      try {
        const res = await client.request('GET', `/v1/nodes/${name}`);
        latencies.push(res.ms);
        if (res.status !== 200) errors.add(`GET ${name}: HTTP ${res.status} ${res.body}`);
        else if (!res.body.includes(`"name":"${name}"`)) errors.add(`GET ${name}: another node came back`);
      } catch (err) {
        errors.add(`GET ${name}: ${(err as Error).message}`);
      }
    });
  } finally {
    client.close();
  }
  const wall = performance.now() - t0;
  return phaseResult(latencies, errors, wall, watch.stop(), total);
}

// ---------------------------------------------------------------------------------------------
// Reporting

function table(rows: string[][]): string {
  const widths = rows[0].map((_, c) => Math.max(...rows.map((r) => (r[c] ?? '').length)));
  return rows.map((r, i) => {
    const line = r.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]) : cell.padStart(widths[c]))).join('  ');
    return i === 0 ? `${line}\n${widths.map((w) => '-'.repeat(w)).join('  ')}` : line;
  }).join('\n');
}

const fmt = (x: number, digits = 1) => (Number.isFinite(x) ? x.toFixed(digits) : '-');

// ---------------------------------------------------------------------------------------------

async function main(): Promise<number> {
  const opts = parseOptions(process.argv.slice(2));
  if (!opts) return 0;
  const startedAt = new Date();
  const log = (m: string) => process.stdout.write(`[bench ${((performance.now()) / 1000).toFixed(1)}s] ${m}\n`);
  const runTag = `${process.pid}-${randomBytes(3).toString('hex')}`;

  const cpus = os.cpus();
  const machine = {
    cpuModel: cpus[0]?.model ?? 'unknown',
    cpuCount: cpus.length,
    totalMemGiB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    platform: `${os.platform()} ${os.release()} ${os.arch()}`,
    hostname: os.hostname(),
    loadAvgAtStart: os.loadavg().map((x) => Math.round(x * 100) / 100),
  };
  const source = gitState();
  log(`machine: ${machine.cpuCount} × ${machine.cpuModel}, ${machine.totalMemGiB} GiB, Node ${machine.node}`);
  if (machine.loadAvgAtStart[0] > 0.5) {
    log(`warning: load average ${machine.loadAvgAtStart.join(' ')} before starting: other work on this machine will skew the figures`);
  }

  const db = await setUpDatabase(opts, log);
  log(`Postgres: ${db.kind}, ${db.serverInfo.version.split(' on ')[0]}, fsync=${db.serverInfo.fsync}, synchronous_commit=${db.serverInfo.synchronous_commit}`);
  const server = await startServer(opts, db.url, log);
  const created: string[] = [];

  log(`phase 1: creating ${opts.nodes} nodes with ${opts.concurrency} concurrent clients`);
  const create = await createPhase(server, opts.nodes, 0, opts.concurrency, runTag, created);
  log(`  ${fmt(create.perSecond)} creations/s, p50 ${fmt(create.latency.p50Ms)} ms, p99 ${fmt(create.latency.p99Ms)} ms, ${create.errors} error(s)`);

  log(`phase 2: ${opts.passes} full passes of GET /v1/nodes?detail=true&limit=${opts.pageLimit}`);
  const list = await listPhase(server, opts.passes, opts.pageLimit, opts.nodes);
  log(`  page p50 ${fmt(list.latency.p50Ms)} ms, p99 ${fmt(list.latency.p99Ms)} ms, ${list.errors} error(s); first pass (nothing rendered yet) p50 ${fmt((list.firstPassPageMs as LatencySummary).p50Ms)} ms`);

  log(`phase 3: ${opts.gets} GET /v1/nodes/<name> with ${opts.concurrency} concurrent clients`);
  const get = created.length
    ? await getPhase(server, opts.gets, opts.concurrency, created)
    : undefined;
  if (get) log(`  ${fmt(get.perSecond)} req/s, p50 ${fmt(get.latency.p50Ms)} ms, p99 ${fmt(get.latency.p99Ms)} ms, ${get.errors} error(s)`);

  let serial: PhaseResult | undefined;
  if (opts.serialCreates > 0) {
    log(`phase 4 (comparison with Ironic): ${opts.serialCreates} more creations with one client`);
    serial = await createPhase(server, opts.serialCreates, opts.nodes, 1, runTag, []);
    log(`  ${fmt(serial.latency.meanMs, 2)} ms per creation (mean), ${serial.errors} error(s)`);
  }

  const targets = [
    {
      name: 'creations per second (phase 1, concurrent clients)',
      target: `>= ${TARGETS.createsPerSecond}/s with ${opts.concurrency} clients`,
      actual: create.perSecond,
      pass: create.perSecond >= TARGETS.createsPerSecond && create.errors === 0,
    },
    {
      name: `list page p50 (detail=true, limit=${opts.pageLimit}, ${opts.nodes} nodes)`,
      target: `<= ${TARGETS.listPageP50Ms} ms`,
      actual: list.latency.p50Ms,
      pass: list.latency.p50Ms <= TARGETS.listPageP50Ms && list.errors === 0,
    },
  ];
  const defaultsUsed = opts.nodes === 10_000 && opts.pageLimit === 1000;
  const errorCount = create.errors + list.errors + (get?.errors ?? 0) + (serial?.errors ?? 0);
  const ok = errorCount === 0 && list.countOk === true;

  const finishedAt = new Date();
  const result = {
    benchmark: 'api',
    startedAt: startedAt.toISOString(),
    finishedAt: finishedAt.toISOString(),
    durationS: Math.round((finishedAt.getTime() - startedAt.getTime()) / 100) / 10,
    source,
    machine: { ...machine, loadAvgAtEnd: os.loadavg().map((x) => Math.round(x * 100) / 100) },
    database: {
      kind: db.kind,
      url: redactUrl(db.url),
      ...db.serverInfo,
      embeddedFastMode: db.kind === 'embedded' ? opts.pgFast : undefined,
    },
    server: {
      command: opts.command,
      logLevel: SERVER_LOG_LEVEL,
      logLevelNote: 'GALVANIC_LOG_LEVEL=warn: the per-request info line is not written, so these figures exclude logging cost',
      maxPoolSize: opts.poolMax ?? 'config default (10)',
      cpuProfileDir: opts.serverCpuProf,
    },
    parameters: {
      nodes: opts.nodes,
      concurrency: opts.concurrency,
      listPasses: opts.passes,
      renderCache: opts.renderCache,
      listPageLimit: opts.pageLimit,
      gets: opts.gets,
      serialCreates: opts.serialCreates,
      apiVersion: API_VERSION,
      client: 'node:http, keep-alive Agent, maxSockets = concurrency; latency = request start to last body byte',
    },
    phases: { create, list, get, serialCreate: serial },
    targets: targets.map((t) => ({ ...t, comparableToReference: defaultsUsed })),
    reference: REFERENCE,
    comparison: {
      createMsPerNodeOneClient: { galvanic: serial?.latency.meanMs, ironic: REFERENCE.createMsPerNodeOneClient },
      listDetailPageP50Ms: { galvanic: list.latency.p50Ms, ironic: REFERENCE.listDetailPageMsAt10000Nodes },
    },
    ok,
  };

  // ---- table
  const phaseRows: string[][] = [['phase', 'requests', 'errors', 'req/s', 'p50 ms', 'p99 ms', 'max ms', 'server max RSS MiB', 'server CPU ms/req', 'postgres CPU ms/req', 'bench CPU s', 'our CPU share']];
  const addRow = (label: string, p: PhaseResult | undefined) => {
    if (!p) return;
    phaseRows.push([label, String(p.requests), String(p.errors), fmt(p.perSecond), fmt(p.latency.p50Ms, 2), fmt(p.latency.p99Ms, 2),
      fmt(p.latency.maxMs, 2), fmt(p.resources.serverMaxRssMiB), fmt((p.resources.serverCpuS * 1000) / p.requests, 2),
      fmt((p.resources.postgresCpuS * 1000) / p.requests, 2), fmt(p.resources.benchClientCpuS, 2), `${fmt(p.resources.cpuSharePct ?? NaN, 0)}%`]);
  };
  addRow(`1 create (${opts.concurrency} clients)`, create);
  addRow(`2 list page (limit ${opts.pageLimit})`, list);
  addRow(`3 get by name (${opts.concurrency} clients)`, get);
  addRow('4 create (1 client)', serial);

  const out: string[] = [];
  out.push('');
  out.push(`Galvanic API benchmark — ${machine.cpuCount} × ${machine.cpuModel}, ${machine.totalMemGiB} GiB RAM, Node ${machine.node}`);
  out.push(`Postgres: ${db.kind === 'embedded' ? `embedded${opts.pgFast ? ' (fsync off)' : ''}` : `external ${redactUrl(db.url)}`}; ${db.serverInfo.version.split(',')[0]}; fsync=${db.serverInfo.fsync}, synchronous_commit=${db.serverInfo.synchronous_commit}, shared_buffers=${db.serverInfo.shared_buffers}`);
  if (source) out.push(`Code: commit ${source.commit.slice(0, 12)}${source.modifiedFiles.length ? ` + ${source.modifiedFiles.length} uncommitted file(s)` : ''}`);
  out.push(`Server: galvanic ${opts.command}, pool ${opts.poolMax ?? 'default (10)'}, log level ${SERVER_LOG_LEVEL} (per-request info logging off; real deployments log every request at info)`);
  out.push(`Client, server and Postgres share this machine's ${machine.cpuCount} CPU(s); load average before ${machine.loadAvgAtStart.join(' ')}, after ${result.machine.loadAvgAtEnd.join(' ')}.`);
  out.push(`"our CPU share": CPU time of server + its Postgres backends + this client over (wall time × ${machine.cpuCount} CPUs); low when other work competes.`);
  out.push('');
  out.push(table(phaseRows));
  out.push('');
  out.push(`List: ${fmt(list.pagesPerPass as number, 0)} pages per pass, ${Math.round((list.meanPageBytes as number) / 1024)} KiB per page; full pass p50 ${fmt((list.fullPassMs as LatencySummary).p50Ms)} ms; counts ${list.countOk ? `all = ${opts.nodes}` : `WRONG: ${(list.countsPerPass as number[]).join(', ')}`}`);
  out.push('');
  out.push(table([
    ['target', 'wanted', 'actual', 'result'],
    ...targets.map((t) => [t.name, t.target, t.name.startsWith('creations') ? `${fmt(t.actual as number)}/s` : `${fmt(t.actual as number, 2)} ms`, t.pass ? 'PASS' : 'FAIL']),
  ]));
  out.push('');
  out.push(table([
    [`reference: ${REFERENCE.system}`, 'Ironic', 'Galvanic'],
    ['ms per creation, one client', fmt(REFERENCE.createMsPerNodeOneClient, 2), serial ? fmt(serial.latency.meanMs, 2) : '-'],
    [`list page (detail, limit 1000, 10,000 nodes), ms`, fmt(REFERENCE.listDetailPageMsAt10000Nodes, 0), fmt(list.latency.p50Ms, 2)],
  ]));
  if (!defaultsUsed) out.push('(non-default --nodes/--page-limit: the Ironic reference figures are not like for like)');
  for (const [label, p] of [['create', create], ['list', list], ['get', get], ['serial create', serial]] as const) {
    if (p && p.errors) out.push(`${label} errors (${p.errors}): ${p.errorSamples.join(' | ')}`);
  }
  out.push('');
  process.stdout.write(`${out.join('\n')}\n`);

  await fs.mkdir(RESULTS_DIR, { recursive: true });
  const stamp = startedAt.toISOString().replace(/:/g, '-');
  const json = `${JSON.stringify(result, null, 2)}\n`;
  const file = path.join(RESULTS_DIR, `api-${stamp}.json`);
  await fs.writeFile(file, json);
  await fs.writeFile(path.join(RESULTS_DIR, 'api-latest.json'), json);
  log(`results written to ${path.relative(process.cwd(), file)} and bench/results/api-latest.json`);
  if (!ok) {
    process.stderr.write(`bench: the run had ${errorCount} error(s)${list.countOk ? '' : ' and wrong list counts'}\n${server.output()}\n`);
    return 1;
  }
  return opts.strict && targets.some((t) => !t.pass) ? 1 : 0;
}

let interrupted = false;
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.on(sig, () => {
    if (interrupted) return;
    interrupted = true;
    process.stderr.write(`bench: ${sig}, stopping what was started\n`);
    void cleanupAll().then(() => process.exit(130));
  });
}

main().then(
  async (code) => {
    await cleanupAll();
    process.exit(code);
  },
  async (err: unknown) => {
    process.stderr.write(`bench: ${(err as Error)?.stack ?? String(err)}\n`);
    await cleanupAll();
    process.exit(1);
  },
);
