import { createHash } from 'node:crypto';
import type { Knex } from 'knex';

const names = new Map<string, string>();

/**
 * A raw statement sent as a named prepared statement (pg's `{ name, text, values }`): each
 * connection parses it once, and Postgres keeps its plan for the connection once a generic
 * plan serves (or at once under plan_cache_mode = force_generic_plan). For the hot statements
 * only, whose text is one of a few fixed strings: each distinct text stays prepared on every
 * connection of the pool. The name is derived from the text, because pg refuses a name it
 * has already prepared with another text on that connection.
 */
export function preparedRaw(db: Knex, sql: string, bindings: readonly unknown[]): Knex.Raw {
  let name = names.get(sql);
  if (name === undefined) {
    name = `galvanic_${createHash('sha1').update(sql).digest('hex').slice(0, 24)}`;
    names.set(sql, name);
  }
  return db.raw(sql, bindings as Knex.RawBinding[]).options({ name });
}

/**
 * For the rest of the transaction, prepared statements run their generic plan, made once per
 * connection. Left to itself (plan_cache_mode = auto) Postgres went on planning the outcome
 * batch and the acceptor's statements nearly every time, their custom plans being estimated
 * cheaper (known array lengths) though no better. Unnamed statements in the transaction are
 * planned generically too: only for transactions whose statements are key lookups.
 */
export async function useGenericPlans(trx: Knex.Transaction): Promise<void> {
  await trx.raw('SET LOCAL plan_cache_mode = force_generic_plan');
}
