import type { Logger } from 'pino';
import { lazyChild } from '../common/logger.js';
import { DriverError, GalvanicError } from '../common/errors.js';
import type { Notifier } from '../common/notifier.js';
import { retryPolicyOf } from '../db/operations.js';
import { INTENT_DONE_CHANNEL, finishIntent, skipRestOfBatch, type ClaimScope, type Intent } from '../db/intents.js';
import type { PgNotifyBatcher } from '../db/notify.js';
import type { AccessOptions } from '../db/nodes.js';
import type { DriverRegistry } from '../drivers/registry.js';
import type { Action, ActionContext, ActionResult } from './actions/types.js';
import { nodePayload } from './node-payload.js';
import { LockLost, type Task, type TaskManager } from './task-manager.js';
import { SuccessRecorder } from './success-recorder.js';
import { failureChanges, settleFailure } from './intent-outcome.js';

export interface RunnerOptions {
  hostname: string;
  workers: number;
  retryInitialDelayMs: number;
  retryMaxDelayMs: number;
  /** Runs before each claim pass (group operations admit their next nodes there). */
  beforeClaim?: () => Promise<void>;
  /** How node updates treat access (see AccessOptions.maintenanceBumpsAccess). */
  update?: AccessOptions;
}

/** Exponential backoff with jitter (half fixed, half random), capped. */
export function backoffMs(attempt: number, initialMs: number, maxMs: number): number {
  const ceiling = Math.min(maxMs, initialMs * 2 ** Math.max(0, attempt - 1));
  return ceiling / 2 + Math.random() * (ceiling / 2);
}

function isTransient(err: unknown): boolean {
  return err instanceof DriverError && err.transient;
}

/**
 * Most intents claimed in one statement. Each batch starts its intents at once, and their
 * first writes queue in the pool ahead of the next claim: with batches of 200, 500 nodes a
 * conductor admitted together started over seconds. One statement for 1,000 costs ~20 ms.
 */
const CLAIM_BATCH = 1000;

/** Delays between attempts to record an outcome when the database fails. */
const COMMIT_RETRY_DELAYS_MS = [200, 1000, 3000];

/**
 * Runs an outcome's transaction, again after a database error (a transaction either commits
 * whole or not at all, so running it again is safe). LockLost is final: the node is not ours.
 */
async function withCommitRetries<T>(log: Logger, commit: () => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await commit();
    } catch (err) {
      if (err instanceof LockLost || attempt >= COMMIT_RETRY_DELAYS_MS.length) throw err;
      log.warn({ err: (err as Error).message, attempt: attempt + 1 }, 'recording an intent outcome failed; trying again');
      await new Promise((r) => setTimeout(r, COMMIT_RETRY_DELAYS_MS[attempt]));
    }
  }
}

class UnknownIntentKind extends GalvanicError {
  readonly code = 'UNKNOWN_INTENT_KIND';
}

/**
 * Claims runnable intents (one per node at a time, in sequence order) and runs them, up to
 * `workers` at once. The claim reserves the node; the outcome, the node's changes and the
 * release are written in one transaction after the BMC work, never across it.
 */
export class IntentRunner {
  private inflight = 0;
  /** Intents this runner is executing: a `running` intent of this host not in here is orphaned. */
  private readonly active = new Set<number>();
  private pumping = false;
  private again = false;
  private stopped = false;
  private readonly idle = new Set<() => void>();
  private readonly successes: SuccessRecorder;

  constructor(
    private readonly tasks: TaskManager,
    private readonly registry: DriverRegistry,
    private readonly actions: Readonly<Record<string, Action | undefined>>,
    private readonly notifier: Notifier,
    /** Wakes API requests waiting on an intent, after its outcome is committed. */
    private readonly wake: PgNotifyBatcher,
    private readonly scope: () => ClaimScope | undefined,
    private readonly log: Logger,
    private readonly opts: RunnerOptions,
  ) {
    this.successes = new SuccessRecorder(tasks, opts.update ?? {});
  }

  get running(): number {
    return this.inflight;
  }

  /**
   * Looks for work at the end of this turn of the event loop: the calls of one turn (a batch
   * of outcomes committed together, a burst of notifications) make one claim, and calls made
   * while a claim is under way coalesce into one more pass.
   */
  pump(): void {
    if (this.stopped) return;
    if (this.pumping) {
      this.again = true;
      return;
    }
    this.pumping = true;
    void new Promise<void>((resolve) => setImmediate(resolve)).then(() => this.claimLoop()).finally(() => {
      this.pumping = false;
      if (this.again) {
        this.again = false;
        this.pump();
      }
    });
  }

  private async claimLoop(): Promise<void> {
    let advanced = false;
    while (!this.stopped) {
      const scope = this.scope();
      const want = Math.min(this.opts.workers - this.inflight, CLAIM_BATCH);
      if (!scope || want <= 0) return;
      // Once per pass, not per batch: what it admits changes only when work ends, and every
      // end pumps again. Per batch, it held the operation's row lock (which the conductors
      // take in turn) five times over while 1,000 admitted nodes waited to be claimed.
      if (this.opts.beforeClaim && !advanced) {
        advanced = true;
        try {
          await this.opts.beforeClaim();
        } catch (err) {
          this.log.error({ err }, 'advancing group operations failed');
        }
      }
      let claimed: Array<{ intent: Intent; task: Task }>;
      try {
        claimed = await this.tasks.claimIntents(want, scope);
      } catch (err) {
        this.log.error({ err }, 'claiming intents failed');
        return;
      }
      for (const { intent, task } of claimed) {
        this.inflight++;
        this.active.add(intent.id);
        void this.execute(intent, task).finally(() => {
          this.active.delete(intent.id);
          this.inflight--;
          if (this.inflight === 0) for (const resolve of [...this.idle]) resolve();
          this.pump();
        });
      }
      if (claimed.length < want) return;
    }
  }

  /** Whether this runner is executing the intent right now. */
  isRunning(intentId: number): boolean {
    return this.active.has(intentId);
  }

  /** Stops claiming and waits (bounded) for running intents to end. */
  async drain(timeoutMs: number): Promise<boolean> {
    this.stopped = true;
    if (this.inflight === 0) return true;
    return new Promise<boolean>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.idle.delete(done);
        resolve(true);
      };
      const timer = setTimeout(() => {
        this.idle.delete(done);
        resolve(false);
      }, timeoutMs);
      this.idle.add(done);
    });
  }

  private async execute(intent: Intent, task: Task): Promise<void> {
    const log = lazyChild(this.log, { intent: intent.uuid, node: task.node.uuid, kind: intent.kind, attempt: intent.attempts });
    const host = this.opts.hostname;
    const node = task.node;
    const action = this.actions[intent.kind];
    const ctx: ActionContext = {
      task, intent, registry: this.registry, log,
      // The node as the task last wrote it: long actions record progress (the step running now).
      get node() {
        return task.node;
      },
      driver: { nodeUuid: node.uuid, driverInfo: node.driverInfo, log, trace: `${intent.uuid}#${intent.attempts}`, attempt: intent.attempts },
    };
    const note = action?.notification;
    try {
      if (note) this.notifier.emit(`${note.prefix}.start`, 'info', note.payloadName, nodePayload(node, note.extra(ctx)));
      let res: ActionResult | undefined;
      let failure: unknown;
      try {
        if (!action) throw new UnknownIntentKind(`Unknown intent kind ${intent.kind}`);
        res = await action.run(ctx);
      } catch (err) {
        failure = err;
      }
      // The BMC work is done: its outcome is recorded as such. A database error while recording
      // is retried, never mistaken for a failure of the action.
      if (res !== undefined) {
        const done = res;
        const history = done.history && { nodeId: node.id, conductor: host, user: intent.requester, operation: intent.operation, ...done.history };
        const updated = await withCommitRetries(log, () => this.successes.record({ task, intent, changes: done.changes ?? {}, result: done.result, history, write: done.write }));
        this.wake.notify(INTENT_DONE_CHANNEL, intent.uuid);
        if (note) this.notifier.emit(`${note.prefix}.end`, 'info', note.payloadName, nodePayload(updated, note.extra(ctx)));
      } else {
        const err = failure;
        const error = err as Error;
        const retryable = isTransient(err) && intent.attempts < intent.maxAttempts;
        let retry = retryable;
        let retryDelay = 0;
        const changes = failureChanges(action, ctx, error, !retry);
        const updated = await withCommitRetries(log, () => task.commit(changes, async (trx, after) => {
          retry = retryable;
          // An intent of a group operation retries on the operation's policy, unless it was stopped.
          const policy = retry && intent.operation ? await retryPolicyOf(trx, intent.operation) : undefined;
          if (policy?.stopped) {
            retry = false;
            await finishIntent(trx, intent.id, { state: 'cancelled', error: `${error.message} (not retried: operation ${intent.operation} was stopped)` });
          } else if (retry) {
            retryDelay = backoffMs(intent.attempts, policy?.initialDelayMs ?? this.opts.retryInitialDelayMs, policy?.maxDelayMs ?? this.opts.retryMaxDelayMs);
            await finishIntent(trx, intent.id, { state: 'queued', error: error.message, notBefore: new Date(Date.now() + retryDelay) });
          } else {
            const status = err instanceof GalvanicError ? { error_code: err.code, http_status: err.httpStatus } : { error_code: 'INTERNAL', http_status: 500 };
            await finishIntent(trx, intent.id, { state: 'failed', error: error.message, result: status });
            if (intent.batch !== null && intent.stepIndex !== null) await skipRestOfBatch(trx, intent.batch, intent.stepIndex);
          }
          await settleFailure(trx, { intent, after, error, conductor: host, retry });
        }));
        if (!retry) this.wake.notify(INTENT_DONE_CHANNEL, intent.uuid);
        // Look again when the retry falls due rather than at the next poll.
        else setTimeout(() => this.pump(), retryDelay + 5).unref();
        if (note && !retry) this.notifier.emit(`${note.prefix}.error`, 'error', note.payloadName, nodePayload(updated, note.extra(ctx)));
        log.warn({ err: error.message, retry }, 'intent failed');
      }
    } catch (err) {
      if (err instanceof LockLost) {
        log.warn({ err: err.message }, 'intent outcome dropped: the node is no longer this task\'s');
        return;
      }
      // Recording the outcome failed for good (database away?). The intent stays `running`
      // under this conductor and its node stays reserved, so nothing else acts on a node whose
      // state is unknown; the orphan sweep (or recovery at restart, or the survivors if this
      // conductor dies) settles it.
      log.error({ err }, 'recording an intent outcome failed; the intent is left to recovery');
    }
  }
}
