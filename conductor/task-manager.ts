import type { Knex } from 'knex';
import type { Logger } from 'pino';
import { ConflictError, InvalidState, NodeLocked } from '../common/errors.js';
import { claimIntents, type ClaimScope, type Intent } from '../db/intents.js';
import { getNodeById, getNodesByIds, updateNode, type Node, type NodeChanges, type UpdateOptions } from '../db/nodes.js';
import { clearStaleReservation } from '../db/conductors.js';

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

/**
 * A node held for a purpose. Exclusive tasks hold the node's reservation from acquire until
 * `commit` or `release`; shared tasks reserve nothing and may not change the node.
 */
export class Task {
  private released = false;
  private readonly acquiredAt = Date.now();

  constructor(
    private readonly db: Knex,
    readonly node: Node,
    readonly mode: LockMode,
    readonly purpose: string,
    private readonly hostname: string,
    private readonly log: Logger,
    private readonly fence?: IntentFence,
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
   * nothing, when the node is no longer this task's (see `stillHeld`).
   */
  async commit(changes: NodeChanges, more?: (trx: Knex.Transaction, node: Node) => Promise<void>, update: UpdateOptions = {}): Promise<Node> {
    this.requireExclusive();
    const node = await this.db.transaction(async (trx) => {
      const updated = await updateNode(trx, this.node.id, { ...changes, reservation: null }, {
        ...update,
        guard: {
          sql: this.stillHeld(),
          bindings: this.stillHeldBindings(),
          error: () => new LockLost(`Task "${this.purpose}" on node ${this.node.uuid} lost its lock (conductor ${this.hostname} was taken for dead); its outcome is dropped.`),
        },
      });
      if (more) await more(trx, updated);
      return updated;
    });
    this.markReleased();
    return node;
  }

  /** Releases without changes; safe to call twice (use it in `finally`). */
  async release(): Promise<void> {
    if (this.released) return;
    if (this.exclusive) {
      await this.db('nodes').where('id', this.node.id).whereRaw(this.stillHeld(), this.stillHeldBindings()).update({ reservation: null });
    }
    this.markReleased();
  }

  /**
   * SQL (on `nodes`): the node is still this task's. The reservation names this host, and for
   * an intent, that intent is still running this very attempt on this host. Both can change
   * behind a live task whose conductor was taken for dead: the survivors clear its
   * reservations and requeue its intents, and the node may be reserved again, even by this
   * same host for a retry of the same intent. Without the check, the late outcome would settle
   * the retry and free the node while the retry runs.
   */
  private stillHeld(): string {
    return this.fence
      ? `(nodes.reservation = ? AND EXISTS (SELECT 1 FROM intents WHERE intents.id = ?
          AND intents.state = 'running' AND intents.conductor = ? AND intents.attempts = ?))`
      : '(nodes.reservation = ?)';
  }

  private stillHeldBindings(): Knex.RawBinding[] {
    return this.fence ? [this.hostname, this.fence.intentId, this.hostname, this.fence.attempts] : [this.hostname];
  }

  private markReleased(): void {
    this.released = true;
    this.log.debug({ node: this.node.uuid, purpose: this.purpose, heldMs: Date.now() - this.acquiredAt }, 'task released');
  }
}

/**
 * The only door to a node on the conductor side. The exclusive lock is a reservation set
 * by compare-and-set in a short statement; no transaction stays open while the task works.
 */
export class TaskManager {
  constructor(
    private readonly db: Knex,
    private readonly hostname: string,
    private readonly log: Logger,
    private readonly heartbeatTimeoutSeconds: number,
  ) {}

  async acquire(nodeId: number, opts: { mode: LockMode; purpose: string }): Promise<Task> {
    const started = Date.now();
    if (opts.mode === 'shared') {
      return new Task(this.db, await getNodeById(this.db, nodeId), 'shared', opts.purpose, this.hostname, this.log);
    }
    for (let attempt = 0; attempt < 2; attempt++) {
      const [row] = await this.db('nodes')
        .where({ id: nodeId })
        .whereNull('reservation')
        .update({ reservation: this.hostname })
        .returning('id');
      if (row) {
        const node = await getNodeById(this.db, nodeId);
        this.log.debug({ node: node.uuid, purpose: opts.purpose, waitMs: Date.now() - started }, 'exclusive lock taken');
        return new Task(this.db, node, 'exclusive', opts.purpose, this.hostname, this.log);
      }
      // Held by a conductor whose heartbeat is stale? Then the survivors may clear it.
      const cleared = await clearStaleReservation(this.db, nodeId, this.heartbeatTimeoutSeconds);
      if (!cleared) break;
    }
    const node = await getNodeById(this.db, nodeId);
    throw new NodeLocked(node.uuid, node.reservation ?? 'unknown');
  }

  /** Claims runnable intents with their nodes reserved: one exclusive task per intent. */
  async claimIntents(limit: number, scope: ClaimScope): Promise<Array<{ intent: Intent; task: Task }>> {
    const intents = await claimIntents(this.db, this.hostname, limit, scope);
    // Reserved by the claim: nobody else changes these rows until the tasks release them.
    const nodes = new Map((await getNodesByIds(this.db, intents.map((i) => i.nodeId))).map((n) => [n.id, n]));
    const out: Array<{ intent: Intent; task: Task }> = [];
    for (const intent of intents) {
      const node = nodes.get(intent.nodeId) ?? await getNodeById(this.db, intent.nodeId);
      out.push({
        intent,
        task: new Task(this.db, node, 'exclusive', `intent ${intent.kind}`, this.hostname, this.log, { intentId: intent.id, attempts: intent.attempts }),
      });
    }
    return out;
  }
}
