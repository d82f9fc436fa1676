/**
 * The state machine of a group operation: what a node's failed round does to the operation
 * (on_failure=abort stops the rest), when the next nodes are admitted, and when and how the
 * operation ends. The statements are db/'s; the order and the conditions are here.
 */
import type { Knex } from 'knex';
import { admitNodes, firstFailedNode, operationCounts, type OperationCounts } from '../db/operation-nodes.js';
import {
  cancelQueuedIntents, claimProgressNotification, finishOperation, hasOpenIntents, lockOpenOperation, markOperationRunning,
  operationsToAdvance, setAbortReason, type Operation, type OperationState,
} from '../db/operations.js';

/** A cancelled or aborted operation: nothing of it is retried, and its queued intents are cancelled. */
export function operationStopped(op: Pick<Operation, 'state' | 'abortReason'>): boolean {
  return op.state === 'cancelled' || op.abortReason !== null;
}

/** The state an operation ends in once none of its intents is open. */
export function finalState(op: Operation, counts: OperationCounts): OperationState {
  if (op.state === 'cancelled') return 'cancelled';
  if (counts.failed === 0 && counts.cancelled === 0) return 'succeeded';
  if (op.abortReason !== null || counts.succeeded === 0) return 'failed';
  return 'partially_failed';
}

/** What one pass over an operation did, for the caller's notifications and wake-ups. */
export interface OperationTick {
  op: Operation;
  admittedNodeIds: number[];
  started: boolean;
  aborted: boolean;
  /** Set when the operation ended in this pass. */
  finished?: OperationState;
  /** Set when a progress notification is due (at most one per `progressIntervalMs` over all conductors). */
  progress?: OperationCounts;
}

/**
 * Advances every unfinished operation, each in a short transaction under its row lock (so
 * conductors take turns, and a cancel is ordered before or after): on_failure=abort stops
 * the rest after a failure; nodes are admitted while fewer than max_parallel are active (an
 * admitted node stays active until its round ends, waits between retries included); an
 * operation with nothing left open ends.
 */
export async function advanceOperations(db: Knex, progressIntervalMs: number): Promise<OperationTick[]> {
  const out: OperationTick[] = [];
  for (const id of await operationsToAdvance(db, progressIntervalMs)) {
    const tick = await db.transaction(async (trx) => advanceOne(trx, id, progressIntervalMs));
    if (tick) out.push(tick);
  }
  return out;
}

async function advanceOne(trx: Knex.Transaction, id: number, progressIntervalMs: number): Promise<OperationTick | undefined> {
  let op = await lockOpenOperation(trx, id);
  if (!op) return undefined;
  const tick: OperationTick = { op, admittedNodeIds: [], started: false, aborted: false };

  if (op.onFailure === 'abort' && op.abortReason === null && op.state !== 'cancelled') {
    const failed = await firstFailedNode(trx, op.id);
    if (failed !== undefined) {
      const reason = `Operation ${op.uuid} stopped (on_failure=abort): node ${failed} failed.`;
      await setAbortReason(trx, op.id, reason);
      await cancelQueuedIntents(trx, op, reason);
      op = { ...op, abortReason: reason };
      tick.aborted = true;
    }
  }

  // A conductor taken for dead hands its running intents back to the queue; for a stopped
  // operation they must not run again.
  if (operationStopped(op) && !tick.aborted) {
    await cancelQueuedIntents(trx, op, op.abortReason ?? `Operation ${op.uuid} was cancelled.`);
  }

  if ((op.state === 'queued' || op.state === 'running') && op.abortReason === null) {
    tick.admittedNodeIds = await admitNodes(trx, op);
    if (op.state === 'queued' && tick.admittedNodeIds.length) {
      op = await markOperationRunning(trx, op.id);
      tick.started = true;
    }
  }

  if (!(await hasOpenIntents(trx, op))) {
    const counts = (await operationCounts(trx, [op.id])).get(op.id)!;
    const state = finalState(op, counts);
    tick.op = await finishOperation(trx, op.id, state);
    tick.finished = state;
    tick.progress = counts;
    return tick;
  }
  tick.op = op;
  const due = await claimProgressNotification(trx, op.id, progressIntervalMs);
  if (due && op.state === 'running' && !tick.started) tick.progress = (await operationCounts(trx, [op.id])).get(op.id)!;
  return tick;
}
