/**
 * What a failed intent does to its node, in one place: the intent runner applies it to a
 * failure it saw, recovery to an intent whose conductor died mid-way. Both write inside the
 * transaction that records the outcome, while the node is locked.
 */
import type { Knex } from 'knex';
import { clearSettledPowerTarget, type Intent } from '../db/intents.js';
import { recordHistory } from '../db/node-history.js';
import type { Node, NodeChanges } from '../db/nodes.js';
import type { Action } from './actions/types.js';

/**
 * The node changes of a failure: the action's own (a provision transition rolled back to its
 * failure state, a power target dropped), and for a final one its error as `last_error`.
 */
export function failureChanges(action: Action | undefined, ctx: { node: Node; intent: Intent }, error: Error, final: boolean): NodeChanges {
  const own = action?.onFailure?.(ctx, error, final) ?? {};
  return final ? { lastError: error.message, ...own } : own;
}

/**
 * After a failure's node changes are written (`after`): a power target no queued intent will
 * reach any more is cleared (the rest of a failed batch is skipped), and the node's history
 * says what failed and whether it will be retried.
 */
export async function settleFailure(
  trx: Knex.Transaction,
  f: { intent: Intent; after: Node; error: Error; conductor: string; retry: boolean },
): Promise<void> {
  const { intent, error } = f;
  if (!f.retry) await clearSettledPowerTarget(trx, f.after);
  await recordHistory(trx, {
    nodeId: f.after.id, severity: 'ERROR', eventType: intent.kind, conductor: f.conductor, user: intent.requester, operation: intent.operation,
    event: f.retry
      ? `Attempt ${intent.attempts} of ${intent.maxAttempts} of ${intent.kind} failed, will retry: ${error.message}`
      : `${intent.kind} failed after ${intent.attempts} attempt(s): ${error.message}`,
  });
}
