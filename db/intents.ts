import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { IntentNotFound } from '../common/errors.js';
import { RowMapper } from './rows.js';

export type IntentState = 'queued' | 'running' | 'succeeded' | 'failed' | 'skipped' | 'cancelled';
export const FINAL_STATES: ReadonlySet<IntentState> = new Set(['succeeded', 'failed', 'skipped', 'cancelled']);

/** One action asked of a node, and what became of it. */
export interface Intent {
  id: number;
  uuid: string;
  nodeId: number;
  seq: number;
  kind: string;
  args: Record<string, unknown>;
  batch: string | null;
  stepIndex: number | null;
  operation: string | null;
  state: IntentState;
  attempts: number;
  maxAttempts: number;
  notBefore: Date | null;
  conductor: string | null;
  error: string | null;
  result: unknown;
  requester: string | null;
  requestId: string | null;
  idempotencyKey: string | null;
  createdAt: Date;
  startedAt: Date | null;
  finishedAt: Date | null;
}

const JSON_COLUMNS = ['args', 'result'];
const mapper = new RowMapper<Intent>([
  'id', 'uuid', 'node_id', 'seq', 'kind', ...JSON_COLUMNS, 'batch', 'step_index', 'operation', 'state', 'attempts',
  'max_attempts', 'not_before', 'conductor', 'error', 'requester', 'request_id', 'idempotency_key', 'created_at',
  'started_at', 'finished_at',
], JSON_COLUMNS);

/** The channel conductors LISTEN on; the payload is the node id. */
export const INTENT_CHANNEL = 'galvanic_intents';

export interface NewIntent {
  kind: string;
  args: Record<string, unknown>;
  maxAttempts: number;
  batch?: string;
  stepIndex?: number;
  operation?: string;
  requester?: string | null;
  requestId?: string | null;
  idempotencyKey?: string | null;
}

/**
 * Appends intents to a node's queue. Must run inside the transaction that holds the node's
 * row lock (taken by the caller's validation): the lock serialises `seq` per node, and the
 * NOTIFY is delivered only if the transaction commits.
 */
export async function enqueueIntents(trx: Knex.Transaction, nodeId: number, intents: NewIntent[]): Promise<Intent[]> {
  const { rows } = await trx.raw<{ rows: { next: number }[] }>('SELECT coalesce(max(seq), 0) + 1 AS next FROM intents WHERE node_id = ?', [nodeId]);
  let seq = Number(rows[0].next);
  const inserted = await trx('intents')
    .insert(intents.map((i) => mapper.toRow({ ...i, uuid: randomUUID(), nodeId, seq: seq++, state: 'queued' })))
    .returning('*');
  await trx.raw('SELECT pg_notify(?, ?)', [INTENT_CHANNEL, String(nodeId)]);
  return inserted.map((r: Record<string, unknown>) => mapper.fromRow(r)).sort((a: Intent, b: Intent) => a.seq - b.seq);
}

export async function findIntentByKey(db: Knex, nodeId: number, key: string): Promise<Intent | undefined> {
  const row = await db('intents').where({ node_id: nodeId, idempotency_key: key }).first();
  return row ? mapper.fromRow(row) : undefined;
}

export async function getIntent(db: Knex, uuid: string): Promise<Intent> {
  if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(uuid)) throw new IntentNotFound(uuid);
  const row = await db('intents').where('uuid', uuid).first();
  if (!row) throw new IntentNotFound(uuid);
  return mapper.fromRow(row);
}

export async function getIntentById(db: Knex, id: number): Promise<Intent> {
  const row = await db('intents').where('id', id).first();
  if (!row) throw new IntentNotFound(String(id));
  return mapper.fromRow(row);
}

export async function listNodeIntents(db: Knex, nodeId: number, limit: number, afterSeq?: number): Promise<Intent[]> {
  const q = db('intents').where('node_id', nodeId).orderBy('seq', 'asc').limit(limit);
  if (afterSeq !== undefined) q.where('seq', '>', afterSeq);
  return (await q).map((r: Record<string, unknown>) => mapper.fromRow(r));
}

/** A claimed intent with its node reserved for this conductor. */
export interface Claim {
  intent: Intent;
}

/**
 * Claims up to `limit` runnable intents in one statement: the head of each node's open
 * queue, due (not_before passed), whose node nobody reserves. The node rows are locked
 * with SKIP LOCKED so concurrent conductors never claim the same node, and the
 * reservation and the intent's `running` state are written in the same statement.
 * `nodeIds`, when given, restricts the claim to this conductor's share of the nodes.
 */
export async function claimIntents(db: Knex, conductor: string, limit: number, nodeIds?: readonly number[]): Promise<Intent[]> {
  const ringFilter = nodeIds ? 'AND n.id = ANY(?::int[])' : '';
  const bindings: unknown[] = [];
  if (nodeIds) bindings.push(nodeIds);
  bindings.push(limit, conductor, conductor);
  const { rows } = await db.raw(
    `WITH heads AS (
       SELECT DISTINCT ON (i.node_id) i.id, i.node_id, i.state, i.not_before
         FROM intents i
        WHERE i.state IN ('queued', 'running')
        ORDER BY i.node_id, i.seq
     ), cand AS (
       SELECT h.id, n.id AS node_id
         FROM heads h JOIN nodes n ON n.id = h.node_id
        WHERE h.state = 'queued' AND (h.not_before IS NULL OR h.not_before <= now())
          AND n.reservation IS NULL ${ringFilter}
        ORDER BY h.id
        LIMIT ?
        FOR UPDATE OF n SKIP LOCKED
     ), reserved AS (
       UPDATE nodes SET reservation = ? FROM cand WHERE nodes.id = cand.node_id RETURNING nodes.id
     )
     UPDATE intents SET state = 'running', conductor = ?, started_at = now(), attempts = intents.attempts + 1
       FROM cand JOIN reserved ON reserved.id = cand.node_id
      WHERE intents.id = cand.id
     RETURNING intents.*`,
    bindings as Knex.RawBinding[],
  );
  return rows.map((r: Record<string, unknown>) => mapper.fromRow(r));
}

export interface IntentOutcome {
  state: 'succeeded' | 'failed' | 'queued';
  error?: string | null;
  result?: unknown;
  /** For a retry: when it may run again. */
  notBefore?: Date;
}

/** Records an intent's outcome; `queued` puts it back for a retry after `notBefore`. */
export async function finishIntent(trx: Knex, id: number, outcome: IntentOutcome): Promise<void> {
  const row: Record<string, unknown> = {
    state: outcome.state,
    error: outcome.error ?? null,
    result: outcome.result === undefined ? null : JSON.stringify(outcome.result),
  };
  if (outcome.state === 'queued') {
    row.not_before = outcome.notBefore ?? null;
  } else {
    row.finished_at = trx.fn.now();
  }
  await trx('intents').where('id', id).update(row);
}

/** Marks the later steps of a failed batch `skipped`. */
export async function skipRestOfBatch(trx: Knex, batch: string, afterStep: number): Promise<void> {
  await trx('intents')
    .where({ batch, state: 'queued' })
    .andWhere('step_index', '>', afterStep)
    .update({ state: 'skipped', finished_at: trx.fn.now(), error: 'An earlier step of this request failed.' });
}

/** Cancels a queued intent; returns false when it was no longer queued. */
export async function cancelIntent(db: Knex, id: number): Promise<boolean> {
  const n = await db('intents').where({ id, state: 'queued' }).update({ state: 'cancelled', finished_at: db.fn.now() });
  return n > 0;
}

/** Releases a node reservation held by `conductor`. */
export async function releaseReservation(trx: Knex, nodeId: number, conductor: string): Promise<void> {
  await trx('nodes').where({ id: nodeId, reservation: conductor }).update({ reservation: null });
}

/** Leftovers of a conductor that restarted or died: its reservations and running intents. */
export async function requeueRunningOf(db: Knex, conductor: string): Promise<number> {
  const n = await db('intents').where({ conductor, state: 'running' }).update({ state: 'queued', conductor: null });
  await db('nodes').where('reservation', conductor).update({ reservation: null });
  return n;
}
