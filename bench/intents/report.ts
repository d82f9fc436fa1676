/** The targets, the results' JSON, and the tables printed at the end. */
import { SCHEMA } from '../../common/config-schema.js';
import type { DatabaseServer } from '../lib/database.js';
import { API_VERSION } from '../lib/http.js';
import { fmt, loadAvg, redactUrl, round2, table, type Calibration, type gitState, type MachineInfo } from '../lib/util.js';
import type { StatementStat } from './measure.js';
import { POLL_MS, SERVER_LOG_LEVEL, type Options } from './options.js';
import type { RunResult } from './run.js';

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

/** What the report says of the whole benchmark, beside its runs. */
export interface BenchContext {
  opts: Options;
  startedAt: Date;
  machine: MachineInfo;
  source: ReturnType<typeof gitState>;
  calibration: Calibration;
  server: DatabaseServer;
}

/** Targets and the JSON for the runs so far; written after every K, so an interrupted run keeps them. */
export function summarizeRuns(ctx: BenchContext, runs: RunResult[], complete: boolean) {
  const { opts, startedAt, machine, source, calibration, server } = ctx;
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
}

/** The tables and notes printed at the end of the benchmark. */
export function renderReport(ctx: BenchContext, runs: RunResult[], summary: ReturnType<typeof summarizeRuns>): string {
  const { opts, machine, source, calibration, server } = ctx;
  const { result, targets, loadAvgAtEnd } = summary;
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
  return `${out.join('\n')}\n`;
}
