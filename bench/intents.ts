/**
 * Intent benchmark (not a test): one `galvanic api` process and K `galvanic conductor`
 * processes on a fresh database with fake-hardware nodes, for each K in --conductors.
 *
 *   node dist/bench/intents.js [--nodes N] [--intents M] [--conductors 1,3] ...
 *
 * Throughput: M power intents (PUT /v1/nodes/{uuid}/states/power, no wait), M/N per node
 * with alternating targets, from C concurrent keep-alive clients. Measures the accept rate
 * and intents completed per second from the first submit until the database shows no open
 * intent (polled every 250 ms), and checks that every intent succeeded, in per-node order.
 *
 * Latency: with the system idle, single power requests one at a time to distinct random
 * nodes; accept→start is started_at − created_at of each intent (both Postgres' clock).
 *
 * --explain-claim instead fills the queue with M queued intents (SQL, no processes) and
 * prints EXPLAIN ANALYZE of the conductor's claim statement (db/intent-claims.ts claimIntents).
 *
 * Results: a table on stdout and bench/results/intents-<timestamp>.json and intents-latest.json.
 */
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import type { Knex } from 'knex';
import { loadConfig } from '../common/config.js';
import { SCHEMA } from '../common/config-schema.js';
import { HashRing } from '../common/hash-ring.js';
import { createKnex } from '../db/connection.js';
import { claimIntents, type ClaimScope } from '../db/intent-claims.js';
import { nodeMapper } from '../db/nodes.js';
import { onCleanup, runBenchmark } from './lib/cleanup.js';
import { createBenchDatabase, PG_FAST_FLAGS, startDatabaseServer, type DatabaseServer } from './lib/database.js';
import { API_VERSION, Client, Errors, runConcurrently, waitForApi } from './lib/http.js';
import { spawnGalvanic, watchCpu, type GalvanicProcess } from './lib/proc.js';
import {
  benchLog, calibrate, fmt, newestMtime, freePort, gitState, loadAvg, machineInfo, parseBenchArgs, positiveInt, redactUrl, ROOT, round2, sleep, summarize,
  table,
  writeResults, type LatencySummary,
} from './lib/util.js';

const CONFIG_FILE = path.join(ROOT, 'etc/galvanic.conf.sample');
const SERVER_LOG_LEVEL = 'warn';
const POLL_MS = 250;

const TARGETS = {
  /** End-to-end intents completed per second with one conductor. */
  intentsPerSecondOneConductor: 2626,
  /** p50 accept→start at light load. */
  acceptToStartP50Ms: 20,
  /** Several conductors' end-to-end intents/s, at least this share of one conductor's. */
  scalingThroughputShare: 0.9,
  /** Postgres CPU per intent with several conductors, at most this many times one conductor's. */
  scalingPostgresCpuRatio: 1.2,
};

// ---------------------------------------------------------------------------------------------
// Options

interface Options {
  nodes: number;
  intents: number;
  conductors: number[];
  concurrency: number;
  latencyRequests: number;
  latencyGapMs: number;
  workers: number | undefined;
  poolMax: number | undefined;
  pgFast: boolean;
  pgStatStatements: boolean;
  cpuProf: string | undefined;
  stallTimeoutS: number;
  phases: Set<Phase>;
  explainClaim: boolean;
  strict: boolean;
  resultsName: string;
}

const USAGE = `Usage: node dist/bench/intents.js [options]

  --nodes N               fake-hardware nodes, inserted with SQL (default 10000)
  --intents M             power intents in the throughput phase, M/N per node (default 100000)
  --conductors LIST       conductor counts to run the benchmark with, comma-separated (default 1,3)
                          (each K>1 is compared with the K=1 runs beside it: 1,3,1,5,1 evens out drift)
  --concurrency C         concurrent HTTP clients in the throughput phase (default 64)
  --latency-requests L    single requests in the latency phase (default 500)
  --latency-gap-ms G      pause between two latency requests (default 5)
  --phases LIST           throughput,latency,idle (default throughput,latency; idle: each process's CPU
                          over 30 s with nothing to do, before the other phases)
  --workers W             GALVANIC_CONDUCTOR__WORKERS_POOL_SIZE (default: the config's, ${SCHEMA.conductor.workers_pool_size.default})
  --pool P                GALVANIC_DATABASE__MAX_POOL_SIZE of api and conductors (default: the config's, ${SCHEMA.database.max_pool_size.default})
  --pg-fast               embedded Postgres without fsync/synchronous_commit (default: durable)
  --pg-stat-statements    embedded Postgres with pg_stat_statements; report the top statements per phase
  --cpu-prof DIR          run api and conductors with --cpu-prof; profiles go to DIR
  --stall-timeout S       give up when no intent finishes for S seconds (default 120)
  --explain-claim         only EXPLAIN ANALYZE the claim query with M queued intents, then exit
  --strict                exit 1 when a target is missed (default: only on errors)
  --results-name NAME     results go to bench/results/NAME-latest.json (default intents)

Environment: DATABASE_URL=postgres://... uses that server instead of an embedded one.`;

const PHASES = ['throughput', 'latency', 'idle'] as const;
type Phase = (typeof PHASES)[number];

function parseOptions(argv: string[]): Options | undefined {
  const values = parseBenchArgs(
    argv, USAGE,
    ['nodes', 'intents', 'conductors', 'concurrency', 'latency-requests', 'latency-gap-ms', 'phases', 'workers', 'pool', 'cpu-prof', 'stall-timeout', 'results-name'],
    ['pg-fast', 'pg-stat-statements', 'explain-claim', 'strict'],
  );
  if (!values) return undefined;
  const conductors = (values.conductors ?? '1,3').split(',').map((s) => positiveInt('conductors', s.trim(), 1));
  const phases = new Set((values.phases ?? 'throughput,latency').split(',').map((s) => s.trim()));
  for (const p of phases) if (!PHASES.includes(p as Phase)) throw new Error(`--phases: unknown phase "${p}"`);
  return {
    nodes: positiveInt('nodes', values.nodes, 10_000),
    intents: positiveInt('intents', values.intents, 100_000),
    conductors,
    concurrency: positiveInt('concurrency', values.concurrency, 64),
    latencyRequests: positiveInt('latency-requests', values['latency-requests'], 500),
    latencyGapMs: positiveInt('latency-gap-ms', values['latency-gap-ms'], 5, true),
    workers: values.workers === undefined ? undefined : positiveInt('workers', values.workers, 100),
    poolMax: values.pool === undefined ? undefined : positiveInt('pool', values.pool, 10),
    pgFast: values['pg-fast'] ?? false,
    pgStatStatements: values['pg-stat-statements'] ?? false,
    cpuProf: values['cpu-prof'] === undefined ? undefined : path.resolve(values['cpu-prof']),
    stallTimeoutS: positiveInt('stall-timeout', values['stall-timeout'], 120),
    phases: phases as Set<Phase>,
    explainClaim: values['explain-claim'] ?? false,
    strict: values.strict ?? false,
    resultsName: values['results-name'] ?? 'intents',
  };
}

// ---------------------------------------------------------------------------------------------
// Setup: nodes, processes

interface BenchNode {
  id: number;
  uuid: string;
}

/** Inserts `count` fake-hardware nodes in batches, with the columns createNode would write. */
async function insertNodes(knex: Knex, count: number): Promise<BenchNode[]> {
  const out: BenchNode[] = [];
  const BATCH = 1000;
  for (let first = 0; first < count; first += BATCH) {
    const rows = [];
    for (let i = first; i < Math.min(count, first + BATCH); i++) {
      rows.push(nodeMapper.toRow({
        uuid: randomUUID(),
        name: `bench-node-${String(i).padStart(6, '0')}`,
        driver: 'fake-hardware',
        powerInterface: 'fake',
        managementInterface: 'fake',
        consoleInterface: 'no-console',
        provisionState: 'enroll',
        powerState: 'power off',
      }));
    }
    const inserted = (await knex('nodes').insert(rows).returning(['id', 'uuid'])) as BenchNode[];
    out.push(...inserted);
  }
  await knex.raw('ANALYZE nodes');
  return out;
}

interface Fleet {
  /** The embedded Postgres' postmaster, for CPU accounting. */
  postmasterPid?: number;
  api: GalvanicProcess;
  apiPort: number;
  conductors: GalvanicProcess[];
  pids: Record<string, number>;
  stop(): Promise<void>;
  output(): string;
}

function serverEnv(opts: Options, dbUrl: string): Record<string, string> {
  const env: Record<string, string> = {
    GALVANIC_DATABASE__CONNECTION: dbUrl,
    GALVANIC_DEFAULT__LOG_LEVEL: SERVER_LOG_LEVEL,
    GALVANIC_CONDUCTOR__SYNC_POWER_STATE_INTERVAL: '0',
  };
  if (opts.workers !== undefined) env.GALVANIC_CONDUCTOR__WORKERS_POOL_SIZE = String(opts.workers);
  if (opts.poolMax !== undefined) env.GALVANIC_DATABASE__MAX_POOL_SIZE = String(opts.poolMax);
  return env;
}

const conductorHost = (k: number, i: number) => `bench-conductor-${k}-${i + 1}`;

async function startFleet(opts: Options, k: number, dbUrl: string, knex: Knex, log: (m: string) => void): Promise<Fleet> {
  const env = serverEnv(opts, dbUrl);
  const apiPort = await freePort();
  const api = await spawnGalvanic({
    label: 'api', command: 'api', env: { ...env, GALVANIC_API__PORT: String(apiPort) }, cpuProfDir: opts.cpuProf,
  });
  const conductors: GalvanicProcess[] = [];
  for (let i = 0; i < k; i++) {
    conductors.push(await spawnGalvanic({
      label: `conductor-${i + 1}`,
      command: 'conductor',
      // No port: a conductor does not listen (one picked while the API was starting could be
      // the API's own, which it then failed to bind).
      env: { ...env, GALVANIC_DEFAULT__HOST: conductorHost(k, i) },
      cpuProfDir: opts.cpuProf,
      stopGraceMs: 90_000,
    }));
  }
  const all = [api, ...conductors];
  const output = () => all.map((p) => p.output()).join('\n');
  const died = () => {
    const dead = all.find((p) => p.proc.exitCode !== null || p.proc.signalCode !== null);
    return dead ? `galvanic ${dead.label} exited early (${dead.proc.exitCode ?? dead.proc.signalCode}):\n${dead.output()}` : undefined;
  };
  const stop = async () => {
    // Conductors first (they drain and go offline), then the API.
    await Promise.all(conductors.map((c) => c.stop()));
    await api.stop();
  };
  try {
    await waitForApi(apiPort, 60_000, died);
    // Conductors are ready once registered; their hash rings agree after one heartbeat.
    const hosts = conductors.map((_, i) => conductorHost(k, i));
    const deadline = Date.now() + 60_000;
    for (;;) {
      const why = died();
      if (why) throw new Error(why);
      const rows = (await knex('conductors').whereIn('hostname', hosts).where('online', true).count({ n: '*' })) as Array<{ n: number }>;
      if (Number(rows[0].n) === k) break;
      if (Date.now() > deadline) throw new Error(`conductors did not register within 60 s:\n${output()}`);
      await sleep(100);
    }
    if (k > 1) {
      const hb = loadConfig({ path: CONFIG_FILE, env: { ...process.env, ...env } }).conductor.heartbeat_interval;
      log(`${k} conductors registered; waiting ${hb + 1} s (one heartbeat) for their hash rings to agree`);
      await sleep((hb + 1) * 1000);
    }
  } catch (err) {
    await stop();
    throw err;
  }
  const pids: Record<string, number> = { api: api.pid };
  for (const c of conductors) pids[c.label] = c.pid;
  log(`galvanic api (pid ${api.pid}) on 127.0.0.1:${apiPort}, ${k} conductor(s) (pids ${conductors.map((c) => c.pid).join(', ')})`);
  return { api, apiPort, conductors, pids, stop, output, postmasterPid: undefined };
}

// ---------------------------------------------------------------------------------------------
// Database-side measurements

async function openCount(knex: Knex): Promise<number> {
  const { rows } = (await knex.raw('SELECT count(*) AS n FROM intents WHERE finished_at IS NULL')) as { rows: Array<{ n: number }> };
  return Number(rows[0].n);
}

interface StatementStat {
  query: string;
  calls: number;
  totalMs: number;
  meanMs: number;
  maxMs: number;
  /** Planning time of all calls (a prepared statement plans once, or rarely). */
  planMs: number;
  /** How many times it was planned, and the mean planning time of those. */
  plans: number;
  meanPlanMs: number;
  rows: number;
}

async function resetStatements(knex: Knex, enabled: boolean): Promise<void> {
  if (enabled) await knex.raw('SELECT pg_stat_statements_reset()');
}

/**
 * What the database did in a phase, counted whole: every statement (pg_stat_statements, this
 * database, the bench's own polling included), the transactions committed, the WAL written.
 * Divided by the intents, these change only with how the work is batched, not with the load.
 */
interface DatabaseWork {
  statements?: { calls: number; execMs: number; planMs: number };
  commits: number;
  walRecords: number;
  walBytes: number;
}

async function databaseWork(knex: Knex, statements: boolean): Promise<DatabaseWork> {
  await knex.raw('SELECT pg_stat_force_next_flush()').catch(() => undefined);
  const { rows: [db] } = (await knex.raw(
    `SELECT xact_commit AS commits, (SELECT wal_records FROM pg_stat_wal) AS records, (SELECT wal_bytes FROM pg_stat_wal) AS bytes
       FROM pg_stat_database WHERE datname = current_database()`,
  )) as { rows: Array<{ commits: string; records: string; bytes: string }> };
  const out: DatabaseWork = { commits: Number(db.commits), walRecords: Number(db.records), walBytes: Number(db.bytes) };
  if (statements) {
    const { rows: [s] } = (await knex.raw(
      `SELECT coalesce(sum(calls), 0) AS calls, coalesce(sum(total_exec_time), 0) AS exec, coalesce(sum(total_plan_time), 0) AS plan
         FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`,
    )) as { rows: Array<{ calls: string; exec: number; plan: number }> };
    out.statements = { calls: Number(s.calls), execMs: round2(Number(s.exec)), planMs: round2(Number(s.plan)) };
  }
  return out;
}

function diffWork(after: DatabaseWork, before: DatabaseWork): DatabaseWork {
  return {
    // pg_stat_statements was reset at the start of the phase.
    statements: after.statements,
    commits: after.commits - before.commits,
    walRecords: after.walRecords - before.walRecords,
    walBytes: after.walBytes - before.walBytes,
  };
}

/** The statements of this database by total execution time. */
async function topStatements(knex: Knex, enabled: boolean, limit = 15): Promise<StatementStat[] | undefined> {
  if (!enabled) return undefined;
  const { rows } = (await knex.raw(
    `SELECT query, calls, total_exec_time AS total, mean_exec_time AS mean, max_exec_time AS max, total_plan_time AS plan, plans,
            mean_plan_time AS mean_plan, rows
       FROM pg_stat_statements
      WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
      ORDER BY total_exec_time + total_plan_time DESC LIMIT ?`,
    [limit],
  )) as { rows: Array<{ query: string; calls: number; total: number; mean: number; max: number; plan: number; plans: number; mean_plan: number; rows: number }> };
  return rows.map((r) => ({
    query: r.query.replace(/\s+/g, ' ').slice(0, 240),
    calls: Number(r.calls),
    totalMs: round2(r.total),
    meanMs: round2(r.mean),
    maxMs: round2(r.max),
    planMs: round2(r.plan),
    plans: Number(r.plans),
    meanPlanMs: Math.round(r.mean_plan * 1000) / 1000,
    rows: Number(r.rows),
  }));
}

// ---------------------------------------------------------------------------------------------
// Throughput phase

interface ThroughputResult {
  intents: number;
  concurrency: number;
  accept: {
    accepted: number;
    errors: number;
    errorSamples: string[];
    wallS: number;
    requestsPerSecond: number;
    latency: LatencySummary;
  };
  endToEnd: {
    /** First submit to the first poll that saw no open intent (bench clock). */
    wallS: number;
    intentsPerSecond: number;
    /** max(finished_at) − min(created_at), Postgres' clock. */
    dbSpanS: number;
    dbIntentsPerSecond: number;
    /** Intents still open when the last request was answered, and how fast they drained. */
    backlogAtLastAccept: number;
    completedWhileSubmitting: number;
    completionRateWhileSubmitting: number;
    drainS: number;
    drainRate: number;
  };
  verification: {
    byState: Record<string, number>;
    allSucceeded: boolean;
    retried: number;
    orderViolations: number;
    wrongFinalPowerState: number;
    reservedNodesLeft: number;
    byConductor: Record<string, number>;
    ok: boolean;
  };
  /**
   * CPU milliseconds per intent of api, conductors, Postgres and the bench client together
   * (less sensitive to other work on the machine than the rates), and the rate this machine's
   * CPUs could sustain at that cost if nothing else ran.
   */
  cpuMsPerIntent: { api: number; conductors: number; postgres: number; benchClient: number; total: number; cpuBoundCeilingPerSecond: number };
  /** Elapsed seconds → open intents, polled every POLL_MS (thinned to at most 400 points). */
  openSamples: Array<[number, number]>;
  resources: ReturnType<ReturnType<typeof watchCpu>['stop']>;
  topStatements?: StatementStat[];
  /** Row writes by table during the phase; HOT updates touch no index, the others update every index of the table. */
  tableWrites: Record<string, TableWrites>;
  /** Statements, commits and WAL of the phase (statements with --pg-stat-statements only). */
  databaseWork: DatabaseWork;
}

interface TableWrites {
  inserts: number;
  updates: number;
  hotUpdates: number;
  indexes: number;
  autovacuums: number;
}

async function tableWrites(knex: Knex, settle = false): Promise<Record<string, TableWrites>> {
  // Backends report their counts at most once a second, and an idle one only after 10 s.
  if (settle) await sleep(11_000);
  // Postgres 15 or later; older servers report this backend's counts a little later.
  await knex.raw('SELECT pg_stat_force_next_flush()').catch(() => undefined);
  const { rows } = (await knex.raw(
    `SELECT relname, n_tup_ins AS ins, n_tup_upd AS upd, n_tup_hot_upd AS hot, autovacuum_count AS av,
            (SELECT count(*) FROM pg_index x WHERE x.indrelid = t.relid) AS idx
       FROM pg_stat_user_tables t WHERE relname IN ('nodes', 'intents', 'node_history')`,
  )) as { rows: Array<{ relname: string; ins: number; upd: number; hot: number; av: number; idx: number }> };
  const out: Record<string, TableWrites> = {};
  for (const r of rows) {
    out[r.relname] = { inserts: Number(r.ins), updates: Number(r.upd), hotUpdates: Number(r.hot), indexes: Number(r.idx), autovacuums: Number(r.av) };
  }
  return out;
}

function diffWrites(after: Record<string, TableWrites>, before: Record<string, TableWrites>): Record<string, TableWrites> {
  const out: Record<string, TableWrites> = {};
  for (const [t, a] of Object.entries(after)) {
    const b = before[t] ?? { inserts: 0, updates: 0, hotUpdates: 0, indexes: a.indexes, autovacuums: 0 };
    out[t] = { inserts: a.inserts - b.inserts, updates: a.updates - b.updates, hotUpdates: a.hotUpdates - b.hotUpdates, indexes: a.indexes, autovacuums: a.autovacuums - b.autovacuums };
  }
  return out;
}

async function throughputPhase(
  opts: Options, fleet: Fleet, knex: Knex, nodes: BenchNode[], log: (m: string) => void,
): Promise<ThroughputResult> {
  const total = opts.intents;
  const n = nodes.length;
  const client = new Client(fleet.apiPort, opts.concurrency);
  const errors = new Errors();
  const latencies: number[] = [];
  let accepted = 0;
  let answered = 0;
  await resetStatements(knex, opts.pgStatStatements);
  const writes0 = await tableWrites(knex);
  const work0 = await databaseWork(knex, opts.pgStatStatements);
  const watch = watchCpu(fleet.pids, fleet.postmasterPid);

  const t0 = performance.now();
  let lastAcceptAt = NaN;
  const samples: Array<[number, number]> = [];
  let submitting = true;
  let backlogAtLastAccept = NaN;
  let endAt = NaN;

  // The poller: open intents every POLL_MS until all requests are answered and none is open.
  const poller = (async () => {
    let lastOpen = -1;
    let lastProgress = performance.now();
    for (;;) {
      const before = performance.now();
      const open = await openCount(knex);
      const now = performance.now();
      samples.push([round2((now - t0) / 1000), open]);
      if (open !== lastOpen) {
        lastOpen = open;
        lastProgress = now;
      }
      if (!submitting && Number.isNaN(backlogAtLastAccept)) backlogAtLastAccept = open;
      if (!submitting && open === 0) {
        endAt = now;
        return;
      }
      if (!submitting && now - lastProgress > opts.stallTimeoutS * 1000) {
        throw new Error(`no intent finished for ${opts.stallTimeoutS} s; ${open} still open\n${fleet.output()}`);
      }
      const progress = samples.length % Math.round(5000 / POLL_MS) === 0;
      if (progress) log(`  ${((now - t0) / 1000).toFixed(1)} s: ${answered}/${total} answered, ${open} open`);
      await sleep(Math.max(0, POLL_MS - (performance.now() - before)));
    }
  })();

  // Observed below; this only keeps an early database error from being an unhandled rejection.
  poller.catch(() => undefined);
  try {
    await runConcurrently(total, opts.concurrency, async (i) => {
      const node = nodes[i % n];
      const round = Math.floor(i / n);
      const body = JSON.stringify({ target: round % 2 === 0 ? 'power on' : 'power off' });
      try {
        const res = await client.request('PUT', `/v1/nodes/${node.uuid}/states/power`, body);
        latencies.push(res.ms);
        if (res.status === 202) accepted += 1;
        else errors.add(`PUT ${node.uuid}: HTTP ${res.status} ${res.body}`);
      } catch (err) {
        errors.add(`PUT ${node.uuid}: ${(err as Error).message}`);
      }
      answered += 1;
    });
    lastAcceptAt = performance.now();
  } finally {
    submitting = false;
    client.close();
  }
  const acceptWall = (lastAcceptAt - t0) / 1000;
  log(`  all ${total} requests answered in ${acceptWall.toFixed(1)} s (${accepted} accepted); waiting for the queue to drain`);
  await poller;
  const resources = watch.stop();
  const top = await topStatements(knex, opts.pgStatStatements);
  const writes = diffWrites(await tableWrites(knex, true), writes0);
  const work = diffWork(await databaseWork(knex, opts.pgStatStatements), work0);
  const e2eWall = (endAt - t0) / 1000;

  // What finished while requests were still being sent: accepted minus the backlog at the end.
  const completedWhileSubmitting = Math.max(0, accepted - backlogAtLastAccept);
  const drainS = (endAt - lastAcceptAt) / 1000;

  // ---- verification, in the database
  const byState: Record<string, number> = {};
  for (const r of (await knex('intents').select('state').count({ n: '*' }).groupBy('state')) as Array<{ state: string; n: number }>) {
    byState[r.state] = Number(r.n);
  }
  const one = async (sql: string): Promise<number> => Number(((await knex.raw(sql)) as { rows: Array<{ n: number }> }).rows[0].n);
  const retried = await one('SELECT count(*) AS n FROM intents WHERE attempts > 1');
  // finished_at is the start of the outcome's transaction, which releases the node; the next
  // intent's claim (started_at) can only come after that commit.
  const orderViolations = await one(`SELECT count(*) AS n FROM (
      SELECT started_at, lag(finished_at) OVER (PARTITION BY node_id ORDER BY seq) AS prev_finished FROM intents) x
     WHERE started_at IS NULL OR started_at < prev_finished`);
  const wrongFinalPowerState = await one(`SELECT count(*) AS n FROM nodes n
      JOIN LATERAL (SELECT args->>'target' AS t FROM intents i WHERE i.node_id = n.id ORDER BY seq DESC LIMIT 1) l ON true
     WHERE n.power_state IS DISTINCT FROM l.t`);
  const reservedNodesLeft = await one('SELECT count(*) AS n FROM nodes WHERE reservation IS NOT NULL');
  const byConductor: Record<string, number> = {};
  for (const r of (await knex('intents').select('conductor').count({ n: '*' }).groupBy('conductor').orderBy('conductor')) as Array<{ conductor: string | null; n: number }>) {
    byConductor[r.conductor ?? '(none)'] = Number(r.n);
  }
  const span = ((await knex.raw(
    'SELECT extract(epoch FROM max(finished_at) - min(created_at)) AS s FROM intents',
  )) as { rows: Array<{ s: string }> }).rows[0].s;
  const dbSpanS = Number(span);
  const allSucceeded = byState.succeeded === total && Object.keys(byState).length === 1;

  const perIntent = (cpuS: number) => round2((cpuS * 1000) / total);
  const conductorCpuS = Object.entries(resources.processes).filter(([l]) => l.startsWith('conductor')).reduce((a, [, v]) => a + v.cpuS, 0);
  const apiCpuS = resources.processes.api?.cpuS ?? NaN;
  const totalCpuS = apiCpuS + conductorCpuS + resources.postgresCpuS + resources.benchClientCpuS;
  const cpuMsPerIntent = {
    api: perIntent(apiCpuS),
    conductors: perIntent(conductorCpuS),
    postgres: perIntent(resources.postgresCpuS),
    benchClient: perIntent(resources.benchClientCpuS),
    total: perIntent(totalCpuS),
    cpuBoundCeilingPerSecond: round2((machineInfo().cpuCount * total) / totalCpuS),
  };

  return {
    intents: total,
    concurrency: opts.concurrency,
    cpuMsPerIntent,
    accept: {
      accepted,
      errors: errors.count,
      errorSamples: errors.samples,
      wallS: round2(acceptWall),
      requestsPerSecond: round2(answered / acceptWall),
      latency: summarize(latencies),
    },
    endToEnd: {
      wallS: round2(e2eWall),
      intentsPerSecond: round2(byState.succeeded === undefined ? 0 : byState.succeeded / e2eWall),
      dbSpanS: round2(dbSpanS),
      dbIntentsPerSecond: round2((byState.succeeded ?? 0) / dbSpanS),
      backlogAtLastAccept,
      completedWhileSubmitting,
      completionRateWhileSubmitting: round2(completedWhileSubmitting / acceptWall),
      drainS: round2(drainS),
      drainRate: round2(drainS > 0 ? backlogAtLastAccept / drainS : NaN),
    },
    verification: {
      byState,
      allSucceeded,
      retried,
      orderViolations,
      wrongFinalPowerState,
      reservedNodesLeft,
      byConductor,
      ok: allSucceeded && errors.count === 0 && orderViolations === 0 && wrongFinalPowerState === 0 && reservedNodesLeft === 0,
    },
    openSamples: thin(samples, 400),
    resources,
    topStatements: top,
    tableWrites: writes,
    databaseWork: work,
  };
}

/** At most `max` evenly spaced entries of `xs`, always with the last one. */
function thin<T>(xs: T[], max: number): T[] {
  if (xs.length <= max) return xs;
  const step = Math.ceil(xs.length / max);
  const out = xs.filter((_, i) => i % step === 0);
  if ((xs.length - 1) % step !== 0) out.push(xs[xs.length - 1]);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Latency phase

interface LatencyResult {
  requests: number;
  gapMs: number;
  errors: number;
  errorSamples: string[];
  httpAccept: LatencySummary;
  acceptToStart: LatencySummary;
  acceptToFinished: LatencySummary;
  startToFinished: LatencySummary;
  /**
   * accept→start taken apart with the client's clock (same host, same wall clock as Postgres):
   * request sent → accepting transaction began (created_at), → 202 received, → claim began
   * (started_at; negative when the claim began before the response arrived).
   */
  breakdown: { sendToCreated: LatencySummary; createdToResponse: LatencySummary; responseToStart: LatencySummary };
  notSucceeded: number;
  deadTuplesBefore: Record<string, number>;
  resources: ReturnType<ReturnType<typeof watchCpu>['stop']>;
  topStatements?: StatementStat[];
}

async function latencyPhase(opts: Options, fleet: Fleet, knex: Knex, nodes: BenchNode[], log: (m: string) => void): Promise<LatencyResult> {
  // Idle first: nothing open, and a moment for the processes to settle.
  for (let i = 0; (await openCount(knex)) > 0; i++) {
    if (i > opts.stallTimeoutS * 4) throw new Error('the queue did not drain before the latency phase');
    await sleep(250);
  }
  await sleep(2000);
  const dead: Record<string, number> = {};
  for (const r of (await knex.raw("SELECT relname, n_dead_tup FROM pg_stat_user_tables WHERE relname IN ('intents','nodes','node_history')")).rows as Array<{ relname: string; n_dead_tup: number }>) {
    dead[r.relname] = Number(r.n_dead_tup);
  }
  await resetStatements(knex, opts.pgStatStatements);

  // Distinct random nodes (while there are enough), so no request waits behind another.
  const order = nodes.map((_, i) => i);
  for (let i = order.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [order[i], order[j]] = [order[j], order[i]];
  }
  const client = new Client(fleet.apiPort, 1);
  const errors = new Errors();
  const http: number[] = [];
  const uuids: string[] = [];
  const clientTimes = new Map<string, { sent: number; received: number }>();
  const wallNow = () => performance.timeOrigin + performance.now();
  const watch = watchCpu(fleet.pids, fleet.postmasterPid);
  try {
    for (let j = 0; j < opts.latencyRequests; j++) {
      const node = nodes[order[j % order.length]];
      const target = Math.random() < 0.5 ? 'power on' : 'power off';
      try {
        const sent = wallNow();
        const res = await client.request('PUT', `/v1/nodes/${node.uuid}/states/power`, JSON.stringify({ target }));
        const received = wallNow();
        if (res.status !== 202) {
          errors.add(`PUT ${node.uuid}: HTTP ${res.status} ${res.body}`);
        } else {
          http.push(res.ms);
          const m = /\/v1\/intents\/([0-9a-f-]{36})$/.exec(String(res.headers.location ?? ''));
          if (m) {
            uuids.push(m[1]);
            clientTimes.set(m[1], { sent, received });
          }
          else errors.add(`PUT ${node.uuid}: no intent in Location "${res.headers.location}"`);
        }
      } catch (err) {
        errors.add(`PUT ${node.uuid}: ${(err as Error).message}`);
      }
      if (opts.latencyGapMs > 0) await sleep(opts.latencyGapMs);
    }
  } finally {
    client.close();
  }
  for (let i = 0; (await openCount(knex)) > 0; i++) {
    if (i > opts.stallTimeoutS * 4) throw new Error('latency-phase intents did not finish');
    await sleep(100);
  }
  const resources = watch.stop();
  const top = await topStatements(knex, opts.pgStatStatements);
  const { rows } = (await knex.raw(
    `SELECT uuid, state,
            extract(epoch FROM created_at) * 1000 AS created_epoch_ms,
            extract(epoch FROM started_at) * 1000 AS started_epoch_ms,
            extract(epoch FROM started_at - created_at) * 1000 AS start_ms,
            extract(epoch FROM finished_at - created_at) * 1000 AS finish_ms,
            extract(epoch FROM finished_at - started_at) * 1000 AS run_ms
       FROM intents WHERE uuid = ANY(?::uuid[])`,
    [uuids],
  )) as { rows: Array<{
    uuid: string; state: string; created_epoch_ms: string; started_epoch_ms: string | null; start_ms: string | null; finish_ms: string | null; run_ms: string | null;
  }> };
  const sendToCreated: number[] = [];
  const createdToResponse: number[] = [];
  const responseToStart: number[] = [];
  for (const r of rows) {
    const c = clientTimes.get(r.uuid);
    if (!c) continue;
    const created = Number(r.created_epoch_ms);
    sendToCreated.push(created - c.sent);
    createdToResponse.push(c.received - created);
    if (r.started_epoch_ms !== null) responseToStart.push(Number(r.started_epoch_ms) - c.received);
  }
  const col = (k: 'start_ms' | 'finish_ms' | 'run_ms') => rows.filter((r) => r[k] !== null).map((r) => Number(r[k]));
  log(`  ${uuids.length} intents accepted; ${rows.filter((r) => r.state === 'succeeded').length} succeeded`);
  return {
    requests: opts.latencyRequests,
    gapMs: opts.latencyGapMs,
    errors: errors.count,
    errorSamples: errors.samples,
    httpAccept: summarize(http),
    acceptToStart: summarize(col('start_ms')),
    acceptToFinished: summarize(col('finish_ms')),
    startToFinished: summarize(col('run_ms')),
    breakdown: { sendToCreated: summarize(sendToCreated), createdToResponse: summarize(createdToResponse), responseToStart: summarize(responseToStart) },
    notSucceeded: rows.filter((r) => r.state !== 'succeeded').length + (uuids.length - rows.length),
    deadTuplesBefore: dead,
    resources,
    topStatements: top,
  };
}

// ---------------------------------------------------------------------------------------------
// One run with K conductors

interface RunResult {
  conductors: number;
  /** The code the processes of this run were started from (others may change it during a long run). */
  source?: ReturnType<typeof gitState>;
  /** When the compiled files the processes load were last written (a rebuild mid-run changes the code under test). */
  distBuiltAt?: string;
  database: string;
  setup: { nodeInsertS: number; startS: number };
  throughput?: ThroughputResult;
  latency?: LatencyResult;
  idle?: IdleResult;
  processOutputTail?: string;
}

const IDLE_S = 30;

interface IdleResult {
  seconds: number;
  /** CPU seconds of each process while nothing was queued. */
  cpuS: Record<string, number>;
}

/**
 * What the processes cost with nothing to do (periodic tasks, timers): paid once per process,
 * so K conductors pay it K times whatever the work.
 */
async function idlePhase(fleet: Fleet): Promise<IdleResult> {
  // The start-up's last writes (registration, first heartbeats) settle first.
  await new Promise((r) => setTimeout(r, 5000));
  const watch = watchCpu(fleet.pids);
  await new Promise((r) => setTimeout(r, IDLE_S * 1000));
  const usage = watch.stop();
  return { seconds: IDLE_S, cpuS: Object.fromEntries(Object.entries(usage.processes).map(([label, u]) => [label, u.cpuS])) };
}

async function runWithConductors(opts: Options, server: DatabaseServer, k: number, log: (m: string) => void): Promise<RunResult> {
  const db = await createBenchDatabase(server, 'galvanic_bench_intents', log);
  const knex = createKnex(db.url, { poolMax: 3, applicationName: 'galvanic-bench' });
  const closeKnex = onCleanup('bench pool', () => knex.destroy());
  try {
    if (opts.pgStatStatements) await knex.raw('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
    let t = performance.now();
    const nodes = await insertNodes(knex, opts.nodes);
    const nodeInsertS = round2((performance.now() - t) / 1000);
    log(`${nodes.length} nodes inserted in ${nodeInsertS} s`);
    t = performance.now();
    const distBuiltAt = newestMtime(['api', 'conductor', 'db', 'drivers', 'cli', 'common'].map((d) => path.join(ROOT, 'dist', d)));
    const fleet = await startFleet(opts, k, db.url, knex, log);
    fleet.postmasterPid = server.postmasterPid;
    const startS = round2((performance.now() - t) / 1000);
    const result: RunResult = { conductors: k, source: gitState(), distBuiltAt, database: db.name, setup: { nodeInsertS, startS } };
    try {
      if (opts.phases.has('idle')) {
        log(`K=${k} idle: each process's CPU over ${IDLE_S} s with nothing queued`);
        result.idle = await idlePhase(fleet);
        log(`  ${Object.entries(result.idle.cpuS).map(([l, c]) => `${l} ${fmt(c, 2)} s`).join(', ')}`);
      }
      if (opts.phases.has('throughput')) {
        log(`K=${k} throughput: ${opts.intents} power intents on ${nodes.length} nodes from ${opts.concurrency} clients`);
        result.throughput = await throughputPhase(opts, fleet, knex, nodes, log);
        const tp = result.throughput;
        log(`  accept ${fmt(tp.accept.requestsPerSecond)} req/s; end to end ${fmt(tp.endToEnd.intentsPerSecond)} intents/s `
          + `(${fmt(tp.endToEnd.wallS)} s); verification ${tp.verification.ok ? 'ok' : `FAILED ${JSON.stringify(tp.verification)}`}`);
      }
      if (opts.phases.has('latency')) {
        log(`K=${k} latency: ${opts.latencyRequests} single requests, ${opts.latencyGapMs} ms apart`);
        result.latency = await latencyPhase(opts, fleet, knex, nodes, log);
        const l = result.latency;
        log(`  accept→start p50 ${fmt(l.acceptToStart.p50Ms, 2)} ms, p99 ${fmt(l.acceptToStart.p99Ms, 2)} ms; HTTP p50 ${fmt(l.httpAccept.p50Ms, 2)} ms; `
          + `p50s: send→created ${fmt(l.breakdown.sendToCreated.p50Ms, 2)}, created→202 ${fmt(l.breakdown.createdToResponse.p50Ms, 2)}, `
          + `202→claim ${fmt(l.breakdown.responseToStart.p50Ms, 2)} ms`);
      }
      const failed = (result.throughput && !result.throughput.verification.ok) || (result.latency && (result.latency.errors || result.latency.notSucceeded));
      if (failed) result.processOutputTail = fleet.output();
    } finally {
      log(`stopping the K=${k} processes`);
      await fleet.stop();
    }
    return result;
  } finally {
    await closeKnex();
    await db.drop();
  }
}

// ---------------------------------------------------------------------------------------------
// --explain-claim: the claim statement with a full queue

/**
 * The claim statement and bindings exactly as db/intent-claims.ts builds them (the last statement
 * it issues), and the settings it issues before it in the same transaction.
 */
async function captureClaimSql(conductor: string, limit: number, scope: ClaimScope): Promise<{ sql: string; bindings: unknown[]; settings: string[] }> {
  const captured: Array<{ sql: string; bindings: unknown[] }> = [];
  const fake = {
    raw: (sql: string, bindings: unknown[] = []) => {
      captured.push({ sql, bindings });
      return Promise.resolve({ rows: [] });
    },
    transaction: async (work: (trx: unknown) => Promise<unknown>) => work(fake),
  } as unknown as Knex;
  await claimIntents(fake, conductor, limit, scope);
  const last = captured.pop();
  if (!last) throw new Error('claimIntents issued no statement');
  return { ...last, settings: captured.map((c) => c.sql) };
}

/** Runs `work` in a transaction that is always rolled back. */
async function inRolledBackTransaction(knex: Knex, work: (trx: Knex.Transaction) => Promise<void>): Promise<void> {
  const trx = await knex.transaction();
  try {
    await work(trx);
  } finally {
    await trx.rollback();
  }
}

async function explainClaim(opts: Options, server: DatabaseServer, log: (m: string) => void): Promise<Record<string, unknown>> {
  const db = await createBenchDatabase(server, 'galvanic_bench_explain', log);
  const knex = createKnex(db.url, { poolMax: 2, applicationName: 'galvanic-bench' });
  const closeKnex = onCleanup('bench pool', () => knex.destroy());
  try {
    const nodes = await insertNodes(knex, opts.nodes);
    const per = Math.ceil(opts.intents / nodes.length);
    const t = performance.now();
    // Round-robin over nodes like the API phase: ids interleave, seq 1..per per node.
    await knex.raw(
      `INSERT INTO intents (uuid, node_id, seq, kind, args, state, max_attempts, created_at)
       SELECT gen_random_uuid(), n.id, s, 'power',
              jsonb_build_object('target', CASE WHEN s % 2 = 1 THEN 'power on' ELSE 'power off' END), 'queued', 5, now()
         FROM generate_series(1, ?) s CROSS JOIN nodes n
        ORDER BY s, n.id
        LIMIT ?`,
      [per, opts.intents],
    );
    await knex.raw('VACUUM ANALYZE intents');
    log(`${opts.intents} queued intents inserted in ${((performance.now() - t) / 1000).toFixed(1)} s`);
    const config = loadConfig({ path: CONFIG_FILE, env: {} });
    const drivers = ['fake-hardware'];
    const limit = Math.min(opts.workers ?? config.conductor.workers_pool_size, 200);
    const ring = new HashRing(['bench-conductor-3-1', 'bench-conductor-3-2', 'bench-conductor-3-3']);
    const scopes: Array<{ label: string; scope: ClaimScope }> = [
      { label: 'one conductor (no ring filter)', scope: { conductorGroup: '', drivers } },
      { label: 'one of three conductors (ring filter)', scope: { conductorGroup: '', drivers, ranges: ring.rangesOf('bench-conductor-3-1') } },
    ];
    const out: Record<string, unknown> = { queuedIntents: opts.intents, nodes: nodes.length, limit, scopes: [] as unknown[] };
    for (const { label, scope } of scopes) {
      const { sql, bindings, settings } = await captureClaimSql('bench-explain', limit, scope);
      let plan = '';
      const timings: number[] = [];
      await inRolledBackTransaction(knex, async (trx) => {
        for (const setting of settings) await trx.raw(setting);
        const { rows } = (await trx.raw(`EXPLAIN (ANALYZE, BUFFERS) ${sql}`, bindings as Knex.RawBinding[])) as { rows: Array<{ 'QUERY PLAN': string }> };
        plan = rows.map((r) => r['QUERY PLAN']).join('\n');
      });
      // The plan a prepared claim would run: its generic plan (Postgres 16 or later), kept to show why the claim is planned per call.
      let genericPlan = '';
      await inRolledBackTransaction(knex, async (trx) => {
        for (const setting of settings) await trx.raw(setting);
        const native = trx.raw(sql, bindings as Knex.RawBinding[]).toSQL().toNative();
        const { rows } = (await trx.raw(`EXPLAIN (GENERIC_PLAN) ${native.sql.replace(/\?/g, '\\?')}`)) as { rows: Array<{ 'QUERY PLAN': string }> };
        genericPlan = rows.map((r) => r['QUERY PLAN']).join('\n');
      }).catch((err: Error) => {
        genericPlan = `(not shown: ${err.message})`;
      });
      // The real statement, rolled back each time: what one claim costs with this queue.
      for (let i = 0; i < 5; i++) {
        const t0 = performance.now();
        let claimed = 0;
        await inRolledBackTransaction(knex, async (trx) => {
          claimed = (await claimIntents(trx, 'bench-explain', limit, scope)).length;
        });
        timings.push(performance.now() - t0);
        if (i === 0) log(`  ${label}: claimed ${claimed} (rolled back)`);
      }
      // The ring's range arrays make some lines kilobytes long; the JSON keeps them whole.
      const shown = plan.split('\n').map((l) => (l.length > 300 ? `${l.slice(0, 300)}…` : l)).join('\n');
      process.stdout.write(`\n=== claim query, ${label}, limit ${limit}, ${opts.intents} queued ===\n${shown}\n`);
      process.stdout.write(`--- its generic plan (what a prepared claim would run) ---\n${genericPlan.split('\n').map((l) => (l.length > 300 ? `${l.slice(0, 300)}…` : l)).join('\n')}\n`);
      process.stdout.write(`claimIntents() wall time over 5 runs (rolled back): ${timings.map((x) => x.toFixed(1)).join(', ')} ms\n`);
      (out.scopes as unknown[]).push({ label, plan: plan.split('\n'), genericPlan: genericPlan.split('\n'), claimWallMs: timings.map(round2) });
    }
    return out;
  } finally {
    await closeKnex();
    await db.drop();
  }
}

// ---------------------------------------------------------------------------------------------
// Main

async function main(): Promise<number> {
  const opts = parseOptions(process.argv.slice(2));
  if (!opts) return 0;
  const startedAt = new Date();
  const log = benchLog();
  const machine = machineInfo();
  const source = gitState();
  log(`machine: ${machine.cpuCount} × ${machine.cpuModel}, ${machine.totalMemGiB} GiB, Node ${machine.node}, load ${machine.loadAvgAtStart.join(' ')}`);
  if (machine.loadAvgAtStart[0] > 0.5) {
    log(`warning: load average ${machine.loadAvgAtStart.join(' ')} before starting: other work on this machine skews the figures (provisional)`);
  }
  if (opts.cpuProf) log(`CPU profiles of api and conductors go to ${opts.cpuProf}`);

  const extraFlags = [...(opts.pgFast ? PG_FAST_FLAGS : [])];
  if (opts.pgStatStatements) extraFlags.push('-c', 'shared_preload_libraries=pg_stat_statements', '-c', 'pg_stat_statements.track=top', '-c', 'pg_stat_statements.track_planning=on');
  const server = await startDatabaseServer({ extraFlags, log, tempPrefix: 'galvanic-bench-intents-' });
  log(`Postgres: ${server.kind}, ${server.info.version.split(' on ')[0]}, fsync=${server.info.fsync}, synchronous_commit=${server.info.synchronous_commit}`);
  const calibration = await calibrate(() => server.admin.raw('SELECT 1'), server.tempDir);
  log(`calibration: SELECT 1 p50 ${calibration.selectOneWallP50Ms} ms (client CPU ${calibration.selectOneClientCpuUs} µs)`
    + `${calibration.fdatasyncP50Ms === undefined ? '' : `, fdatasync p50 ${calibration.fdatasyncP50Ms} ms, p99 ${calibration.fdatasyncP99Ms} ms`}`);

  if (opts.explainClaim) {
    const explain = await explainClaim(opts, server, log);
    const file = await writeResults('intents-explain', startedAt, { benchmark: 'intents-explain-claim', startedAt: startedAt.toISOString(), source, machine, database: server.info, ...explain });
    log(`written to ${path.relative(process.cwd(), file)}`);
    return 0;
  }

  const runs: RunResult[] = [];
  /** Targets and the JSON for the runs so far; written after every K, so an interrupted run keeps them. */
  const summarizeRuns = (complete: boolean) => {
    const one = runs.find((r) => r.conductors === 1);
    const targets = [
      {
        name: 'end-to-end intents/s, one conductor',
        target: `>= ${TARGETS.intentsPerSecondOneConductor}/s`,
        actual: one?.throughput?.endToEnd.intentsPerSecond,
        unit: 'intents/s',
        pass: one?.throughput === undefined ? undefined
          : one.throughput.endToEnd.intentsPerSecond >= TARGETS.intentsPerSecondOneConductor && one.throughput.verification.ok,
      },
      ...runs.flatMap((r, i) => {
        // Against the K=1 runs on either side of it, averaged (runs such as 1,3,1,5,1 alternate):
        // this machine's speed drifts over minutes, and the first run of a series is often the
        // fastest, so a run before alone would charge that drift to the conductors.
        const isOne = (b: RunResult) => b.conductors === 1 && b.throughput !== undefined;
        const bases = [runs.slice(0, i).reverse().find(isOne), runs.slice(i + 1).find(isOne)]
          .filter((b): b is RunResult => b !== undefined);
        const tp = r.throughput;
        if (r.conductors === 1 || !tp || bases.length === 0) return [];
        const mean = (f: (t: NonNullable<RunResult['throughput']>) => number) => bases.reduce((a, b) => a + f(b.throughput!), 0) / bases.length;
        const share = tp.endToEnd.intentsPerSecond / mean((t) => t.endToEnd.intentsPerSecond);
        const pgRatio = (tp.resources.postgresCpuS / tp.intents) / mean((t) => t.resources.postgresCpuS / t.intents);
        return [{
          name: `end-to-end intents/s, ${r.conductors} conductors ÷ one`,
          target: `>= ${TARGETS.scalingThroughputShare}`,
          actual: share,
          unit: '×',
          pass: share >= TARGETS.scalingThroughputShare && tp.verification.ok,
        }, {
          name: `Postgres CPU per intent, ${r.conductors} conductors ÷ one`,
          target: `<= ${TARGETS.scalingPostgresCpuRatio}`,
          actual: pgRatio,
          unit: '×',
          pass: pgRatio <= TARGETS.scalingPostgresCpuRatio,
        }];
      }),
      ...runs.filter((r) => r.latency).map((r) => ({
        name: `p50 accept→start at light load, ${r.conductors} conductor(s)`,
        target: `<= ${TARGETS.acceptToStartP50Ms} ms`,
        actual: r.latency!.acceptToStart.p50Ms,
        unit: 'ms',
        pass: r.latency!.acceptToStart.p50Ms <= TARGETS.acceptToStartP50Ms && r.latency!.errors === 0 && r.latency!.notSucceeded === 0,
      })),
    ];
    const errorCount = runs.reduce((sum, r) => sum + (r.throughput ? (r.throughput.verification.ok ? 0 : 1) : 0)
      + (r.latency ? r.latency.errors + r.latency.notSucceeded : 0), 0);
    const ok = errorCount === 0;
    const finishedAt = new Date();
    const loadAvgAtEnd = loadAvg();
    // Work other than this benchmark's during a throughput phase: the machine's busy CPU less
    // what its processes used. (The load average at the end says little: the K=3 phase alone
    // keeps five processes busy on two cores.)
    const otherCpuShare = Math.max(0, ...runs.map((r) => {
      const res = r.throughput?.resources;
      if (!res) return 0;
      const ours = Object.values(res.processes).reduce((a, p) => a + p.cpuS, 0) + res.postgresCpuS + res.benchClientCpuS;
      return (res.machineBusyCpuS - ours) / res.machineBusyCpuS;
    }));
    const result = {
      benchmark: 'intents',
      complete,
      provisional: machine.loadAvgAtStart[0] > 0.5 || otherCpuShare > 0.05 || calibration.selectOneWallP50Ms > 0.5,
      otherCpuShare: round2(otherCpuShare),
      provisionalNote: 'Measured while other work may have been running on this machine; rerun on a quiet machine for reference figures.',
      startedAt: startedAt.toISOString(),
      finishedAt: finishedAt.toISOString(),
      durationS: Math.round((finishedAt.getTime() - startedAt.getTime()) / 100) / 10,
      source,
      machine: { ...machine, loadAvgAtEnd, calibrationAtStart: calibration },
      database: { kind: server.kind, url: redactUrl(server.url), ...server.info, embeddedFastMode: server.kind === 'embedded' ? opts.pgFast : undefined },
      servers: {
        logLevel: SERVER_LOG_LEVEL,
        config: 'etc/galvanic.conf.sample (defaults) + GALVANIC_CONDUCTOR__SYNC_POWER_STATE_INTERVAL=0',
        workersPoolSize: opts.workers ?? `config default (${SCHEMA.conductor.workers_pool_size.default})`,
        maxPoolSize: opts.poolMax ?? `config default (${SCHEMA.database.max_pool_size.default})`,
        cpuProfileDir: opts.cpuProf,
      },
      parameters: {
        nodes: opts.nodes,
        intents: opts.intents,
        intentsPerNode: opts.intents / opts.nodes,
        conductors: opts.conductors,
        concurrency: opts.concurrency,
        latencyRequests: opts.latencyRequests,
        latencyGapMs: opts.latencyGapMs,
        apiVersion: API_VERSION,
        request: 'PUT /v1/nodes/{uuid}/states/power {"target": "power on"|"power off"} (alternating per node), no wait → 202',
        client: 'undici Pool, one keep-alive connection per concurrent client',
        endToEnd: `first submit → first poll (every ${POLL_MS} ms) of count(*) of queued/running intents that returns 0`,
        acceptToStart: 'intents.started_at − intents.created_at (Postgres now(): created_at is the accepting transaction\'s start, started_at the claim statement\'s start)',
      },
      runs,
      targets,
      ok,
    };
    return { result, targets, errorCount, ok, loadAvgAtEnd };
  };

  for (const k of opts.conductors) {
    log(`=== ${k} conductor(s) ===`);
    runs.push(await runWithConductors(opts, server, k, log));
    if (runs.length < opts.conductors.length) {
      await writeResults(opts.resultsName, startedAt, summarizeRuns(false).result);
      log(`partial results (K = ${runs.map((r) => r.conductors).join(', ')}) written to bench/results/${opts.resultsName}-latest.json`);
    }
  }
  const { result, targets, errorCount, ok, loadAvgAtEnd } = summarizeRuns(true);

  // ---- table
  const rows: string[][] = [['K', 'accept req/s', 'HTTP p50/p99 ms', 'e2e intents/s', 'e2e (db) /s', 'backlog', 'drain /s', 'all ok',
    'lat HTTP p50/p99', 'acc→start p50/p99', 'acc→end p50/p99']];
  for (const r of runs) {
    const tp = r.throughput;
    const l = r.latency;
    rows.push([
      String(r.conductors),
      tp ? fmt(tp.accept.requestsPerSecond) : '-',
      tp ? `${fmt(tp.accept.latency.p50Ms)}/${fmt(tp.accept.latency.p99Ms)}` : '-',
      tp ? fmt(tp.endToEnd.intentsPerSecond) : '-',
      tp ? fmt(tp.endToEnd.dbIntentsPerSecond) : '-',
      tp ? String(tp.endToEnd.backlogAtLastAccept) : '-',
      tp ? fmt(tp.endToEnd.drainRate) : '-',
      tp ? (tp.verification.ok ? 'yes' : 'NO') : '-',
      l ? `${fmt(l.httpAccept.p50Ms, 2)}/${fmt(l.httpAccept.p99Ms, 2)}` : '-',
      l ? `${fmt(l.acceptToStart.p50Ms, 2)}/${fmt(l.acceptToStart.p99Ms, 2)}` : '-',
      l ? `${fmt(l.acceptToFinished.p50Ms, 2)}/${fmt(l.acceptToFinished.p99Ms, 2)}` : '-',
    ]);
  }
  const cpuRows: string[][] = [['K', 'api CPU s', 'conductors CPU s', 'postgres CPU s', 'bench CPU s', 'machine busy CPU s', 'wall s',
    'CPU ms/intent', 'CPU-bound ceiling /s']];
  for (const r of runs) {
    const tp = r.throughput;
    if (!tp) continue;
    const cond = Object.entries(tp.resources.processes).filter(([label]) => label.startsWith('conductor')).map(([, v]) => fmt(v.cpuS)).join('+');
    cpuRows.push([String(r.conductors), fmt(tp.resources.processes.api?.cpuS), cond, fmt(tp.resources.postgresCpuS),
      fmt(tp.resources.benchClientCpuS), fmt(tp.resources.machineBusyCpuS), fmt(tp.endToEnd.wallS), fmt(tp.cpuMsPerIntent.total, 2),
      fmt(tp.cpuMsPerIntent.cpuBoundCeilingPerSecond, 0)]);
  }
  const out: string[] = [''];
  out.push(`Galvanic intent benchmark — ${machine.cpuCount} × ${machine.cpuModel}, ${machine.totalMemGiB} GiB RAM, Node ${machine.node}`);
  out.push(`Postgres: ${server.kind}${opts.pgFast ? ' (fsync off)' : ''}; ${server.info.version.split(',')[0]}; fsync=${server.info.fsync}, synchronous_commit=${server.info.synchronous_commit}`);
  if (source) out.push(`Code: commit ${source.commit.slice(0, 12)}${source.modifiedFiles.length ? ` + ${source.modifiedFiles.length} uncommitted file(s)` : ''}`);
  for (const r of runs) {
    out.push(`K=${r.conductors} processes started from commit ${r.source?.commit.slice(0, 12) ?? '?'}`
      + `${r.source?.modifiedFiles.length ? ` + ${r.source.modifiedFiles.length} uncommitted file(s)` : ''}, dist/ last built ${r.distBuiltAt ?? '?'}`);
  }
  out.push(`${opts.nodes} nodes, ${opts.intents} intents (${opts.intents / opts.nodes} per node), ${opts.concurrency} clients; latency: ${opts.latencyRequests} requests ${opts.latencyGapMs} ms apart`);
  out.push(`Load average before ${machine.loadAvgAtStart.join(' ')}, after ${loadAvgAtEnd.join(' ')}; other work's share of the busy CPU during a throughput phase `
    + `${Math.round(result.otherCpuShare * 100)} %${result.provisional ? ' — PROVISIONAL: the machine was busy' : ''}`);
  out.push(`Calibration at start: SELECT 1 round trip p50 ${calibration.selectOneWallP50Ms} ms, client CPU ${calibration.selectOneClientCpuUs} µs/query`
    + `${calibration.fdatasyncP50Ms === undefined ? '' : `; fdatasync p50 ${calibration.fdatasyncP50Ms} ms, p99 ${calibration.fdatasyncP99Ms} ms`} (quiet: < 0.2 ms, < 100 µs)`);
  out.push('');
  out.push(table(rows));
  out.push('(backlog: intents still open when the last request was answered; drain /s: backlog / time to drain it)');
  for (const r of runs) {
    const b = r.latency?.breakdown;
    if (b) {
      out.push(`K=${r.conductors} light load, p50 (p99) ms: request sent → accepting transaction began ${fmt(b.sendToCreated.p50Ms, 2)} (${fmt(b.sendToCreated.p99Ms, 2)}), `
        + `→ 202 received ${fmt(b.createdToResponse.p50Ms, 2)} (${fmt(b.createdToResponse.p99Ms, 2)}), 202 → claim began ${fmt(b.responseToStart.p50Ms, 2)} (${fmt(b.responseToStart.p99Ms, 2)})`);
    }
  }
  out.push('');
  if (cpuRows.length > 1) {
    out.push(`Throughput phase CPU (postgres: ${server.postmasterPid ? 'this benchmark\'s server only' : 'every postgres process on the host'}; `
      + `ceiling: ${machine.cpuCount} CPUs / CPU per intent, if nothing else ran):`);
    out.push(table(cpuRows));
    out.push('');
  }
  out.push(table([
    ['target', 'wanted', 'actual', 'result'],
    ...targets.map((t) => [t.name, t.target, t.actual === undefined ? '-' : `${fmt(t.actual, t.unit === 'ms' ? 2 : t.unit === '×' ? 3 : 1)} ${t.unit}`,
      t.pass === undefined ? 'n/a' : t.pass ? 'PASS' : 'FAIL']),
  ]));
  for (const r of runs) {
    const tp = r.throughput;
    if (tp && !tp.verification.ok) out.push(`K=${r.conductors} verification: ${JSON.stringify(tp.verification)} ${tp.accept.errorSamples.join(' | ')}`);
    if (r.latency?.errors) out.push(`K=${r.conductors} latency errors: ${r.latency.errorSamples.join(' | ')}`);
    if (tp) {
      out.push(`K=${r.conductors} row writes per intent: ${Object.entries(tp.tableWrites).map(([t, w]) => `${t} ${fmt(w.inserts / tp.intents, 2)} ins + `
        + `${fmt(w.updates / tp.intents, 2)} upd (${fmt(w.hotUpdates / tp.intents, 2)} HOT; ${w.indexes} indexes)`).join(', ')}`);
      const w = tp.databaseWork;
      const st = w.statements;
      out.push(`K=${r.conductors} database work per intent: ${st ? `${fmt(st.calls / tp.intents, 2)} statements (exec ${fmt(st.execMs / tp.intents, 3)} ms + plan `
        + `${fmt(st.planMs / tp.intents, 3)} ms), ` : ''}${fmt(w.commits / tp.intents, 3)} commits, ${fmt(w.walRecords / tp.intents, 1)} WAL records, `
        + `${fmt(w.walBytes / tp.intents, 0)} WAL bytes`);
    }
    if (opts.pgStatStatements && tp?.topStatements) {
      out.push('', `K=${r.conductors} throughput phase, top statements by execution + planning time (pg_stat_statements):`);
      out.push(table([['query', 'exec ms', 'plan ms', 'calls', 'plans', 'rows', 'mean exec ms', 'mean plan ms'],
        ...tp.topStatements.slice(0, 12).map((s) => [s.query.slice(0, 100), fmt(s.totalMs, 0), fmt(s.planMs, 0), String(s.calls), String(s.plans),
          String(s.rows), fmt(s.meanMs, 3), fmt(s.meanPlanMs, 3)])]));
      // The claim has two shapes (the whole share, or only the woken nodes): both count.
      const claims = tp.topStatements.filter((s) => s.query.includes('WITH cand AS'));
      if (claims.length > 0) {
        const sum = (f: (s: StatementStat) => number) => claims.reduce((a, s) => a + f(s), 0);
        const calls = sum((s) => s.calls);
        const plans = sum((s) => s.plans);
        out.push(`K=${r.conductors} claim (${claims.length} shape(s)): ${calls} calls for ${tp.intents} intents, ${fmt(sum((s) => s.rows) / Math.max(1, calls), 1)} intents per claim, `
          + `planned ${plans} times (mean ${fmt(sum((s) => s.planMs) / Math.max(1, plans), 3)} ms), mean exec ${fmt(sum((s) => s.totalMs) / Math.max(1, calls), 3)} ms`);
      }
    }
  }
  out.push('');
  process.stdout.write(`${out.join('\n')}\n`);

  const file = await writeResults(opts.resultsName, startedAt, result);
  log(`results written to ${path.relative(process.cwd(), file)} and bench/results/${opts.resultsName}-latest.json`);
  if (!ok) {
    process.stderr.write(`bench: ${errorCount} problem(s); see the verification above\n`);
    for (const r of runs) if (r.processOutputTail) process.stderr.write(`${r.processOutputTail}\n`);
    return 1;
  }
  return opts.strict && targets.some((t) => t.pass === false) ? 1 : 0;
}

runBenchmark(main);
