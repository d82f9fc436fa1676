import { setTimeout as sleep } from 'node:timers/promises';

interface BmcSlot {
  /** Resolves when the last queued command of this BMC has ended. Never rejects. */
  tail: Promise<void>;
  /** performance.now() at the end of the last command sent. */
  lastEnd: number;
  pending: number;
}

/** Entries beyond this many trigger a sweep of idle BMCs. */
const SWEEP_ABOVE = 256;

/**
 * Ironic's `[ipmi] min_command_interval`, without its module-level LAST_CMD_TIME: commands to
 * one BMC (address:port) run one at a time, each starting at least `intervalMs` after the
 * previous one ended, as fragile BMCs need. BMCs do not wait for each other.
 */
export class CommandSpacing {
  private readonly slots = new Map<string, BmcSlot>();

  constructor(
    private readonly intervalMs: number,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /**
   * Runs `command` in `key`'s turn. Aborting while waiting for the turn rejects at once
   * with the signal's reason; the turn passes on once the commands before it have ended.
   */
  async run<T>(key: string, command: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    if (this.slots.size > SWEEP_ABOVE) this.sweep();
    let slot = this.slots.get(key);
    if (!slot) {
      slot = { tail: Promise.resolve(), lastEnd: -Infinity, pending: 0 };
      this.slots.set(key, slot);
    }
    const s = slot;
    const previous = s.tail;
    let release!: () => void;
    s.tail = new Promise<void>((r) => (release = r));
    s.pending++;
    let sent = false;
    try {
      signal?.throwIfAborted();
      await abortable(previous, signal);
      const wait = s.lastEnd + this.intervalMs - this.now();
      if (wait > 0) await sleep(wait, undefined, { signal });
      sent = true;
      return await command();
    } catch (err) {
      throw signal?.aborted && !sent ? signal.reason : err;
    } finally {
      s.pending--;
      if (sent) {
        s.lastEnd = this.now();
        release();
      } else {
        // Gave up before our turn: the next one still waits for those before us.
        void previous.then(release);
      }
    }
  }

  private sweep(): void {
    const now = this.now();
    for (const [key, s] of this.slots) {
      if (s.pending === 0 && now - s.lastEnd >= this.intervalMs) this.slots.delete(key);
    }
  }
}

function abortable(p: Promise<void>, signal?: AbortSignal): Promise<void> {
  if (!signal) return p;
  return new Promise<void>((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    void p.then(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    });
  });
}
