/**
 * Group deploy benchmark (not a test): one group operation deploys N simulated Redfish nodes
 * (ramdisk deploy over virtual media: power off, eject, insert the ISO, boot override, power on
 * and wait for the boot) through one `galvanic api` and K `galvanic conductor` processes, once
 * per --max-parallel value, each followed by an undeploy operation.
 *
 *   node dist/bench/deploy.js [--nodes 1000] [--conductors 2] [--max-parallel 1000,100]
 *     [--latency 100-500] [--boot-seconds 5-10] [--api-port 6460] [--workers 1000]
 *     [--cpu-prof DIR]   (the conductors write CPU profiles there)
 *     [--log-dir DIR [--log-level info]]   (every Galvanic process's output to DIR/<label>.log)
 *     [--deploy-interface direct [--agent-image kernel|iso] [--image-mib 1] [--agent-boot-seconds 1-2]
 *      [--agent-write-mbps 3] [--heartbeat-gap-ms 1000] [--heartbeat-timeout 60]
 *      [--agent-no-auto-tls]]
 *     [--pg-stat-statements]   (embedded Postgres with pg_stat_statements: statements per node by kind)
 *
 * With `--deploy-interface direct` the nodes deploy through the simulated agent (its ISO over
 * virtual media, lookup, heartbeats, write_image of an image this process serves, tear-down)
 * and the undeploy cleans them through it (erase_devices_metadata and erase_devices). With
 * `--agent-image kernel` (the default) the nodes name a deploy_kernel and deploy_ramdisk that
 * this process serves: each conductor downloads them once, builds one agent ISO and publishes
 * it per node in its HTTP root, and the simulated hosts read the API's URL from that ISO; with
 * `iso` they name a deploy_iso handed to the BMC as it is. The
 * floor of a node then adds to its BMC chain what the agent imposes: each agent's boot delay
 * (from its host's boot to the agent's start, in the simulator's events) and, per
 * asynchronous command, the longer of its run and the forced heartbeat's least gap (IPA
 * heartbeats at least that long after the previous one, the only way the conductor hears of
 * the end); write_image runs image bytes / write rate; a command the conductor polls for
 * (install_bootloader) adds its run.
 *
 * The floor of a run is computed at the simulator (`/_sim/chains?all=1`): each BMC's chain is
 * the latency imposed on its requests plus its boots, the shortest time in which a client doing
 * one request at a time could have had its answers. With every node admitted at once the floor
 * is the slowest node's chain; with max_parallel P it is the sum, over the admission waves (the
 * operation's nodes in order, P at a time), of each wave's slowest chain. Per-node deploy time
 * is the step's run (its start to its end, from the operation's node rows).
 *
 * Results: a table on stdout, bench/results/deploy-<timestamp>.json and deploy-latest.json.
 */
import type { ChildProcess } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { nicMacs } from '../sim/redfish/model-synthetic.js';
import type { LogEntry } from '../sim/redfish/index.js';
import { parseArgs } from 'node:util';
import type { Knex } from 'knex';
import { createKnex } from '../db/connection.js';
import { onCleanup, runBenchmark } from './lib/cleanup.js';
import { createBenchDatabase, startDatabaseServer } from './lib/database.js';
import { Client, followOperation, waitForApi } from './lib/http.js';
import { spawnSim } from './lib/redfish-fleet.js';
import { spawnGalvanic, watchCpu, type GalvanicProcess } from './lib/proc.js';
import { benchLog, fmt, gitState, loadAvg, machineInfo, positiveInt, round2, sleep, summarize, table, writeResults } from './lib/util.js';

const ISO = 'http://images.example/bench/live.iso';

interface Options {
  nodes: number;
  conductors: number;
  maxParallel: number[];
  latency: string;
  bootSeconds: string;
  apiPort: number;
  workers: number;
  cpuProf?: string;
  deployInterface: 'ramdisk' | 'direct';
  agentImage: 'kernel' | 'iso';
  imageMiB: number;
  agentBootSeconds: string;
  agentWriteMBps: number;
  heartbeatGapMs: number;
  heartbeatTimeout: number;
  /** The agents serve plain HTTP instead of IPA's automatic TLS (to measure what TLS costs). */
  agentNoAutoTls: boolean;
  logDir?: string;
  logLevel: string;
  pgStatStatements: boolean;
}

function parseOptions(): Options {
  const { values } = parseArgs({
    options: {
      nodes: { type: 'string' }, conductors: { type: 'string' }, 'max-parallel': { type: 'string' }, latency: { type: 'string' },
      'boot-seconds': { type: 'string' }, 'api-port': { type: 'string' }, workers: { type: 'string' }, 'cpu-prof': { type: 'string' },
      'deploy-interface': { type: 'string' }, 'agent-image': { type: 'string' }, 'image-mib': { type: 'string' }, 'agent-boot-seconds': { type: 'string' },
      'agent-write-mbps': { type: 'string' }, 'heartbeat-gap-ms': { type: 'string' }, 'heartbeat-timeout': { type: 'string' }, 'agent-no-auto-tls': { type: 'boolean' },
      'log-dir': { type: 'string' }, 'log-level': { type: 'string' }, 'pg-stat-statements': { type: 'boolean' },
    },
  });
  const deployInterface = values['deploy-interface'] ?? 'ramdisk';
  if (deployInterface !== 'ramdisk' && deployInterface !== 'direct') throw new Error(`--deploy-interface must be ramdisk or direct, got ${deployInterface}`);
  const agentImage = values['agent-image'] ?? 'kernel';
  if (agentImage !== 'kernel' && agentImage !== 'iso') throw new Error(`--agent-image must be kernel or iso, got ${agentImage}`);
  const maxParallel = (values['max-parallel'] ?? '1000,100').split(',').map((v) => positiveInt('max-parallel', v, 0));
  return {
    nodes: positiveInt('nodes', values.nodes, 1000),
    conductors: positiveInt('conductors', values.conductors, 2),
    maxParallel,
    latency: values.latency ?? '100-500',
    bootSeconds: values['boot-seconds'] ?? '5-10',
    apiPort: positiveInt('api-port', values['api-port'], 6460),
    workers: positiveInt('workers', values.workers, 1000),
    cpuProf: values['cpu-prof'],
    deployInterface,
    agentImage,
    // The simulator fetches and hashes every byte as IPA does, but for every agent in one
    // process: 1,000 x 64 MiB kept it busy for 270 of a 347 s deploy, which measured the
    // simulator. A small image written slowly takes the write time of a large one (0.35 s).
    imageMiB: positiveInt('image-mib', values['image-mib'], 1),
    agentBootSeconds: values['agent-boot-seconds'] ?? '1-2',
    agentWriteMBps: positiveInt('agent-write-mbps', values['agent-write-mbps'], 3),
    heartbeatGapMs: positiveInt('heartbeat-gap-ms', values['heartbeat-gap-ms'], 1000),
    heartbeatTimeout: positiveInt('heartbeat-timeout', values['heartbeat-timeout'], 60),
    agentNoAutoTls: values['agent-no-auto-tls'] ?? false,
    logDir: values['log-dir'],
    logLevel: values['log-level'] ?? 'warn',
    pgStatStatements: values['pg-stat-statements'] ?? false,
  };
}

interface Sim {
  proc: ChildProcess;
  firstPort: number;
}

async function startSim(opts: Options, log: (m: string) => void): Promise<Sim> {
  const args = ['--count', String(opts.nodes), '--latency', opts.latency,
    '--boot-seconds', opts.bootSeconds, '--session-limit', '4'];
  if (opts.deployInterface === 'direct') {
    args.push('--agent-api-url', `http://127.0.0.1:${opts.apiPort}`, '--agent-boot-seconds', opts.agentBootSeconds,
      '--agent-write-mbps', String(opts.agentWriteMBps), '--agent-heartbeat-min-gap-ms', String(opts.heartbeatGapMs));
    if (opts.agentNoAutoTls) args.push('--agent-no-auto-tls');
  }
  const { proc, ready } = await spawnSim(args, 'simulator');
  log(`simulator: ${ready.listening} BMCs`);
  return { proc, firstPort: ready.firstPort };
}

/** Every BMC's chain since the last mark, by port, and a new mark. */
async function markChains(sim: Sim): Promise<Map<number, { ms: number; requests: number }>> {
  const res = await fetch(`http://127.0.0.1:${sim.firstPort}/_sim/chains?all=1`, { method: 'POST' });
  const body = (await res.json()) as { all: Array<[number, number, number]> };
  return new Map(body.all.map(([port, ms, requests]) => [port, { ms, requests }]));
}

async function simTotals(sim: Sim): Promise<Record<string, number>> {
  return (await (await fetch(`http://127.0.0.1:${sim.firstPort}/_sim/totals`)).json()) as Record<string, number>;
}

async function simPorts(sim: Sim): Promise<number[]> {
  const res = await fetch(`http://127.0.0.1:${sim.firstPort}/_sim/chains?all=1`);
  return ((await res.json()) as { all: Array<[number, number, number]> }).all.map((c) => c[0]);
}

interface OperationBody {
  uuid: string;
  state: string;
  counts: Record<string, number>;
  finished_at: string | null;
  nodes?: Array<{ node_uuid: string; state: string; attempts: number; last_error: string | null; admitted_at: string | null; started_at: string | null; finished_at: string | null }>;
  next?: string;
}

interface PhaseResult {
  phase: string;
  maxParallel: number;
  state: string;
  counts: Record<string, number>;
  acceptMs: number;
  wallS: number;
  floorS: number;
  wallOverFloor: number;
  waves: number;
  slowestChainS: number;
  chainP50S: number;
  requestsPerNode: number;
  mostRunning: number;
  /** GET /v1/operations/{id}?limit=1 while it ran (the bench polls it every second). */
  statusGetMs: ReturnType<typeof summarize>;
  nodeStepS: ReturnType<typeof summarize>;
  admitToEndS: ReturnType<typeof summarize>;
  failures: Array<{ node: string; error: string | null }>;
  startToFirstBmcChangeS: ReturnType<typeof summarize>;
  bootEndToStepEndS: ReturnType<typeof summarize>;
  /**
   * Means over the nodes (s) of where each node's time from admission to end went, by what its
   * BMC was doing (nodeTimeline), and of that time less the node's own chain.
   */
  nodeTimeS: NodeTime & { overOwnChain: number };
  /** Direct deploys: the agents' calls, served requests and command runs by kind, per node and their mean time. */
  agentCalls?: Record<string, { perNode: number; meanMs: number }>;
  /** Direct deploys: from an accepted heartbeat's answer to the conductor's next request to that agent. */
  heartbeatToCommandS?: ReturnType<typeof summarize>;
  /** From the operation's creation: when nodes were admitted and when their step started. */
  admittedAfterS: ReturnType<typeof summarize>;
  startedAfterS: ReturnType<typeof summarize>;
  /** What the simulator counted meanwhile, over every BMC. */
  simulator: Record<string, number>;
  cpu: Record<string, { cpuS: number; maxRssMiB: number }>;
  postgresCpuS: number;
  machineBusyCpuS: number;
  loadAverage: { start: number[]; end: number[] };
  /** Direct deploys: heartbeats the agents sent (all answered) and the agent's share of a node's floor. */
  agent?: { heartbeats: number; heartbeatsPerS: number; heartbeatStatuses: Record<string, number>; agentFloorP50S: number };
  /** Transactions committed in the bench's database, per node (the bench's own polling included). */
  commitsPerNode: number;
  /** With --pg-stat-statements: every statement per node, and the most frequent ones. */
  statements?: {
    perNode: number;
    /** Postgres's time per node in these statements (planning and execution), ms. */
    msPerNode: number;
    top: Array<{ perNode: number; meanMs: number; meanPlanMs: number; query: string }>;
  };
}

/** Transactions committed so far in the database of `knex`. */
async function commits(knex: Knex): Promise<number> {
  await knex.raw('SELECT pg_stat_force_next_flush()');
  const { rows } = (await knex.raw('SELECT xact_commit AS n FROM pg_stat_database WHERE datname = current_database()')) as { rows: Array<{ n: string }> };
  return Number(rows[0].n);
}

/** The statements run in this database since the last reset, per node, most frequent first. */
async function statementsPerNode(knex: Knex, nodes: number): Promise<NonNullable<PhaseResult['statements']>> {
  const { rows } = (await knex.raw(
    // Planning per call: mean_plan_time is per planning, and a prepared statement's generic plan is made once.
    `SELECT query, calls, mean_exec_time AS mean, total_plan_time / greatest(calls, 1) AS plan FROM pg_stat_statements
      WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) ORDER BY calls DESC`,
  )) as { rows: Array<{ query: string; calls: string; mean: number; plan: number }> };
  const all = rows.reduce((t, r) => t + Number(r.calls), 0);
  const ms = rows.reduce((t, r) => t + Number(r.calls) * (r.mean + r.plan), 0);
  return {
    perNode: round2(all / nodes),
    msPerNode: round2(ms / nodes),
    top: rows.slice(0, 40).map((r) => ({
      perNode: round2(Number(r.calls) / nodes), meanMs: round2(r.mean), meanPlanMs: round2(r.plan), query: r.query.replace(/\s+/g, ' ').slice(0, 300),
    })),
  };
}

/** Where one node's time went, from its admission to its end, in ms by category (see nodeTimeline). */
const TIME_KINDS = ['bmcLatency', 'bmcSim', 'boot', 'agentBoot', 'agentServe', 'agentApi', 'agentRun', 'agentIdle', 'conductor'] as const;
type NodeTime = Record<(typeof TIME_KINDS)[number], number>;

/**
 * Splits a node's time from `from` to `to` (epoch ms) by what was happening at its BMC, each
 * millisecond counted once, in this order: a request waiting out its imposed latency
 * (bmcLatency) or being answered (bmcSim: the simulator's own time, late timers included);
 * else the host booting; the agent ISO booted but its agent not yet started (agentBoot); while
 * the agent runs, a conductor's request to it being answered (agentServe), its own call to
 * Galvanic's API in flight (agentApi: lookups, heartbeats), a command running (agentRun), or
 * none of these (agentIdle: a heartbeat's least gap, claims, the conductor's own work); else
 * nothing at the BMC (conductor: claims, database writes, the conductor's own work).
 */
function nodeTimeline(log: LogEntry[], events: Array<{ at: number; type: string }>, calls: Array<[string, number, number]>, from: number, to: number): NodeTime {
  const span = Math.max(0, Math.ceil(to - from));
  const kind = new Uint8Array(span).fill(TIME_KINDS.indexOf('conductor'));
  // Lowest priority first: each later fill overwrites.
  const fill = (a: number, b: number, k: (typeof TIME_KINDS)[number]) => kind.fill(TIME_KINDS.indexOf(k), Math.max(0, Math.floor(a - from)), Math.max(0, Math.min(span, Math.ceil(b - from))));
  const ordered = events.filter((e) => e.at >= from - 60_000 && e.at <= to).sort((a, b) => a.at - b.at);
  let agentFrom: number | undefined;
  for (const e of ordered) {
    if (e.type === 'agent-started') agentFrom = e.at;
    if (e.type === 'agent-stopped' && agentFrom !== undefined) {
      fill(agentFrom, e.at, 'agentIdle');
      agentFrom = undefined;
    }
  }
  if (agentFrom !== undefined) fill(agentFrom, to, 'agentIdle');
  for (const prefix of ['run', 'api', 'serve'] as const) {
    const k = ({ run: 'agentRun', api: 'agentApi', serve: 'agentServe' } as const)[prefix];
    for (const [what, a, b] of calls) if (what.startsWith(`${prefix} `)) fill(a, b, k);
  }
  let bootFrom: number | undefined;
  for (const e of ordered) {
    if (e.type === 'boot-started') bootFrom = e.at;
    if ((e.type === 'boot-finished' || e.type === 'boot-failed') && bootFrom !== undefined) {
      fill(bootFrom, e.at, 'boot');
      bootFrom = undefined;
      if (e.type === 'boot-finished') {
        const started = ordered.find((x) => x.at >= e.at && (x.type === 'agent-started' || x.type === 'boot-started'));
        if (started?.type === 'agent-started') fill(e.at, started.at, 'agentBoot');
      }
    }
  }
  for (const [, , , start, end, latency] of log) {
    if (end < from || start > to) continue;
    fill(start + latency, end, 'bmcSim');
    fill(start, start + latency, 'bmcLatency');
  }
  const out = Object.fromEntries(TIME_KINDS.map((k) => [k, 0])) as NodeTime;
  for (const k of kind) out[TIME_KINDS[k]]++;
  return out;
}

/** The heartbeats the agents of these BMCs sent so far, in all and by the API's answer (status code, or `error`). */
async function agentHeartbeats(ports: number[]): Promise<{ total: number; byStatus: Record<string, number> }> {
  const byStatus: Record<string, number> = {};
  let total = 0;
  await Promise.all(ports.map(async (p) => {
    const w = (await (await fetch(`http://127.0.0.1:${p}/_sim/agent`)).json()) as { heartbeats: number; heartbeatStatuses: Record<string, number> };
    total += w.heartbeats;
    for (const [k, n] of Object.entries(w.heartbeatStatuses)) byStatus[k] = (byStatus[k] ?? 0) + n;
  }));
  return { total, byStatus };
}

/** Bytes of the agent's kernel and ramdisk the bench serves (deterministic; no host really boots them). */
const AGENT_KERNEL_BYTES = 1024 * 1024;
const AGENT_RAMDISK_BYTES = 8 * 1024 * 1024;

function benchBytes(n: number, seed: number): Buffer {
  const data = Buffer.alloc(n);
  for (let i = 0; i < n; i += 4096) data.writeUInt32LE((i + seed) >>> 0, i);
  return data;
}

/** Serves the image the agents write, the agent's kernel and ramdisk, and the agent ISO's name. */
async function startImageServer(mib: number): Promise<{ imageUrl: string; isoUrl: string; kernelUrl: string; ramdiskUrl: string; sha256: string; bytes: number }> {
  const bytes = mib * 1024 * 1024;
  const files: Record<string, Buffer> = {
    '/bench/disk.raw': benchBytes(bytes, 0), '/bench/ipa.kernel': benchBytes(AGENT_KERNEL_BYTES, 1), '/bench/ipa.initramfs': benchBytes(AGENT_RAMDISK_BYTES, 2),
  };
  const server = http.createServer((req, res) => {
    const body = files[req.url ?? ''];
    if (body) res.writeHead(200, { 'content-length': String(body.length) }).end(req.method === 'HEAD' ? undefined : body);
    else res.writeHead(404).end();
  });
  // Longer than the agents' keep-alive: a connection this server closes as an agent reuses it fails the download.
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  onCleanup('image server', () => new Promise((r) => { server.closeAllConnections(); server.close(() => r()); }));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    imageUrl: `${url}/bench/disk.raw`, isoUrl: `${url}/bench/ipa.iso`, kernelUrl: `${url}/bench/ipa.kernel`, ramdiskUrl: `${url}/bench/ipa.initramfs`,
    sha256: createHash('sha256').update(files['/bench/disk.raw']!).digest('hex'), bytes,
  };
}

const toS = (s: ReturnType<typeof summarize>) => ({ ...s, meanMs: round2(s.meanMs / 1000), p50Ms: round2(s.p50Ms / 1000), p90Ms: round2(s.p90Ms / 1000), p99Ms: round2(s.p99Ms / 1000), maxMs: round2(s.maxMs / 1000) });

/** Runs one operation over every node and measures it against the simulator's floor. */
async function runPhase(
  phase: string, steps: unknown[], maxParallel: number, ctx: {
    client: Client; sim: Sim; uuids: string[]; portOf: Map<string, number>; pids: Record<string, number>; log: (m: string) => void; died: () => string | undefined;
    knex: Knex; postmasterPid?: number; pgStatStatements: boolean;
    /** Direct deploys: the agent's least heartbeat gap and write_image's run, in ms. */
    agent?: { gapMs: number; writeMs: number };
  },
): Promise<PhaseResult> {
  const { client, sim, uuids, portOf, log } = ctx;
  const heartbeats0 = ctx.agent ? await agentHeartbeats(uuids.map((u) => portOf.get(u)!)) : undefined;
  await markChains(sim);
  const totals0 = await simTotals(sim);
  const load0 = loadAvg();
  if (ctx.pgStatStatements) await ctx.knex.raw('SELECT pg_stat_statements_reset()');
  const commits0 = await commits(ctx.knex);
  const watch = watchCpu(ctx.pids, ctx.postmasterPid);
  const t0 = Date.now();
  const created = await client.request('POST', '/v1/operations', JSON.stringify({ nodes: uuids, steps, max_parallel: maxParallel, description: `bench ${phase}` }));
  if (created.status !== 201) throw new Error(`POST /v1/operations: ${created.status} ${created.body.slice(0, 500)}`);
  const opId = (JSON.parse(created.body) as OperationBody).uuid;
  let lastLog = 0;
  const { op, mostRunning, getMs } = await followOperation<OperationBody>(client, opId, {
    pauseMs: 1000,
    died: ctx.died,
    progress: (o) => {
      if (Date.now() - lastLog > 10_000) {
        lastLog = Date.now();
        log(`${phase}: ${JSON.stringify(o.counts)}`);
      }
    },
  });
  // The operation's own end (the server's clock is this machine's): polling once a second, as
  // a client following it does, costs the database less than polling closely would.
  const wallS = (Date.parse(op.finished_at) - t0) / 1000;
  const usage = watch.stop();
  const commitsPerNode = round2(((await commits(ctx.knex)) - commits0) / uuids.length);
  const statements = ctx.pgStatStatements ? await statementsPerNode(ctx.knex, uuids.length) : undefined;
  const chains = await markChains(sim);
  const totals1 = await simTotals(sim);
  const rows: NonNullable<OperationBody['nodes']> = [];
  let next: string | undefined = `/v1/operations/${opId}?limit=1000`;
  while (next) {
    const page = JSON.parse((await client.request('GET', next.replace(/^https?:\/\/[^/]+/, ''))).body) as OperationBody;
    rows.push(...(page.nodes ?? []));
    next = page.next;
  }
  // Waves: the nodes in the operation's order, maxParallel at a time.
  const agentExtra = new Map<string, number>();
  const chainOf = (uuid: string) => (chains.get(portOf.get(uuid)!)?.ms ?? 0) + (agentExtra.get(uuid) ?? 0);
  if (ctx.agent) {
    const { gapMs, writeMs } = ctx.agent;
    await Promise.all(uuids.map(async (u) => {
      const port = portOf.get(u)!;
      const { events } = (await (await fetch(`http://127.0.0.1:${port}/_sim/events`)).json()) as { events: Array<{ at: number; type: string }> };
      let extra = 0;
      let bootEnd: number | undefined;
      for (const e of events.filter((x) => x.at >= t0)) {
        if (e.type === 'boot-finished') bootEnd = e.at;
        if (e.type === 'agent-started' && bootEnd !== undefined) extra += e.at - bootEnd;
      }
      const w = (await (await fetch(`http://127.0.0.1:${port}/_sim/agent`)).json()) as { commands: Array<{ command_name: string; command_result: unknown }>; calls: Array<[string, number, number]> };
      for (const c of w.commands) {
        if (!c.command_name.startsWith('execute_')) continue;
        const step = ((c.command_result ?? {}) as { deploy_step?: { step?: string } }).deploy_step?.step;
        extra += Math.max(gapMs, step === 'write_image' ? writeMs : 0);
      }
      // A command the conductor waits for by reading the agent's command list (the bootloader's
      // install) holds the node for its run.
      for (const [what, from, to] of w.calls) if (what === 'run image.install_bootloader' && from >= t0) extra += to - from;
      agentExtra.set(u, extra);
    }));
  }
  const heartbeats1 = ctx.agent ? await agentHeartbeats(uuids.map((u) => portOf.get(u)!)) : undefined;
  const heartbeats = heartbeats1 && heartbeats0 ? heartbeats1.total - heartbeats0.total : 0;
  const heartbeatStatuses: Record<string, number> = {};
  for (const [k, n] of Object.entries(heartbeats1?.byStatus ?? {})) {
    const d = n - (heartbeats0?.byStatus[k] ?? 0);
    if (d > 0) heartbeatStatuses[k] = d;
  }
  let floorMs = 0;
  let waves = 0;
  for (let i = 0; i < uuids.length; i += maxParallel) {
    floorMs += Math.max(...uuids.slice(i, i + maxParallel).map(chainOf));
    waves++;
  }
  // Where a node's time went, from the simulator's event log (same clock): from the step's
  // start to its BMC's first state change (claim, first writes, login, discovery), and from its
  // boot's end to the step's end (the power-on poll seeing it, and the outcome's commit).
  const toFirstChange: number[] = [];
  const bootToEnd: number[] = [];
  const times: NodeTime[] = [];
  const callStats = new Map<string, { n: number; ms: number }>();
  const heartbeatToCommand: number[] = [];
  const overheads: number[] = [];
  await Promise.all(rows.map(async (r) => {
    const port = portOf.get(r.node_uuid)!;
    const { events } = (await (await fetch(`http://127.0.0.1:${port}/_sim/events`, { method: 'GET' })).json()) as { events: Array<{ at: number; type: string }> };
    const { log: requestLog } = (await (await fetch(`http://127.0.0.1:${port}/_sim/stats`)).json()) as { log: LogEntry[] };
    const calls = ctx.agent ? ((await (await fetch(`http://127.0.0.1:${port}/_sim/agent`)).json()) as { calls: Array<[string, number, number]> }).calls : [];
    for (const [what, a, b] of calls) {
      if (a < t0) continue;
      const key = what.replace(/ \d+$/, '');
      const c = callStats.get(key) ?? { n: 0, ms: 0 };
      c.n++;
      c.ms += b - a;
      callStats.set(key, c);
    }
    // From an accepted heartbeat's answer to the conductor's next request to the agent.
    for (let i = 0; i < calls.length; i++) {
      if (calls[i][1] < t0 || !/^api POST \/v1\/heartbeat\/\{node\} 202$/.test(calls[i][0])) continue;
      const next = calls.slice(i + 1).find((c) => c[0].startsWith('serve ') || c[0].startsWith('api POST /v1/heartbeat'));
      if (next?.[0].startsWith('serve ')) heartbeatToCommand.push(next[1] - calls[i][2]);
    }
    if (r.admitted_at && r.finished_at) {
      const from = Date.parse(r.admitted_at);
      const to = Date.parse(r.finished_at);
      times.push(nodeTimeline(requestLog, events, calls, from, to));
      overheads.push(to - from - chainOf(r.node_uuid));
    }
    const mine = events.filter((e) => e.at >= t0);
    const first = mine.find((e) => e.type === 'reset' || e.type === 'insert' || e.type === 'eject');
    const boot = mine.filter((e) => e.type === 'boot-finished').at(-1);
    if (first && r.started_at) toFirstChange.push(first.at - Date.parse(r.started_at));
    if (boot && r.finished_at) bootToEnd.push(Date.parse(r.finished_at) - boot.at);
  }));
  // Means over the nodes, in s: what the overhead over each node's own chain was spent on.
  const meanS = (xs: number[]) => round2(xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length) / 1000);
  const nodeTimeS = { ...Object.fromEntries(TIME_KINDS.map((k) => [k, meanS(times.map((t) => t[k]))])), overOwnChain: meanS(overheads) } as NodeTime & { overOwnChain: number };
  const agentCalls = Object.fromEntries([...callStats].sort((a, b) => b[1].ms - a[1].ms).map(([k, c]) => [k, { perNode: round2(c.n / rows.length), meanMs: Math.round(c.ms / c.n) }]));
  const all = uuids.map(chainOf).sort((a, b) => a - b);
  const requests = uuids.reduce((t, u) => t + (chains.get(portOf.get(u)!)?.requests ?? 0), 0);
  const ms = (a: string | null, b: string | null) => (a && b ? Date.parse(b) - Date.parse(a) : NaN);
  const result: PhaseResult = {
    phase, maxParallel, state: op.state, counts: op.counts, acceptMs: round2(created.ms), wallS: round2(wallS),
    floorS: round2(floorMs / 1000), wallOverFloor: round2(wallS / (floorMs / 1000)), waves,
    slowestChainS: round2(all[all.length - 1] / 1000), chainP50S: round2(all[Math.floor(all.length / 2)] / 1000),
    requestsPerNode: round2(requests / uuids.length), mostRunning, statusGetMs: summarize(getMs),
    nodeStepS: toS(summarize(rows.map((r) => ms(r.started_at, r.finished_at)))),
    admitToEndS: toS(summarize(rows.map((r) => ms(r.admitted_at, r.finished_at)))),
    startToFirstBmcChangeS: toS(summarize(toFirstChange)),
    nodeTimeS,
    ...(ctx.agent ? { agentCalls, heartbeatToCommandS: toS(summarize(heartbeatToCommand)) } : {}),
    bootEndToStepEndS: toS(summarize(bootToEnd)),
    admittedAfterS: toS(summarize(rows.map((r) => (r.admitted_at ? Date.parse(r.admitted_at) - t0 : NaN)))),
    startedAfterS: toS(summarize(rows.map((r) => (r.started_at ? Date.parse(r.started_at) - t0 : NaN)))),
    simulator: Object.fromEntries(['requests', 'sessionsCreated', 'logins', 'unauthorized'].map((k) => [k, totals1[k] - totals0[k]])),
    failures: rows.filter((r) => r.state !== 'succeeded').slice(0, 10).map((r) => ({ node: r.node_uuid, error: r.last_error })),
    cpu: usage.processes, postgresCpuS: usage.postgresCpuS, machineBusyCpuS: usage.machineBusyCpuS,
    loadAverage: { start: load0, end: loadAvg() },
    commitsPerNode, ...(statements ? { statements } : {}),
    ...(ctx.agent ? { agent: { heartbeats, heartbeatsPerS: round2(heartbeats / wallS), heartbeatStatuses, agentFloorP50S: round2(([...agentExtra.values()].sort((a, b) => a - b)[Math.floor(agentExtra.size / 2)] ?? 0) / 1000) } } : {}),
  };
  log(`${phase}: ${commitsPerNode} commits per node${statements ? `, ${statements.perNode} statements per node (${statements.msPerNode} ms of Postgres time: planning and execution); most frequent (per node, plan + exec ms each):\n${statements.top.slice(0, 25).map((t) => `  ${fmt(t.perNode, 2)}  ${fmt(t.meanPlanMs, 2)} + ${fmt(t.meanMs, 2)}  ${t.query.slice(0, 140)}`).join('\n')}` : ''}`);
  log(`${phase}: a node's time, mean s: ${TIME_KINDS.map((k) => `${k} ${fmt(nodeTimeS[k], 2)}`).join(', ')}; over its own chain ${fmt(nodeTimeS.overOwnChain, 2)}`);
  if (ctx.agent) {
    log(`${phase}: the agents' calls (per node, mean ms): ${Object.entries(agentCalls).map(([k, c]) => `${k} ${fmt(c.perNode, 2)} × ${c.meanMs}`).join('; ')}`);
    log(`${phase}: heartbeat answered → the conductor's next request to the agent: p50 ${fmt(result.heartbeatToCommandS!.p50Ms, 2)} s, p90 ${fmt(result.heartbeatToCommandS!.p90Ms, 2)} s`);
    log(`${phase}: heartbeats by answer: ${Object.entries(heartbeatStatuses).map(([k, n]) => `${k} × ${n}`).join(', ')}`);
  }
  log(`${phase}: ${op.state} in ${fmt(wallS, 2)} s against a floor of ${fmt(result.floorS, 2)} s (${fmt(result.wallOverFloor, 2)}x); node step p50 ${fmt(result.nodeStepS.p50Ms, 2)} s p99 ${fmt(result.nodeStepS.p99Ms, 2)} s`);
  return result;
}

async function main(): Promise<number> {
  const opts = parseOptions();
  const log = benchLog();
  const startedAt = new Date();
  const machine = machineInfo();
  log(`machine: ${machine.cpuCount} CPUs, load ${machine.loadAvgAtStart.join(' ')}; ${JSON.stringify(opts)}`);

  const extraFlags = opts.pgStatStatements ? ['-c', 'shared_preload_libraries=pg_stat_statements', '-c', 'pg_stat_statements.track=top', '-c', 'pg_stat_statements.track_planning=on'] : [];
  const server = await startDatabaseServer({ log, tempPrefix: 'galvanic-bench-deploy-', extraFlags });
  const db = await createBenchDatabase(server, 'galvanic_bench_deploy', log);
  const sim = await startSim(opts, log);
  const ports = await simPorts(sim);

  const env: Record<string, string> = {
    GALVANIC_DATABASE__CONNECTION: db.url, GALVANIC_DEFAULT__LOG_LEVEL: opts.logLevel,
    GALVANIC_CONDUCTOR__SYNC_POWER_STATE_INTERVAL: '0',
    GALVANIC_CONDUCTOR__WORKERS_POOL_SIZE: String(opts.workers),
    GALVANIC_REDFISH__CONNECTION_CACHE_SIZE: String(opts.nodes + 100),
    GALVANIC_API__RAMDISK_HEARTBEAT_TIMEOUT: String(opts.heartbeatTimeout),
    // The API's port for every process: the conductors put its URL on the agent's command line.
    GALVANIC_API__PORT: String(opts.apiPort),
  };
  const direct = opts.deployInterface === 'direct';
  const image = direct ? await startImageServer(opts.imageMiB) : undefined;
  const procs: GalvanicProcess[] = [await spawnGalvanic({ label: 'api', command: 'api', logDir: opts.logDir, env: { ...env, GALVANIC_API__PORT: String(opts.apiPort) } })];
  for (let i = 0; i < opts.conductors; i++) {
    procs.push(await spawnGalvanic({
      label: `conductor-${i + 1}`, command: 'conductor', cpuProfDir: opts.cpuProf, logDir: opts.logDir,
      env: { ...env, GALVANIC_DEFAULT__HOST: `bench-deploy-${i + 1}` },
    }));
  }
  const died = () => procs.find((p) => p.proc.exitCode !== null)?.output();
  await waitForApi(opts.apiPort, 60_000, died);
  const client = new Client(opts.apiPort, 2);

  // One node through the API (its interfaces resolved as for any node), the rest copied from its row.
  const agentInfo = !image ? {} : opts.agentImage === 'iso' ? { deploy_iso: image.isoUrl } : { deploy_kernel: image.kernelUrl, deploy_ramdisk: image.ramdiskUrl };
  const first = await client.request('POST', '/v1/nodes', JSON.stringify({
    name: 'bench-deploy-0', driver: 'redfish', deploy_interface: opts.deployInterface, boot_interface: 'redfish-virtual-media',
    driver_info: { redfish_address: `http://127.0.0.1:${ports[0]}`, redfish_username: 'admin', redfish_password: 'password', ...agentInfo },
    ...(image ? { instance_info: { image_source: image.imageUrl, image_os_hash_algo: 'sha256', image_os_hash_value: image.sha256 } } : {}),
  }));
  if (first.status !== 201) throw new Error(`POST /v1/nodes: ${first.status} ${first.body}`);
  const knex = createKnex(db.url, { poolMax: 2, applicationName: 'galvanic-bench-deploy' });
  onCleanup('bench pool', () => knex.destroy());
  if (opts.pgStatStatements) await knex.raw('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
  const template = await knex('nodes').where('name', 'bench-deploy-0').first();
  const copies = ports.slice(1).map((port, i) => {
    const { id: _id, ...row } = template as Record<string, unknown>;
    return {
      ...row, uuid: randomUUID(), name: `bench-deploy-${i + 1}`,
      driver_info: JSON.stringify({ redfish_address: `http://127.0.0.1:${port}`, redfish_username: 'admin', redfish_password: 'password', ...agentInfo }),
      properties: JSON.stringify(row.properties ?? {}), instance_info: JSON.stringify(row.instance_info ?? {}), extra: JSON.stringify(row.extra ?? {}),
      driver_internal_info: JSON.stringify(row.driver_internal_info ?? {}),
    };
  });
  for (let i = 0; i < copies.length; i += 500) await knex('nodes').insert(copies.slice(i, i + 500));
  await knex('nodes').update({ provision_state: 'available', power_state: 'power off' });
  const nodeRows: Array<{ uuid: string; driver_info: { redfish_address: string } }> = await knex('nodes').select('uuid', 'driver_info').orderBy('id');
  const uuids = nodeRows.map((r) => r.uuid);
  const portOf = new Map(nodeRows.map((r) => [r.uuid, Number(new URL(r.driver_info.redfish_address).port)]));
  if (direct) {
    // The agents look themselves up by their NICs' MACs: the simulator's, by BMC index (fleet 0).
    const ids: Array<{ id: number; uuid: string }> = await knex('nodes').select('id', 'uuid');
    const idOf = new Map(ids.map((r) => [r.uuid, r.id]));
    const rows = uuids.flatMap((u) => nicMacs(0, ports.indexOf(portOf.get(u)!)).map((address) => ({ uuid: randomUUID(), address, node_id: idOf.get(u) })));
    for (let i = 0; i < rows.length; i += 1000) await knex('ports').insert(rows.slice(i, i + 1000));
  }
  log(`${uuids.length} nodes enrolled (available)`);
  while (Number(((await knex('conductors').where('online', true).count({ n: '*' })) as Array<{ n: number }>)[0].n) < opts.conductors) await sleep(200);
  // Let the rings agree (one heartbeat) before the work starts.
  await sleep(11_000);

  const pids = { ...Object.fromEntries(procs.map((p) => [p.label, p.pid])), simulator: sim.proc.pid! };
  const agent = image ? { gapMs: opts.heartbeatGapMs, writeMs: (image.bytes / (opts.agentWriteMBps * 1e6)) * 1000 } : undefined;
  const ctx = { client, sim, uuids, portOf, pids, log, died, agent, knex, postmasterPid: server.postmasterPid, pgStatStatements: opts.pgStatStatements };
  const phases: PhaseResult[] = [];
  for (const mp of opts.maxParallel) {
    // Given at each deploy: the undeploy before it cleared instance_info, as Ironic's tear-down does.
    const instanceInfo = image ? { image_source: image.imageUrl, image_os_hash_algo: 'sha256', image_os_hash_value: image.sha256 } : { boot_iso: ISO };
    phases.push(await runPhase(`deploy-${mp}`, [{ action: 'deploy', args: { instance_info: instanceInfo } }], mp, ctx));
    phases.push(await runPhase(`undeploy-${mp}`, [{ action: 'undeploy' }], mp, ctx));
  }
  client.close();
  for (const p of procs) await p.stop();
  for (const p of procs) log(p.output().split('\n').slice(0, 4).join(' | ').slice(0, 600));

  const deploys = phases.filter((p) => p.phase.startsWith('deploy'));
  const result = {
    benchmark: 'deploy', startedAt: startedAt.toISOString(), source: gitState(), machine: { ...machine, loadAvgAtEnd: loadAvg() },
    database: { kind: server.kind, ...server.info },
    options: opts,
    floorDefinition: 'per BMC, the latency the simulator imposed on its requests plus its boots (one request at a time); a run\'s floor is the sum over admission waves (nodes in order, max_parallel at a time) of the wave\'s slowest chain',
    target: 'wall <= 1.3 x floor for every deploy',
    targetMet: deploys.every((p) => p.state === 'succeeded' && p.wallOverFloor <= 1.3),
    phases,
  };
  process.stdout.write(`${table([
    ['phase', 'state', 'wall s', 'floor s', 'wall/floor', 'step p50 s', 'step p99 s', 'most running', 'req/node', 'conductor CPU s', 'conductor peak RSS MiB', 'API CPU s', 'simulator CPU s', 'machine busy CPU s', 'heartbeats/s', 'load (start → end)'],
    ...phases.map((p) => {
      const conductors = Object.entries(p.cpu).filter(([k]) => k.startsWith('conductor'));
      return [p.phase, p.state, fmt(p.wallS, 2), fmt(p.floorS, 2), fmt(p.wallOverFloor, 2), fmt(p.nodeStepS.p50Ms, 2), fmt(p.nodeStepS.p99Ms, 2), String(p.mostRunning),
        fmt(p.requestsPerNode), conductors.map(([, v]) => fmt(v.cpuS)).join(' + '), conductors.map(([, v]) => fmt(v.maxRssMiB, 0)).join(' / '),
        fmt(p.cpu.api?.cpuS ?? NaN), fmt(p.cpu.simulator?.cpuS ?? NaN), fmt(p.machineBusyCpuS),
        p.agent ? fmt(p.agent.heartbeatsPerS, 1) : '-',
        `${p.loadAverage.start[0]} → ${p.loadAverage.end[0]}`];
    }),
  ])}\n`);
  for (const p of phases) {
    // One core's worth of simulator: the run measured the simulator, not the conductors.
    const simShare = (p.cpu.simulator?.cpuS ?? 0) / p.wallS;
    if (simShare > 0.7) log(`${p.phase}: WARNING the simulator used ${fmt(simShare * 100, 0)} % of a core; its own work may set the wall time`);
  }
  log(`target (wall <= 1.3 x floor on every deploy): ${result.targetMet ? 'met' : 'MISSED'}`);
  log(`results: ${await writeResults(direct ? 'deploy-direct' : 'deploy', startedAt, result)}`);
  await db.drop();
  return result.targetMet ? 0 : 1;
}

runBenchmark(main);
