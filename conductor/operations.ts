import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { Notifier } from '../common/notifier.js';
import { INTENT_CHANNEL } from '../db/intents.js';
import type { PgNotifyBatcher } from '../db/notify.js';
import { progressOf, type OperationCounts } from '../db/operation-nodes.js';
import { advanceOperations, type OperationTick } from './operation-progress.js';
import type { Operation } from '../db/operations.js';

function iso(d: Date | null): string | null {
  return d ? d.toISOString() : null;
}

/** The notification payload of an operation. */
export function operationPayload(op: Operation, counts?: OperationCounts): Record<string, unknown> {
  return {
    uuid: op.uuid,
    state: op.state,
    description: op.description,
    round: op.round,
    node_count: op.nodeCount,
    ...(counts ? { counts, progress: progressOf(counts) } : {}),
    abort_reason: op.abortReason,
    created_at: iso(op.createdAt),
    started_at: iso(op.startedAt),
    finished_at: iso(op.finishedAt),
  };
}

/**
 * The conductor's part in group operations, run before each claim pass: admits nodes
 * (decided in Postgres, so max_parallel holds over all conductors), wakes the conductors
 * that own the admitted nodes, and sends baremetal.operation.start / progress / end.
 */
export class OperationAdvancer {
  private lastRunAt = 0;
  private trailing?: NodeJS.Timeout;
  private running = false;
  private stopped = false;

  constructor(
    private readonly db: Knex,
    private readonly notifier: Notifier,
    private readonly wake: PgNotifyBatcher,
    private readonly log: Logger,
    private readonly progressIntervalMs: number,
    /**
     * Least time between two passes. The runner asks before every claim, i.e. after every
     * intent that ends: 1,000 nodes ending within seconds made back-to-back passes over every
     * open operation, each under its row lock, on the database the steps need.
     */
    private readonly minSpacingMs = 100,
  ) {}

  /** No further passes (the conductor is stopping); one under way finishes. */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.trailing);
    this.trailing = undefined;
  }

  async advance(): Promise<void> {
    if (this.stopped) return;
    const wait = this.running ? this.minSpacingMs : this.lastRunAt + this.minSpacingMs - Date.now();
    if (wait > 0) {
      // One more pass once the spacing allows, so that the last change is not left to the poll.
      // It runs alone, not before a claim: what it admits wakes the conductors that own it, and
      // in a deploy of 1,000 nodes claims after such passes found nothing 250 times in 262.
      this.trailing ??= setTimeout(() => {
        this.trailing = undefined;
        this.advance().catch((err: unknown) => this.log.error({ err }, 'advancing group operations failed'));
      }, wait).unref();
      return;
    }
    this.lastRunAt = Date.now();
    this.running = true;
    try {
      const ticks = await advanceOperations(this.db, this.progressIntervalMs);
      for (const t of ticks) this.report(t);
    } finally {
      this.running = false;
    }
  }

  private report(t: OperationTick): void {
    const emit = (what: string, priority: 'info' | 'error', counts?: OperationCounts) =>
      this.notifier.emit(`baremetal.operation.${what}`, priority, 'OperationPayload', operationPayload(t.op, counts));
    if (t.admittedNodeIds.length) {
      for (const id of t.admittedNodeIds) this.wake.notify(INTENT_CHANNEL, String(id));
      this.log.debug({ operation: t.op.uuid, admitted: t.admittedNodeIds.length }, 'operation admitted nodes');
    }
    if (t.started) emit('start', 'info');
    if (t.aborted) this.log.warn({ operation: t.op.uuid, reason: t.op.abortReason }, 'operation aborted');
    if (t.finished) {
      emit('end', t.finished === 'failed' || t.finished === 'partially_failed' ? 'error' : 'info', t.progress);
      this.log.info({ operation: t.op.uuid, state: t.finished, counts: t.progress }, 'operation ended');
    } else if (t.progress) {
      emit('progress', 'info', t.progress);
    }
  }
}
