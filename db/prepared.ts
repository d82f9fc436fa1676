/**
 * Named prepared statements, for hot statements whose generic plan is as good as any: parsed
 * once per connection by node-postgres and, after Postgres's first five executions, planned
 * once instead of at every call. The accept's node lock took 0.35-0.44 ms to plan and about as
 * long to run. Not for statements that join an array or a JSON recordset of the batch against
 * a table (the claim, the outcome batch): their custom plans see the batch's size, and generic
 * plans measured 4 to 30 times slower.
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
