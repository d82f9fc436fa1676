import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { InvalidParameterValue, NodeInOperation, NodeNotFound, OperationNotFound } from '../common/errors.js';
import { isUuid } from './nodes.js';
import { RowMapper } from './rows.js';
import { whereDefined } from './table.js';

export type OperationState = 'queued' | 'running' | 'succeeded' | 'partially_failed' | 'failed' | 'cancelled';
export const OPERATION_STATES: readonly OperationState[] = ['queued', 'running', 'succeeded', 'partially_failed', 'failed', 'cancelled'];

/** One step run on every node of an operation, in the intents API's step format. */
export interface OperationStep {
  kind: string;
  args: Record<string, unknown>;
}

/** A group operation: its policy, and where it stands. */
export interface Operation {
  id: number;
  uuid: string;
  state: OperationState;
  description: string | null;
  steps: OperationStep[];
  maxParallel: number;
  maxAttempts: number;
  initialDelayMs: number;
  maxDelayMs: number;
  onFailure: 'continue' | 'abort';
  queue: boolean;
  round: number;
  nodeCount: number;
  abortReason: string | null;
  requester: string | null;
  requestId: string | null;
  createdAt: Date;
  startedAt: Date | null;
  finishedAt: Date | null;
  cancelledAt: Date | null;
  progressNotifiedAt: Date | null;
}

const JSON_COLUMNS = ['steps'];
export const operationMapper = new RowMapper<Operation>([
  'id', 'uuid', 'state', 'description', ...JSON_COLUMNS, 'max_parallel', 'max_attempts', 'initial_delay_ms', 'max_delay_ms',
  'on_failure', 'queue', 'round', 'node_count', 'abort_reason', 'requester', 'request_id', 'created_at', 'started_at',
  'finished_at', 'cancelled_at', 'progress_notified_at',
], JSON_COLUMNS);

export type NewOperation = Pick<Operation, 'description' | 'steps' | 'maxParallel' | 'maxAttempts' | 'initialDelayMs' | 'maxDelayMs' | 'onFailure' | 'queue' | 'requester' | 'requestId'>;

/** Which nodes a selector-based operation covers; every given key must match. */
export interface NodeSelector {
  resourceClass?: string;
  conductorGroup?: string;
  owner?: string;
  provisionState?: string;
  driver?: string;
  maintenance?: boolean;
}

/**
 * Resolves node UUIDs or names to ids and takes their row locks (in id order, so two
 * requests over overlapping nodes never deadlock): nothing can queue on them meanwhile.
 */
export async function lockNodesByIdent(trx: Knex.Transaction, idents: readonly string[]): Promise<number[]> {
  const uuids = idents.filter((i) => isUuid(i)).map((i) => i.toLowerCase());
  const names = idents.filter((i) => !isUuid(i));
  const rows: Array<{ id: number; uuid: string; name: string | null }> = await trx('nodes')
    .select('id', 'uuid', 'name')
    .where((w) => w.whereIn('uuid', uuids).orWhereIn('name', names))
    .orderBy('id')
    .forUpdate();
  const byIdent = new Map<string, number>();
  for (const r of rows) {
    byIdent.set(r.uuid, r.id);
    if (r.name !== null) byIdent.set(r.name, r.id);
  }
  const ids = idents.map((i) => {
    const id = byIdent.get(isUuid(i) ? i.toLowerCase() : i);
    if (id === undefined) throw new NodeNotFound(i);
    return id;
  });
  if (new Set(ids).size !== ids.length) throw new InvalidParameterValue('"nodes" names the same node more than once.');
  return ids;
}

/** The nodes a selector matches, locked, in id order; at most `max` (more is an error). */
export async function lockNodesBySelector(trx: Knex.Transaction, s: NodeSelector, max: number): Promise<number[]> {
  const q = trx('nodes').select('id').orderBy('id').limit(max + 1).forUpdate();
  whereDefined(q, {
    resource_class: s.resourceClass, conductor_group: s.conductorGroup?.toLowerCase(), owner: s.owner,
    provision_state: s.provisionState, driver: s.driver, maintenance: s.maintenance,
  });
  const ids = (await q).map((r: { id: number }) => r.id);
  if (ids.length > max) throw new InvalidParameterValue(`The selector matches more than ${max} nodes ([operations] max_nodes).`);
  if (ids.length === 0) throw new InvalidParameterValue('The selector matches no node.');
  return ids;
}

/**
 * Refuses nodes that another operation still has work queued or running on: 409 naming
 * that operation. Call it with the nodes' row locks held.
 */
export async function assertNodesFree(trx: Knex.Transaction, nodeIds: readonly number[], except?: string): Promise<void> {
  const q = trx('intents as i')
    .join('nodes as n', 'n.id', 'i.node_id')
    .select('i.operation', 'n.uuid')
    .whereIn('i.node_id', nodeIds as number[])
    .whereNotNull('i.operation')
    .whereNull('i.finished_at')
    .first();
  if (except) q.whereNot('i.operation', except);
  const busy = await q;
  if (busy) throw new NodeInOperation(busy.uuid, busy.operation);
}

/**
 * Queues the operation's steps on each node, one batch per node, the first step `held` until
 * the operation admits the node. One statement for all nodes: `seq` continues each node's
 * queue, which the caller's row locks keep still.
 */
async function enqueueRound(trx: Knex.Transaction, op: Operation, nodeIds: readonly number[], batches: readonly string[]): Promise<void> {
  await trx.raw(
    `WITH queued AS (
       INSERT INTO intents (uuid, node_id, seq, kind, args, batch, step_index, operation, state, max_attempts, held, requester, request_id)
       SELECT gen_random_uuid(), n.node_id,
              coalesce((SELECT max(seq) FROM intents x WHERE x.node_id = n.node_id), 0) + s.ord,
              s.step->>'kind', s.step->'args', n.batch, s.ord - 1, ?, 'queued', ?, s.ord = 1, ?, ?
         FROM unnest(?::int[], ?::uuid[]) AS n(node_id, batch)
        CROSS JOIN jsonb_array_elements(?::jsonb) WITH ORDINALITY AS s(step, ord)
       RETURNING id, node_id, held
     )
     UPDATE operation_nodes o SET head_intent_id = queued.id FROM queued
      WHERE o.operation_id = ? AND o.node_id = queued.node_id AND queued.held`,
    [op.uuid, op.maxAttempts, op.requester, op.requestId, nodeIds as number[], batches as string[], JSON.stringify(op.steps), op.id],
  );
}

/** Creates the operation, its node list (in the given order) and every node's intents. */
export async function createOperation(trx: Knex.Transaction, values: NewOperation, nodeIds: readonly number[]): Promise<Operation> {
  const [row] = await trx('operations')
    .insert(operationMapper.toRow({ ...values, uuid: randomUUID(), state: 'queued', round: 1, nodeCount: nodeIds.length }))
    .returning('*');
  const op = operationMapper.fromRow(row);
  const batches = nodeIds.map(() => randomUUID());
  await trx.raw(
    `INSERT INTO operation_nodes (operation_id, node_id, position, batch, round)
     SELECT ?, n.node_id, n.ord, n.batch, 1 FROM unnest(?::int[], ?::uuid[]) WITH ORDINALITY AS n(node_id, batch, ord)`,
    [op.id, nodeIds as number[], batches],
  );
  await enqueueRound(trx, op, nodeIds, batches);
  return op;
}

export async function getOperation(db: Knex, uuid: string, opts: { forUpdate?: boolean } = {}): Promise<Operation> {
  if (!isUuid(uuid)) throw new OperationNotFound(uuid);
  const q = db('operations').where('uuid', uuid.toLowerCase()).first();
  if (opts.forUpdate) q.forUpdate();
  const row = await q;
  if (!row) throw new OperationNotFound(uuid);
  return operationMapper.fromRow(row);
}

export async function listOperations(db: Knex, opts: { state?: OperationState; limit: number; marker?: Operation }): Promise<Operation[]> {
  const q = db('operations').orderBy('id', 'asc').limit(opts.limit);
  if (opts.state) q.where('state', opts.state);
  if (opts.marker) q.where('id', '>', opts.marker.id);
  return (await q).map((r: Record<string, unknown>) => operationMapper.fromRow(r));
}

/**
 * Cancels: the state changes and every queued intent of the operation is cancelled in the
 * same transaction, under the operation's row lock, which admission and the runner's retry
 * decision also take; intents already running finish. Returns false when it had ended.
 */
export async function cancelOperation(trx: Knex.Transaction, op: Operation): Promise<boolean> {
  if (op.finishedAt !== null) return false;
  await trx('operations').where('id', op.id).update({ state: 'cancelled', cancelled_at: trx.fn.now() });
  await cancelQueuedIntents(trx, op, `Operation ${op.uuid} was cancelled.`);
  return true;
}

export async function cancelQueuedIntents(trx: Knex.Transaction, op: Operation, reason: string): Promise<void> {
  await trx('intents').where({ operation: op.uuid, state: 'queued' }).update({ state: 'cancelled', held: false, finished_at: trx.fn.now(), error: reason });
}

/**
 * A new round for the nodes whose current round failed: fresh intents (attempt counters
 * start again), not admitted yet; the operation is queued again. Returns the node ids.
 */
export async function retryFailedNodes(trx: Knex.Transaction, op: Operation): Promise<number[]> {
  const { rows } = await trx.raw<{ rows: Array<{ node_id: number }> }>(
    `SELECT o.node_id FROM operation_nodes o
      WHERE o.operation_id = ? AND EXISTS (SELECT 1 FROM intents i WHERE i.batch = o.batch AND i.state = 'failed')
      ORDER BY o.node_id FOR UPDATE`,
    [op.id],
  );
  const nodeIds = rows.map((r) => r.node_id);
  if (nodeIds.length === 0) return [];
  await trx('nodes').select('id').whereIn('id', nodeIds).orderBy('id').forUpdate();
  await assertNodesFree(trx, nodeIds, op.uuid);
  const batches = nodeIds.map(() => randomUUID());
  await trx.raw(
    `UPDATE operation_nodes o SET batch = n.batch, round = ?, admitted_at = NULL
       FROM unnest(?::int[], ?::uuid[]) AS n(node_id, batch) WHERE o.operation_id = ? AND o.node_id = n.node_id`,
    [op.round + 1, nodeIds, batches, op.id],
  );
  await trx('operations').where('id', op.id).update({
    state: 'queued', round: op.round + 1, finished_at: null, cancelled_at: null, abort_reason: null, progress_notified_at: null,
  });
  await enqueueRound(trx, op, nodeIds, batches);
  return nodeIds;
}

/** What the intent runner needs to decide a retry: the policy, and where the operation stands. */
export type RetryPolicy = Pick<Operation, 'state' | 'abortReason' | 'initialDelayMs' | 'maxDelayMs'>;

/**
 * Read under a share lock on the operation row: a cancel (which takes the row exclusively)
 * either sees the requeued intent and cancels it, or is seen here and no retry is queued.
 */
export async function retryPolicyOf(trx: Knex.Transaction, uuid: string): Promise<RetryPolicy | undefined> {
  const row = await trx('operations').where('uuid', uuid).forShare().first('state', 'abort_reason', 'initial_delay_ms', 'max_delay_ms');
  if (!row) return undefined;
  return { state: row.state, abortReason: row.abort_reason, initialDelayMs: row.initial_delay_ms, maxDelayMs: row.max_delay_ms };
}

/** Which of the nodes have intents queued or running (work a queued operation waits behind). */
export async function nodesWithOpenIntents(trx: Knex.Transaction, nodeIds: readonly number[]): Promise<Set<number>> {
  const rows: Array<{ node_id: number }> = await trx('intents').distinct('node_id')
    .whereRaw('node_id = any(?::int[])', [nodeIds as number[]]).whereNull('finished_at');
  return new Set(rows.map((r) => r.node_id));
}

/**
 * The unfinished operations a pass may have something to do for, read without their row
 * locks: one to start, stop or end, nodes waiting for admission, a failure to abort on, or a
 * progress notification due. The rest (all admitted, still running, nothing failed) are most
 * of the passes of a big operation; locking each made the conductors wait on one another
 * (10 ms per pass, half the database time of a direct deploy). The locked pass decides again.
 */
export async function operationsToAdvance(db: Knex, progressIntervalMs: number): Promise<number[]> {
  // Most passes find no open operation at all: say so with a statement that plans in
  // microseconds, before the one whose subqueries take half a millisecond to plan.
  const open: Array<{ id: number }> = await db('operations').whereNull('finished_at').select('id');
  if (open.length === 0) return [];
  const { rows } = await db.raw<{ rows: Array<{ id: number }> }>(
    `SELECT o.id FROM operations o
      WHERE o.id = ANY(?::bigint[]) AND o.finished_at IS NULL
        AND (o.state <> 'running' OR o.abort_reason IS NOT NULL
             OR o.progress_notified_at IS NULL OR o.progress_notified_at <= now() - ? * interval '1 millisecond'
             OR EXISTS (SELECT 1 FROM operation_nodes w WHERE w.operation_id = o.id AND w.admitted_at IS NULL)
             OR NOT EXISTS (SELECT 1 FROM intents i WHERE i.operation = o.uuid AND i.finished_at IS NULL)
             OR (o.on_failure = 'abort' AND EXISTS (
                   SELECT 1 FROM operation_nodes f JOIN intents fi ON fi.batch = f.batch WHERE f.operation_id = o.id AND fi.state = 'failed')))
      ORDER BY o.id`,
    [open.map((r) => r.id), progressIntervalMs],
  );
  return rows.map((r) => Number(r.id));
}

/** Takes the row lock of an unfinished operation; undefined once it has finished. */
export async function lockOpenOperation(trx: Knex.Transaction, id: number): Promise<Operation | undefined> {
  const row = await trx('operations').where('id', id).whereNull('finished_at').forUpdate().first();
  return row ? operationMapper.fromRow(row) : undefined;
}

export async function setAbortReason(trx: Knex.Transaction, id: number, reason: string): Promise<void> {
  await trx('operations').where('id', id).update({ abort_reason: reason });
}

export async function markOperationRunning(trx: Knex.Transaction, id: number): Promise<Operation> {
  const [row] = await trx('operations').where('id', id).update({ state: 'running', started_at: trx.raw('coalesce(started_at, now())') }).returning('*');
  return operationMapper.fromRow(row);
}

export async function finishOperation(trx: Knex.Transaction, id: number, state: OperationState): Promise<Operation> {
  const [row] = await trx('operations').where('id', id)
    .update({ state, finished_at: trx.fn.now(), started_at: trx.raw('coalesce(started_at, now())') }).returning('*');
  return operationMapper.fromRow(row);
}

/** True when an intent of the operation is queued or running. */
export async function hasOpenIntents(trx: Knex.Transaction, op: Operation): Promise<boolean> {
  const { rows } = await trx.raw<{ rows: unknown[] }>(
    'SELECT 1 FROM intents WHERE operation = ? AND finished_at IS NULL LIMIT 1', [op.uuid],
  );
  return rows.length > 0;
}

/**
 * Stamps the progress notification as sent when the last one is at least `intervalMs` old,
 * over all conductors; true when it was due.
 */
export async function claimProgressNotification(trx: Knex.Transaction, id: number, intervalMs: number): Promise<boolean> {
  const due = await trx('operations')
    .where('id', id)
    .where((w) => w.whereNull('progress_notified_at').orWhereRaw('progress_notified_at <= now() - ? * interval \'1 millisecond\'', [intervalMs]))
    .update({ progress_notified_at: trx.fn.now() });
  return due > 0;
}
