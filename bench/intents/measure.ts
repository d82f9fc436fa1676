/** Database-side measurements: open intents, statements, commits and WAL, row writes by table. */
import type { Knex } from 'knex';
import { round2, sleep } from '../lib/util.js';

export async function openCount(knex: Knex): Promise<number> {
  const { rows } = (await knex.raw('SELECT count(*) AS n FROM intents WHERE finished_at IS NULL')) as { rows: Array<{ n: number }> };
  return Number(rows[0].n);
}

export interface StatementStat {
  query: string;
  calls: number;
  totalMs: number;
  meanMs: number;
  maxMs: number;
  /** Planning time of all calls (a prepared statement plans once, or rarely). */
  planMs: number;
  /** How many times it was planned, and the mean planning time of those. */
  plans: number;
  meanPlanMs: number;
  rows: number;
}

export async function resetStatements(knex: Knex, enabled: boolean): Promise<void> {
  if (enabled) await knex.raw('SELECT pg_stat_statements_reset()');
}

/**
 * What the database did in a phase, counted whole: every statement (pg_stat_statements, this
 * database, the bench's own polling included), the transactions committed, the WAL written.
 * Divided by the intents, these change only with how the work is batched, not with the load.
 */
export interface DatabaseWork {
  statements?: { calls: number; execMs: number; planMs: number };
  commits: number;
  walRecords: number;
  walBytes: number;
}

export async function databaseWork(knex: Knex, statements: boolean): Promise<DatabaseWork> {
  await knex.raw('SELECT pg_stat_force_next_flush()').catch(() => undefined);
  const { rows: [db] } = (await knex.raw(
    `SELECT xact_commit AS commits, (SELECT wal_records FROM pg_stat_wal) AS records, (SELECT wal_bytes FROM pg_stat_wal) AS bytes
       FROM pg_stat_database WHERE datname = current_database()`,
  )) as { rows: Array<{ commits: string; records: string; bytes: string }> };
  const out: DatabaseWork = { commits: Number(db.commits), walRecords: Number(db.records), walBytes: Number(db.bytes) };
  if (statements) {
    const { rows: [s] } = (await knex.raw(
      `SELECT coalesce(sum(calls), 0) AS calls, coalesce(sum(total_exec_time), 0) AS exec, coalesce(sum(total_plan_time), 0) AS plan
         FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`,
    )) as { rows: Array<{ calls: string; exec: number; plan: number }> };
    out.statements = { calls: Number(s.calls), execMs: round2(Number(s.exec)), planMs: round2(Number(s.plan)) };
  }
  return out;
}

export function diffWork(after: DatabaseWork, before: DatabaseWork): DatabaseWork {
  return {
    // pg_stat_statements was reset at the start of the phase.
    statements: after.statements,
    commits: after.commits - before.commits,
    walRecords: after.walRecords - before.walRecords,
    walBytes: after.walBytes - before.walBytes,
  };
}

/** The statements of this database by total execution time. */
export async function topStatements(knex: Knex, enabled: boolean, limit = 15): Promise<StatementStat[] | undefined> {
  if (!enabled) return undefined;
  const { rows } = (await knex.raw(
    `SELECT query, calls, total_exec_time AS total, mean_exec_time AS mean, max_exec_time AS max, total_plan_time AS plan, plans,
            mean_plan_time AS mean_plan, rows
       FROM pg_stat_statements
      WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
      ORDER BY total_exec_time + total_plan_time DESC LIMIT ?`,
    [limit],
  )) as { rows: Array<{ query: string; calls: number; total: number; mean: number; max: number; plan: number; plans: number; mean_plan: number; rows: number }> };
  return rows.map((r) => ({
    query: r.query.replace(/\s+/g, ' ').slice(0, 240),
    calls: Number(r.calls),
    totalMs: round2(r.total),
    meanMs: round2(r.mean),
    maxMs: round2(r.max),
    planMs: round2(r.plan),
    plans: Number(r.plans),
    meanPlanMs: Math.round(r.mean_plan * 1000) / 1000,
    rows: Number(r.rows),
  }));
}

export interface TableWrites {
  inserts: number;
  updates: number;
  hotUpdates: number;
  indexes: number;
  autovacuums: number;
}

export async function tableWrites(knex: Knex, settle = false): Promise<Record<string, TableWrites>> {
  // Backends report their counts at most once a second, and an idle one only after 10 s.
  if (settle) await sleep(11_000);
  // Postgres 15 or later; older servers report this backend's counts a little later.
  await knex.raw('SELECT pg_stat_force_next_flush()').catch(() => undefined);
  const { rows } = (await knex.raw(
    `SELECT relname, n_tup_ins AS ins, n_tup_upd AS upd, n_tup_hot_upd AS hot, autovacuum_count AS av,
            (SELECT count(*) FROM pg_index x WHERE x.indrelid = t.relid) AS idx
       FROM pg_stat_user_tables t WHERE relname IN ('nodes', 'intents', 'node_history')`,
  )) as { rows: Array<{ relname: string; ins: number; upd: number; hot: number; av: number; idx: number }> };
  const out: Record<string, TableWrites> = {};
  for (const r of rows) {
    out[r.relname] = { inserts: Number(r.ins), updates: Number(r.upd), hotUpdates: Number(r.hot), indexes: Number(r.idx), autovacuums: Number(r.av) };
  }
  return out;
}

export function diffWrites(after: Record<string, TableWrites>, before: Record<string, TableWrites>): Record<string, TableWrites> {
  const out: Record<string, TableWrites> = {};
  for (const [t, a] of Object.entries(after)) {
    const b = before[t] ?? { inserts: 0, updates: 0, hotUpdates: 0, indexes: a.indexes, autovacuums: 0 };
    out[t] = { inserts: a.inserts - b.inserts, updates: a.updates - b.updates, hotUpdates: a.hotUpdates - b.hotUpdates, indexes: a.indexes, autovacuums: a.autovacuums - b.autovacuums };
  }
  return out;
}
