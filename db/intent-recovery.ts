/**
 * Intents a conductor left running: those of a conductor that restarted or died, and those
 * of a live one that ran too long (orphans).
 */
import type { Knex } from 'knex';
import { intentMapper, notifyIntentDone, skipRestOfBatch, type Intent } from './intents.js';
import { clearReservationsOf } from './reservations.js';
import { withTransaction } from './transaction.js';

/** Intents running under `conductor` for longer than `olderThanSeconds`. */
export async function longRunningIntentIds(db: Knex, conductor: string, olderThanSeconds: number): Promise<number[]> {
  const rows: Array<{ id: number }> = await db('intents')
    .select('id')
    // Implied by the state, but it lets the open intents' partial index answer: without it every
    // conductor read the whole table, finished intents included (31 ms at 100,000, each minute).
    .whereNull('finished_at')
    .where({ conductor, state: 'running' })
    .whereRaw('started_at < now() - make_interval(secs => ?)', [olderThanSeconds]);
  return rows.map((r) => Number(r.id));
}

/**
 * Recovers what `conductor` (restarted, or dead) left behind, in one transaction: running
 * intents that are safe to repeat go back to the queue (their attempt stays counted, so the
 * re-run is recorded as a retry); the others fail with a clear error, since running them
 * twice could do harm. Then its reservations are cleared.
 */
export async function recoverConductorLeftovers(
  db: Knex,
  conductor: string,
  /** Whether an intent cut short may run again: the kind's contract (common/intent-kinds.ts). */
  safeToRepeat: (intent: Intent) => boolean,
  /** Puts the node of a failed intent right (rolls back a transition), in the same transaction. */
  settleFailed?: (trx: Knex.Transaction, failed: Intent) => Promise<void>,
  /** Only these intents (and their nodes' reservations): the conductor is alive and runs others. */
  onlyIds?: readonly number[],
): Promise<{ requeued: Intent[]; failed: Intent[] }> {
  const mine = (q: Knex.QueryBuilder) => {
    // Implied by the state, but it lets the open intents' partial indexes answer.
    q.whereNull('finished_at').where({ conductor, state: 'running' });
    if (onlyIds) q.whereIn('id', onlyIds as number[]);
    return q;
  };
  // Retried on a deadlock: a survivor's recovery may race another's, or the dead conductor's
  // own recovery of its orphans.
  return withTransaction(db, async (trx) => {
    // Their nodes first, in id order, as every multi-node lock here: settling a failed intent
    // writes its node, and two recoveries that locked intents first, each in its own order,
    // then waited on each other's nodes (a deadlock, which failed a conductor's start).
    await trx.raw(
      `SELECT n.id FROM nodes n
        WHERE n.id IN (SELECT i.node_id FROM intents i WHERE i.finished_at IS NULL AND i.conductor = ? AND i.state = 'running'${onlyIds ? ' AND i.id = ANY(?::bigint[])' : ''})
        ORDER BY n.id FOR UPDATE OF n`,
      onlyIds ? [conductor, onlyIds as number[]] : [conductor],
    );
    const running: Intent[] = (await mine(trx('intents')).select('*').orderBy('id').forUpdate()).map((r: Record<string, unknown>) => intentMapper.fromRow(r));
    const ids = (repeat: boolean) => running.filter((i) => safeToRepeat(i) === repeat).map((i) => i.id);
    const requeued = await trx('intents').whereIn('id', ids(true))
      .update({ state: 'queued', error: `Conductor ${conductor} stopped while running this intent; retried.` })
      .returning('*');
    const failed = await trx('intents').whereIn('id', ids(false))
      .update({
        state: 'failed', finished_at: trx.fn.now(),
        // What is known: when it started; not whether its request reached the BMC before the stop.
        error: trx.raw(`? || to_char(started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') || ?`, [
          `Conductor ${conductor} stopped while running this intent (started at `,
          '), which is not safe to repeat; whether its request reached the BMC is not known: check the node and ask again.',
        ]),
      })
      .returning('*');
    for (const f of failed) {
      if (f.batch !== null && f.step_index !== null) await skipRestOfBatch(trx, f.batch, f.step_index);
      if (settleFailed) await settleFailed(trx, intentMapper.fromRow(f));
      await notifyIntentDone(trx, f.uuid);
    }
    await clearReservationsOf(trx, conductor, onlyIds ? [...requeued, ...failed].map((r: { node_id: number }) => r.node_id) : undefined);
    const map = (r: Record<string, unknown>) => intentMapper.fromRow(r);
    return { requeued: requeued.map(map), failed: failed.map(map) };
  });
}
