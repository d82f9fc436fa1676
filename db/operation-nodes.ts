import type { Knex } from 'knex';
import type { Operation } from './operations.js';
import { queueHeadSeq } from './intents.js';

/**
 * Where each node of an operation stands, derived from its intents of the current round
 * rather than stored, so that every path that ends an intent (the runner, recovery after a
 * dead conductor, a cancelled intent) counts without having to remember to.
 */
export type OperationNodeState = 'pending' | 'running' | 'succeeded' | 'failed' | 'cancelled';
export const OPERATION_NODE_STATES: readonly OperationNodeState[] = ['pending', 'running', 'succeeded', 'failed', 'cancelled'];

/** The SQL that derives a node's state from its current batch (`o` = operation_nodes, `i` = intents). */
const NODE_STATE_SQL = `CASE
    WHEN bool_or(i.state = 'failed') THEN 'failed'
    WHEN bool_or(i.state = 'cancelled') THEN 'cancelled'
    WHEN bool_and(i.state = 'succeeded') THEN 'succeeded'
    WHEN o.admitted_at IS NOT NULL THEN 'running'
    ELSE 'pending' END`;

/** One node of an operation, as the status shows it. */
export interface OperationNodeRow {
  nodeUuid: string;
  nodeName: string | null;
  position: number;
  round: number;
  state: OperationNodeState;
  /** Attempts over the steps of the current round. */
  attempts: number;
  lastError: string | null;
  admittedAt: Date | null;
  startedAt: Date | null;
  finishedAt: Date | null;
}

export type OperationCounts = Record<OperationNodeState, number>;

function emptyCounts(): OperationCounts {
  return { pending: 0, running: 0, succeeded: 0, failed: 0, cancelled: 0 };
}

/** Node counts per state, for each of the given operations. */
export async function operationCounts(db: Knex, opIds: readonly number[]): Promise<Map<number, OperationCounts>> {
  const out = new Map<number, OperationCounts>(opIds.map((id) => [id, emptyCounts()]));
  if (opIds.length === 0) return out;
  const { rows } = await db.raw<{ rows: Array<{ operation_id: string; state: OperationNodeState; n: string }> }>(
    `SELECT operation_id, state, count(*) AS n FROM (
       SELECT o.operation_id, ${NODE_STATE_SQL} AS state
         FROM operation_nodes o LEFT JOIN intents i ON i.batch = o.batch
        WHERE o.operation_id = ANY(?::bigint[])
        GROUP BY o.operation_id, o.node_id
     ) s GROUP BY operation_id, state`,
    [opIds as number[]],
  );
  for (const r of rows) out.get(Number(r.operation_id))![r.state] = Number(r.n);
  return out;
}

/** A page of the operation's nodes in their order; `afterPosition` is the previous page's last. */
export async function listOperationNodes(
  db: Knex, opId: number, opts: { limit: number; afterPosition?: number; state?: OperationNodeState },
): Promise<OperationNodeRow[]> {
  const { rows } = await db.raw<{ rows: Array<Record<string, unknown>> }>(
    `SELECT * FROM (
       SELECT n.uuid AS node_uuid, n.name AS node_name, o.position, o.round, o.admitted_at,
              ${NODE_STATE_SQL} AS state,
              coalesce(sum(i.attempts), 0) AS attempts,
              -- The failed step's error, not the "earlier step failed" of the steps it skipped.
              (array_agg(i.error ORDER BY i.step_index DESC) FILTER (WHERE i.error IS NOT NULL AND i.state <> 'skipped'))[1] AS last_error,
              min(i.started_at) AS started_at,
              CASE WHEN bool_and(i.state NOT IN ('queued', 'running')) THEN max(i.finished_at) END AS finished_at
         FROM operation_nodes o JOIN nodes n ON n.id = o.node_id LEFT JOIN intents i ON i.batch = o.batch
        WHERE o.operation_id = ? AND o.position > ?
        GROUP BY o.operation_id, o.node_id, n.uuid, n.name
     ) s WHERE (?::text IS NULL OR s.state = ?::text)
     ORDER BY position LIMIT ?`,
    [opId, opts.afterPosition ?? 0, opts.state ?? null, opts.state ?? null, opts.limit],
  );
  return rows.map((r) => ({
    nodeUuid: r.node_uuid as string,
    nodeName: r.node_name as string | null,
    position: r.position as number,
    round: r.round as number,
    state: r.state as OperationNodeState,
    attempts: Number(r.attempts),
    lastError: r.last_error as string | null,
    admittedAt: r.admitted_at as Date | null,
    startedAt: r.started_at as Date | null,
    finishedAt: r.finished_at as Date | null,
  }));
}

export async function positionOf(db: Knex, opId: number, nodeUuid: string): Promise<number | undefined> {
  const row = await db('operation_nodes as o').join('nodes as n', 'n.id', 'o.node_id').where({ 'o.operation_id': opId, 'n.uuid': nodeUuid }).first('o.position');
  return row?.position;
}

/** The uuid of a node whose current round failed, if any. */
export async function firstFailedNode(trx: Knex.Transaction, opId: number): Promise<string | undefined> {
  const failed = await trx.raw<{ rows: Array<{ uuid: string }> }>(
    `SELECT n.uuid FROM operation_nodes o JOIN nodes n ON n.id = o.node_id
      WHERE o.operation_id = ? AND EXISTS (SELECT 1 FROM intents i WHERE i.batch = o.batch AND i.state = 'failed') LIMIT 1`,
    [opId],
  );
  return failed.rows[0]?.uuid;
}

/**
 * Admits the next nodes in order while fewer than max_parallel are active: releases the
 * held first intent of each. Only nodes whose held intent heads their queue are admitted,
 * so an admitted node starts at once and never holds a slot waiting for other work.
 */
export async function admitNodes(trx: Knex.Transaction, op: Operation): Promise<number[]> {
  // Most passes over a running operation have nobody left to admit: say so without counting
  // the active nodes (an index probe per admitted node).
  const waiting = await trx('operation_nodes').where('operation_id', op.id).whereNull('admitted_at').first(trx.raw('1 AS one'));
  if (!waiting) return [];
  // Joins go through keys (head_intent_id, the primary keys): the plan must not depend on
  // statistics, which lag behind a freshly created operation's thousands of intents.
  const { rows } = await trx.raw<{ rows: Array<{ node_id: number }> }>(
    `WITH active AS (
       SELECT count(*) AS n FROM operation_nodes o
        WHERE o.operation_id = ? AND o.admitted_at IS NOT NULL
          AND EXISTS (SELECT 1 FROM intents i WHERE i.node_id = o.node_id AND i.batch = o.batch AND i.finished_at IS NULL)
     ), cand AS (
       SELECT o.node_id, o.head_intent_id
         FROM operation_nodes o JOIN intents h ON h.id = o.head_intent_id
        WHERE o.operation_id = ? AND o.admitted_at IS NULL AND h.held AND h.state = 'queued'
          -- Heads its node's queue (as NOT EXISTS, an anti join over every open intent for each
          -- candidate on statistics that took the table for a few rows: 0.2 s for 1,000 nodes).
          AND h.seq = ${queueHeadSeq('o.node_id')}
          -- on_failure=abort: a failure committed since the pass looked for one admits nobody
          -- (this statement's snapshot is later than that look); the next pass aborts.
          AND NOT (?::boolean AND EXISTS (
                SELECT 1 FROM operation_nodes f JOIN intents fi ON fi.batch = f.batch WHERE f.operation_id = ? AND fi.state = 'failed'))
        ORDER BY o.position
        LIMIT greatest(0, ? - (SELECT n FROM active))
     ), admitted AS (
       UPDATE operation_nodes o SET admitted_at = now() FROM cand
        WHERE o.operation_id = ? AND o.node_id = cand.node_id
       RETURNING o.node_id, o.head_intent_id
     )
     UPDATE intents i SET held = false FROM admitted WHERE i.id = admitted.head_intent_id
     RETURNING i.node_id`,
    [op.id, op.id, op.onFailure === 'abort', op.id, op.maxParallel, op.id],
  );
  return rows.map((r) => r.node_id);
}

/** Nodes done (succeeded, failed or cancelled) out of all, and the percentage. */
export function progressOf(counts: OperationCounts): { done: number; total: number; percent: number } {
  const done = counts.succeeded + counts.failed + counts.cancelled;
  const total = done + counts.pending + counts.running;
  return { done, total, percent: total === 0 ? 100 : Math.floor((done * 100) / total) };
}
