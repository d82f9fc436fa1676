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
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { runBenchmark } from './lib/cleanup.js';
import { createBenchDatabase, PG_FAST_FLAGS, startDatabaseServer } from './lib/database.js';
import { API_VERSION, Client, Errors, runConcurrently, waitForApi } from './lib/http.js';
import { cpuOf, livePids, rssKiB, spawnGalvanic } from './lib/proc.js';
import {
  benchLog, fmt, freePort, gitState, machineInfo, parseBenchArgs, positiveInt, redactUrl, RESULTS_DIR, summarize, table, type LatencySummary,
} from './lib/util.js';

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

function parseOptions(argv: string[]): Options | undefined {
  const values = parseBenchArgs(
    argv, USAGE,
    ['nodes', 'concurrency', 'passes', 'gets', 'page-limit', 'serial-creates', 'command', 'pool', 'server-cpu-prof'],
    ['pg-fast', 'no-render-cache', 'strict'],
  );
  if (!values) return undefined;
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
// Process metrics from /proc

/** Pids of the Postgres backends serving `database`: their process title names it. */
function backendsOf(database: string): number[] {
  return (livePids() ?? []).filter((pid) => {
    try {
      // "postgres: user database host(port) state"
      const title = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      return title.startsWith('postgres: ') && title.includes(` ${database} `);
    } catch {
      // Gone meanwhile, or not ours to read.
      return false;
    }
  });
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
  const server = await startDatabaseServer({ extraFlags: opts.pgFast ? PG_FAST_FLAGS : [], log });
  const db = await createBenchDatabase(server, 'galvanic_bench', log);
  return { kind: server.kind, url: db.url, serverInfo: server.info };
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
  const env: Record<string, string> = {
    GALVANIC_DATABASE__CONNECTION: dbUrl,
    GALVANIC_API__PORT: String(port),
    GALVANIC_DEFAULT__LOG_LEVEL: SERVER_LOG_LEVEL,
  };
  if (opts.poolMax !== undefined) env.GALVANIC_DATABASE__MAX_POOL_SIZE = String(opts.poolMax);
  if (!opts.renderCache) env.GALVANIC_API__NODE_RENDER_CACHE_BYTES = '0';
  const server = await spawnGalvanic({ label: opts.command, command: opts.command, env, cpuProfDir: opts.serverCpuProf, stopGraceMs: 20_000 });
  const exited = () => (server.proc.exitCode !== null ? `galvanic ${opts.command} exited early (${server.proc.exitCode}):\n${server.output()}` : undefined);
  try {
    await waitForApi(port, 60_000, exited);
  } catch (err) {
    throw new Error(`${(err as Error).message}\n${server.output()}`);
  }
  log(`galvanic ${opts.command} (pid ${server.pid}) listening on 127.0.0.1:${port}, log level ${SERVER_LOG_LEVEL}`);
  return { pid: server.pid, database: new URL(dbUrl).pathname.slice(1), port, output: server.output };
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

type Answer = Awaited<ReturnType<Client['request']>>;

/**
 * `count` requests, `concurrency` at a time, timed and watched. `one(client, k)` sends request
 * k and says what it is (for error lines) and how to settle its answer: what was wrong with
 * it, if anything.
 */
async function requestPhase(
  server: Server, count: number, concurrency: number,
  one: (client: Client, k: number) => { what: string; sent: Promise<Answer>; settle(res: Answer): string | undefined },
): Promise<PhaseResult> {
  const client = new Client(server.port, concurrency);
  const errors = new Errors();
  const latencies: number[] = [];
  const watch = watchResources(server.pid, server.database);
  const t0 = performance.now();
  try {
    await runConcurrently(count, concurrency, async (k) => {
      const r = one(client, k);
      try {
        const res = await r.sent;
        latencies.push(res.ms);
        const wrong = r.settle(res);
        if (wrong !== undefined) errors.add(`${r.what}: ${wrong}`);
      } catch (err) {
        errors.add(`${r.what}: ${(err as Error).message}`);
      }
    });
  } finally {
    client.close();
  }
  const wall = performance.now() - t0;
  return phaseResult(latencies, errors, wall, watch.stop(), count);
}

function createPhase(server: Server, count: number, first: number, concurrency: number, runTag: string, created: string[]): Promise<PhaseResult> {
  return requestPhase(server, count, concurrency, (client, k) => ({
    what: `POST ${nodeName(first + k)}`,
    sent: client.request('POST', '/v1/nodes', nodeBody(first + k, runTag)),
    settle(res) {
      if (res.status !== 201) return `HTTP ${res.status} ${res.body}`;
      created.push(nodeName(first + k));
      return undefined;
    },
  }));
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

function getPhase(server: Server, total: number, concurrency: number, names: string[]): Promise<PhaseResult> {
  return requestPhase(server, total, concurrency, (client) => {
    const name = names[Math.floor(Math.random() * names.length)];
    return {
      what: `GET ${name}`,
      sent: client.request('GET', `/v1/nodes/${name}`),
      settle(res) {
        if (res.status !== 200) return `HTTP ${res.status} ${res.body}`;
        return res.body.includes(`"name":"${name}"`) ? undefined : 'another node came back';
      },
    };
  });
}

// ---------------------------------------------------------------------------------------------
// Reporting

// ---------------------------------------------------------------------------------------------

async function main(): Promise<number> {
  const opts = parseOptions(process.argv.slice(2));
  if (!opts) return 0;
  const startedAt = new Date();
  const log = benchLog();
  const runTag = `${process.pid}-${randomBytes(3).toString('hex')}`;
  const machine = machineInfo();
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
      logLevelNote: 'GALVANIC_DEFAULT__LOG_LEVEL=warn: the per-request info line is not written, so these figures exclude logging cost',
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
      client: 'undici Pool, one keep-alive connection per concurrent client; latency = request start to last body byte',
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

runBenchmark(main);
