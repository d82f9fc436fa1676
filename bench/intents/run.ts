/** One run with K conductors: a fresh database, its nodes and processes, and the phases asked for. */
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { createKnex } from '../../db/connection.js';
import { onCleanup } from '../lib/cleanup.js';
import { createBenchDatabase, type DatabaseServer } from '../lib/database.js';
import { fmt, gitState, newestMtime, ROOT, round2 } from '../lib/util.js';
import { insertNodes, startFleet } from './fleet.js';
import { IDLE_S, idlePhase, type IdleResult } from './idle.js';
import { latencyPhase, type LatencyResult } from './latency.js';
import type { Options } from './options.js';
import { throughputPhase, type ThroughputResult } from './throughput.js';

export interface RunResult {
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


export async function runWithConductors(opts: Options, server: DatabaseServer, k: number, log: (m: string) => void): Promise<RunResult> {
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
