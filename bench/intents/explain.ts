/** --explain-claim: the claim statement with a full queue. */
import { performance } from 'node:perf_hooks';
import type { Knex } from 'knex';
import { loadConfig } from '../../common/config.js';
import { HashRing } from '../../common/hash-ring.js';
import { createKnex } from '../../db/connection.js';
import { claimIntents, type ClaimScope } from '../../db/intent-claims.js';
import { onCleanup } from '../lib/cleanup.js';
import { createBenchDatabase, type DatabaseServer } from '../lib/database.js';
import { round2 } from '../lib/util.js';
import { insertNodes } from './fleet.js';
import { CONFIG_FILE, type Options } from './options.js';

/**
 * The claim statement and bindings exactly as db/intent-claims.ts builds them (the last statement
 * it issues), and the settings it issues before it in the same transaction.
 */
async function captureClaimSql(conductor: string, limit: number, scope: ClaimScope): Promise<{ sql: string; bindings: unknown[]; settings: string[] }> {
  const captured: Array<{ sql: string; bindings: unknown[] }> = [];
  const fake = {
    raw: (sql: string, bindings: unknown[] = []) => {
      captured.push({ sql, bindings });
      return Promise.resolve({ rows: [] });
    },
    transaction: async (work: (trx: unknown) => Promise<unknown>) => work(fake),
  } as unknown as Knex;
  await claimIntents(fake, conductor, limit, scope);
  const last = captured.pop();
  if (!last) throw new Error('claimIntents issued no statement');
  return { ...last, settings: captured.map((c) => c.sql) };
}

/** Runs `work` in a transaction that is always rolled back. */
async function inRolledBackTransaction(knex: Knex, work: (trx: Knex.Transaction) => Promise<void>): Promise<void> {
  const trx = await knex.transaction();
  try {
    await work(trx);
  } finally {
    await trx.rollback();
  }
}

export async function explainClaim(opts: Options, server: DatabaseServer, log: (m: string) => void): Promise<Record<string, unknown>> {
  const db = await createBenchDatabase(server, 'galvanic_bench_explain', log);
  const knex = createKnex(db.url, { poolMax: 2, applicationName: 'galvanic-bench' });
  const closeKnex = onCleanup('bench pool', () => knex.destroy());
  try {
    const nodes = await insertNodes(knex, opts.nodes);
    const per = Math.ceil(opts.intents / nodes.length);
    const t = performance.now();
    // Round-robin over nodes like the API phase: ids interleave, seq 1..per per node.
    await knex.raw(
      `INSERT INTO intents (uuid, node_id, seq, kind, args, state, max_attempts, created_at)
       SELECT gen_random_uuid(), n.id, s, 'power',
              jsonb_build_object('target', CASE WHEN s % 2 = 1 THEN 'power on' ELSE 'power off' END), 'queued', 5, now()
         FROM generate_series(1, ?) s CROSS JOIN nodes n
        ORDER BY s, n.id
        LIMIT ?`,
      [per, opts.intents],
    );
    await knex.raw('VACUUM ANALYZE intents');
    log(`${opts.intents} queued intents inserted in ${((performance.now() - t) / 1000).toFixed(1)} s`);
    const config = loadConfig({ path: CONFIG_FILE, env: {} });
    const drivers = ['fake-hardware'];
    const limit = Math.min(opts.workers ?? config.conductor.workers_pool_size, 200);
    const ring = new HashRing(['bench-conductor-3-1', 'bench-conductor-3-2', 'bench-conductor-3-3']);
    const scopes: Array<{ label: string; scope: ClaimScope }> = [
      { label: 'one conductor (no ring filter)', scope: { conductorGroup: '', drivers } },
      { label: 'one of three conductors (ring filter)', scope: { conductorGroup: '', drivers, ranges: ring.rangesOf('bench-conductor-3-1') } },
    ];
    const out: Record<string, unknown> = { queuedIntents: opts.intents, nodes: nodes.length, limit, scopes: [] as unknown[] };
    for (const { label, scope } of scopes) {
      const { sql, bindings, settings } = await captureClaimSql('bench-explain', limit, scope);
      let plan = '';
      const timings: number[] = [];
      await inRolledBackTransaction(knex, async (trx) => {
        for (const setting of settings) await trx.raw(setting);
        const { rows } = (await trx.raw(`EXPLAIN (ANALYZE, BUFFERS) ${sql}`, bindings as Knex.RawBinding[])) as { rows: Array<{ 'QUERY PLAN': string }> };
        plan = rows.map((r) => r['QUERY PLAN']).join('\n');
      });
      // The plan a prepared claim would run: its generic plan (Postgres 16 or later), kept to show why the claim is planned per call.
      let genericPlan = '';
      await inRolledBackTransaction(knex, async (trx) => {
        for (const setting of settings) await trx.raw(setting);
        const native = trx.raw(sql, bindings as Knex.RawBinding[]).toSQL().toNative();
        const { rows } = (await trx.raw(`EXPLAIN (GENERIC_PLAN) ${native.sql.replace(/\?/g, '\\?')}`)) as { rows: Array<{ 'QUERY PLAN': string }> };
        genericPlan = rows.map((r) => r['QUERY PLAN']).join('\n');
      }).catch((err: Error) => {
        genericPlan = `(not shown: ${err.message})`;
      });
      // The real statement, rolled back each time: what one claim costs with this queue.
      for (let i = 0; i < 5; i++) {
        const t0 = performance.now();
        let claimed = 0;
        await inRolledBackTransaction(knex, async (trx) => {
          claimed = (await claimIntents(trx, 'bench-explain', limit, scope)).length;
        });
        timings.push(performance.now() - t0);
        if (i === 0) log(`  ${label}: claimed ${claimed} (rolled back)`);
      }
      // The ring's range arrays make some lines kilobytes long; the JSON keeps them whole.
      const shown = plan.split('\n').map((l) => (l.length > 300 ? `${l.slice(0, 300)}…` : l)).join('\n');
      process.stdout.write(`\n=== claim query, ${label}, limit ${limit}, ${opts.intents} queued ===\n${shown}\n`);
      process.stdout.write(`--- its generic plan (what a prepared claim would run) ---\n${genericPlan.split('\n').map((l) => (l.length > 300 ? `${l.slice(0, 300)}…` : l)).join('\n')}\n`);
      process.stdout.write(`claimIntents() wall time over 5 runs (rolled back): ${timings.map((x) => x.toFixed(1)).join(', ')} ms\n`);
      (out.scopes as unknown[]).push({ label, plan: plan.split('\n'), genericPlan: genericPlan.split('\n'), claimWallMs: timings.map(round2) });
    }
    return out;
  } finally {
    await closeKnex();
    await db.drop();
  }
}
