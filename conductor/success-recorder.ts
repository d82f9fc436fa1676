import type { Knex } from 'knex';
import { Batcher, type BatchOutcome } from '../common/batcher.js';
import type { Intent } from '../db/intents.js';
import { finishSucceededIntents, requeueIntents } from '../db/intents.js';
import { recordHistories, type NewHistoryEvent } from '../db/node-history.js';
import type { Node, NodeChanges, AccessOptions } from '../db/nodes.js';
import { LockLost, type Task, type TaskManager } from './task-manager.js';

/** A succeeded intent's outcome, to be written with its node's changes and release. */
export interface Success {
  task: Task;
  intent: Intent;
  changes: NodeChanges;
  result: unknown;
  /** Back to the queue, due then (see ActionResult.requeueAt), instead of succeeded. */
  requeueAt?: Date;
  history?: NewHistoryEvent;
  /** More rows to write with the outcome (inventory, ports found by inspection). */
  write?: (trx: Knex.Transaction, node: Node) => Promise<void>;
}

/**
 * Records succeeded intents in batches (group commit): one transaction of a handful of
 * set-based statements for all outcomes that arrived while the previous batch committed.
 * Each outcome still commits with its own node's release or not at all: a task that lost its
 * lock gets LockLost, a database error fails the whole batch (the caller retries).
 */
/** A recorded outcome: the node as written, and for a requeued intent whether it is due at once. */
export interface Recorded {
  node: Node;
  /** Requeued and due at once: a wake-up came while it ran (see requeueIntents). */
  dueAgain: boolean;
}

export class SuccessRecorder {
  private readonly batcher: Batcher<Success, Recorded>;

  constructor(tasks: TaskManager, update: AccessOptions, maxBatch = 500) {
    this.batcher = new Batcher(async (batch) => {
      let due = new Set<number>();
      const out = await tasks.commitAll(batch.map((s) => ({ task: s.task, changes: s.changes })), async (trx, held) => {
        const done = held.map((h) => batch[h.index]);
        await finishSucceededIntents(trx, done.filter((s) => !s.requeueAt).map((s) => ({ id: s.intent.id, result: s.result })));
        due = await requeueIntents(trx, done.flatMap((s) => (s.requeueAt ? [{ id: s.intent.id, notBefore: s.requeueAt, result: s.result }] : [])));
        await recordHistories(trx, done.flatMap((s) => (s.history ? [s.history] : [])));
        for (const h of held) await batch[h.index].write?.(trx, h.node);
      }, update);
      return out.map((r, i): BatchOutcome<Recorded> => (r instanceof LockLost ? { error: r } : { value: { node: r, dueAgain: due.has(batch[i].intent.id) } }));
    }, maxBatch);
  }

  /** Resolves with the updated node once the outcome is committed. */
  record(success: Success): Promise<Recorded> {
    return this.batcher.submit(success);
  }
}
