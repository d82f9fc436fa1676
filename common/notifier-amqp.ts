/**
 * The `amqp` notification driver: RabbitMQ through amqplib, on the wire exactly as
 * oslo.messaging's messagingv2 driver sends Ironic's notifications (IRONIC-API.md, "On the
 * wire"): topic exchange `ironic`, routing key `notifications.<priority>`, persistent JSON
 * messages whose body is `{"oslo.version": "2.0", "oslo.message": "<envelope as JSON>"}`.
 *
 * Publishing never blocks the caller: notifications go to a bounded in-memory buffer that a
 * confirm channel drains. While the broker is away (or slower than the producers) the buffer
 * fills; when full the oldest notification is dropped and counted, so memory stays bounded
 * and the newest sensor data wins. Lost connections are re-established with exponential
 * backoff; notifications sent but not confirmed when the connection dropped are sent again
 * (at least once, like oslo.messaging's retries).
 */
import type { ChannelModel, ConfirmChannel } from 'amqplib';
import type { Logger } from 'pino';
import { AmqpLink } from './amqp-link.js';
import { EnvelopeNotifier, type Notification } from './notification.js';

export interface AmqpNotifierOptions {
  /** amqp://user:password@host:port/vhost */
  url: string;
  exchange: string;
  topic: string;
  /** Declare `<topic>.<priority>` queues bound to the exchange, as oslo.messaging does. */
  declareQueue: boolean;
  /** Notifications kept while they cannot be sent; the oldest is dropped beyond this. */
  bufferSize: number;
}

/** What the bus driver did since it started (for /metrics and tests). */
export interface BusStats {
  /** Accepted from the producers. */
  accepted: number;
  /** Confirmed by the broker. */
  confirmed: number;
  /** Dropped, oldest first, because the buffer was full. */
  dropped: number;
  /** Waiting in the buffer now. */
  buffered: number;
  /** Sent, not yet confirmed. */
  unconfirmed: number;
  /** Connections established (the first one included). */
  connections: number;
  connected: boolean;
}

interface Outgoing {
  routingKey: string;
  body: Buffer;
}

/** Unconfirmed messages on the channel at once: enough to fill the pipe, few to resend. */
const CONFIRM_WINDOW = 512;
const PRIORITIES = ['info', 'warn', 'error'] as const;

/** A FIFO with O(1) push, shift and drop-oldest, for tens of thousands of messages. */
class Deque<T> {
  private items: Array<T | undefined> = [];
  private head = 0;

  get length(): number {
    return this.items.length - this.head;
  }

  push(item: T): void {
    this.items.push(item);
  }

  unshift(item: T): void {
    if (this.head > 0) this.items[--this.head] = item;
    else this.items.unshift(item);
  }

  shift(): T | undefined {
    if (this.length === 0) return undefined;
    const item = this.items[this.head];
    this.items[this.head++] = undefined;
    // Compact once the consumed prefix dominates, so the array does not grow forever.
    if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return item;
  }
}

export class AmqpNotifier extends EnvelopeNotifier {
  readonly #buffer = new Deque<Outgoing>();
  readonly #stats: Omit<BusStats, 'buffered' | 'unconfirmed' | 'connected'> = { accepted: 0, confirmed: 0, dropped: 0, connections: 0 };
  #unconfirmed = 0;
  #channel: ConfirmChannel | null = null;
  #waitingForDrain = false;
  #idleWaiters: Array<() => void> = [];
  readonly #log: Logger;
  readonly #link: AmqpLink<ConfirmChannel>;

  constructor(publisherId: string, private readonly opts: AmqpNotifierOptions, log: Logger) {
    super(publisherId);
    this.#log = log.child({ component: 'amqp-notifier', exchange: opts.exchange });
    this.#link = new AmqpLink({
      url: opts.url, connectionName: publisherId, log: this.#log,
      open: (conn) => this.#open(conn), onUp: (ch) => this.#up(ch), onDown: () => this.#down(),
      retryContext: () => ({ buffered: this.#buffer.length }),
    });
    this.#link.start();
  }

  get stats(): BusStats {
    return { ...this.#stats, buffered: this.#buffer.length, unconfirmed: this.#unconfirmed, connected: this.#channel !== null };
  }

  protected publish(n: Notification<unknown>): void {
    const body = Buffer.from(JSON.stringify({ 'oslo.version': '2.0', 'oslo.message': JSON.stringify(n) }));
    this.#stats.accepted++;
    this.#buffer.push({ routingKey: `${this.opts.topic}.${n.priority.toLowerCase()}`, body });
    if (this.#buffer.length > this.opts.bufferSize) {
      this.#buffer.shift();
      this.#stats.dropped++;
      if (this.#stats.dropped === 1 || this.#stats.dropped % 1000 === 0) {
        this.#log.warn({ dropped: this.#stats.dropped, bufferSize: this.opts.bufferSize }, 'notification buffer full: oldest notifications dropped');
      }
    }
    this.#pump();
  }

  /** Resolves true once everything accepted so far is confirmed, false after `timeoutMs`. */
  async flush(timeoutMs: number): Promise<boolean> {
    if (this.#idle()) return true;
    let timer: NodeJS.Timeout | undefined;
    const idle = new Promise<boolean>((resolve) => this.#idleWaiters.push(() => resolve(true)));
    const late = new Promise<boolean>((resolve) => { timer = setTimeout(() => resolve(false), timeoutMs); });
    const done = await Promise.race([idle, late]);
    clearTimeout(timer);
    return done;
  }

  /** Sends what is buffered (bounded wait), then closes the connection. */
  async close(): Promise<void> {
    if (this.#channel) await this.flush(5000);
    this.#channel = null;
    if (this.#buffer.length || this.#unconfirmed) this.#log.warn({ lost: this.#buffer.length + this.#unconfirmed }, 'notifications not sent at shutdown');
    await this.#link.close();
  }

  #idle(): boolean {
    return this.#buffer.length === 0 && this.#unconfirmed === 0;
  }

  async #open(conn: ChannelModel): Promise<ConfirmChannel> {
    const ch = await conn.createConfirmChannel();
    await ch.assertExchange(this.opts.exchange, 'topic', { durable: false });
    if (this.opts.declareQueue) {
      for (const p of PRIORITIES) {
        const q = `${this.opts.topic}.${p}`;
        await ch.assertQueue(q, { durable: false });
        await ch.bindQueue(q, this.opts.exchange, q);
      }
    }
    ch.on('drain', () => {
      this.#waitingForDrain = false;
      this.#pump();
    });
    return ch;
  }

  #up(ch: ConfirmChannel): void {
    this.#channel = ch;
    this.#waitingForDrain = false;
    this.#stats.connections++;
    this.#log.info({ connections: this.#stats.connections, buffered: this.#buffer.length }, 'AMQP connected');
    this.#pump();
  }

  #down(): void {
    this.#channel = null;
    this.#waitingForDrain = false;
  }

  #pump(): void {
    const ch = this.#channel;
    while (ch && ch === this.#channel && !this.#waitingForDrain && this.#unconfirmed < CONFIRM_WINDOW && this.#buffer.length) {
      const item = this.#buffer.shift()!;
      this.#unconfirmed++;
      let ok: boolean;
      try {
        ok = ch.publish(this.opts.exchange, item.routingKey, item.body, {
          persistent: true, contentType: 'application/json', contentEncoding: 'utf-8',
        }, (err) => this.#settled(item, err));
      } catch (err) {
        // The channel closed under us: keep the message for the next connection, and stop
        // using this channel (its close event brings the reconnect).
        if (this.#channel === ch) this.#channel = null;
        this.#settled(item, err as Error);
        return;
      }
      if (!ok) this.#waitingForDrain = true;
    }
    if (this.#idle()) for (const w of this.#idleWaiters.splice(0)) w();
  }

  #settled(item: Outgoing, err: unknown): void {
    this.#unconfirmed--;
    if (err) {
      // Nacked or cut off: send it again, ahead of newer ones, unless the buffer is full.
      // Not at once: a closing channel settles all its messages in one go.
      if (this.#buffer.length < this.opts.bufferSize) this.#buffer.unshift(item);
      else this.#stats.dropped++;
      setImmediate(() => this.#pump());
      return;
    }
    this.#stats.confirmed++;
    this.#pump();
  }
}
