/**
 * The budget a conductor has at each BMC: at most `limit` requests (Redfish) or commands
 * (ipmitool) in flight to one BMC address at once, whichever path sends them (intents, power
 * sync, sensor reads, inspection, virtual media). One instance per conductor, built with its
 * driver registry and shared by every driver; the drivers name the key (the BMC's address).
 *
 * Waiters are served by priority, then in arrival order: an operator's intent waiting for a
 * BMC goes before a periodic read waiting for the same BMC. A waiter that gives up (its
 * signal aborts) leaves the queue at once.
 */

/** Who waits for a BMC. `intent` (the default) is an operator's request; `periodic` is a periodic read. */
export type BmcPriority = 'intent' | 'periodic';

interface Waiter {
  grant(): void;
}

interface Slot {
  active: number;
  intent: Waiter[];
  periodic: Waiter[];
}

/** Totals since start, for /metrics and tests. */
export interface BmcBudgetStats {
  /** Grants that had to wait for a slot. */
  waited: number;
  /** Grants given to an intent ahead of a periodic read that waited longer. */
  promoted: number;
  /** The most requests in flight to one BMC at any time (never above `limit`). */
  maxInFlight: number;
}

export class BmcBudget {
  private readonly slots = new Map<string, Slot>();
  readonly stats: BmcBudgetStats = { waited: 0, promoted: 0, maxInFlight: 0 };

  constructor(readonly limit: number) {
    if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`BMC budget: limit must be a positive integer, not ${limit}`);
  }

  /** Requests in flight to `key` now. */
  inFlight(key: string): number {
    return this.slots.get(key)?.active ?? 0;
  }

  /**
   * Waits for a slot at `key`. The returned function frees it (calling it twice is harmless).
   * @throws the signal's reason when it aborts first
   */
  acquire(key: string, priority: BmcPriority = 'intent', signal?: AbortSignal): Promise<() => void> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    let slot = this.slots.get(key);
    if (!slot) {
      slot = { active: 0, intent: [], periodic: [] };
      this.slots.set(key, slot);
    }
    const s = slot;
    if (s.active < this.limit && s.intent.length === 0 && (priority === 'intent' || s.periodic.length === 0)) {
      this.take(s);
      return Promise.resolve(this.releaser(key, s));
    }
    return new Promise((resolve, reject) => {
      const queue = priority === 'intent' ? s.intent : s.periodic;
      const waiter: Waiter = {
        grant: () => {
          signal?.removeEventListener('abort', onAbort);
          this.stats.waited++;
          resolve(this.releaser(key, s));
        },
      };
      const onAbort = () => {
        const i = queue.indexOf(waiter);
        if (i >= 0) queue.splice(i, 1);
        this.sweep(key, s);
        reject(signal?.reason);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      queue.push(waiter);
    });
  }

  /** Runs `fn` holding a slot at `key`. */
  async run<T>(key: string, priority: BmcPriority | undefined, fn: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    const release = await this.acquire(key, priority, signal);
    try {
      return await fn();
    } finally {
      release();
    }
  }

  private take(s: Slot): void {
    s.active++;
    if (s.active > this.stats.maxInFlight) this.stats.maxInFlight = s.active;
  }

  private releaser(key: string, s: Slot): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      s.active--;
      while (s.active < this.limit) {
        const fromIntent = s.intent.length > 0;
        const next = fromIntent ? s.intent.shift()! : s.periodic.shift();
        if (!next) break;
        if (fromIntent && s.periodic.length > 0) this.stats.promoted++;
        this.take(s);
        next.grant();
      }
      this.sweep(key, s);
    };
  }

  private sweep(key: string, s: Slot): void {
    if (s.active === 0 && s.intent.length === 0 && s.periodic.length === 0 && this.slots.get(key) === s) this.slots.delete(key);
  }
}
