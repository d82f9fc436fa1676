/**
 * Console benchmark (not a test): a real `galvanic all-in-one` with fake consoles on a fresh
 * database. Measures (1) connect latency: token request + websocket through the API relay
 * until the first byte of backlog; (2) fan-out: one busy console streamed to many viewers,
 * bytes delivered per second and the CPU it costs; (3) how long after an owner change every
 * live session of the changed nodes is closed.
 *
 *   npm run bench:console -- [--connects N] [--viewers V] [--fanout-seconds S] [--epoch-nodes K]
 *
 * Results go to stdout and to bench/results/console-<timestamp>.json and console-latest.json.
 */
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { WebSocket } from 'ws';
import { runBenchmark } from './lib/cleanup.js';
import { createBenchDatabase, startDatabaseServer } from './lib/database.js';
import { waitForApi } from './lib/http.js';
import { spawnGalvanic, watchCpu } from './lib/proc.js';
import {
  benchLog, fmt, freePort, gitState, loadAvg, machineInfo, parseBenchArgs, positiveInt, round2, sleep, summarize, table, writeResults,
} from './lib/util.js';

const HEADERS = { 'X-OpenStack-Ironic-API-Version': '1.78', 'Content-Type': 'application/json' };

interface Options {
  connects: number;
  viewers: number;
  fanoutSeconds: number;
  epochNodes: number;
}

const USAGE = `Usage: node dist/bench/console.js [options]

  --connects N         sequential token + connect + first byte measurements (default 300)
  --viewers V          viewers of one busy console in the fan-out phase (default 50)
  --fanout-seconds S   length of the fan-out phase (default 5)
  --epoch-nodes K      nodes (5 viewers each) whose owner changes in phase 3 (default 20)

Environment: DATABASE_URL=postgres://... uses that server instead of an embedded one.`;

function parseOptions(argv: string[]): Options | undefined {
  const values = parseBenchArgs(argv, USAGE, ['connects', 'viewers', 'fanout-seconds', 'epoch-nodes']);
  if (!values) return undefined;
  return {
    connects: positiveInt('--connects', values.connects, 300),
    viewers: positiveInt('--viewers', values.viewers, 50),
    fanoutSeconds: positiveInt('--fanout-seconds', values['fanout-seconds'], 5),
    epochNodes: positiveInt('--epoch-nodes', values['epoch-nodes'], 20),
  };
}

async function main(): Promise<number> {
  const opts = parseOptions(process.argv.slice(2));
  if (!opts) return 0;
  const [startedAt, machine, log] = [new Date(), machineInfo(), benchLog()];
  log(`machine: ${machine.cpuCount} × ${machine.cpuModel}, load ${machine.loadAvgAtStart.join(' ')}`);
  const server = await startDatabaseServer({ log, tempPrefix: 'galvanic-bench-console-' });
  const db = await createBenchDatabase(server, 'galvanic_bench_console', log);
  const port = await freePort();
  const g = await spawnGalvanic({
    label: 'all-in-one',
    command: 'all-in-one',
    env: { GALVANIC_DATABASE__CONNECTION: db.url, GALVANIC_API__PORT: String(port), GALVANIC_DEFAULT__HOST: 'bench-console', GALVANIC_CONDUCTOR__SYNC_POWER_STATE_INTERVAL: '0' },
  });
  await waitForApi(port, 30_000, () => (g.proc.exitCode !== null ? `galvanic exited: ${g.output()}` : undefined));
  const base = `http://127.0.0.1:${port}`;
  const call = async (method: string, url: string, body?: unknown) => {
    const res = await fetch(`${base}${url}`, { method, headers: HEADERS, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await res.text();
    if (res.status >= 400) throw new Error(`${method} ${url}: ${res.status} ${text}`);
    return text ? JSON.parse(text) : undefined;
  };
  const consoleNode = async (intervalMs: number, owner: string): Promise<string> => {
    const node = await call('POST', '/v1/nodes', { driver: 'fake-hardware', console_interface: 'fake', owner, driver_info: { fake_console_interval_ms: intervalMs } });
    await call('PUT', `/v1/nodes/${node.uuid}/states/console?wait=30`, { enabled: true });
    return node.uuid as string;
  };
  const tokenUrl = async (uuid: string): Promise<string> => (await call('GET', `/v1/nodes/${uuid}/states/console`)).console_info.url;
  const open = (url: string, onData: (n: number) => void) => new Promise<WebSocket>((resolve, reject) => {
    const ws = new WebSocket(url);
    ws.on('message', (d: Buffer) => onData(d.length));
    ws.once('open', () => resolve(ws));
    ws.once('error', reject);
  });

  // Phase 1: connect latency.
  const quiet = await consoleNode(0, 'p');
  await sleep(500);
  const connectMs: number[] = [];
  for (let i = 0; i < opts.connects; i++) {
    const t0 = performance.now();
    const url = await tokenUrl(quiet);
    let done!: () => void;
    const first = new Promise<void>((r) => { done = r; });
    const ws = await open(url, () => done());
    await first;
    connectMs.push(performance.now() - t0);
    ws.close();
  }
  const connect = summarize(connectMs);
  log(`connect (token + websocket via the API relay + first backlog byte): p50 ${connect.p50Ms} ms, p99 ${connect.p99Ms} ms`);

  // Phase 2: fan-out of one busy console (a line every millisecond).
  const busy = await consoleNode(1, 'p');
  let bytes = 0;
  const viewers = await Promise.all(Array.from({ length: opts.viewers }, async () => open(await tokenUrl(busy), (n) => { bytes += n; })));
  await sleep(1000);
  bytes = 0;
  const cpu = watchCpu({ 'all-in-one': g.pid });
  await sleep(opts.fanoutSeconds * 1000);
  const fanBytes = bytes;
  const fanCpu = cpu.stop();
  for (const ws of viewers) ws.close();
  const fanout = {
    viewers: opts.viewers,
    seconds: opts.fanoutSeconds,
    deliveredKiBPerSecond: round2(fanBytes / 1024 / opts.fanoutSeconds),
    perViewerKiBPerSecond: round2(fanBytes / 1024 / opts.fanoutSeconds / opts.viewers),
    galvanicCpuPerSecond: round2(fanCpu.processes['all-in-one'].cpuS / opts.fanoutSeconds),
    maxRssMiB: fanCpu.processes['all-in-one'].maxRssMiB,
  };
  log(`fan-out: ${opts.viewers} viewers, ${fanout.deliveredKiBPerSecond} KiB/s delivered, galvanic CPU ${fanout.galvanicCpuPerSecond} s/s`);
  await call('PUT', `/v1/nodes/${busy}/states/console?wait=30`, { enabled: false });

  // Phase 3: close latency after an owner change.
  const nodes = await Promise.all(Array.from({ length: opts.epochNodes }, () => consoleNode(100, 'old')));
  const sessions = (await Promise.all(nodes.map(async (uuid) => Promise.all(Array.from({ length: 5 }, async () => {
    const ws = await open(await tokenUrl(uuid), () => undefined);
    const closedAt = new Promise<number>((r) => ws.once('close', () => r(performance.now())));
    return { uuid, closedAt };
  }))))).flat();
  const patchedAt = new Map<string, number>();
  await Promise.all(nodes.map(async (uuid) => {
    await call('PATCH', `/v1/nodes/${uuid}`, [{ op: 'replace', path: '/owner', value: 'new' }]);
    patchedAt.set(uuid, performance.now());
  }));
  const closeMs = await Promise.all(sessions.map(async (s) => (await s.closedAt) - patchedAt.get(s.uuid)!));
  const close = summarize(closeMs);
  log(`close after owner change (from the PATCH response): p50 ${close.p50Ms} ms, p99 ${close.p99Ms} ms, max ${close.maxMs} ms`);

  await g.stop();
  const loadAvgAtEnd = loadAvg();
  process.stdout.write(`\n${table([
    ['measure', 'p50 ms', 'p99 ms', 'max ms'],
    ['connect to first byte', fmt(connect.p50Ms, 2), fmt(connect.p99Ms, 2), fmt(connect.maxMs, 2)],
    ['close after owner change', fmt(close.p50Ms, 2), fmt(close.p99Ms, 2), fmt(close.maxMs, 2)],
  ])}\n\n`);
  const file = await writeResults('console', startedAt, {
    benchmark: 'console',
    provisional: machine.loadAvgAtStart[0] > 0.5 || loadAvgAtEnd[0] > 0.5,
    provisionalNote: 'Measured while other work may have been running on this machine; rerun on a quiet machine for reference figures.',
    startedAt: startedAt.toISOString(),
    source: gitState(),
    machine: { ...machine, loadAvgAtEnd },
    parameters: opts,
    connect,
    fanout,
    closeAfterOwnerChange: close,
  });
  log(`written to ${path.relative(process.cwd(), file)}`);
  return 0;
}

runBenchmark(main);
