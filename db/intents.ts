import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { preparedRaw } from './prepared.js';
import { IntentNotFound } from '../common/errors.js';
import { isUuid, updateNode } from './nodes.js';
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
export const intentMapper = new RowMapper<Intent>([
  'id', 'uuid', 'node_id', 'seq', 'kind', ...JSON_COLUMNS, 'batch', 'step_index', 'operation', 'state', 'attempts',
  'max_attempts', 'not_before', 'conductor', 'error', 'requester', 'request_id', 'idempotency_key', 'created_at',
  'started_at', 'finished_at',
], JSON_COLUMNS);

/**
 * The channel conductors LISTEN on. The payload names the node with new work (intentWakePayload):
 * only the conductor owning it on the hash ring looks; any other payload wakes every conductor.
 */
export const INTENT_CHANNEL = 'galvanic_intents';

/**
 * SQL: the seq of the head of the queue of node `nodeId` (an SQL expression), its unfinished
 * intent of lowest seq. A correlated scalar subquery in (node_id, seq) order, so an index probe
 * of that node whatever the statistics: as EXISTS or NOT EXISTS forms, planners on statistics
 * that said no intent was open read every open intent for each candidate.
 */
export function queueHeadSeq(nodeId: string): string {
  return `(SELECT p.seq FROM intents p WHERE p.node_id = ${nodeId} AND p.finished_at IS NULL ORDER BY p.node_id, p.seq LIMIT 1)`;
}

/** What a wake-up on INTENT_CHANNEL says: the node, and the newest intent it announces if known. */
export interface IntentWake {
  nodeUuid: string;
  /**
   * The `seq` of the newest intent queued or made due: a conductor running that node's intent
   * of this `seq` or a later one has nothing more to look for (a step it runs that goes back to
   * the queue learns from the requeue whether a wake came meanwhile). Unknown when the wake-up
   * may concern any intent of the node.
   */
  seq?: number;
}

/** The payload of a wake-up for new work on a node: `uuid`, or `uuid:seq`. */
export function intentWakePayload(wake: IntentWake): string {
  return wake.seq === undefined ? wake.nodeUuid : `${wake.nodeUuid}:${wake.seq}`;
}

/** The node and intent a wake-up payload names; undefined when it names none (wake every conductor). */
export function parseIntentWake(payload: string | undefined): IntentWake | undefined {
  if (!payload) return undefined;
  const colon = payload.indexOf(':');
  const nodeUuid = colon < 0 ? payload : payload.slice(0, colon);
  if (!isUuid(nodeUuid)) return undefined;
  if (colon < 0) return { nodeUuid };
  const seq = Number(payload.slice(colon + 1));
  return Number.isSafeInteger(seq) && seq > 0 ? { nodeUuid, seq } : { nodeUuid };
}

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
 * row lock (taken by the caller's validation): the lock serialises `seq` per node. The caller
 * wakes the conductors after commit (PgNotifyBatcher on INTENT_CHANNEL).
 */
export async function enqueueIntents(trx: Knex.Transaction, nodeId: number, intents: NewIntent[]): Promise<Intent[]> {
  return enqueueIntentsOfNodes(trx, intents.map((intent) => ({ nodeId, intent })));
}

/**
 * Appends intents to the queues of several nodes in one statement, each node's in the order
 * given. The transaction must hold every one of those nodes' row locks (see enqueueIntents).
 * Returns the intents in the order given.
 */
export async function enqueueIntentsOfNodes(trx: Knex.Transaction, items: ReadonlyArray<{ nodeId: number; intent: NewIntent }>): Promise<Intent[]> {
  if (items.length === 0) return [];
  const k = new Map<number, number>();
  const rows = items.map(({ nodeId, intent: i }) => {
    const nth = (k.get(nodeId) ?? 0) + 1;
    k.set(nodeId, nth);
    return {
      uuid: randomUUID(), node_id: nodeId, nth, kind: i.kind, args: i.args, batch: i.batch ?? null, step_index: i.stepIndex ?? null,
      operation: i.operation ?? null, max_attempts: i.maxAttempts, requester: i.requester ?? null, request_id: i.requestId ?? null,
      idempotency_key: i.idempotencyKey ?? null,
    };
  });
  // Every row's subquery sees the queue as it was before this statement: a node's n-th new intent gets max + n.
  const { rows: inserted } = await preparedRaw(
    trx,
    `INSERT INTO intents (uuid, node_id, seq, kind, args, batch, step_index, operation, state, max_attempts, requester, request_id, idempotency_key)
     SELECT v.uuid, v.node_id, coalesce((SELECT max(i.seq) FROM intents i WHERE i.node_id = v.node_id), 0) + v.nth, v.kind, v.args,
            v.batch, v.step_index, v.operation, 'queued', v.max_attempts, v.requester, v.request_id, v.idempotency_key
       FROM jsonb_to_recordset(?::jsonb) AS v(uuid uuid, node_id int, nth int, kind text, args jsonb, batch uuid, step_index int,
            operation uuid, max_attempts int, requester text, request_id text, idempotency_key text)
     RETURNING *`,
    [JSON.stringify(rows)],
  );
  const byUuid = new Map((inserted as Array<Record<string, unknown>>).map((r) => [r.uuid as string, intentMapper.fromRow(r)]));
  return rows.map((r) => byUuid.get(r.uuid) as Intent);
}

export async function findIntentByKey(db: Knex, nodeId: number, key: string): Promise<Intent | undefined> {
  const row = await db('intents').where({ node_id: nodeId, idempotency_key: key }).first();
  return row ? intentMapper.fromRow(row) : undefined;
}

export async function getIntent(db: Knex, uuid: string): Promise<Intent> {
  if (!isUuid(uuid)) throw new IntentNotFound(uuid);
  const row = await db('intents').where('uuid', uuid).first();
  if (!row) throw new IntentNotFound(uuid);
  return intentMapper.fromRow(row);
}

export async function getIntentById(db: Knex, id: number): Promise<Intent> {
  const row = await db('intents').where('id', id).first();
  if (!row) throw new IntentNotFound(String(id));
  return intentMapper.fromRow(row);
}

export async function listNodeIntents(db: Knex, nodeId: number, limit: number, afterSeq?: number): Promise<Intent[]> {
  const q = db('intents').where('node_id', nodeId).orderBy('seq', 'asc').limit(limit);
  if (afterSeq !== undefined) q.where('seq', '>', afterSeq);
  return (await q).map((r: Record<string, unknown>) => intentMapper.fromRow(r));
}

export interface IntentOutcome {
  state: 'succeeded' | 'failed' | 'queued' | 'cancelled';
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

/** Records many intents as succeeded with their results, in one statement. */
export async function finishSucceededIntents(trx: Knex, items: ReadonlyArray<{ id: number; result: unknown }>): Promise<void> {
  if (items.length === 0) return;
  await trx.raw(
    `UPDATE intents SET state = 'succeeded', error = NULL, result = v.result, finished_at = now()
       FROM jsonb_to_recordset(?::jsonb) AS v(id bigint, result jsonb)
      WHERE intents.id = v.id`,
    [JSON.stringify(items.map((i) => ({ id: i.id, result: i.result ?? null })))],
  );
}

/**
 * Puts running intents back in the queue, due at `notBefore` (work that waits for an event).
 * Returns the ids of those due at once: woken while they ran (wakeWaitingSteps), so that the
 * wake stands and a claim will find them.
 */
export async function requeueIntents(trx: Knex, items: ReadonlyArray<{ id: number; notBefore: Date; result?: unknown }>): Promise<Set<number>> {
  if (items.length === 0) return new Set();
  const { rows } = await trx.raw(
    // A wake that came while it ran (not_before set after it started) stands.
    `UPDATE intents SET state = 'queued', error = NULL, result = v.result,
            not_before = CASE WHEN intents.not_before > intents.started_at THEN intents.not_before ELSE v.not_before END
       FROM jsonb_to_recordset(?::jsonb) AS v(id bigint, not_before timestamptz, result jsonb)
      WHERE intents.id = v.id
      RETURNING intents.id, intents.not_before <= statement_timestamp() AS due`,
    [JSON.stringify(items.map((i) => ({ id: i.id, not_before: i.notBefore.toISOString(), result: i.result ?? null })))],
  ) as { rows: Array<{ id: string | number; due: boolean }> };
  return new Set(rows.filter((r) => r.due).map((r) => Number(r.id)));
}

/**
 * Makes each node's waiting provision step (a group operation's, requeued while its node waits
 * for an agent) due now. Returns the `seq` of each node's woken step, by node id, for the
 * wake-up (IntentWake); nodes without one are absent. Call it holding those nodes' row locks.
 */
export async function wakeWaitingSteps(trx: Knex, nodeIds: readonly number[]): Promise<Map<number, number>> {
  const out = new Map<number, number>();
  if (nodeIds.length === 0) return out;
  // A running one is woken too: its requeue keeps a not_before set after it started.
  const rows: Array<{ node_id: number; seq: number }> = await trx('intents').whereIn('node_id', nodeIds as number[])
    .where({ kind: 'provision_step', held: false }).whereIn('state', ['queued', 'running'])
    .where('attempts', '>', 0).update({ not_before: trx.fn.now() }).returning(['node_id', 'seq']);
  for (const r of rows) out.set(r.node_id, Math.max(out.get(r.node_id) ?? 0, r.seq));
  return out;
}

/**
 * Hands an agent's inspection data to the node's provision step that waits for it (a group
 * operation's inspect, requeued while its node waits in inspect wait), due now, so that the
 * step processes it as the node's turn. Returns its `seq` (for the wake-up), or undefined when
 * there was none. Call it holding the node's row lock.
 */
export async function handToWaitingStep(trx: Knex, nodeId: number, inspection: Record<string, unknown>): Promise<number | undefined> {
  const rows: Array<{ seq: number }> = await trx('intents').where({ node_id: nodeId, kind: 'provision_step', held: false }).whereIn('state', ['queued', 'running'])
    .where('attempts', '>', 0)
    .update({ args: trx.raw(`args || jsonb_build_object('inspection', ?::jsonb)`, [JSON.stringify(inspection)]), not_before: trx.fn.now() })
    .returning('seq');
  return rows.length > 0 ? Math.max(...rows.map((r) => r.seq)) : undefined;
}

/** Marks the later steps of a failed batch `skipped`. */
export async function skipRestOfBatch(trx: Knex, batch: string, afterStep: number): Promise<void> {
  await trx('intents')
    .where({ batch, state: 'queued' })
    .andWhere('step_index', '>', afterStep)
    .update({ state: 'skipped', finished_at: trx.fn.now(), error: 'An earlier step of this request failed.' });
}

/**
 * True while the node has a power intent queued or running: `target_power_state` announces
 * its target. Call it inside the transaction that holds the node's row lock.
 */
export async function hasOpenPowerIntent(db: Knex, nodeId: number): Promise<boolean> {
  const row = await db('intents').where({ node_id: nodeId, kind: 'power' }).whereNull('finished_at').first('id');
  return row !== undefined;
}

/**
 * Clears the node's `target_power_state` once no power intent is left to reach it (one was
 * cancelled, skipped or failed). Call it inside the transaction that holds the node's row lock.
 */
export async function clearSettledPowerTarget(trx: Knex, node: { id: number; targetPowerState: string | null }): Promise<void> {
  if (node.targetPowerState !== null && !(await hasOpenPowerIntent(trx, node.id))) {
    await updateNode(trx, node.id, { targetPowerState: null });
  }
}

/** Cancels a queued intent; returns false when it was no longer queued. */
export async function cancelIntent(db: Knex, id: number): Promise<boolean> {
  const n = await db('intents').where({ id, state: 'queued' }).update({ state: 'cancelled', finished_at: db.fn.now() });
  return n > 0;
}

/** The channel API servers LISTEN on for finished intents; the payload is the intent UUID. */
export const INTENT_DONE_CHANNEL = 'galvanic_intent_done';

export async function notifyIntentDone(trx: Knex, uuid: string): Promise<void> {
  await trx.raw('SELECT pg_notify(?, ?)', [INTENT_DONE_CHANNEL, uuid]);
}

/** Intents waiting or running, over all nodes (the queue depth of /metrics). */
export async function countOpenIntents(db: Knex): Promise<{ queued: number; running: number }> {
  const rows = await db('intents').select('state').count<Array<{ state: string; count: string }>>('* as count').whereNull('finished_at').groupBy('state');
  const out = { queued: 0, running: 0 };
  for (const r of rows) out[r.state as 'queued' | 'running'] = Number(r.count);
  return out;
}

/** The node's last queued or running intent: once it ends, every earlier one has too. */
export async function lastOpenIntent(db: Knex, nodeId: number): Promise<Intent | undefined> {
  const row = await db('intents').where('node_id', nodeId).whereNull('finished_at').orderBy('seq', 'desc').first();
  return row ? intentMapper.fromRow(row) : undefined;
}

/** Those of `nodeIds` with a queued intent of this kind (a heartbeat's continue is queued once). */
export async function nodesWithQueuedIntent(trx: Knex, nodeIds: readonly number[], kind: string): Promise<Set<number>> {
  if (nodeIds.length === 0) return new Set();
  const rows: Array<{ node_id: number }> = await trx('intents').distinct('node_id').whereIn('node_id', nodeIds as number[]).where({ kind, state: 'queued' });
  return new Set(rows.map((r) => r.node_id));
}
