import { performance } from 'node:perf_hooks';
import type { Knex } from 'knex';
import type { Logger } from 'pino';

/** Payloads per millisecond from which a batcher gathers for busyDelayMs (see PgNotifyBatcher). */
const BUSY_PER_MS = 1;

/**
 * Postgres NOTIFY, sent after commit and in batches. A transaction that issues NOTIFY takes a
 * database-wide lock from its pre-commit until after its commit record is flushed, so every
 * notifying transaction commits one after another: one NOTIFY inside each intent's
 * transaction caps the whole system at one WAL flush per intent. A NOTIFY in a statement of its
 * own writes no WAL and holds that lock only for an instant; batching a few milliseconds of
 * them into one statement makes it rarer still. Listeners are woken only after the data they
 * look for is committed, and a lost notification is covered by the listeners' slow poll.
 *
 * The payloads of a batch travel packed, several to a notification (PgListener unpacks them):
 * Postgres hands every notification to every listening backend, and each listener parses
 * every one, whatever its share, so a notification per payload cost each of K conductors the
 * whole fleet's wake-ups.
 *
 * Each notification wakes every listener, and each wake-up costs its process and its backend a
 * few hundred microseconds of CPU however little it carries: four idle processes listening
 * beside one conductor took 9 % off its intents/s at ~2,300 a second, where batches left every
 * ~12 ms. While payloads come at BUSY_PER_MS or faster the batcher gathers them for busyDelayMs
 * instead: the conductors pace their claims by 100 ms or more at such rates anyway, and a
 * `?wait=` request learns of its intent's end up to that much later. A slower stream (single
 * requests, a few hundred a second) goes out after delayMs, as before.
 */
export class PgNotifyBatcher {
  private readonly pending = new Map<string, Set<string>>();
  private timer?: NodeJS.Timeout;
  private flushing: Promise<void> = Promise.resolve();
  /** When the last batch was taken, and whether payloads came at BUSY_PER_MS or faster before it. */
  private lastFlushAt = 0;
  private busy = false;

  constructor(
    private readonly db: Knex,
    private readonly log: Logger,
    private readonly delayMs = 2,
    private readonly busyDelayMs = 25,
  ) {}

  /** Queues `payload` (no spaces: they separate packed payloads) for `channel`. */
  notify(channel: string, payload: string): void {
    let set = this.pending.get(channel);
    if (!set) {
      set = new Set();
      this.pending.set(channel, set);
    }
    set.add(payload);
    this.timer ??= setTimeout(() => {
      this.timer = undefined;
      this.flushing = this.flushing.then(() => this.flush());
    }, this.busy ? this.busyDelayMs : this.delayMs);
  }

  private async flush(): Promise<void> {
    const batches = [...this.pending.entries()];
    this.pending.clear();
    const now = performance.now();
    let count = 0;
    for (const [, payloads] of batches) count += payloads.size;
    this.busy = count >= BUSY_PER_MS * Math.max(1, now - this.lastFlushAt);
    this.lastFlushAt = now;
    for (const [channel, payloads] of batches) {
      try {
        await this.db.raw('SELECT pg_notify(?, p) FROM unnest(?::text[]) AS p', [channel, packPayloads(payloads)]);
      } catch (err) {
        this.log.warn({ err, channel, count: payloads.size }, 'NOTIFY failed; listeners will find the work by polling');
      }
    }
  }

  /** Sends what is pending; call before closing the pool. */
  async close(): Promise<void> {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = undefined;
      this.flushing = this.flushing.then(() => this.flush());
    }
    await this.flushing;
  }
}

/** Separates the payloads packed into one notification. */
export const PAYLOAD_SEPARATOR = ' ';

/** Postgres refuses a payload of 8,000 bytes or more. */
const MAX_PACKED_BYTES = 7_900;

/** Joins payloads into as few notifications as the payload limit allows, in order. */
export function packPayloads(payloads: Iterable<string>): string[] {
  const out: string[] = [];
  let parts: string[] = [];
  let bytes = 0;
  for (const p of payloads) {
    const size = Buffer.byteLength(p);
    if (parts.length > 0 && bytes + 1 + size > MAX_PACKED_BYTES) {
      out.push(parts.join(PAYLOAD_SEPARATOR));
      parts = [];
      bytes = 0;
    }
    bytes += (parts.length > 0 ? 1 : 0) + size;
    parts.push(p);
  }
  if (parts.length > 0) out.push(parts.join(PAYLOAD_SEPARATOR));
  return out;
}

/** The payloads one notification carries (see packPayloads); [undefined] for none. */
export function unpackPayloads(payload: string | undefined): Array<string | undefined> {
  if (!payload) return [payload];
  return payload.split(PAYLOAD_SEPARATOR);
}
