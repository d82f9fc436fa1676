/**
 * Claiming intents: the statement that starts the head of each node's queue and reserves the
 * node in one round trip, and the undo of a claim whose commit is unknown.
 */
import type { Knex } from 'knex';
import { intentMapper, queueHeadSeq, type Intent } from './intents.js';
import { NODE_COLUMNS, nodeMapper, type Node } from './nodes.js';
import { clearReservationsOf } from './reservations.js';

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
  /**
   * Filled with the claimed nodes' agent tokens, by node id, where the claim could tell the
   * token it read is current (the node row it locked is the one its snapshot saw; a lookup
   * mints no token while the node is reserved). A node absent has none, or one to read.
   */
  tokens?: Map<number, string>,
): Promise<ClaimedIntent[]> {
  const bindings: unknown[] = only ? [only as string[]] : [];
  bindings.push(scope.conductorGroup, scope.drivers as string[]);
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
      // Each node is read and locked by its key, in a LATERAL subquery of its own: a locking
      // subquery is never flattened into a join, so no plan can read the nodes table whole. As
      // a join, a planner that takes the table for one row (never analyzed: a fleet enrolled
      // since the last autoanalyze, or autovacuum off) read every node for each intent it
      // walked, 0.85 s for the claim that started a deploy of 1,000 nodes and a full read of
      // the table at every claim after it. The group and driver tests are written so that no
      // index can serve them (IS TRUE): on such statistics the conductor_group index, as good
      // as the key on paper, was taken for a named node and read the whole group.
      const node = (key: string) => `CROSS JOIN LATERAL (
                    SELECT n.id, n.xmin AS row_xmin FROM nodes n
                     WHERE ${key} AND n.reservation IS NULL AND (n.conductor_group = ? AND n.driver = ANY(?::text[])) IS TRUE ${ringFilter}
                       FOR UPDATE SKIP LOCKED) n`;
      const cand = only
        // Each named node's head (its unfinished intent of lowest seq), read through the node's
        // queue index: planned freely, the same conditions as below took 46 ms a claim (the
        // planner's statistics of this hot table are always behind). A named node is locked
        // before its head is looked at, for the claim's transaction only.
        ? `SELECT i.id, n.id AS node_id, n.row_xmin
             FROM unnest(?::uuid[]) AS w(uuid) ${node('n.uuid = w.uuid')}
             CROSS JOIN LATERAL (
                    SELECT h.id, h.state, h.held, h.not_before, h.created_at FROM intents h
                     WHERE h.node_id = n.id AND h.finished_at IS NULL ORDER BY h.node_id, h.seq LIMIT 1) i
            WHERE coalesce(i.not_before, i.created_at) <= statement_timestamp() AND i.state = 'queued' AND NOT i.held
            ORDER BY coalesce(i.not_before, i.created_at), i.id
            LIMIT ?`
        : `SELECT i.id, n.id AS node_id, n.row_xmin
             FROM intents i ${node('n.id = i.node_id')}
            WHERE i.finished_at IS NULL AND coalesce(i.not_before, i.created_at) <= statement_timestamp() AND i.state = 'queued' AND NOT i.held
              -- Only the head of the node's queue: nothing earlier still queued or running.
              AND i.seq = ${queueHeadSeq('i.node_id')}
            ORDER BY coalesce(i.not_before, i.created_at), i.id
            LIMIT ?`;
      const { rows } = await trx.raw(`WITH cand AS (${cand}), started AS (
       -- Re-checked on the row's latest version: a snapshot taken before another conductor
       -- finished this intent must not start it again.
       UPDATE intents SET state = 'running', conductor = ?, started_at = now(), attempts = intents.attempts + 1
         FROM cand
        WHERE intents.id = cand.id AND intents.state = 'queued'
       RETURNING intents.*, cand.row_xmin
     )
     -- The nodes by their key (an InitPlan's ids), then joined to what started.
     UPDATE nodes SET reservation = ? FROM started
      WHERE nodes.id = ANY(ARRAY(SELECT s.node_id FROM started s)) AND nodes.id = started.node_id
     RETURNING started.*, started.started_at::text AS claim_token, (SELECT q.seq FROM intents q
                                   WHERE q.node_id = started.node_id AND q.seq > started.seq AND q.finished_at IS NULL
                                   ORDER BY q.node_id, q.seq LIMIT 1) IS NOT NULL AS queued_behind${nodes ? `,
               ${CLAIMED_NODE_COLUMNS}` : ''}${tokens ? `,
               -- The token as this statement's snapshot shows it, when the node row locked is the
               -- one that snapshot saw: a node released since (its token maybe wiped) is not.
               CASE WHEN (SELECT s.xmin FROM nodes s WHERE s.id = started.node_id) = started.row_xmin
                    THEN (SELECT t.token FROM agent_tokens t WHERE t.node_id = started.node_id) END AS agent_token` : ''}`,
      bindings as Knex.RawBinding[]);
      claimed = rows.map((r: Record<string, unknown>) => ({ ...intentMapper.fromRow(r), queuedBehind: r.queued_behind === true, claimToken: r.claim_token as string }));
      if (nodes) for (const r of rows as Array<Record<string, unknown>>) nodes.set(r.node_id as number, claimedNodeOf(r));
      if (tokens) {
        for (const r of rows as Array<Record<string, unknown>>) if (typeof r.agent_token === 'string') tokens.set(r.node_id as number, r.agent_token);
      }
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
