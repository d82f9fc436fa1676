import type { Intent } from '../db/intents.js';
import { finishSucceededIntents } from '../db/intents.js';
import { recordHistories, type NewHistoryEvent } from '../db/node-history.js';
import type { Node, NodeChanges, UpdateOptions } from '../db/nodes.js';
import { LockLost, type Task, type TaskManager } from './task-manager.js';

/** A succeeded intent's outcome, to be written with its node's changes and release. */
export interface Success {
  task: Task;
  intent: Intent;
  changes: NodeChanges;
  result: unknown;
  history?: NewHistoryEvent;
}

interface Pending {
  success: Success;
  resolve: (node: Node) => void;
  reject: (err: unknown) => void;
}

/**
 * Records succeeded intents in batches: one transaction (a handful of set-based statements)
 * for all outcomes that arrived while the previous batch committed. Nothing waits for a batch
 * to fill: a lone outcome is written at once, and under load the batches grow by themselves.
 * Each outcome still commits with its own node's release or not at all: a task that lost its
 * lock gets LockLost, a database error fails the whole batch (the caller retries).
 */
export class SuccessRecorder {
  private queue: Pending[] = [];
  private flushing = false;

  constructor(
    private readonly tasks: TaskManager,
    private readonly update: UpdateOptions,
    private readonly maxBatch = 500,
  ) {}

  /** Resolves with the updated node once the outcome is committed. */
  record(success: Success): Promise<Node> {
    return new Promise<Node>((resolve, reject) => {
      this.queue.push({ success, resolve, reject });
      if (!this.flushing) void this.flush();
    });
  }

  private async flush(): Promise<void> {
    this.flushing = true;
    try {
      while (this.queue.length > 0) {
        const batch = this.queue.splice(0, this.maxBatch);
        try {
          const out = await this.tasks.commitAll(batch.map((p) => ({ task: p.success.task, changes: p.success.changes })), async (trx, held) => {
            const done = held.map((h) => batch[h.index].success);
            await finishSucceededIntents(trx, done.map((s) => ({ id: s.intent.id, result: s.result })));
            await recordHistories(trx, done.flatMap((s) => (s.history ? [s.history] : [])));
          }, this.update);
          out.forEach((r, i) => (r instanceof LockLost ? batch[i].reject(r) : batch[i].resolve(r)));
        } catch (err) {
          for (const p of batch) p.reject(err);
        }
      }
    } finally {
      this.flushing = false;
    }
  }
}
