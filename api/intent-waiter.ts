import type { Knex } from 'knex';
import type { Logger } from 'pino';
import { PgListener } from '../db/listener.js';
import { FINAL_STATES, INTENT_DONE_CHANNEL, getIntentById, type Intent } from '../db/intents.js';

/**
 * Lets a request wait for an intent to end. Conductors NOTIFY when an intent ends; one
 * LISTEN connection per API process wakes every waiter of that intent. A slow poll covers
 * a lost notification (or runs alone when no connection string is given, as in tests).
 */
export class IntentWaiter {
  private readonly waiters = new Map<string, Set<() => void>>();
  private listener?: PgListener;
  private ready?: Promise<void>;

  constructor(
    private readonly db: Knex,
    private readonly connectionString: string | undefined,
    private readonly log: Logger,
    private readonly pollMs = 500,
  ) {}

  private listen(): Promise<void> {
    if (!this.connectionString) return Promise.resolve();
    if (!this.listener) {
      this.listener = new PgListener({
        connectionString: this.connectionString, applicationName: 'galvanic-api-listen', channels: [INTENT_DONE_CHANNEL], log: this.log,
        onNotification: (_channel, payload) => {
          for (const wake of this.waiters.get(payload ?? '') ?? []) wake();
        },
        // An intent may have ended while the connection was down: every waiter reads its row again.
        onReconnect: () => {
          for (const set of this.waiters.values()) for (const wake of [...set]) wake();
        },
      });
      this.ready = this.listener.start();
    }
    return this.ready ?? Promise.resolve();
  }

  /** Resolves with the intent once it has ended, or with its current row when `ms` pass. */
  async wait(intent: Intent, ms: number): Promise<Intent> {
    if (ms <= 0 || FINAL_STATES.has(intent.state)) return intent;
    await this.listen();
    const deadline = Date.now() + ms;
    let current = intent;
    const set = this.waiters.get(intent.uuid) ?? new Set();
    this.waiters.set(intent.uuid, set);
    try {
      while (Date.now() < deadline) {
        current = await getIntentById(this.db, intent.id);
        if (FINAL_STATES.has(current.state)) return current;
        await new Promise<void>((resolve) => {
          const wake = () => {
            clearTimeout(timer);
            set.delete(wake);
            resolve();
          };
          const timer = setTimeout(wake, Math.min(this.pollMs, Math.max(0, deadline - Date.now())));
          set.add(wake);
        });
      }
      return await getIntentById(this.db, intent.id);
    } finally {
      if (set.size === 0) this.waiters.delete(intent.uuid);
    }
  }

  async close(): Promise<void> {
    await this.listener?.stop();
  }
}
