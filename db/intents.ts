import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { preparedRaw } from './prepared.js';
import { IntentNotFound } from '../common/errors.js';
import { NODE_COLUMNS, isUuid, nodeMapper, updateNode, type Node } from './nodes.js';
import { clearReservationsOf } from './reservations.js';
import { RowMapper } from './rows.js';
import { withTransaction } from './transaction.js';

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

/**
 * The channel conductors LISTEN on. The payload names the node with new work (intentWakePayload):
 * only the conductor owning it on the hash ring looks; any other payload wakes every conductor.
 */
export const INTENT_CHANNEL = 'galvanic_intents';

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
  const byUuid = new Map((inserted as Array<Record<string, unknown>>).map((r) => [r.uuid as string, mapper.fromRow(r)]));
  return rows.map((r) => byUuid.get(r.uuid) as Intent);
}

export async function findIntentByKey(db: Knex, nodeId: number, key: string): Promise<Intent | undefined> {
  const row = await db('intents').where({ node_id: nodeId, idempotency_key: key }).first();
  return row ? mapper.fromRow(row) : undefined;
}

export async function getIntent(db: Knex, uuid: string): Promise<Intent> {
  if (!isUuid(uuid)) throw new IntentNotFound(uuid);
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

/** A claimed intent, its node now reserved for this conductor. */
export interface ClaimedIntent extends Intent {
  /**
   * Another intent of the node was queued behind it when it was claimed: once it ends, the
   * node has more to run. A later one is announced by its wake-up.
   */
  queuedBehind: boolean;
  /**
   * The claim's started_at to the microsecond (Postgres' text form): it tells this claim from a
   * later one of the same intent by the same conductor as the same attempt, which follows a
   * claim that did not commit (see unclaimIntents).
   */
  claimToken: string;
}

/** Which nodes a conductor may claim: its conductor group, its drivers, its ring share. */
export interface ClaimScope {
  conductorGroup: string;
  drivers: readonly string[];
  /** Ranges (lo, hi] of the nodes' ring hashes (nodes.ring_hash) this conductor owns; undefined = all. */
  ranges?: ReadonlyArray<{ lo: number; hi: number }>;
}

/** The claimed nodes' columns, returned by the claim statement under a prefix of their own. */
const CLAIMED_NODE_COLUMNS = NODE_COLUMNS.map((c) => `nodes.${c} AS "node.${c}"`).join(', ');

/** Each node column with its key in a claim's row: built once, not per column of every row claimed. */
const CLAIMED_NODE_KEYS = NODE_COLUMNS.map((c) => [c, `node.${c}`] as const);

function claimedNodeOf(row: Record<string, unknown>): Node {
  const node: Record<string, unknown> = {};
  for (const [c, key] of CLAIMED_NODE_KEYS) node[c] = row[key];
  return nodeMapper.fromRow(node);
}

/**
 * A scope's ranges, sorted, as the two Postgres array literals (his, los) the claim's ring
 * filter takes. Built once per ranges array (a ring's are fixed): serialising two arrays of a
 * few hundred numbers at every claim cost a conductor of five 1.6 s of CPU per 100,000 intents.
 */
const RANGE_LITERALS = new WeakMap<ReadonlyArray<{ lo: number; hi: number }>, { his: string; los: string }>();

function rangeLiterals(ranges: ReadonlyArray<{ lo: number; hi: number }>): { his: string; los: string } {
  let out = RANGE_LITERALS.get(ranges);
  if (!out) {
    const sorted = [...ranges].sort((a, b) => a.lo - b.lo);
    out = { his: `{${sorted.map((r) => r.hi).join(',')}}`, los: `{${sorted.map((r) => r.lo).join(',')}}` };
    RANGE_LITERALS.set(ranges, out);
  }
  return out;
}

/**
 * Claims up to `limit` runnable intents in one statement: the head of each node's open
 * queue, due (not_before passed), whose node nobody reserves, those due longest first. The
 * node rows are locked with SKIP LOCKED so concurrent conductors never claim the same node,
 * and the reservation and the intent's `running` state are written in the same statement.
 * Under READ COMMITTED the locked node row is re-checked on its newest version, but the
 * joined intent row is not: hence the state guard on the intent's own UPDATE.
 */
export async function claimIntents(
  db: Knex,
  conductor: string,
  limit: number,
  scope: ClaimScope,
  /**
   * Filled with the claimed nodes by id, as the claim left them (reserved). The same statement
   * returns them: a read of its own cost a statement and a plan per claim.
   */
  nodes?: Map<number, Node>,
  /**
   * Only these nodes (UUIDs): a claim after wake-ups that named them. It reads their queues
   * alone instead of walking every open intent in due order, which passes every intent
   * running at its BMC: with 1,000 steps running, that walk cost 5-6 ms a claim.
   */
  only?: readonly string[],
): Promise<ClaimedIntent[]> {
  const bindings: unknown[] = [scope.conductorGroup, scope.drivers as string[]];
  let onlyFilter = '';
  if (only) {
    onlyFilter = 'AND n.uuid = ANY(?::uuid[])';
    bindings.push(only as string[]);
  }
  let ringFilter = '';
  if (scope.ranges) {
    // A binary search (width_bucket) in the sorted, disjoint ranges: the last range whose lo
    // is below the hash is the only one that can hold it. An EXISTS over unnest(ranges) cost
    // rows x ranges evaluations (seconds for 20,000 queued intents and 64 ranges).
    const { his, los } = rangeLiterals(scope.ranges);
    ringFilter = 'AND coalesce((?::bigint[])[width_bucket(n.ring_hash::bigint - 1, ?::bigint[])] >= n.ring_hash::bigint, false)';
    bindings.push(his, los);
  }
  bindings.push(limit, conductor, conductor);
  // Claimed by the statement, whether or not its transaction then commits: when the outcome is
  // unknown (the connection dropped at COMMIT), the claimer must undo it (unclaimIntents).
  let claimed: ClaimedIntent[] = [];
  // The queue is a hot, fast-changing table whose statistics are always behind: estimating a
  // handful of queued rows, the planner fetches every open intent and sorts them, a cost
  // that grows with the backlog (13 ms at 2,300 queued). Walking intents_due_idx in the order
  // intents became due stops at the LIMIT and never reaches those not due yet (a step waiting
  // for its agent); the settings below (for this statement's transaction only) leave the
  // planner that plan alone. Due by the statement's start, not the transaction's: an intent
  // committed just before the statement may have been created after its BEGIN.
  // Each look at one node's queue (its head, what is queued behind it) is a scalar subquery in
  // (node_id, seq) order: an autoanalyze that ran while the queue was drained leaves statistics
  // that say no intent is open, and on those the planner read NOT EXISTS and EXISTS forms by
  // scanning every open intent for each candidate (7,000 entries for each of 200, 0.2-0.5 s a
  // claim, and a backlog of 8,000 behind it). Correlated and ordered with sorts off, it can
  // only be an index lookup of that node.
  // The claim is planned on every call (about 1 ms): a generic plan cannot see the LIMIT or
  // the ring ranges, and one measured 30 times slower in execution (147 ms against 4.9 ms per
  // claim with a backlog of 10,000).
  try {
    return await db.transaction(async (trx): Promise<ClaimedIntent[]> => {
      // No plan this statement wants has a sequential scan or a sort: on statistics of a table
      // that was nearly empty (a new database filling up) the planner took a node's head by
      // sorting a scan of intents_due_idx, and started intents by scanning the table for each,
      // 60-145 ms a claim until the next autoanalyze. A switch may only turn off what the plan
      // can do without: a node it keeps anyway is costed 1e10, which lifts the estimate over
      // jit_above_cost (a server with JIT then compiled the claim, 1-2 s, had our sessions not
      // turned JIT off) and blinds the planner's choice among the other nodes. The 'only' shape
      // sorts its few candidates into due order, so sorts stay on there: its per-node heads
      // are ordered reads of intents_unfinished_node_idx by their ORDER BY alone.
      await trx.raw(only
        ? 'SET LOCAL enable_seqscan = off'
        : 'SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off; SET LOCAL enable_sort = off');
      const cand = only
        // Each named node's head (its unfinished intent of lowest seq), read through the node's
        // queue index: planned freely, the same conditions as below took 46 ms a claim (the
        // planner's statistics of this hot table are always behind).
        ? `SELECT i.id, n.id AS node_id
             FROM nodes n CROSS JOIN LATERAL (
                    SELECT h.id, h.state, h.held, h.not_before, h.created_at FROM intents h
                     WHERE h.node_id = n.id AND h.finished_at IS NULL ORDER BY h.node_id, h.seq LIMIT 1) i
            WHERE coalesce(i.not_before, i.created_at) <= statement_timestamp() AND i.state = 'queued' AND NOT i.held
              AND n.reservation IS NULL AND n.conductor_group = ? AND n.driver = ANY(?::text[]) ${onlyFilter} ${ringFilter}
            ORDER BY coalesce(i.not_before, i.created_at), i.id
            LIMIT ?
            FOR UPDATE OF n SKIP LOCKED`
        : `SELECT i.id, n.id AS node_id
             FROM intents i JOIN nodes n ON n.id = i.node_id
            WHERE i.finished_at IS NULL AND coalesce(i.not_before, i.created_at) <= statement_timestamp() AND i.state = 'queued' AND NOT i.held
              -- Only the head of the node's queue: nothing earlier still queued or running.
              AND i.seq = (SELECT p.seq FROM intents p WHERE p.node_id = i.node_id AND p.finished_at IS NULL
                            ORDER BY p.node_id, p.seq LIMIT 1)
              AND n.reservation IS NULL AND n.conductor_group = ? AND n.driver = ANY(?::text[]) ${ringFilter}
            ORDER BY coalesce(i.not_before, i.created_at), i.id
            LIMIT ?
            FOR UPDATE OF n SKIP LOCKED`;
      const { rows } = await trx.raw(`WITH cand AS (${cand}), started AS (
       -- Re-checked on the row's latest version: a snapshot taken before another conductor
       -- finished this intent must not start it again.
       UPDATE intents SET state = 'running', conductor = ?, started_at = now(), attempts = intents.attempts + 1
         FROM cand
        WHERE intents.id = cand.id AND intents.state = 'queued'
       RETURNING intents.*
     )
     UPDATE nodes SET reservation = ? FROM started WHERE nodes.id = started.node_id
     RETURNING started.*, started.started_at::text AS claim_token, (SELECT q.seq FROM intents q
                                   WHERE q.node_id = started.node_id AND q.seq > started.seq AND q.finished_at IS NULL
                                   ORDER BY q.node_id, q.seq LIMIT 1) IS NOT NULL AS queued_behind${nodes ? `,
               ${CLAIMED_NODE_COLUMNS}` : ''}`,
      bindings as Knex.RawBinding[]);
      claimed = rows.map((r: Record<string, unknown>) => ({ ...mapper.fromRow(r), queuedBehind: r.queued_behind === true, claimToken: r.claim_token as string }));
      if (nodes) for (const r of rows as Array<Record<string, unknown>>) nodes.set(r.node_id as number, claimedNodeOf(r));
      return claimed;
    });
  } catch (err) {
    if (claimed.length > 0) throw new ClaimIncomplete(claimed, err);
    throw err;
  }
}

/**
 * A claim whose transaction failed after its statement had claimed intents: it may have
 * committed or not. Nothing of it ran, so unclaimIntents puts back whatever did commit.
 */
export class ClaimIncomplete extends Error {
  constructor(readonly claimed: readonly ClaimedIntent[], override readonly cause: unknown) {
    super(`claiming ${claimed.length} intent(s) did not complete: ${(cause as Error)?.message ?? String(cause)}`);
  }
}

/**
 * Undoes a claim that never started (ClaimIncomplete): each intent that is still this very
 * claim's (its claimToken) goes back to the queue with the attempt uncounted, and its node's
 * reservation is cleared. A no-op for what did not commit or was recovered meanwhile. The
 * conductor and attempt do not tell the claim apart: when it did not commit, the conductor's
 * next claim of the intent is the same attempt again, and putting that one back while it
 * runs lets the intent run twice at its BMC.
 */
export async function unclaimIntents(db: Knex, conductor: string, claimed: ReadonlyArray<Pick<ClaimedIntent, 'id' | 'claimToken'>>): Promise<number> {
  if (claimed.length === 0) return 0;
  return db.transaction(async (trx) => {
    const { rows } = await trx.raw(
      `UPDATE intents SET state = 'queued', conductor = NULL, attempts = intents.attempts - 1,
              started_at = CASE WHEN intents.attempts = 1 THEN NULL ELSE intents.started_at END
         FROM unnest(?::bigint[], ?::timestamptz[]) AS v(id, claimed_at)
        WHERE intents.id = v.id AND intents.state = 'running' AND intents.conductor = ? AND intents.started_at = v.claimed_at
       RETURNING intents.node_id`,
      [claimed.map((c) => c.id), claimed.map((c) => c.claimToken), conductor],
    );
    const nodeIds = (rows as Array<{ node_id: number }>).map((r) => r.node_id);
    if (nodeIds.length > 0) await clearReservationsOf(trx, conductor, nodeIds);
    return nodeIds.length;
  });
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

/** The channel API servers LISTEN on for finished intents; the payload is the intent UUID. */
export const INTENT_DONE_CHANNEL = 'galvanic_intent_done';

export async function notifyIntentDone(trx: Knex, uuid: string): Promise<void> {
  await trx.raw('SELECT pg_notify(?, ?)', [INTENT_DONE_CHANNEL, uuid]);
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
    const running: Intent[] = (await mine(trx('intents')).select('*').orderBy('id').forUpdate()).map((r: Record<string, unknown>) => mapper.fromRow(r));
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
      if (settleFailed) await settleFailed(trx, mapper.fromRow(f));
      await notifyIntentDone(trx, f.uuid);
    }
    await clearReservationsOf(trx, conductor, onlyIds ? [...requeued, ...failed].map((r: { node_id: number }) => r.node_id) : undefined);
    const map = (r: Record<string, unknown>) => mapper.fromRow(r);
    return { requeued: requeued.map(map), failed: failed.map(map) };
  });
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
  return row ? mapper.fromRow(row) : undefined;
}

/** Those of `nodeIds` with a queued intent of this kind (a heartbeat's continue is queued once). */
export async function nodesWithQueuedIntent(trx: Knex, nodeIds: readonly number[], kind: string): Promise<Set<number>> {
  if (nodeIds.length === 0) return new Set();
  const rows: Array<{ node_id: number }> = await trx('intents').distinct('node_id').whereIn('node_id', nodeIds as number[]).where({ kind, state: 'queued' });
  return new Set(rows.map((r) => r.node_id));
}
