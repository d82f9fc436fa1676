import type { Knex } from 'knex';
import type { Logger } from 'pino';
import { ConflictError, InvalidState, NodeLocked } from '../common/errors.js';
import { claimIntents, unclaimIntents, type ClaimedIntent, type ClaimScope } from '../db/intent-claims.js';
import { getNodeById, updateLockedNodes, type LockedNodeChange, type Node, type NodeChanges, type AccessOptions } from '../db/nodes.js';
import { clearStaleReservation, lockAndWriteHeld, releaseNode, reserveIdleNodes, reserveNode } from '../db/reservations.js';
import { Batcher, type BatchOutcome } from '../common/batcher.js';

export type LockMode = 'exclusive' | 'shared';

/**
 * The task's hold on its node is gone: its conductor was taken for dead (heartbeat too old)
 * and the node's reservation cleared, and maybe taken again, while the task still worked.
 */
export class LockLost extends ConflictError {
  readonly code = 'LOCK_LOST';
}

/** The intent attempt a task was claimed for: its outcome counts only while it is current. */
export interface IntentFence {
  intentId: number;
  attempts: number;
}

/** A secret a task holds (Task.agentToken): a log of the task shows it masked. */
export class HeldToken {
  value: string | undefined;

  toJSON(): string | undefined {
    return this.value === undefined ? undefined : '******';
  }
}

/**
 * A node held for a purpose. Exclusive tasks hold the node's reservation from acquire until
 * `commit` or `release`; shared tasks reserve nothing and may not change the node.
 */
export class Task {
  private released = false;
  private readonly acquiredAt = Date.now();
  /** driver_internal_info keys a driver saved during this task (null: removed), kept by its later writes. */
  private readonly kept: Record<string, unknown> = {};
  /**
   * The node's agent token as the claim read it, while it is current: nobody mints one while
   * the task holds the node, and whoever wipes it during the task empties this. Empty: none
   * known (read it). A holder, so that a context derived from the task shares it.
   */
  readonly agentToken = new HeldToken();

  constructor(
    private readonly db: Knex,
    /** The node as last written by this task (claim, then each `progress`). */
    public node: Node,
    readonly mode: LockMode,
    readonly purpose: string,
    private readonly hostname: string,
    private readonly log: Logger,
    private readonly fence?: IntentFence,
    /** Writes progress together with other tasks' (group commit); alone when not given. */
    private readonly progressWriter?: Batcher<TaskOutcome, Node>,
  ) {}

  get exclusive(): boolean {
    return this.mode === 'exclusive';
  }

  /** Guards every state change, like Ironic's require_exclusive_lock. */
  requireExclusive(): void {
    if (!this.exclusive || this.released) {
      throw new InvalidState(`Task "${this.purpose}" on node ${this.node.uuid} needs an exclusive lock to change it.`);
    }
  }

  /**
   * Writes `changes` (and whatever `more` writes) and releases the reservation, in one
   * transaction: an outcome and the release can never be seen apart. Throws LockLost, writing
   * nothing, when the node is no longer this task's (see db/reservations.ts lockAndWriteHeld).
   */
  async commit(changes: NodeChanges, more?: (trx: Knex.Transaction, node: Node) => Promise<void>, update: AccessOptions = {}): Promise<Node> {
    const [outcome] = await commitTasks(this.db, this.hostname, [{ task: this, changes }], async (trx, held) => {
      if (more && held.length) await more(trx, held[0].node);
    }, update);
    if (outcome instanceof LockLost) throw outcome;
    return outcome;
  }

  /**
   * As `progress`, with `more` run in the same transaction while the node is held: rows an
   * action reads beside the node (its ports) or writes before its outcome.
   */
  async progressWith(changes: NodeChanges, more: (trx: Knex.Transaction, node: Node) => Promise<void>): Promise<Node> {
    const [outcome] = await commitTasks(this.db, this.hostname, [{ task: this, changes }], async (trx, held) => {
      if (held.length) await more(trx, held[0].node);
    }, {}, false);
    if (outcome instanceof LockLost) throw outcome;
    this.node = outcome;
    return outcome;
  }

  /**
   * Writes `changes` while keeping the reservation: progress of long work (the step running
   * now), seen by clients before the outcome. Throws LockLost when the node is no longer ours.
   */
  async progress(changes: NodeChanges): Promise<Node> {
    let node: Node;
    if (this.progressWriter) {
      node = await this.progressWriter.submit({ task: this, changes });
    } else {
      const [outcome] = await commitTasks(this.db, this.hostname, [{ task: this, changes }], undefined, {}, false);
      if (outcome instanceof LockLost) throw outcome;
      node = outcome;
    }
    this.node = node;
    return node;
  }

  /**
   * Saves `patch` into driver_internal_info now (a driver's node.save(): the dnsmasq tag before
   * a file names it) and keeps it in the task's later writes, whose driver_internal_info the
   * actions compute from what they read before. `null` removes a key.
   */
  async saveInternalInfo(patch: Readonly<Record<string, unknown>>): Promise<Node> {
    Object.assign(this.kept, patch);
    return this.progress({ driverInternalInfo: { ...(this.node.driverInternalInfo ?? {}) } });
  }

  /** `changes` with the saved driver_internal_info keys applied to any driver_internal_info they write. */
  withKeptInfo(changes: NodeChanges): NodeChanges {
    if (changes.driverInternalInfo === undefined || Object.keys(this.kept).length === 0) return changes;
    const info = { ...changes.driverInternalInfo };
    for (const [k, v] of Object.entries(this.kept)) {
      if (v === null) delete info[k];
      else info[k] = v;
    }
    return { ...changes, driverInternalInfo: info };
  }

  /** Releases without changes; safe to call twice (use it in `finally`). */
  async release(): Promise<void> {
    if (this.released) return;
    if (this.exclusive) await releaseNode(this.db, this.node.id, this.hostname, this.fence);
    this.markReleased();
  }

  /** The intent attempt this task was claimed for, if any. */
  get fenceOf(): IntentFence | undefined {
    return this.fence;
  }

  lockLost(): LockLost {
    return new LockLost(`Task "${this.purpose}" on node ${this.node.uuid} lost its lock (conductor ${this.hostname} was taken for dead); its outcome is dropped.`);
  }

  /** For commitTasks: the task's reservation is gone with its committed outcome. */
  markCommitted(): void {
    this.requireExclusive();
    this.markReleased();
  }

  private markReleased(): void {
    this.released = true;
    this.log.debug({ node: this.node.uuid, purpose: this.purpose, heldMs: Date.now() - this.acquiredAt }, 'task released');
  }
}

/** An exclusive task's outcome: its node's changes, written with the release. */
export interface TaskOutcome {
  task: Task;
  changes: NodeChanges;
}

/**
 * Whether the API moved the node to another provision state since the task last read or wrote
 * it: the API takes a verb while a task still holds the node (it never answers "locked"), as
 * Ironic's synchronous events end a state at once (an inspection aborted in inspect wait).
 */
function movedOnSince(row: Pick<Node, 'provisionState' | 'targetProvisionState'>, seen: Pick<Node, 'provisionState' | 'targetProvisionState'>): boolean {
  return row.provisionState !== seen.provisionState || row.targetProvisionState !== seen.targetProvisionState;
}

/**
 * A task's changes without those of the transition it ran: the verb accepted since is the
 * node's newest state, and the older task's end (its state, target and last_error) must not
 * put the node back; what it did at the BMC (power state) and its other changes stay.
 */
function withoutTransition(changes: NodeChanges): NodeChanges {
  const { provisionState: _p, targetProvisionState: _t, provisionUpdatedAt: _u, lastError: _e, ...rest } = changes;
  return rest;
}

/**
 * Commits the outcomes of many exclusive tasks in one transaction: locks their nodes (in id
 * order), writes the changes of those still held (updateLockedNodes: one statement per set of
 * changed columns) with their reservations cleared, then `more` for those. A task no longer
 * held gets LockLost in its place and nothing of it is written. All or nothing otherwise: a
 * database error rolls back every outcome of the call.
 *
 * The lock and the write of the common case (nobody changed the node since the task last wrote
 * it) are one statement (lockAndWriteHeld). With nothing `more` to write (progress), each
 * node's change stands alone: that statement commits those it wrote, and only the others (the
 * API moved the node on meanwhile) go through a transaction.
 */
export async function commitTasks(
  db: Knex,
  hostname: string,
  outcomes: readonly TaskOutcome[],
  more: ((trx: Knex.Transaction, held: Array<{ index: number; node: Node }>) => Promise<void>) | undefined,
  update: AccessOptions = {},
  release = true,
): Promise<Array<Node | LockLost>> {
  for (const o of outcomes) o.task.requireExclusive();
  const kept = outcomes.map((o) => o.task.withKeptInfo(o.changes));
  const items = outcomes.map((o, i) => ({ before: o.task.node, fence: o.task.fenceOf, changes: release ? { ...kept[i], reservation: null } : kept[i] }));
  const out = new Array<Node | LockLost>(outcomes.length);
  /** Locks `indexes` and writes what it can at once; returns the changes left to write under the lock. */
  const lockAndWrite = async (conn: Knex, indexes: readonly number[]): Promise<Array<{ index: number; change: LockedNodeChange }>> => {
    const locked = await lockAndWriteHeld(conn, hostname, indexes.map((i) => items[i]), update);
    const rest: Array<{ index: number; change: LockedNodeChange }> = [];
    indexes.forEach((index, k) => {
      const row = locked[k];
      const o = outcomes[index];
      if (row.written) out[index] = row.written;
      else if (!row.held) out[index] = o.task.lockLost();
      else {
        const changes = movedOnSince(row.before, o.task.node) ? withoutTransition(kept[index]) : kept[index];
        rest.push({ index, change: { before: row.before, changes: release ? { ...changes, reservation: null } : changes } });
      }
    });
    return rest;
  };
  let pending: readonly number[] = outcomes.map((_, i) => i);
  // Nothing more to write: a node's change stands alone, and the statement is its commit.
  if (!more) pending = (await lockAndWrite(db, pending)).map((r) => r.index);
  if (more || pending.length > 0) {
    await db.transaction(async (trx) => {
      const rest = await lockAndWrite(trx, pending);
      const nodes = await updateLockedNodes(trx, rest.map((r) => r.change), update);
      rest.forEach((r, k) => { out[r.index] = nodes[k]; });
      if (more) {
        const held: Array<{ index: number; node: Node }> = [];
        out.forEach((r, index) => { if (!(r instanceof LockLost)) held.push({ index, node: r }); });
        await more(trx, held);
      }
    });
  }
  if (release) out.forEach((r, i) => { if (!(r instanceof LockLost)) outcomes[i].task.markCommitted(); });
  return out;
}

/**
 * The only door to a node on the conductor side. The exclusive lock is a reservation set
 * by compare-and-set in a short statement; no transaction stays open while the task works.
 */
export class TaskManager {
  /**
   * Progress of intents, in batches: a group operation starts hundreds of intents at once, and
   * each first records its step; one transaction apiece, 500 of them through a pool of 10 took
   * seconds before the first BMC call.
   */
  private readonly progressWriter: Batcher<TaskOutcome, Node>;

  constructor(
    private readonly db: Knex,
    private readonly hostname: string,
    private readonly log: Logger,
    private readonly heartbeatTimeoutSeconds: number,
    /** Whether a holder's old heartbeat may be taken for its death now (see ConductorService.mayJudgePeers). */
    private readonly mayJudgePeers: () => boolean = () => true,
  ) {
    this.progressWriter = new Batcher<TaskOutcome, Node>(async (batch) => {
      const out = await commitTasks(this.db, this.hostname, batch, undefined, {}, false);
      return out.map((r): BatchOutcome<Node> => (r instanceof LockLost ? { error: r } : { value: r }));
    }, 500);
  }

  async acquire(nodeId: number, opts: { mode: LockMode; purpose: string }): Promise<Task> {
    const started = Date.now();
    if (opts.mode === 'shared') {
      return new Task(this.db, await getNodeById(this.db, nodeId), 'shared', opts.purpose, this.hostname, this.log);
    }
    for (let attempt = 0; attempt < 2; attempt++) {
      if (await reserveNode(this.db, nodeId, this.hostname)) {
        const node = await getNodeById(this.db, nodeId);
        this.log.debug({ node: node.uuid, purpose: opts.purpose, waitMs: Date.now() - started }, 'exclusive lock taken');
        return new Task(this.db, node, 'exclusive', opts.purpose, this.hostname, this.log);
      }
      // Held by a conductor whose heartbeat is stale? Then the survivors may clear it.
      const cleared = this.mayJudgePeers() && await clearStaleReservation(this.db, nodeId, this.heartbeatTimeoutSeconds);
      if (!cleared) break;
    }
    const node = await getNodeById(this.db, nodeId);
    throw new NodeLocked(node.uuid, node.reservation ?? 'unknown');
  }

  /**
   * Exclusive tasks, in one statement, on those of `nodeIds` that nobody holds and that have no
   * intent queued or running (the others are left out, as a NodeLocked would); each task's
   * node is as re-read under its lock.
   */
  async acquireIdle(nodeIds: readonly number[], purpose: string): Promise<Task[]> {
    const nodes = await reserveIdleNodes(this.db, this.hostname, nodeIds);
    return nodes.map((node) => new Task(this.db, node, 'exclusive', purpose, this.hostname, this.log));
  }

  /** Commits many exclusive tasks' outcomes in one transaction (see commitTasks). */
  commitAll(
    outcomes: readonly TaskOutcome[],
    more: (trx: Knex.Transaction, held: Array<{ index: number; node: Node }>) => Promise<void>,
    update?: AccessOptions,
  ): Promise<Array<Node | LockLost>> {
    return commitTasks(this.db, this.hostname, outcomes, more, update);
  }

  /** Undoes a claim that did not complete (ClaimIncomplete); returns how many were put back. */
  unclaim(claimed: ReadonlyArray<Pick<ClaimedIntent, 'id' | 'claimToken'>>): Promise<number> {
    return unclaimIntents(this.db, this.hostname, claimed);
  }

  /** Claims runnable intents with their nodes reserved (of `only`, when given): one exclusive task per intent. */
  async claimIntents(limit: number, scope: ClaimScope, only?: readonly string[]): Promise<Array<{ intent: ClaimedIntent; task: Task }>> {
    const nodes = new Map<number, Node>();
    const tokens = new Map<number, string>();
    const intents = await claimIntents(this.db, this.hostname, limit, scope, nodes, only, tokens);
    const out: Array<{ intent: ClaimedIntent; task: Task }> = [];
    for (const intent of intents) {
      const node = nodes.get(intent.nodeId)!;
      const task = new Task(this.db, node, 'exclusive', `intent ${intent.kind}`, this.hostname, this.log, { intentId: intent.id, attempts: intent.attempts }, this.progressWriter);
      task.agentToken.value = tokens.get(intent.nodeId);
      out.push({ intent, task });
    }
    return out;
  }
}
