import pg from 'pg';
import type { Logger } from 'pino';
import { backoffMs } from '../common/backoff.js';
import { unpackPayloads } from './notify.js';

export interface ListenerOptions {
  connectionString: string;
  /** Shown in pg_stat_activity, so an operator can tell the listeners apart. */
  applicationName: string;
  channels: readonly string[];
  log: Logger;
  /** Called once per payload: those PgNotifyBatcher packed into one notification come one by one. */
  onNotification(channel: string, payload: string | undefined): void;
  /**
   * Runs after each reconnection (not after the first connect): whatever was notified while
   * the connection was down is lost, so the owner looks for it (a catch-up read).
   */
  onReconnect?(): void;
  /** Backoff between connection attempts (first, cap). */
  retryInitialMs?: number;
  retryMaxMs?: number;
}

/**
 * One LISTEN connection, outside any pool, that stays up: when the server restarts or the
 * backend is terminated, it reconnects with backoff, LISTENs again on every channel and calls
 * `onReconnect`. The first connect failing does not fail `start`: it is retried the same way,
 * and the owner's slow poll covers the time without notifications.
 */
export class PgListener {
  private client?: pg.Client;
  private stopped = false;
  private attempt = 0;
  private timer?: NodeJS.Timeout;
  private everConnected = false;
  /** Reconnections made after the first connect. */
  reconnects = 0;

  constructor(private readonly opts: ListenerOptions) {}

  /** True while LISTENing on every channel. */
  get connected(): boolean {
    return this.client !== undefined;
  }

  /** Connects and LISTENs; on failure keeps trying in the background. */
  async start(): Promise<void> {
    this.stopped = false;
    await this.connect();
  }

  private async connect(): Promise<void> {
    if (this.stopped) return;
    const client = new pg.Client({
      connectionString: this.opts.connectionString, application_name: this.opts.applicationName,
      // A peer that vanished without a FIN (a failover, a cut link) is noticed by TCP keepalive.
      keepAlive: true, connectionTimeoutMillis: 10_000,
    });
    let lost = false;
    const lose = (err: unknown) => {
      if (lost) return;
      lost = true;
      if (this.client === client) this.client = undefined;
      client.removeAllListeners('notification');
      client.end().catch(() => undefined);
      this.retry(err);
    };
    client.on('error', lose);
    client.on('end', () => lose(new Error('the LISTEN connection was closed')));
    client.on('notification', (msg) => {
      for (const payload of unpackPayloads(msg.payload)) this.opts.onNotification(msg.channel, payload);
    });
    try {
      await client.connect();
      for (const channel of this.opts.channels) await client.query(`LISTEN ${pg.escapeIdentifier(channel)}`);
    } catch (err) {
      lose(err);
      return;
    }
    if (lost) return;
    if (this.stopped) {
      await client.end().catch(() => undefined);
      return;
    }
    this.client = client;
    this.attempt = 0;
    if (this.everConnected) {
      this.reconnects++;
      this.opts.log.info({ listener: this.opts.applicationName }, 'LISTEN connection re-established');
      this.opts.onReconnect?.();
    }
    this.everConnected = true;
  }

  private retry(err: unknown): void {
    if (this.stopped) return;
    this.attempt++;
    const delay = Math.round(backoffMs(this.attempt, this.opts.retryInitialMs ?? 100, this.opts.retryMaxMs ?? 1000));
    // Once per outage at warn; the attempts after it at debug, or a long outage floods the log.
    const level = this.attempt === 1 ? 'warn' : 'debug';
    this.opts.log[level]({ listener: this.opts.applicationName, err: (err as Error).message, attempt: this.attempt, retryInMs: delay }, 'LISTEN connection lost; reconnecting');
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.connect();
    }, delay);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
  }
}
