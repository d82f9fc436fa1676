import amqp, { type Channel, type ChannelModel, type ConfirmChannel } from 'amqplib';
import type { Logger } from 'pino';
import { backoffMs } from './backoff.js';

export interface AmqpLinkOptions<C extends Channel | ConfirmChannel> {
  /** amqp://user:password@host:port/vhost */
  url: string;
  /** The connection's name in the broker's management views. */
  connectionName: string;
  log: Logger;
  /**
   * Opens the channel and declares what the owner needs (exchange, queues, consumers), on
   * every new connection: a broker that restarted has forgotten whatever was not durable.
   */
  open(conn: ChannelModel): Promise<C>;
  /** The link is up on this channel (a new one after each reconnection). */
  onUp(channel: C): void;
  /** The link was lost (not called when the owner closes it). */
  onDown?(): void;
  /** Fields for the reconnect warning, such as what waits to be sent. */
  retryContext?(): Record<string, unknown>;
  /** Backoff between connection attempts (first, cap). */
  retryInitialMs?: number;
  retryMaxMs?: number;
}

const RETRY_INITIAL_MS = 200;
/** Short enough that traffic resumes soon after a broker restart. */
const RETRY_MAX_MS = 10_000;

/**
 * One AMQP connection that stays up: it connects, opens and declares through `open`, and when
 * the connection or its channel goes away (broker restart, cut link, channel error) it drops
 * both and connects again with exponential backoff, declaring everything again. A first
 * connect that fails is retried the same way. What the owner does while it is down (buffer,
 * drop, stop consuming) is the owner's, through `onUp` and `onDown`.
 */
export class AmqpLink<C extends Channel | ConfirmChannel> {
  #conn: ChannelModel | null = null;
  #closed = false;
  #attempt = 0;
  #timer: NodeJS.Timeout | null = null;

  constructor(private readonly opts: AmqpLinkOptions<C>) {}

  /** Connects in the background; never rejects. */
  start(): void {
    void this.#connect();
  }

  /** Stops reconnecting and closes the connection. */
  async close(): Promise<void> {
    this.#closed = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    const conn = this.#conn;
    this.#conn = null;
    await conn?.close().catch(() => undefined);
  }

  async #connect(): Promise<void> {
    this.#timer = null;
    if (this.#closed) return;
    const log = this.opts.log;
    let conn: ChannelModel | null = null;
    try {
      conn = await amqp.connect(this.opts.url, { clientProperties: { connection_name: this.opts.connectionName } });
      const c = conn;
      // One handler for both: whichever closes first takes the whole connection down.
      const lost = (err?: Error) => this.#lost(c, err);
      conn.on('error', (err: Error) => log.warn({ err: err.message }, 'AMQP connection error'));
      conn.on('close', lost);
      const ch = await this.opts.open(conn);
      ch.on('error', (err: Error) => log.warn({ err: err.message }, 'AMQP channel error'));
      ch.on('close', lost);
      if (this.#closed) {
        await conn.close().catch(() => undefined);
        return;
      }
      this.#conn = conn;
      this.#attempt = 0;
      this.opts.onUp(ch);
    } catch (err) {
      await conn?.close().catch(() => undefined);
      this.#retry(err as Error);
    }
  }

  #lost(conn: ChannelModel, err?: Error): void {
    if (this.#conn !== conn) return;
    this.#conn = null;
    void conn.close().catch(() => undefined);
    this.opts.onDown?.();
    this.#retry(err ?? new Error('connection closed'));
  }

  #retry(err: Error): void {
    if (this.#closed || this.#timer) return;
    const delay = backoffMs(++this.#attempt, this.opts.retryInitialMs ?? RETRY_INITIAL_MS, this.opts.retryMaxMs ?? RETRY_MAX_MS);
    this.opts.log.warn({ err: err.message, retryInMs: Math.round(delay), ...this.opts.retryContext?.() }, 'AMQP unavailable; reconnecting');
    this.#timer = setTimeout(() => void this.#connect(), delay);
  }
}
