import type { Knex } from 'knex';
import type { Logger } from 'pino';
import {
  assignNode, claimPendingAllocations, countCandidates, failAllocation, lockCandidateNode, type Allocation,
} from '../db/allocations.js';
import { withTransaction } from '../db/transaction.js';

export interface AllocatorOptions {
  /** Allocations handled per transaction. */
  batchSize?: number;
  /**
   * How long an allocation waits while every suitable node is busy (reserved by a conductor,
   * or locked by another allocation pass) before it fails, as Ironic's
   * node_locked_retry_attempts × node_locked_retry_interval (3 × 1 s).
   */
  busyTimeoutMs?: number;
  /** Delay before another pass when suitable nodes were busy. */
  retryDelayMs?: number;
}

/** What one pass did. */
export interface AllocationPassResult {
  active: number;
  failed: number;
  /** Left in `allocating` for a later pass: their suitable nodes were all busy. */
  deferred: number;
}

/** Ironic's AllocationFailed message. */
function failedMessage(a: Allocation, error: string): string {
  return `Failed to process allocation ${a.uuid}: ${error}.`;
}

/**
 * Processes allocations in `allocating`: picks a suitable node for each and gives it to the
 * allocation, or fails it with Ironic's reason. Any number of conductors run this against one
 * database: a pass locks the allocations it handles and the node it gives each with
 * `FOR UPDATE SKIP LOCKED`, so two passes never handle one allocation or take one node, and
 * never wait on each other. Only row locks are taken, in one short transaction with no I/O
 * but the database; a node reserved by a conductor (an intent is running on it) is not taken.
 */
export class Allocator {
  private pumping = false;
  private again = false;
  private stopped = false;
  private current: Promise<void> = Promise.resolve();
  private retryTimer?: NodeJS.Timeout;
  /** When each deferred allocation was first found with only busy nodes. */
  private readonly busySince = new Map<number, number>();
  private readonly batchSize: number;
  private readonly busyTimeoutMs: number;
  private readonly retryDelayMs: number;

  constructor(
    private readonly db: Knex,
    private readonly hostname: string,
    private readonly log: Logger,
    opts: AllocatorOptions = {},
  ) {
    this.batchSize = opts.batchSize ?? 20;
    this.busyTimeoutMs = opts.busyTimeoutMs ?? 3000;
    this.retryDelayMs = opts.retryDelayMs ?? 1000;
  }

  /** Runs passes until none is left to do; calls while one runs are folded into one more pass. */
  pump(): void {
    if (this.stopped) return;
    if (this.pumping) {
      this.again = true;
      return;
    }
    this.pumping = true;
    this.current = (async () => {
      try {
        do {
          this.again = false;
          const result = await this.runPass();
          if (result.active + result.failed === this.batchSize) this.again = true;
          if (result.deferred > 0) this.scheduleRetry();
        } while (this.again && !this.stopped);
      } catch (err) {
        this.log.error({ err }, 'allocation pass failed; the next poll tries again');
      } finally {
        this.pumping = false;
      }
    })();
  }

  private scheduleRetry(): void {
    if (this.retryTimer || this.stopped) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      this.pump();
    }, this.retryDelayMs);
  }

  /** One pass over up to batchSize pending allocations, in one transaction. */
  async runPass(): Promise<AllocationPassResult> {
    const result: AllocationPassResult = { active: 0, failed: 0, deferred: 0 };
    const failures: Array<{ a: Allocation; message: string }> = [];
    await withTransaction(this.db, async (trx) => {
      result.active = 0;
      result.deferred = 0;
      failures.length = 0;
      for (const a of await claimPendingAllocations(trx, this.batchSize)) {
        try {
          // A savepoint per allocation: one that fails in SQL does not undo the others.
          const outcome = await trx.transaction((sp) => this.allocate(sp, a));
          if (outcome === 'active') result.active++;
          else if (outcome === 'deferred') result.deferred++;
          else {
            await failAllocation(trx, a.id, outcome.error, this.hostname);
            failures.push({ a, message: outcome.error });
          }
        } catch (err) {
          const message = `Unexpected exception during allocation: ${(err as Error).message}`;
          await failAllocation(trx, a.id, message, this.hostname);
          failures.push({ a, message });
        }
      }
    });
    result.failed = failures.length;
    for (const { a, message } of failures) {
      this.busySince.delete(a.id);
      this.log.error({ allocation: a.uuid }, message);
    }
    return result;
  }

  private async allocate(trx: Knex.Transaction, a: Allocation): Promise<'active' | 'deferred' | { error: string }> {
    const counts = await countCandidates(trx, a);
    if (counts.matching === 0) {
      return {
        error: failedMessage(a, a.candidateNodes.length
          ? `none of the requested nodes are available and match the resource class ${a.resourceClass}`
          : `no available nodes match the resource class ${a.resourceClass}`),
      };
    }
    if (counts.withTraits === 0) {
      return { error: failedMessage(a, `no suitable nodes have the requested traits ${a.traits.join(', ')}`) };
    }
    const node = await lockCandidateNode(trx, a);
    if (node) {
      await assignNode(trx, a, node, this.hostname);
      this.busySince.delete(a.id);
      this.log.info({ allocation: a.uuid, node: node.uuid }, 'node reserved for allocation');
      return 'active';
    }
    const since = this.busySince.get(a.id) ?? Date.now();
    this.busySince.set(a.id, since);
    if (Date.now() - since >= this.busyTimeoutMs) {
      return { error: failedMessage(a, `could not reserve any of ${counts.withTraits} suitable nodes`) };
    }
    return 'deferred';
  }

  /** Stops pumping and waits for a running pass. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    await this.current;
  }
}
