/**
 * Group operation benchmark (not a test): one `galvanic api` and K `galvanic conductor`
 * processes on a fresh database with N fake-hardware nodes whose BMC calls take D ms.
 *
 *   node dist/bench/operations.js [--nodes N] [--max-parallel P] [--conductors K] [--delay-ms D]
 *
 * One operation (one power step) over all nodes: accept time of POST /v1/operations, wall
 * time to the end, nodes per second against the ideal N / P × D, the most nodes running at
 * once in the API's counts (polled every 100 ms), and the latency of GET /v1/operations/{id}
 * (counts over N nodes) while it runs and after.
 *
 * Results: a table on stdout and bench/results/operations-<timestamp>.json and -latest.json.
 */
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import { createKnex } from '../db/connection.js';
import { nodeMapper } from '../db/nodes.js';
import { onCleanup, runBenchmark } from './lib/cleanup.js';
import { createBenchDatabase, startDatabaseServer } from './lib/database.js';
import { Client, followOperation, waitForApi } from './lib/http.js';
import { spawnGalvanic, type GalvanicProcess } from './lib/proc.js';
import { benchLog, fmt, freePort, gitState, loadAvg, machineInfo, positiveInt, round2, sleep, summarize, table, writeResults } from './lib/util.js';

interface NodeRow {
  admitted_at: string | null;
  started_at: string | null;
  finished_at: string | null;
}

interface OperationBody {
  uuid: string;
  state: string;
  counts: Record<string, number>;
  finished_at: string | null;
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: { nodes: { type: 'string' }, 'max-parallel': { type: 'string' }, conductors: { type: 'string' }, 'delay-ms': { type: 'string' } },
  });
  const nodes = positiveInt('--nodes', values.nodes, 2000);
  const maxParallel = positiveInt('--max-parallel', values['max-parallel'], 100);
  const k = positiveInt('--conductors', values.conductors, 2);
  const delayMs = positiveInt('--delay-ms', values['delay-ms'], 50, true);
  const log = benchLog();
  const startedAt = new Date();
  const machine = machineInfo();
  log(`machine: ${machine.cpuCount} CPUs, load ${machine.loadAvgAtStart.join(' ')}; ${nodes} nodes, max_parallel ${maxParallel}, ${k} conductor(s), ${delayMs} ms per BMC call`);

  const server = await startDatabaseServer({ log, tempPrefix: 'galvanic-bench-ops-' });
  const db = await createBenchDatabase(server, 'galvanic_bench_ops', log);
  const knex = createKnex(db.url, { poolMax: 2, applicationName: 'galvanic-bench' });
  onCleanup('bench pool', () => knex.destroy());
  const uuids = Array.from({ length: nodes }, () => randomUUID());
  await knex.batchInsert('nodes', uuids.map((uuid) => nodeMapper.toRow({
    uuid, driver: 'fake-hardware', powerInterface: 'fake', managementInterface: 'fake', consoleInterface: 'no-console',
    driverInfo: { fake_delay_ms: delayMs }, provisionState: 'manageable',
  })), 1000);

  const env = { GALVANIC_DATABASE__CONNECTION: db.url, GALVANIC_DEFAULT__LOG_LEVEL: 'warn', GALVANIC_CONDUCTOR__SYNC_POWER_STATE_INTERVAL: '0' };
  const apiPort = await freePort();
  const procs: GalvanicProcess[] = [await spawnGalvanic({ label: 'api', command: 'api', env: { ...env, GALVANIC_API__PORT: String(apiPort) } })];
  for (let i = 0; i < k; i++) {
    procs.push(await spawnGalvanic({ label: `conductor-${i + 1}`, command: 'conductor', env: { ...env, GALVANIC_DEFAULT__HOST: `bench-ops-${i + 1}` } }));
  }
  const died = () => procs.find((p) => p.proc.exitCode !== null)?.output();
  await waitForApi(apiPort, 60_000, died);
  while (Number(((await knex('conductors').where('online', true).count({ n: '*' })) as Array<{ n: number }>)[0].n) < k) await sleep(100);
  // Let the rings agree (one heartbeat) before the work starts.
  await sleep(11_000);

  const client = new Client(apiPort, 2);
  const body = JSON.stringify({ nodes: uuids, steps: [{ action: 'power', args: { target: 'power on' } }], max_parallel: maxParallel });
  const t0 = Date.now();
  const created = await client.request('POST', '/v1/operations', body);
  if (created.status !== 201) throw new Error(`POST /v1/operations: ${created.status} ${created.body}`);
  const opId = (JSON.parse(created.body) as OperationBody).uuid;
  const { op, mostRunning, getMs } = await followOperation<OperationBody>(client, opId, { pauseMs: 100, died });
  const wallS = (Date.now() - t0) / 1000;
  const idleGetMs: number[] = [];
  for (let i = 0; i < 20; i++) idleGetMs.push((await client.request('GET', `/v1/operations/${opId}?limit=1`)).ms);
  // Per node, from its rows: admission to the start of its step, and the step itself.
  const admitToStartMs: number[] = [];
  const runMs: number[] = [];
  let next: string | undefined = `/v1/operations/${opId}?limit=1000`;
  while (next) {
    const page = JSON.parse((await client.request('GET', next.replace(/^https?:\/\/[^/]+/, ''))).body) as { nodes: NodeRow[]; next?: string };
    for (const n of page.nodes) {
      const [a, s0, f] = [n.admitted_at, n.started_at, n.finished_at].map((t) => (t ? Date.parse(t) : NaN));
      admitToStartMs.push(s0 - a);
      runMs.push(f - s0);
    }
    next = page.next;
  }
  client.close();

  const idealS = Math.ceil(nodes / maxParallel) * delayMs / 1000;
  const result = {
    benchmark: 'operations', startedAt: startedAt.toISOString(), source: gitState(), machine: { ...machine, loadAvgAtEnd: loadAvg() },
    params: { nodes, maxParallel, conductors: k, delayMs },
    state: op.state, counts: op.counts,
    acceptMs: round2(created.ms), wallS: round2(wallS), nodesPerSecond: round2(nodes / wallS), idealWallS: idealS, mostRunning,
    getWhileRunningMs: summarize(getMs), getAfterMs: summarize(idleGetMs),
    admitToStartMs: summarize(admitToStartMs), stepMs: summarize(runMs),
  };
  process.stdout.write(`${table([
    ['nodes', 'max_parallel', 'conductors', 'accept ms', 'wall s', 'ideal s', 'nodes/s', 'most running', 'GET p50 ms (running)', 'GET p50 ms (after)'],
    [String(nodes), String(maxParallel), String(k), fmt(created.ms), fmt(wallS, 2), fmt(idealS, 2), fmt(nodes / wallS), String(mostRunning),
      fmt(result.getWhileRunningMs.p50Ms), fmt(result.getAfterMs.p50Ms)],
  ])}\n`);
  log(`admission to start p50 ${fmt(result.admitToStartMs.p50Ms)} ms p90 ${fmt(result.admitToStartMs.p90Ms)} ms; step (BMC call and commit) p50 ${fmt(result.stepMs.p50Ms)} ms p90 ${fmt(result.stepMs.p90Ms)} ms`);
  log(`results: ${await writeResults('operations', startedAt, result)}`);
  return op.state === 'succeeded' ? 0 : 1;
}

runBenchmark(main);
