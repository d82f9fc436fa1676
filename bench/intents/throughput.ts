/**
 * The throughput phase: M power intents from C concurrent clients, the queue polled until it
 * drains, and the database's verification that every intent succeeded, in per-node order.
 */
import { performance } from 'node:perf_hooks';
import type { Knex } from 'knex';
import { Client, Errors, runConcurrently } from '../lib/http.js';
import { watchCpu } from '../lib/proc.js';
import { machineInfo, round2, sleep, summarize, type LatencySummary } from '../lib/util.js';
import type { BenchNode, Fleet } from './fleet.js';
import {
  databaseWork, diffWork, diffWrites, openCount, resetStatements, tableWrites, topStatements,
  type DatabaseWork, type StatementStat, type TableWrites,
} from './measure.js';
import { POLL_MS, type Options } from './options.js';

export interface ThroughputResult {
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

export async function throughputPhase(
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
