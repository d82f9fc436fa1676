import type { Knex } from 'knex';
import type { Logger } from 'pino';

/**
 * Postgres NOTIFY, sent after commit and in batches. A transaction that issues NOTIFY takes a
 * database-wide lock from its pre-commit until after its commit record is flushed, so every
 * notifying transaction commits one after another: one NOTIFY inside each intent's
 * transaction caps the whole system at one WAL flush per intent. A NOTIFY in a statement of its
 * own writes no WAL and holds that lock only for an instant; batching a few milliseconds of
 * them into one statement makes it rarer still. Listeners are woken only after the data they
 * look for is committed, and a lost notification is covered by the listeners' slow poll.
 */
export class PgNotifyBatcher {
  private readonly pending = new Map<string, Set<string>>();
  private timer?: NodeJS.Timeout;
  private flushing: Promise<void> = Promise.resolve();

  constructor(
    private readonly db: Knex,
    private readonly log: Logger,
    private readonly delayMs = 2,
  ) {}

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
    }, this.delayMs);
  }

  private async flush(): Promise<void> {
    const batches = [...this.pending.entries()];
    this.pending.clear();
    for (const [channel, payloads] of batches) {
      try {
        await this.db.raw('SELECT pg_notify(?, p) FROM unnest(?::text[]) AS p', [channel, [...payloads]]);
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
