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
 *
 * This file is the entry; bench/intents/ holds the options, the set-up (nodes, processes), the
 * database-side measurements, one file per phase, one run with K conductors, --explain-claim
 * and the report.
 */
import path from 'node:path';
import { runBenchmark } from './lib/cleanup.js';
import { PG_FAST_FLAGS, startDatabaseServer } from './lib/database.js';
import { benchLog, calibrate, gitState, machineInfo, writeResults } from './lib/util.js';
import { explainClaim } from './intents/explain.js';
import { parseOptions } from './intents/options.js';
import { renderReport, summarizeRuns, type BenchContext } from './intents/report.js';
import { runWithConductors, type RunResult } from './intents/run.js';

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

  const ctx: BenchContext = { opts, startedAt, machine, source, calibration, server };
  const runs: RunResult[] = [];
  for (const k of opts.conductors) {
    log(`=== ${k} conductor(s) ===`);
    runs.push(await runWithConductors(opts, server, k, log));
    if (runs.length < opts.conductors.length) {
      await writeResults(opts.resultsName, startedAt, summarizeRuns(ctx, runs, false).result);
      log(`partial results (K = ${runs.map((r) => r.conductors).join(', ')}) written to bench/results/${opts.resultsName}-latest.json`);
    }
  }
  const summary = summarizeRuns(ctx, runs, true);
  const { result, targets, errorCount, ok } = summary;
  process.stdout.write(renderReport(ctx, runs, summary));

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
