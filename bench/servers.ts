/**
 * Postgres servers compared (not a test): the same work, in one run, on the embedded server
 * (`npm start`'s default, durable) and on the server users run (DATABASE_URL; by default the
 * machine's, postgres://postgres@127.0.0.1:5432/postgres, e.g. Debian's package with JIT on).
 *
 *   npm run bench:servers -- [--requests R] [--nodes N] [--intents M] [--no-intents]
 *
 * 1. Sync power actions: `galvanic all-in-one` on a fresh database of each server, one
 *    fake-hardware node, R sequential `PUT /v1/nodes/{uuid}/states/power?wait=30` (alternating
 *    targets) after 3 unmeasured ones; each answer must say the action succeeded.
 * 2. Intents: `bench/intents.js --conductors 1 --phases throughput` on each server (its results
 *    in bench/results/intents-embedded-latest.json and intents-external-latest.json).
 *
 * Targets: the server users run costs at most 1.5 × the embedded one's p50 per sync action, and
 * reaches at least 0.8 × its end-to-end intents/s. Results: a table on stdout and
 * bench/results/servers-<timestamp>.json and servers-latest.json.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { runBenchmark } from './lib/cleanup.js';
import { createBenchDatabase, startDatabaseServer } from './lib/database.js';
import { Client, waitForApi } from './lib/http.js';
import { spawnGalvanic } from './lib/proc.js';
import {
  benchLog, fmt, freePort, gitState, machineInfo, parseBenchArgs, positiveInt, redactUrl, RESULTS_DIR, ROOT, summarize, table, writeResults,
  type LatencySummary,
} from './lib/util.js';

const MACHINE_SERVER = 'postgres://postgres@127.0.0.1:5432/postgres';
const WARMUP_REQUESTS = 3;
const TARGETS = {
  /** p50 of a sync power action on the server users run ÷ on the embedded one. */
  syncP50Ratio: 1.5,
  /** End-to-end intents/s, one conductor, on the server users run ÷ on the embedded one. */
  intentsRatio: 0.8,
};

interface Options {
  requests: number;
  nodes: number;
  intents: number;
  runIntents: boolean;
  external: string;
}

const USAGE = `Usage: node dist/bench/servers.js [options]

  --requests R     measured sync power actions per server (default 30)
  --nodes N        nodes of the intents phase (default 10000)
  --intents M      intents of the intents phase (default 100000)
  --no-intents     only the sync power phase

Environment: DATABASE_URL=postgres://... the server compared with the embedded one
(default ${MACHINE_SERVER}).`;

function parseOptions(argv: string[]): Options | undefined {
  const values = parseBenchArgs(argv, USAGE, ['requests', 'nodes', 'intents'], ['no-intents']);
  if (!values) return undefined;
  return {
    requests: positiveInt('requests', values.requests, 30),
    nodes: positiveInt('nodes', values.nodes, 10_000),
    intents: positiveInt('intents', values.intents, 100_000),
    runIntents: !(values['no-intents'] ?? false),
    external: process.env.DATABASE_URL || MACHINE_SERVER,
  };
}

type Kind = 'embedded' | 'external';

interface SyncPhase {
  server: Record<string, string>;
  requests: number;
  latency: LatencySummary;
  samplesMs: number[];
}

/** R sequential sync power actions through `galvanic all-in-one` on a fresh database of the server. */
async function syncPower(kind: Kind, opts: Options, log: (m: string) => void): Promise<SyncPhase> {
  const server = await startDatabaseServer({ url: kind === 'embedded' ? '' : opts.external, log, tempPrefix: 'galvanic-bench-servers-' });
  log(`${kind}: ${server.info.version.split(' on ')[0]}; server jit=${server.info.jit} (provider ${server.info.jitProviderAvailable === 'true' ? 'available' : 'absent'}), `
    + `Galvanic's sessions jit=${server.info.jitInGalvanicSessions}, synchronous_commit=${server.info.synchronous_commit}`);
  const db = await createBenchDatabase(server, 'galvanic_bench_servers', log);
  const port = await freePort();
  const proc = await spawnGalvanic({
    label: `all-in-one (${kind})`, command: 'all-in-one', stopGraceMs: 20_000,
    env: { GALVANIC_DATABASE__CONNECTION: db.url, GALVANIC_API__PORT: String(port), GALVANIC_DEFAULT__LOG_LEVEL: 'warn' },
  });
  const client = new Client(port, 1);
  try {
    await waitForApi(port, 60_000, () => (proc.proc.exitCode !== null ? `all-in-one exited:\n${proc.output()}` : undefined));
    const created = await client.request('POST', '/v1/nodes', JSON.stringify({ driver: 'fake-hardware', name: 'sync-power' }));
    if (created.status !== 201) throw new Error(`node create answered ${created.status}: ${created.body}`);
    const uuid = (JSON.parse(created.body) as { uuid: string }).uuid;
    const samples: number[] = [];
    for (let i = 0; i < WARMUP_REQUESTS + opts.requests; i++) {
      const target = i % 2 === 0 ? 'power on' : 'power off';
      const res = await client.request('PUT', `/v1/nodes/${uuid}/states/power?wait=30`, JSON.stringify({ target }));
      if (res.status >= 300) throw new Error(`power ${target} answered ${res.status}: ${res.body}`);
      const node = await client.request('GET', `/v1/nodes/${uuid}?fields=power_state,target_power_state,last_error`);
      const state = JSON.parse(node.body) as { power_state: string; target_power_state: string | null; last_error: string | null };
      if (state.power_state !== target || state.target_power_state !== null) {
        throw new Error(`after the sync power ${target} the node shows ${node.body}`);
      }
      if (i >= WARMUP_REQUESTS) samples.push(res.ms);
    }
    const latency = summarize(samples);
    log(`${kind}: ${opts.requests} sync power actions, p50 ${fmt(latency.p50Ms)} ms, p90 ${fmt(latency.p90Ms)} ms, max ${fmt(latency.maxMs)} ms`);
    return { server: { kind, url: redactUrl(server.url), ...server.info }, requests: opts.requests, latency, samplesMs: samples.map((x) => Math.round(x * 10) / 10) };
  } finally {
    client.close();
    await proc.stop();
    await db.drop();
  }
}

/** bench/intents.js, one conductor, throughput only, on the server; its end-to-end intents/s. */
async function intents(kind: Kind, opts: Options, log: (m: string) => void): Promise<{ intentsPerSecond: number; resultsFile: string; run: unknown }> {
  const name = `intents-${kind}`;
  const env: Record<string, string | undefined> = { ...process.env, DATABASE_URL: kind === 'embedded' ? '' : opts.external };
  const args = [path.join(ROOT, 'dist/bench/intents.js'), '--conductors', '1', '--phases', 'throughput', '--nodes', String(opts.nodes),
    '--intents', String(opts.intents), '--results-name', name];
  log(`${kind}: node dist/bench/intents.js ${args.slice(1).join(' ')}`);
  const child = spawn(process.execPath, args, { env, stdio: ['ignore', 'inherit', 'inherit'] });
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  if (code !== 0) throw new Error(`bench/intents.js on the ${kind} server exited ${code}`);
  const file = path.join(RESULTS_DIR, `${name}-latest.json`);
  const result = JSON.parse(await fs.readFile(file, 'utf8')) as { runs: Array<{ throughput?: { endToEnd: { intentsPerSecond: number } } }> };
  const perSecond = result.runs[0]?.throughput?.endToEnd.intentsPerSecond;
  if (perSecond === undefined) throw new Error(`${file} has no throughput run`);
  return { intentsPerSecond: perSecond, resultsFile: path.relative(ROOT, file), run: result.runs[0] };
}

async function main(): Promise<number> {
  const opts = parseOptions(process.argv.slice(2));
  if (!opts) return 0;
  const startedAt = new Date();
  const log = benchLog();
  const machine = machineInfo();
  log(`machine: ${machine.cpuCount} × ${machine.cpuModel}, load ${machine.loadAvgAtStart.join(' ')}; compared server ${redactUrl(opts.external)}`);

  const sync: Partial<Record<Kind, SyncPhase>> = {};
  for (const kind of ['embedded', 'external'] as const) sync[kind] = await syncPower(kind, opts, log);
  const throughput: Partial<Record<Kind, Awaited<ReturnType<typeof intents>>>> = {};
  if (opts.runIntents) for (const kind of ['embedded', 'external'] as const) throughput[kind] = await intents(kind, opts, log);

  const syncRatio = sync.external!.latency.p50Ms / sync.embedded!.latency.p50Ms;
  const intentsRatio = throughput.external && throughput.embedded ? throughput.external.intentsPerSecond / throughput.embedded.intentsPerSecond : undefined;
  const targets = [
    { name: 'sync power action p50, external ÷ embedded', target: `<= ${TARGETS.syncP50Ratio}`, actual: syncRatio, pass: syncRatio <= TARGETS.syncP50Ratio },
    {
      name: 'end-to-end intents/s (K=1), external ÷ embedded', target: `>= ${TARGETS.intentsRatio}`, actual: intentsRatio,
      pass: intentsRatio === undefined ? undefined : intentsRatio >= TARGETS.intentsRatio,
    },
  ];
  const finishedAt = new Date();
  const result = {
    benchmark: 'servers',
    startedAt: startedAt.toISOString(),
    finishedAt: finishedAt.toISOString(),
    source: gitState(),
    machine: { ...machine, loadAvgAtEnd: machineInfo().loadAvgAtStart },
    parameters: {
      syncRequests: opts.requests, warmupRequests: WARMUP_REQUESTS, nodes: opts.nodes, intents: opts.intents,
      request: 'PUT /v1/nodes/{uuid}/states/power?wait=30 {"target": "power on"|"power off"} (alternating), one fake-hardware node, galvanic all-in-one; time to the last byte of the answer',
    },
    syncPower: sync,
    intents: throughput,
    targets,
  };
  process.stdout.write(`\n${table([
    ['server', 'version', 'server jit', 'sync p50 ms', 'sync p90 ms', 'sync max ms', 'intents/s (K=1)'],
    ...(['embedded', 'external'] as const).map((k) => [k, sync[k]!.server.version.split(' on ')[0], sync[k]!.server.jit, fmt(sync[k]!.latency.p50Ms),
      fmt(sync[k]!.latency.p90Ms), fmt(sync[k]!.latency.maxMs), fmt(throughput[k]?.intentsPerSecond, 0)]),
  ])}\n\n${table([['target', 'wanted', 'actual', 'result'],
    ...targets.map((t) => [t.name, t.target, fmt(t.actual, 3), t.pass === undefined ? 'n/a' : t.pass ? 'PASS' : 'FAIL'])])}\n\n`);
  const file = await writeResults('servers', startedAt, result);
  log(`results written to ${path.relative(process.cwd(), file)} and bench/results/servers-latest.json`);
  return targets.some((t) => t.pass === false) ? 1 : 0;
}

runBenchmark(main);
