/** The latency phase: single power requests, one at a time, with the system idle. */
import { performance } from 'node:perf_hooks';
import type { Knex } from 'knex';
import { Client, Errors } from '../lib/http.js';
import { watchCpu } from '../lib/proc.js';
import { sleep, summarize, type LatencySummary } from '../lib/util.js';
import type { BenchNode, Fleet } from './fleet.js';
import { openCount, resetStatements, topStatements, type StatementStat } from './measure.js';
import type { Options } from './options.js';

export interface LatencyResult {
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

export async function latencyPhase(opts: Options, fleet: Fleet, knex: Knex, nodes: BenchNode[], log: (m: string) => void): Promise<LatencyResult> {
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
