/**
 * Power state sync benchmark (not a test): one `galvanic conductor` with default options
 * syncing N simulated Redfish BMCs (`galvanic sim redfish` child processes).
 *
 *   node dist/bench/power-sync.js [--nodes 10000] [--latency 1000-2000] [--slow-bmc-fraction 0.01]
 *     [--slow 20000] [--interval 60] [--passes 2] [--ironic-seconds 60] [--both-seconds 180]
 *     [--base-port 10000] [--name power-sync]
 *
 * Phase 1 (the asynchronous sync, the default): `--passes` passes, each from the conductor's
 * own "power state sync pass" log line: wall time, nodes ok / failed / timed out, requests
 * per node at the simulators, and the slowest BMC's request chain (the sum of the latencies
 * the simulator imposed on its requests during the pass: with one request at a time per BMC,
 * no client reads that node faster). Reads slower than sync_power_state_node_timeout are cut
 * at it: a pass with reads cut off is compared with the timeout. Slow BMCs log in and discover
 * over several passes (what a cut read sent is kept), so use --passes 3 or more for the steady one. The first pass also logs
 * in to every BMC and discovers its system.
 * Phase 2 (Ironic's mode, steady): the same warm conductor is switched by SIGHUP to
 * sync_power_state_async = false (8 lanes, Ironic's sync_power_state_workers); the nodes it
 * reads over `--ironic-seconds` (its /metrics) give its rate and the pass it implies.
 * Phase 3: a fresh conductor with sensor collection and the power sync both running on the
 * whole fleet for `--both-seconds`: its peak RSS. `--passes 0` runs only this phase.
 * Results: a table on stdout, bench/results/<name>-<timestamp>.json and <name>-latest.json.
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { onCleanup, runBenchmark } from './lib/cleanup.js';
import { createBenchDatabase, PG_FAST_FLAGS, startDatabaseServer } from './lib/database.js';
import { spawnGalvanic, watchCpu, type CpuWatch, type GalvanicProcess } from './lib/proc.js';
import { ensureFdLimit, enroll, markChains, simTotals, startSims, type Chains, type Sim, type Totals } from './lib/redfish-fleet.js';
import { benchLog, fmt, freePort, gitState, loadAvg, machineInfo, positiveInt, ROOT, round2, sleep, table, writeResults } from './lib/util.js';

/** [conductor] sync_power_state_node_timeout's default. */
const NODE_TIMEOUT_S = 30;

interface Options {
  nodes: number;
  latency: string;
  slowBmcFraction: number;
  slowMs: number;
  interval: number;
  passes: number;
  ironicSeconds: number;
  bothSeconds: number;
  basePort: number;
  name: string;
}

function parseOptions(argv: string[]): Options {
  const { values } = parseArgs({
    args: argv,
    options: {
      nodes: { type: 'string' }, latency: { type: 'string' }, 'slow-bmc-fraction': { type: 'string' }, slow: { type: 'string' },
      interval: { type: 'string' }, passes: { type: 'string' }, 'ironic-seconds': { type: 'string' }, 'both-seconds': { type: 'string' },
      'base-port': { type: 'string' }, name: { type: 'string' },
    },
  });
  const name = values.name ?? 'power-sync';
  if (!/^[a-z0-9-]+$/.test(name)) throw new Error('--name: lower-case letters, digits and dashes only');
  const slowBmcFraction = Number(values['slow-bmc-fraction'] ?? 0.01);
  if (!(slowBmcFraction >= 0 && slowBmcFraction <= 1)) throw new Error('--slow-bmc-fraction must be between 0 and 1');
  const interval = positiveInt('interval', values.interval, 60);
  return {
    nodes: positiveInt('nodes', values.nodes, 10_000),
    latency: values.latency ?? '1000-2000',
    slowBmcFraction,
    slowMs: positiveInt('slow', values.slow, 20_000, true),
    interval,
    passes: positiveInt('passes', values.passes, 2, true),
    ironicSeconds: positiveInt('ironic-seconds', values['ironic-seconds'], 60, true),
    bothSeconds: positiveInt('both-seconds', values['both-seconds'], 3 * interval, true),
    basePort: positiveInt('base-port', values['base-port'], 10_000),
    name,
  };
}

interface PassLine {
  nodes: number;
  ok: number;
  failed: number;
  timedOut: number;
  corrected: number;
  durationMs: number;
  failures: Record<string, number>;
}

/** One pass of phase 1, as reported. */
interface PassRow {
  pass: number;
  nodes: number;
  ok: number;
  failed: number;
  timedOut: number;
  corrected: number;
  failures: Record<string, number>;
  wallS: number;
  requests: number;
  requestsPerNode: number;
  slowestChainS: number;
  slowestChainCutS: number;
  chainP99S: number;
  wallOverSlowestChain: number | null;
  maxConcurrentAtOneBmc: number;
}

type CpuUsage = ReturnType<CpuWatch['stop']>;

interface Observed {
  line: PassLine;
  sim: Promise<{ chains: Chains; totals: Totals }>;
}

/** Starts a conductor and collects its "power state sync pass" lines, marking the simulators' chains at each. */
async function startConductor(label: string, dbUrl: string, env: Record<string, string>, sims: Sim[], config: string): Promise<{ proc: GalvanicProcess; passes: Observed[]; metricsPort: number }> {
  const metricsPort = await freePort();
  const proc = await spawnGalvanic({
    label, command: 'conductor', config,
    env: { GALVANIC_DATABASE__CONNECTION: dbUrl, GALVANIC_DEFAULT__HOST: label, GALVANIC_CONDUCTOR__METRICS_PORT: String(metricsPort), ...env },
  });
  const passes: Observed[] = [];
  let buf = '';
  proc.proc.stdout!.on('data', (d: Buffer) => {
    buf += d.toString();
    let i: number;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      if (!line.includes('power state sync pass')) continue;
      let parsed: PassLine;
      try {
        parsed = JSON.parse(line) as PassLine;
      } catch {
        continue;
      }
      const sim = (async () => ({ chains: await markChains(sims), totals: await simTotals(sims) }))();
      sim.catch(() => undefined);
      passes.push({ line: parsed, sim });
    }
  });
  return { proc, passes, metricsPort };
}

/** A gauge of the conductor's /metrics (the first sample of `name`). */
async function metric(port: number, name: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  return Number(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
}

async function main(): Promise<number> {
  const opts = parseOptions(process.argv.slice(2));
  const log = benchLog();
  const reexec = await ensureFdLimit(opts.nodes, log);
  if (reexec !== undefined) return reexec;
  const startedAt = new Date();
  const load0 = loadAvg();
  log(`options ${JSON.stringify(opts)}; load average ${load0.join(' ')}`);

  const server = await startDatabaseServer({ log, extraFlags: PG_FAST_FLAGS, tempPrefix: 'galvanic-bench-power-sync-' });
  const sims = await startSims({ ...opts, slowFraction: 0 }, log);
  const db = await createBenchDatabase(server, 'powersync', log);
  await enroll(db.url, sims);
  log(`${opts.nodes} nodes enrolled`);

  const common: Record<string, string> = {
    GALVANIC_NOTIFICATIONS__DRIVER: 'noop',
    GALVANIC_CONDUCTOR__SYNC_POWER_STATE_INTERVAL: String(opts.interval),
    GALVANIC_REDFISH__CONNECTION_CACHE_SIZE: String(opts.nodes + 100),
    GALVANIC_SENSOR_DATA__SEND_SENSOR_DATA: 'false',
  };
  const confDir = await fs.mkdtemp(path.join(os.tmpdir(), 'galvanic-bench-power-sync-'));
  onCleanup('conductor configuration', () => fs.rm(confDir, { recursive: true, force: true }));
  const confFile = path.join(confDir, 'galvanic.conf');
  const writeMode = (asyncSync: boolean) => fs.writeFile(confFile, `[conductor]\nsync_power_state_async = ${String(asyncSync)}\n`);
  await writeMode(true);

  const alive = (r: { proc: GalvanicProcess }) => {
    const p = r.proc.proc;
    if (p.exitCode !== null || p.signalCode !== null) throw new Error(`conductor exited (${p.exitCode ?? p.signalCode}):\n${r.proc.output()}`);
  };
  const passes: PassRow[] = [];
  let usage: CpuUsage | null = null;
  let ironic: Record<string, unknown> | null = null;
  // Phase 1: the asynchronous sync, default options (and phase 2 in the same conductor).
  if (opts.passes > 0) {
    await markChains(sims);
    const before = await simTotals(sims);
    const run = await startConductor('power-sync', db.url, common, sims, confFile);
    const simPids = Object.fromEntries(sims.map((x, i) => [`simulator${i + 1}`, x.proc.pid!]));
    const watch = watchCpu({ conductor: run.proc.pid, ...simPids }, server.postmasterPid);
    const deadline = Date.now() + (opts.passes + 2) * Math.max(opts.interval, 120) * 1000;
    while (run.passes.length < opts.passes) {
      alive(run);
      if (Date.now() > deadline) throw new Error(`${opts.passes} passes did not finish in time:\n${run.proc.output()}`);
      await sleep(250);
    }
    usage = watch.stop();
    let prev = before.requests;
    for (const [i, o] of run.passes.slice(0, opts.passes).entries()) {
      const { chains, totals } = await o.sim;
      const requests = totals.requests - prev;
      prev = totals.requests;
      const wall = o.line.durationMs / 1000;
      // A BMC slower than the node timeout (30 s by default) is cut there: a pass with reads cut
      // off is bound by the timeout, whatever the simulator counted for that BMC.
      const chainS = o.line.timedOut > 0 ? Math.max(chains.longest[1] / 1000, NODE_TIMEOUT_S) : chains.longest[1] / 1000;
      passes.push({
        pass: i + 1, nodes: o.line.nodes, ok: o.line.ok, failed: o.line.failed, timedOut: o.line.timedOut, corrected: o.line.corrected, failures: o.line.failures,
        wallS: round2(wall), requests, requestsPerNode: round2(requests / Math.max(1, o.line.nodes)),
        slowestChainS: round2(chains.longest[1] / 1000), slowestChainCutS: round2(chainS), chainP99S: round2(chains.p99Ms / 1000),
        wallOverSlowestChain: chainS > 0 ? round2(wall / chainS) : null, maxConcurrentAtOneBmc: totals.maxConcurrent,
      });
    }
    // Phase 2: Ironic's mode in the same warm conductor.
    if (opts.ironicSeconds > 0) {
      await writeMode(false);
      run.proc.proc.kill('SIGHUP');
      const seen = run.passes.length;
      // The next pass takes the new mode: wait for its start (the end of the one running, or the next tick).
      const tickWait = Date.now() + opts.interval * 1000 + 120_000;
      while (run.passes.length === seen && Date.now() < tickWait) await sleep(250);
      await sleep(Math.min(opts.interval * 1000, 60_000));
      const ok0 = await metric(run.metricsPort, 'galvanic_power_sync_reads_ok');
      const t0 = Date.now();
      const s0 = await simTotals(sims);
      await sleep(opts.ironicSeconds * 1000);
      alive(run);
      const read = (await metric(run.metricsPort, 'galvanic_power_sync_reads_ok')) - ok0;
      const windowS = (Date.now() - t0) / 1000;
      const s1 = await simTotals(sims);
      const perS = read / windowS;
      ironic = {
        workers: 8, windowS: round2(windowS), nodesRead: read, nodesPerS: round2(perS), requestsPerNode: read > 0 ? round2((s1.requests - s0.requests) / read) : null,
        impliedPassS: perS > 0 ? Math.round(opts.nodes / perS) : null,
      };
    }
    await run.proc.stop();
  }
  const steady = passes[passes.length - 1];

  // Phase 3: sensors and power sync together, for memory.
  let both: Record<string, unknown> | null = null;
  if (opts.bothSeconds > 0) {
    await writeMode(true);
    const env = { ...common, GALVANIC_SENSOR_DATA__SEND_SENSOR_DATA: 'true', GALVANIC_SENSOR_DATA__INTERVAL: String(opts.interval) };
    const r = await startConductor('power-sync-sensors', db.url, env, sims, confFile);
    const w = watchCpu({ conductor: r.proc.pid }, server.postmasterPid);
    const end = Date.now() + opts.bothSeconds * 1000;
    while (Date.now() < end) {
      alive(r);
      await sleep(500);
    }
    const u = w.stop();
    both = { seconds: opts.bothSeconds, powerPasses: r.passes.map((p) => ({ wallS: round2(p.line.durationMs / 1000), ok: p.line.ok })), conductorPeakRssMiB: u.processes.conductor.maxRssMiB, conductorCpuS: u.processes.conductor.cpuS };
    await r.proc.stop();
  }

  const result = {
    benchmark: 'power-sync',
    startedAt: startedAt.toISOString(),
    options: opts,
    machine: machineInfo(),
    loadAverage: { start: load0, end: loadAvg() },
    git: gitState(),
    database: { kind: server.kind, info: server.info },
    chainDefinition: 'per BMC and pass, the sum of the latencies the simulator imposed on its requests; BMCs slower than the node timeout count up to it',
    async: usage ? { passes, conductorCpuS: usage.processes.conductor.cpuS, conductorPeakRssMiB: usage.processes.conductor.maxRssMiB, postgresCpuS: usage.postgresCpuS } : null,
    ironic,
    ratio: ironic && steady && (ironic.impliedPassS as number | null) ? { ironicPassOverSteadyPass: round2((ironic.impliedPassS as number) / steady.wallS) } : null,
    both,
  };
  const file = await writeResults(opts.name, startedAt, result);
  if (usage) process.stdout.write(`\n${table([
    ['pass', 'nodes', 'ok', 'failed', 'timed out', 'wall s', 'req/node', 'slowest chain s (cut)', 'wall/chain', 'max at one BMC'],
    ...passes.map((p) => [String(p.pass), String(p.nodes), String(p.ok), String(p.failed), String(p.timedOut), fmt(p.wallS), fmt(p.requestsPerNode, 2),
      `${fmt(p.slowestChainS)} (${fmt(p.slowestChainCutS)})`, fmt(p.wallOverSlowestChain ?? NaN, 2), String(p.maxConcurrentAtOneBmc)]),
  ])}\n`);
  if (usage) process.stdout.write(`conductor: ${fmt(usage.processes.conductor.cpuS)} CPU s, peak RSS ${fmt(usage.processes.conductor.maxRssMiB)} MiB\n`);
  if (ironic) process.stdout.write(`Ironic's mode (8 lanes), steady: ${String(ironic.nodesRead)} nodes in ${fmt(ironic.windowS as number)} s = ${fmt(ironic.nodesPerS as number, 2)} nodes/s, a pass of about ${String(ironic.impliedPassS)} s; ratio ${fmt(result.ratio?.ironicPassOverSteadyPass ?? NaN)}x\n`);
  if (both) process.stdout.write(`sensors and power sync together for ${opts.bothSeconds} s: conductor peak RSS ${fmt(both.conductorPeakRssMiB as number)} MiB\n`);
  process.stdout.write(`load average ${result.loadAverage.start.join(' ')} → ${result.loadAverage.end.join(' ')}; results in ${path.relative(ROOT, file)}\n`);
  await db.drop();
  return 0;
}

runBenchmark(main);
