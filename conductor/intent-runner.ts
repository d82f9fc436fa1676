import type { Knex } from 'knex';
import type { Logger } from 'pino';
import { DriverError, GalvanicError } from '../common/errors.js';
import {
  claimIntents, finishIntent, releaseReservation, skipRestOfBatch, type Intent,
} from '../db/intents.js';
import { recordHistory } from '../db/node-history.js';
import { getNodeById, updateNode, type NodeChanges } from '../db/nodes.js';
import type { DriverRegistry } from '../drivers/registry.js';
import type { Action } from './actions/types.js';

export interface RunnerOptions {
  hostname: string;
  workers: number;
  retryInitialDelayMs: number;
  retryMaxDelayMs: number;
}

/** Exponential backoff with full jitter, capped. */
export function backoffMs(attempt: number, initialMs: number, maxMs: number): number {
  const ceiling = Math.min(maxMs, initialMs * 2 ** Math.max(0, attempt - 1));
  return ceiling / 2 + Math.random() * (ceiling / 2);
}

function isTransient(err: unknown): boolean {
  return err instanceof DriverError && err.transient;
}

/**
 * Claims runnable intents (one per node at a time, in sequence order) and runs them, up to
 * `workers` at once. The claim reserves the node; the outcome, the node's changes and the
 * release are written in one transaction after the BMC work, never across it.
 */
export class IntentRunner {
  private inflight = 0;
  private pumping = false;
  private again = false;
  private stopped = false;
  private readonly idle = new Set<() => void>();

  constructor(
    private readonly db: Knex,
    private readonly registry: DriverRegistry,
    private readonly actions: Record<string, Action>,
    private readonly log: Logger,
    private readonly opts: RunnerOptions,
  ) {}

  get running(): number {
    return this.inflight;
  }

  /** Looks for work now; calls made while a claim is under way coalesce into one more pass. */
  pump(): void {
    if (this.stopped) return;
    if (this.pumping) {
      this.again = true;
      return;
    }
    this.pumping = true;
    void this.claimLoop().finally(() => {
      this.pumping = false;
      if (this.again) {
        this.again = false;
        this.pump();
      }
    });
  }

  private async claimLoop(): Promise<void> {
    while (!this.stopped) {
      const free = this.opts.workers - this.inflight;
      if (free <= 0) return;
      let claimed: Intent[];
      try {
        claimed = await claimIntents(this.db, this.opts.hostname, Math.min(free, 100));
      } catch (err) {
        this.log.error({ err }, 'claiming intents failed');
        return;
      }
      for (const intent of claimed) {
        this.inflight++;
        void this.execute(intent).finally(() => {
          this.inflight--;
          if (this.inflight === 0) for (const resolve of this.idle) resolve();
          this.pump();
        });
      }
      if (claimed.length < Math.min(free, 100)) return;
    }
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

  private async execute(intent: Intent): Promise<void> {
    const log = this.log.child({ intent: intent.uuid, kind: intent.kind, attempt: intent.attempts });
    const host = this.opts.hostname;
    try {
      const node = await getNodeById(this.db, intent.nodeId);
      const action = this.actions[intent.kind];
      const ctx = {
        node, intent, registry: this.registry, log,
        driver: { nodeUuid: node.uuid, driverInfo: node.driverInfo, log },
      };
      try {
        if (!action) throw new UnknownIntentKind(`Unknown intent kind ${intent.kind}`);
        const res = await action.run(ctx);
        await this.db.transaction(async (trx) => {
          await finishIntent(trx, intent.id, { state: 'succeeded', result: res.result });
          await updateNode(trx, node.id, { ...res.changes, reservation: null });
          if (res.history) await recordHistory(trx, { nodeId: node.id, conductor: host, user: intent.requester, operation: intent.operation, ...res.history });
        });
      } catch (err) {
        const error = err as Error;
        const retry = isTransient(err) && intent.attempts < intent.maxAttempts;
        const changes: NodeChanges = action?.onFailure?.(ctx, error, !retry) ?? {};
        await this.db.transaction(async (trx) => {
          if (retry) {
            const delay = backoffMs(intent.attempts, this.opts.retryInitialDelayMs, this.opts.retryMaxDelayMs);
            await finishIntent(trx, intent.id, { state: 'queued', error: error.message, notBefore: new Date(Date.now() + delay) });
            await updateNode(trx, node.id, { ...changes, reservation: null });
          } else {
            await finishIntent(trx, intent.id, { state: 'failed', error: error.message });
            if (intent.batch !== null && intent.stepIndex !== null) await skipRestOfBatch(trx, intent.batch, intent.stepIndex);
            await updateNode(trx, node.id, { lastError: error.message, ...changes, reservation: null });
          }
          await recordHistory(trx, {
            nodeId: node.id, severity: 'ERROR', eventType: intent.kind, conductor: host, user: intent.requester, operation: intent.operation,
            event: retry ? `Attempt ${intent.attempts} of ${intent.kind} failed, will retry: ${error.message}` : `${intent.kind} failed: ${error.message}`,
          });
        });
        log.warn({ err: error.message, retry }, 'intent failed');
      }
    } catch (err) {
      // Bookkeeping itself failed (database away?): leave the intent running; the
      // reservation is released so a restart or another conductor can take it over.
      log.error({ err }, 'recording an intent outcome failed');
      await releaseReservation(this.db, intent.nodeId, host).catch(() => undefined);
    }
  }
}

class UnknownIntentKind extends GalvanicError {
  readonly code = 'UNKNOWN_INTENT_KIND';
}
