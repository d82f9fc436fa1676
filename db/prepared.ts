/**
 * Named prepared statements, for hot statements whose generic plan is as good as any: parsed
 * once per connection by node-postgres and, after Postgres's first five executions, planned
 * once instead of at every call. The accept's node lock took 0.35-0.44 ms to plan and about as
 * long to run. Not for statements whose custom plans see what a generic one cannot (the
 * claim's LIMIT and ring ranges, the outcome batch's states): generic plans of those measured 4
 * to 30 times slower. An array parameter joined against a table is planned anew at every call
 * (its custom plan counts the elements, the generic one assumes ten, and never looks cheaper);
 * a JSON recordset is estimated at 100 rows either way, so a statement that takes its batch as
 * one settles on the generic plan (lockAndWriteHeld, updateLockedNodes).
 */
import { createHash } from 'node:crypto';
import type { Knex } from 'knex';

/** The statement's name: from its text, so that one name never stands for two statements. */
function nameOf(sql: string): string {
  return `g_${createHash('sha1').update(sql).digest('base64url').slice(0, 20)}`;
}

/**
 * `db.raw(sql, bindings)` as a named prepared statement. Only for statements whose text does
 * not depend on the values (arrays go in as one array parameter, not as lists).
 */
export function preparedRaw(db: Knex, sql: string, bindings: readonly Knex.RawBinding[]): Knex.Raw {
  return db.raw(sql, bindings as Knex.RawBinding[]).options({ name: nameOf(sql) });
}
