import type { Knex } from 'knex';
import type { Logger } from 'pino';
import { InvalidState, NodeLocked } from '../common/errors.js';
import { claimIntents, type ClaimScope, type Intent } from '../db/intents.js';
import { getNodeById, updateNode, type Node, type NodeChanges } from '../db/nodes.js';
import { clearStaleReservation } from '../db/conductors.js';

export type LockMode = 'exclusive' | 'shared';

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
   * transaction: an outcome and the release can never be seen apart.
   */
  async commit(changes: NodeChanges, more?: (trx: Knex.Transaction, node: Node) => Promise<void>): Promise<Node> {
    this.requireExclusive();
    const node = await this.db.transaction(async (trx) => {
      const updated = await updateNode(trx, this.node.id, { ...changes, reservation: null });
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
      await this.db('nodes').where({ id: this.node.id, reservation: this.hostname }).update({ reservation: null });
    }
    this.markReleased();
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
    const out: Array<{ intent: Intent; task: Task }> = [];
    for (const intent of intents) {
      const node = await getNodeById(this.db, intent.nodeId);
      out.push({ intent, task: new Task(this.db, node, 'exclusive', `intent ${intent.kind}`, this.hostname, this.log) });
    }
    return out;
  }
}
