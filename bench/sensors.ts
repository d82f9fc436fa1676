/**
 * Sensor collection benchmark (not a test): one `galvanic conductor` reading N simulated
 * Redfish BMCs (`galvanic sim redfish` in child processes) every interval, publishing to the
 * real RabbitMQ; a consumer here counts what arrives.
 *
 *   node dist/bench/sensors.js [--nodes 10000] [--latency 1000-2000] [--slow-bmc-fraction 0.01]
 *     [--slow-fraction 0] [--slow 20000] [--interval 60] [--iterations 2] [--sync-seconds 60] [--per-bmc-requests 1]
 *     [--max-concurrency N] [--conductor-node-options=--max-old-space-size=384] [--base-port 10000]   (BMC i listens on base-port + i; below the ephemeral range, clear of 25672)
 *     [--name sensors]   (results: bench/results/<name>-latest.json)
 *     [--trace-gc]   (the conductor runs with node --trace-gc: the heap left live after each mark-compact is reported)
 *   --slow-bmc-fraction: that fraction of the BMCs answers every request after --slow (1 % of
 *   BMCs answering in 20 s, by default); --slow-fraction: that fraction of all requests, on any BMC.
 *   The like-for-like comparison on Ironic's fleet size:
 *     node dist/bench/sensors.js --nodes 3500 --iterations 2 --sync-seconds 120 --name sensors-3500
 *
 * Phase 1 (asynchronous collection, the default): `--iterations` iterations, each reported
 * from the conductor's own "sensor data iteration" log line: wall time, nodes ok / failed /
 * timed out; the slowest node's own request chain (see below) and the ratio of the wall time
 * to it; requests and requests/s at the simulators; plus notifications received, the
 * conductor's and the simulators' CPU seconds and peak RSS. The first iteration also logs in
 * to every BMC and discovers its resources; later ones are the steady state.
 * The request chain of a node is computed at the simulator, not seen by the client: the sum
 * of the latencies the simulator imposed on that BMC's requests during the iteration. With
 * one request at a time per BMC (--per-bmc-requests 1, the default, checked at the
 * simulator), no client can read that node faster: it is the floor of the iteration.
 * Phase 2 (Ironic's behaviour, steady): the same conductor, once phase 1 is over, is switched
 * by SIGHUP (its [sensor_data] options are mutable) to enable_async_collection = false and
 * workers = 4, keeping its sessions and what it learnt of every BMC; notifications are counted
 * over `--sync-seconds` from the tick at which that synchronous iteration starts. Its
 * throughput against phase 1's steady iteration (nodes / wall time) gives the ratio.
 * Collecting the whole fleet that way would take most of an hour, hence the window.
 *
 * File descriptors: each BMC costs the simulator a listener and a connection, and the conductor
 * a connection, so the simulators are split into processes of at most 4,000 BMCs, and the
 * benchmark re-executes itself under the hard limit (`ulimit -n`) when the soft one is lower.
 * Results: a table on stdout, bench/results/sensors-<timestamp>.json and sensors-latest.json.
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import amqp from 'amqplib';
import { onCleanup, runBenchmark } from './lib/cleanup.js';
import { createBenchDatabase, PG_FAST_FLAGS, startDatabaseServer } from './lib/database.js';
import { rssKiB, spawnGalvanic, watchCpu, type GalvanicProcess } from './lib/proc.js';
import { ensureFdLimit, enroll, markChains, simTotals, startSims, type Chains, type Sim, type Totals } from './lib/redfish-fleet.js';
import { benchLog, fmt, freePort, gitState, loadAvg, machineInfo, positiveInt, ROOT, round2, sleep, table, writeResults } from './lib/util.js';

const RABBITMQ_URL = process.env.RABBITMQ_URL ?? 'amqp://guest:guest@127.0.0.1:5672/';
/** What Ironic's asynchronous prototype needed (the specification): 3,500 fake nodes. */
const IRONIC_PROTOTYPE = { nodes: 3500, cpu: 'a whole core', rssGiB: '2-3' };

interface Options {
  nodes: number;
  latency: string;
  slowFraction: number;
  slowBmcFraction: number;
  slowMs: number;
  interval: number;
  iterations: number;
  syncSeconds: number;
  perBmcRequests: number;
  basePort: number;
  /** NODE_OPTIONS of the conductors, e.g. --max-old-space-size=384. */
  conductorNodeOptions: string;
  /** [sensor_data] max_concurrency; 0: the conductor's default. */
  maxConcurrency: number;
  /** Results go to bench/results/<name>-<time>.json and <name>-latest.json. */
  name: string;
  traceGc: boolean;
}

function parseOptions(argv: string[]): Options {
  const { values } = parseArgs({
    args: argv,
    options: {
      nodes: { type: 'string' }, latency: { type: 'string' }, 'slow-fraction': { type: 'string' }, 'slow-bmc-fraction': { type: 'string' }, slow: { type: 'string' },
      interval: { type: 'string' }, iterations: { type: 'string' }, 'sync-seconds': { type: 'string' }, 'per-bmc-requests': { type: 'string' },
      'base-port': { type: 'string' },
      'conductor-node-options': { type: 'string' },
      'max-concurrency': { type: 'string' },
      name: { type: 'string' },
      'trace-gc': { type: 'boolean' },
    },
  });
  const name = values.name ?? 'sensors';
  if (!/^[a-z0-9-]+$/.test(name)) throw new Error('--name: lower-case letters, digits and dashes only');
  const fraction = (flag: string, raw: string | undefined, fallback: number): number => {
    const f = Number(raw ?? fallback);
    if (!(f >= 0 && f <= 1)) throw new Error(`--${flag} must be between 0 and 1`);
    return f;
  };
  const slowFraction = fraction('slow-fraction', values['slow-fraction'], 0);
  const slowBmcFraction = fraction('slow-bmc-fraction', values['slow-bmc-fraction'], 0.01);
  return {
    nodes: positiveInt('nodes', values.nodes, 10_000),
    latency: values.latency ?? '1000-2000',
    slowFraction,
    slowBmcFraction,
    slowMs: positiveInt('slow', values.slow, 20_000, true),
    interval: positiveInt('interval', values.interval, 60),
    iterations: positiveInt('iterations', values.iterations, 2),
    syncSeconds: positiveInt('sync-seconds', values['sync-seconds'], 60, true),
    perBmcRequests: positiveInt('per-bmc-requests', values['per-bmc-requests'], 1),
    basePort: positiveInt('base-port', values['base-port'], 10_000),
    conductorNodeOptions: values['conductor-node-options'] ?? '',
    maxConcurrency: positiveInt('max-concurrency', values['max-concurrency'], 0, true),
    name,
    traceGc: values['trace-gc'] === true,
  };
}

/** Counts notifications arriving on a queue of our own, bound before the conductor starts. */
async function countNotifications(exchange: string, topic: string): Promise<{ count(): number; close(): Promise<void> }> {
  const conn = await amqp.connect(RABBITMQ_URL);
  const ch = await conn.createChannel();
  await ch.assertExchange(exchange, 'topic', { durable: false });
  const { queue } = await ch.assertQueue('', { exclusive: true, autoDelete: true });
  await ch.bindQueue(queue, exchange, `${topic}.info`);
  let n = 0;
  await ch.consume(queue, () => { n++; }, { noAck: true });
  return {
    count: () => n,
    close: async () => {
      await ch.deleteExchange(exchange).catch(() => undefined);
      await conn.close().catch(() => undefined);
    },
  };
}

interface IterationLine {
  nodes: number;
  ok: number;
  failed: number;
  timedOut: number;
  durationMs: number;
  failures: Record<string, number>;
}

interface Observed {
  line: IterationLine;
  /** When the bench read the line (ms since the epoch). */
  at: number;
  /** What the simulators saw during the iteration, read as soon as the line came. */
  sim: Promise<{ chains: Chains; totals: Totals }>;
  /** The conductor's memory between the previous line and this one. */
  memory: IterationMemory;
}

interface IterationMemory {
  /** Sampled every 250 ms from /proc. */
  peakRssMiB: number;
  /** Sampled every second from its /metrics. */
  peakHeapUsedMiB: number;
  peakHeapTotalMiB: number;
  peakExternalMiB: number;
  /** With --trace-gc: the largest heap left after a mark-compact (what was live), null without. */
  maxAfterMarkCompactMiB: number | null;
}

/** Peaks of the conductor's memory, restarted at every iteration line. */
function memoryWatch(pid: number, metricsPort: number): { take(): IterationMemory; gcLine(line: string): void; stop(): void } {
  const fresh = (): IterationMemory => ({ peakRssMiB: 0, peakHeapUsedMiB: 0, peakHeapTotalMiB: 0, peakExternalMiB: 0, maxAfterMarkCompactMiB: null });
  let m = fresh();
  const rss = setInterval(() => {
    m.peakRssMiB = Math.max(m.peakRssMiB, round2((rssKiB(pid) ?? 0) / 1024));
  }, 250);
  let busy = false;
  const heap = setInterval(() => {
    if (busy) return;
    busy = true;
    heapOf(metricsPort).then((h) => {
      m.peakHeapUsedMiB = Math.max(m.peakHeapUsedMiB, h.heapUsedMiB);
      m.peakHeapTotalMiB = Math.max(m.peakHeapTotalMiB, h.heapTotalMiB);
      m.peakExternalMiB = Math.max(m.peakExternalMiB, h.externalMiB);
    }, () => undefined).finally(() => { busy = false; });
  }, 1000);
  return {
    take() {
      const out = m;
      m = fresh();
      return out;
    },
    // e.g. "[123:0x...]   45000 ms: Mark-Compact 812.3 (850.1) -> 301.2 (840.7) MB, ..."
    gcLine(line) {
      const g = /Mark-Compact[^>]*-> ([\d.]+) \(/.exec(line);
      if (g) m.maxAfterMarkCompactMiB = Math.max(m.maxAfterMarkCompactMiB ?? 0, Number(g[1]));
    },
    stop() {
      clearInterval(rss);
      clearInterval(heap);
    },
  };
}

/**
 * Starts a conductor and collects its "sensor data iteration" lines as they come; at each,
 * the simulators' chains are read and marked (an iteration shorter than the interval leaves
 * a quiet gap before the next tick, so nothing of the next one is counted).
 */
async function startConductor(label: string, dbUrl: string, env: Record<string, string>, sims: Sim[], config: string, nodeArgs: string[]): Promise<{ proc: GalvanicProcess; iterations: Observed[]; heap(): Promise<Heap> }> {
  const metricsPort = await freePort();
  const proc = await spawnGalvanic({
    label, command: 'conductor', config, nodeArgs,
    env: { GALVANIC_DATABASE__CONNECTION: dbUrl, GALVANIC_DEFAULT__HOST: label, GALVANIC_CONDUCTOR__METRICS_PORT: String(metricsPort), ...env },
  });
  const iterations: Observed[] = [];
  const memory = memoryWatch(proc.pid, metricsPort);
  onCleanup('conductor memory watch', async () => memory.stop());
  void proc.exited.then(() => memory.stop());
  let buf = '';
  proc.proc.stdout!.on('data', (d: Buffer) => {
    buf += d.toString();
    let i: number;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      memory.gcLine(line);
      if (!line.includes('sensor data iteration')) continue;
      let parsed: IterationLine;
      try {
        parsed = JSON.parse(line) as IterationLine;
      } catch {
        continue;
      }
      const sim = (async () => {
        const chains = await markChains(sims);
        return { chains, totals: await simTotals(sims) };
      })();
      sim.catch(() => undefined);
      iterations.push({ line: parsed, at: Date.now(), sim, memory: memory.take() });
    }
  });
  return { proc, iterations, heap: () => heapOf(metricsPort) };
}

interface Heap {
  heapUsedMiB: number;
  heapTotalMiB: number;
  externalMiB: number;
}

/** The conductor's V8 heap as its /metrics reports it: what is live, beside what RSS holds. */
async function heapOf(port: number): Promise<Heap> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const value = (name: string) => Number(new RegExp(`^${name}\\{[^}]*\\} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN) / 2 ** 20;
  return {
    heapUsedMiB: round2(value('nodejs_heap_size_used_bytes')),
    heapTotalMiB: round2(value('nodejs_heap_size_total_bytes')),
    externalMiB: round2(value('nodejs_external_memory_bytes')),
  };
}

async function main(): Promise<number> {
  const opts = parseOptions(process.argv.slice(2));
  const log = benchLog();
  const reexec = await ensureFdLimit(opts.nodes, log);
  if (reexec !== undefined) return reexec;
  const startedAt = new Date();
  const load0 = loadAvg();
  log(`options ${JSON.stringify(opts)}; load average ${load0.join(' ')}`);

  const server = await startDatabaseServer({ log, extraFlags: PG_FAST_FLAGS, tempPrefix: 'galvanic-bench-sensors-' });
  const sims = await startSims(opts, log);
  const db = await createBenchDatabase(server, 'sensors', log);
  await enroll(db.url, sims);
  log(`${opts.nodes} nodes enrolled`);

  const id = `${process.pid}-${Date.now()}`;
  const exchange = `galvanic-bench-${id}`;
  const topic = `notifications-${id}`;
  const common: Record<string, string> = {
    GALVANIC_NOTIFICATIONS__DRIVER: 'amqp', GALVANIC_NOTIFICATIONS__TRANSPORT_URL: RABBITMQ_URL,
    GALVANIC_NOTIFICATIONS__EXCHANGE: exchange, GALVANIC_NOTIFICATIONS__TOPIC: topic, GALVANIC_NOTIFICATIONS__DECLARE_QUEUE: 'false',
    GALVANIC_NOTIFICATIONS__BUFFER_SIZE: String(opts.nodes * 2),
    GALVANIC_SENSOR_DATA__SEND_SENSOR_DATA: 'true', GALVANIC_SENSOR_DATA__INTERVAL: String(opts.interval),
    GALVANIC_SENSOR_DATA__NODE_TIMEOUT: String(opts.interval),
    ...(opts.maxConcurrency ? { GALVANIC_SENSOR_DATA__MAX_CONCURRENCY: String(opts.maxConcurrency) } : {}),
    GALVANIC_REDFISH__CONNECTION_CACHE_SIZE: String(opts.nodes + 100),
    GALVANIC_REDFISH__MAX_CONCURRENT_REQUESTS_PER_BMC: String(opts.perBmcRequests),
    GALVANIC_REDFISH__REQUEST_TIMEOUT: String(opts.interval),
    GALVANIC_CONDUCTOR__SYNC_POWER_STATE_INTERVAL: '0',
    GALVANIC_DATABASE__MAX_POOL_SIZE: '10',
    ...(opts.conductorNodeOptions ? { NODE_OPTIONS: opts.conductorNodeOptions } : {}),
  };

  // The conductor's [sensor_data] mode lives in a file of its own, so that SIGHUP can change it.
  const confDir = await fs.mkdtemp(path.join(os.tmpdir(), 'galvanic-bench-sensors-'));
  onCleanup('conductor configuration', () => fs.rm(confDir, { recursive: true, force: true }));
  const confFile = path.join(confDir, 'galvanic.conf');
  const writeMode = (asyncCollection: boolean, workers: number) =>
    fs.writeFile(confFile, `[sensor_data]\nenable_async_collection = ${String(asyncCollection)}\nworkers = ${workers}\n`);
  await writeMode(true, 4);

  // Phase 1: asynchronous collection.
  const counter = await countNotifications(exchange, topic);
  onCleanup('notification counter', () => counter.close());
  await markChains(sims);
  const before = await simTotals(sims);
  const run = await startConductor('sensors', db.url, common, sims, confFile, opts.traceGc ? ['--trace-gc'] : []);
  const simPids = Object.fromEntries(sims.map((x, i) => [`simulator${i + 1}`, x.proc.pid!]));
  const watch = watchCpu({ conductor: run.proc.pid, ...simPids }, server.postmasterPid);
  const t0 = Date.now();
  const deadline = t0 + (opts.iterations + 1) * opts.interval * 1000 + 120_000;
  const alive = () => {
    const p = run.proc.proc;
    if (p.exitCode !== null || p.signalCode !== null) throw new Error(`conductor exited (${p.exitCode ?? p.signalCode}):\n${run.proc.output()}`);
  };
  while (run.iterations.length < opts.iterations) {
    alive();
    if (Date.now() > deadline) throw new Error(`${opts.iterations} iterations did not finish in time:\n${run.proc.output()}`);
    await sleep(250);
  }
  const wallS = (Date.now() - t0) / 1000;
  const usage = watch.stop();
  const heapAfter = await run.heap();
  const after = await simTotals(sims);
  const cpuOf = (label: string) => usage.processes[label];
  const simCpuS = round2(Object.keys(simPids).reduce((t, k) => t + cpuOf(k).cpuS, 0));
  const simRequests = after.requests - before.requests;
  let prevRequests = before.requests;
  const iterations = [];
  for (const [i, o] of run.iterations.slice(0, opts.iterations).entries()) {
    const it = o.line;
    const { chains, totals } = await o.sim;
    const requests = totals.requests - prevRequests;
    prevRequests = totals.requests;
    const wall = it.durationMs / 1000;
    iterations.push({
      iteration: i + 1, nodes: it.nodes, ok: it.ok, failed: it.failed, timedOut: it.timedOut, failures: it.failures,
      wallS: round2(wall), nodesPerS: round2(it.ok / wall),
      simulatorRequests: requests, requestsPerNode: round2(requests / Math.max(1, it.nodes)), simulatorRequestsPerS: round2(requests / wall),
      slowestChainS: round2(chains.longest[1] / 1000), slowestChainRequests: chains.longest[2], slowestChainBmcPort: chains.longest[0],
      chainP50S: round2(chains.p50Ms / 1000), chainP99S: round2(chains.p99Ms / 1000),
      wallOverSlowestChain: chains.longest[1] > 0 ? round2(wall / (chains.longest[1] / 1000)) : null,
      conductorMemory: o.memory,
    });
  }

  // Phase 2: Ironic's behaviour, four at a time, in the same (warm) conductor, over a window.
  let sync: Record<string, unknown> | null = null;
  if (opts.syncSeconds > 0) {
    await writeMode(false, 4);
    run.proc.proc.kill('SIGHUP');
    const hupAt = Date.now();
    // Ticks are `interval` apart from the first iteration's start. An iteration during which a
    // tick came is followed at once by the next (the task catches up): one that started before
    // the SIGHUP is still asynchronous, so wait for it. The synchronous one starts after it, or
    // at the first tick after the last asynchronous one.
    const intervalMs = opts.interval * 1000;
    const grid0 = run.iterations[0].at - run.iterations[0].line.durationMs;
    const tickIndex = (t: number) => Math.floor((t - grid0) / intervalMs);
    const tickDuring = (o: Observed) => tickIndex(o.at) > tickIndex(o.at - o.line.durationMs);
    let last = run.iterations[run.iterations.length - 1];
    while (tickDuring(last) && last.at < hupAt) {
      const seen = run.iterations.length;
      while (run.iterations.length === seen) {
        alive();
        await sleep(250);
      }
      last = run.iterations[run.iterations.length - 1];
    }
    const syncStart = tickDuring(last) ? last.at : grid0 + (tickIndex(last.at) + 1) * intervalMs;
    while (Date.now() < syncStart) await sleep(100);
    const linesAtSyncStart = run.iterations.length;
    const n0 = counter.count();
    const syncWatch = watchCpu({ conductor: run.proc.pid, ...simPids }, server.postmasterPid);
    const s0 = await simTotals(sims);
    await sleep(opts.syncSeconds * 1000);
    alive();
    const done = counter.count() - n0;
    const s1 = await simTotals(sims);
    const syncUsage = syncWatch.stop();
    if (run.iterations.length > linesAtSyncStart) throw new Error('the synchronous iteration ended within its window: use a shorter --sync-seconds');
    const perS = done / opts.syncSeconds;
    sync = {
      workers: 4, windowS: opts.syncSeconds, steady: true, nodesNotified: done, nodesPerS: round2(perS),
      simulatorRequests: s1.requests - s0.requests, requestsPerNode: done > 0 ? round2((s1.requests - s0.requests) / done) : null,
      sessionsCreated: s1.sessionsCreated - s0.sessionsCreated,
      extrapolatedIterationS: perS > 0 ? Math.round(opts.nodes / perS) : null,
      conductorCpuS: syncUsage.processes.conductor.cpuS,
    };
  }
  await sleep(2000);
  const received = counter.count();
  await run.proc.stop();

  const steady = iterations[iterations.length - 1];
  const result = {
    benchmark: 'sensors',
    startedAt: startedAt.toISOString(),
    options: opts,
    machine: machineInfo(),
    loadAverage: { start: load0, end: loadAvg() },
    git: gitState(),
    database: { kind: server.kind, info: server.info },
    fleet: { nodes: opts.nodes, simulatorProcesses: sims.length, bmcs: after.bmcs },
    chainDefinition: 'per BMC and iteration, the sum of the latencies the simulator imposed on its requests (computed at the simulator, one request at a time per BMC)',
    async: {
      iterations,
      wallS: round2(wallS),
      simulatorRequests: simRequests,
      simulatorRequestsPerS: round2(simRequests / wallS),
      conductorCpuS: cpuOf('conductor').cpuS,
      conductorPeakRssMiB: cpuOf('conductor').maxRssMiB,
      conductorHeapAtEnd: heapAfter,
      simulatorCpuS: simCpuS,
      simulatorCpuMsPerRequest: round2((simCpuS * 1000) / Math.max(1, simRequests)),
      simulatorPeakRssMiB: Object.fromEntries(Object.keys(simPids).map((k) => [k, cpuOf(k).maxRssMiB])),
      postgresCpuS: usage.postgresCpuS,
      benchClientCpuS: usage.benchClientCpuS,
      machineBusyCpuS: usage.machineBusyCpuS,
      maxConcurrentRequestsAtOneBmc: after.maxConcurrent,
      sessionsCreated: after.sessionsCreated - before.sessionsCreated,
      logins: after.logins - before.logins,
    },
    notificationsReceived: received,
    sync,
    ratio: sync && steady ? { steadyAsyncVsSteadySync: round2(steady.nodesPerS / (sync.nodesPerS as number)) } : null,
    ironicPrototype: IRONIC_PROTOTYPE,
  };
  const file = await writeResults(opts.name, startedAt, result);
  process.stdout.write(`\n${table([
    ['iteration', 'nodes', 'ok', 'failed', 'timed out', 'wall s', 'nodes/s', 'requests', 'req/node', 'slowest chain s', 'wall/chain', 'peak RSS MiB', 'peak heap MiB'],
    ...iterations.map((r) => [String(r.iteration), String(r.nodes), String(r.ok), String(r.failed), String(r.timedOut), fmt(r.wallS), fmt(r.nodesPerS),
      String(r.simulatorRequests), fmt(r.requestsPerNode), fmt(r.slowestChainS), fmt(r.wallOverSlowestChain ?? NaN),
      fmt(r.conductorMemory.peakRssMiB), `${fmt(r.conductorMemory.peakHeapUsedMiB)} / ${fmt(r.conductorMemory.peakHeapTotalMiB)}`]),
  ])}\n`);
  process.stdout.write(`conductor: ${fmt(cpuOf('conductor').cpuS)} CPU s over ${fmt(wallS)} s, peak RSS ${fmt(cpuOf('conductor').maxRssMiB)} MiB (V8 heap at the end: ${fmt(heapAfter.heapUsedMiB)} MiB used of ${fmt(heapAfter.heapTotalMiB)}); ` +
    `simulators: ${fmt(simCpuS)} CPU s for ${simRequests} requests (${fmt(simRequests / wallS)}/s, ${fmt(result.async.simulatorCpuMsPerRequest)} ms CPU each), max ${after.maxConcurrent} concurrent at one BMC, ` +
    `${after.sessionsCreated - before.sessionsCreated} sessions for ${after.bmcs} BMCs; machine busy ${fmt(usage.machineBusyCpuS)} CPU s; notifications received ${received}\n`);
  if (sync) process.stdout.write(`synchronous, 4 workers, steady: ${sync.nodesNotified as number} nodes in ${opts.syncSeconds} s = ${fmt(sync.nodesPerS as number, 2)} nodes/s; steady asynchronous / steady synchronous = ${fmt(result.ratio?.steadyAsyncVsSteadySync ?? NaN)}x\n`);
  process.stdout.write(`load average ${result.loadAverage.start.join(' ')} → ${result.loadAverage.end.join(' ')}; results in ${path.relative(ROOT, file)}\n`);
  await db.drop();
  return 0;
}

runBenchmark(main);
