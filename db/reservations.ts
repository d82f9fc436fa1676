/**
 * The node reservation (`nodes.reservation`): the durable exclusive lock a conductor holds
 * across BMC I/O. Every statement that takes, checks, clears or deletes through it lives here;
 * the policy (modes, fences, logging, what to do when it is held) is TaskManager's. The one
 * exception is the intent claim (db/intent-claims.ts claimIntents), which reserves the nodes in the
 * same statement that starts their intents.
 */
import type { Knex } from 'knex';
import { preparedRaw } from './prepared.js';
import {
  LOCKED_STATE_COLUMNS, NODE_COLUMNS, groupLockedChanges, lockedGroupDocument, lockedGroupSet, nodeMapper,
  type AccessOptions, type LockedNodeChange, type LockedNodeState, type Node,
} from './nodes.js';

/** The intent attempt a reservation was taken for (see HELD_SQL). */
export interface ReservationFence {
  intentId: number;
  attempts: number;
}

/**
 * SQL (on `nodes`, beside a row `v(intent_id, attempts)`): the node is still the task's. The
 * reservation names this host (first binding), and for an intent (v.intent_id not null), that
 * intent is still running this very attempt on this host (second binding). Both can change
 * behind a live task whose conductor was taken for dead: the survivors clear its reservations
 * and requeue its intents, and the node may be reserved again, even by this same host for a
 * retry of the same intent. Without the check, the late outcome would settle the retry and free
 * the node while the retry runs.
 *
 * The intent is read as a scalar subquery, by its key at each row: an EXISTS may be planned
 * as a hashed subplan over every running intent, and was, as a sequential scan of intents,
 * on statistics that took the table for a few rows (never analyzed).
 */
const HELD_SQL = `(nodes.reservation = ? AND (v.intent_id IS NULL OR (SELECT intents.state = 'running' AND intents.conductor = ?
  AND intents.attempts = v.attempts FROM intents WHERE intents.id = v.intent_id) IS TRUE))`;

/** Reserves the node for `host` by compare-and-set; false when someone holds it (or it is gone). */
export async function reserveNode(db: Knex, nodeId: number, host: string): Promise<boolean> {
  const rows = await db('nodes').where({ id: nodeId }).whereNull('reservation').update({ reservation: host }).returning('id');
  return rows.length > 0;
}

/**
 * Reserves for `hostname`, in one statement, each of these nodes that nobody holds and that
 * has no intent queued or running; returns them as they are now (re-read under the lock).
 */
export async function reserveIdleNodes(db: Knex, hostname: string, ids: readonly number[]): Promise<Node[]> {
  if (ids.length === 0) return [];
  const { rows } = await db.raw(
    `UPDATE nodes AS n SET reservation = ?
      WHERE n.id = ANY(?::int[]) AND n.reservation IS NULL
        AND NOT EXISTS (SELECT 1 FROM intents i WHERE i.node_id = n.id AND i.finished_at IS NULL)
     RETURNING n.*`,
    [hostname, ids as number[]],
  );
  return (rows as Array<Record<string, unknown>>).map((r) => nodeMapper.fromRow(r));
}

/** Releases the node if it is still held by `host` (for `fence`, when given); else does nothing. */
export async function releaseNode(db: Knex, nodeId: number, host: string, fence?: ReservationFence): Promise<void> {
  await db.raw(
    `UPDATE nodes SET reservation = NULL FROM (SELECT ?::bigint AS intent_id, ?::int AS attempts) AS v
      WHERE nodes.id = ? AND ${HELD_SQL}`,
    [fence?.intentId ?? null, fence?.attempts ?? null, nodeId, host, host],
  );
}

/** A node locked for a commit: what the change depends on, and whether the task still holds it. */
export interface LockedForCommit {
  /** Only LOCKED_STATE_COLUMNS are read: these rows are read per outcome, on the hot path. */
  before: Node;
  held: boolean;
}

/** Clears a node's reservation when its holder's heartbeat is stale; true when cleared. */
export async function clearStaleReservation(db: Knex, nodeId: number, timeoutSeconds: number): Promise<boolean> {
  const n = await db('nodes')
    .where('id', nodeId)
    .whereNotNull('reservation')
    .whereNotIn('reservation', db('conductors').select('hostname')
      .whereRaw('online AND heartbeat_at > now() - make_interval(secs => ?)', [timeoutSeconds]))
    .update({ reservation: null });
  return n > 0;
}

/** Clears every reservation `conductor` holds, or only those of `nodeIds`. */
export async function clearReservationsOf(db: Knex, conductor: string, nodeIds?: readonly number[]): Promise<void> {
  const nodes = db('nodes').where('reservation', conductor);
  if (nodeIds) nodes.whereIn('id', nodeIds as number[]);
  await nodes.update({ reservation: null });
}

/**
 * Deletes the node as it was read (same `version`) if no task holds it, in one statement: a
 * reservation taken after the caller's checks keeps the node. False when it is reserved or
 * changed since, so the caller reads it again and re-checks.
 */
export async function deleteNodeIfUnreserved(db: Knex, id: number, version: number): Promise<boolean> {
  return (await db('nodes').where({ id, version }).whereNull('reservation').delete()) > 0;
}

/** A task's change for lockAndWriteHeld: its node as the task last wrote or read it. */
export interface HeldChange extends LockedNodeChange {
  /** The task's copy of its node: the change is written at once while the row is still at its version. */
  before: LockedNodeState;
  fence?: ReservationFence;
}

/** What lockAndWriteHeld found of one node, and the node as written when it wrote the change. */
export interface LockedAndWritten extends LockedForCommit {
  written?: Node;
}

/** Each column a lock-and-write statement returns of the row it locked, under its own name. */
const LOCKED_AS = LOCKED_STATE_COLUMNS.map((c) => `l.${c} AS "locked.${c}"`).join(', ');
const LOCKED_KEYS = LOCKED_STATE_COLUMNS.map((c) => [c, `locked.${c}`] as const);
const WRITTEN_COLUMNS = NODE_COLUMNS.map((c) => `u.${c}`).join(', ');

/**
 * A commit's lock and write in one statement, for the common case of a task whose
 * node nobody changed since it last wrote it: locks every node (in id order) and writes, in
 * the same statement, the changes of the largest group (by changed columns, see
 * groupLockedChanges) to the nodes the task still holds at the version it saw. Each node comes
 * back locked (LockedForCommit), with `written` when its change was written; the caller
 * writes the others (moved on, another group) from their locked state, as without this. A
 * commit went through a lock, then a write: two round trips more, on every step of every node.
 *
 * A prepared statement planned once: the batch comes as a JSON recordset (its row estimate is
 * the same whatever the batch, so Postgres settles on the generic plan after five runs) and
 * each node is locked by an index lookup of its own (LATERAL ... FOR UPDATE, in the batch's
 * order, sorted by id here). With the batch as arrays, every call was planned anew (0.48 ms,
 * more than it took to run): the custom plan saw one row where the generic one assumed ten.
 */
export async function lockAndWriteHeld(
  db: Knex,
  host: string,
  items: readonly HeldChange[],
  opts: AccessOptions = {},
): Promise<LockedAndWritten[]> {
  if (items.length === 0) return [];
  const groups = groupLockedChanges(items, opts);
  const group = groups.reduce((a, b) => (b.members.length > a.members.length ? b : a));
  const { rows } = await preparedRaw(
    db,
    `WITH locked AS (
       SELECT nodes.*, ${HELD_SQL} AS held_by_task, v.seen_version
         FROM jsonb_to_recordset(?::jsonb) AS v(node_id int, intent_id bigint, attempts int, seen_version int)
         CROSS JOIN LATERAL (SELECT n.reservation, ${LOCKED_STATE_COLUMNS.map((c) => `n.${c}`).join(', ')} FROM nodes n WHERE n.id = v.node_id FOR UPDATE) AS nodes
        ORDER BY nodes.id
     ), u AS (
       UPDATE nodes AS n SET ${lockedGroupSet(group)}
         FROM jsonb_populate_recordset(NULL::nodes, ?::jsonb) AS v JOIN locked ON locked.id = v.id
        WHERE n.id = v.id AND locked.held_by_task AND locked.version = locked.seen_version
       RETURNING n.*
     )
     SELECT ${LOCKED_AS}, l.held_by_task, u.id IS NOT NULL AS written, ${WRITTEN_COLUMNS}
       FROM locked l LEFT JOIN u ON u.id = l.id`,
    [host, host, JSON.stringify([...items].sort((a, b) => a.before.id - b.before.id).map((i) => ({
      node_id: i.before.id, intent_id: i.fence?.intentId ?? null, attempts: i.fence?.attempts ?? null, seen_version: i.before.version,
    }))), lockedGroupDocument(group)] as Knex.RawBinding[],
  );
  const byId = new Map<number, LockedAndWritten>();
  for (const r of rows as Array<Record<string, unknown>>) {
    const locked: Record<string, unknown> = {};
    for (const [c, key] of LOCKED_KEYS) locked[c] = r[key];
    const before = nodeMapper.fromRow(locked);
    byId.set(before.id, { before, held: r.held_by_task === true, ...(r.written === true ? { written: nodeMapper.fromRow(r) } : {}) });
  }
  return items.map((i) => byId.get(i.before.id) ?? { before: i.before as Node, held: false });
}
