/**
 * Helpers for tests against the real RabbitMQ (127.0.0.1:5672, guest/guest, or RABBITMQ_URL):
 * a skip (a failure under CI=true) when it is absent, per-run names, a queue that records
 * what arrives, and a TCP proxy whose cut is a broker outage as the client sees it.
 */
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import amqp, { type ChannelModel, type ConsumeMessage } from 'amqplib';
import { until } from './until.js';

export const RABBITMQ_URL = process.env.RABBITMQ_URL ?? 'amqp://guest:guest@127.0.0.1:5672/';

/** Skips the calling suite when RabbitMQ does not answer; in CI that is a failure instead. */
export async function requireRabbitMq(ctx: Mocha.Context): Promise<void> {
  try {
    const conn = await amqp.connect(RABBITMQ_URL);
    await conn.close();
  } catch (err) {
    const msg = `these tests need RabbitMQ at ${RABBITMQ_URL.replace(/\/\/[^@]*@/, '//')} (${(err as Error).message})`;
    if (process.env.CI === 'true') throw new Error(`${msg}; CI=true, so this is a failure, not a skip`);
    console.warn(`      skipped: ${msg}`);
    ctx.skip();
  }
}

/** Exchange, topic and queue names no other run uses. */
export function uniqueBusNames(): { exchange: string; topic: string; queue: string } {
  const id = `${process.pid}-${randomBytes(4).toString('hex')}`;
  return { exchange: `galvanic-test-${id}`, topic: `notifications-${id}`, queue: `galvanic-test-exporter-${id}` };
}

/** One message as received: its properties and the envelope inside the oslo wrapper. */
export interface Received {
  routingKey: string;
  contentType: string | undefined;
  contentEncoding: string | undefined;
  deliveryMode: number | undefined;
  wrapper: Record<string, unknown>;
  envelope: Record<string, unknown> & { event_type: string; payload: Record<string, unknown> };
}

export interface Recorder {
  messages: Received[];
  /** Resolves once at least `n` messages arrived; rejects after timeoutMs. */
  waitFor(n: number, timeoutMs: number): Promise<void>;
  close(): Promise<void>;
}

/** An exclusive queue bound to `exchange` / `routingKey` that keeps every message it gets. */
export async function recordQueue(exchange: string, routingKey: string): Promise<Recorder> {
  const conn: ChannelModel = await amqp.connect(RABBITMQ_URL);
  const ch = await conn.createChannel();
  await ch.assertExchange(exchange, 'topic', { durable: false });
  const { queue } = await ch.assertQueue('', { exclusive: true, autoDelete: true });
  await ch.bindQueue(queue, exchange, routingKey);
  const messages: Received[] = [];
  await ch.consume(queue, (m: ConsumeMessage | null) => {
    if (!m) return;
    const wrapper = JSON.parse(m.content.toString('utf8')) as Record<string, unknown>;
    messages.push({
      routingKey: m.fields.routingKey,
      contentType: m.properties.contentType as string | undefined,
      contentEncoding: m.properties.contentEncoding as string | undefined,
      deliveryMode: m.properties.deliveryMode as number | undefined,
      wrapper,
      envelope: JSON.parse(wrapper['oslo.message'] as string) as Received['envelope'],
    });
  }, { noAck: true });
  return {
    messages,
    async waitFor(n, timeoutMs) {
      await until(() => `${n} messages (got ${messages.length})`, () => messages.length >= n, timeoutMs, 50);
    },
    async close() {
      await conn.close().catch(() => undefined);
    },
  };
}

/** Deletes an exchange and a queue a test made the broker keep. */
export async function deleteBusObjects(names: { exchange?: string; queues?: string[] }): Promise<void> {
  const conn = await amqp.connect(RABBITMQ_URL);
  try {
    const ch = await conn.createChannel();
    for (const q of names.queues ?? []) await ch.deleteQueue(q);
    if (names.exchange) await ch.deleteExchange(names.exchange);
  } finally {
    await conn.close().catch(() => undefined);
  }
}

/** A TCP proxy to the broker on a port of its own; `cut` is an outage, `restore` ends it. */
export class TcpProxy {
  private server: net.Server | null = null;
  private readonly sockets = new Set<net.Socket>();
  port = 0;

  constructor(private readonly target: { host: string; port: number }) {}

  async start(port = 0): Promise<void> {
    const server = net.createServer((client) => {
      const upstream = net.connect(this.target.port, this.target.host);
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on('close', () => this.sockets.delete(s));
        s.on('error', () => undefined);
      }
      client.pipe(upstream).pipe(client);
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve());
    });
    this.server = server;
    this.port = (server.address() as net.AddressInfo).port;
  }

  /** Drops every connection and refuses new ones. */
  async cut(): Promise<void> {
    const server = this.server;
    this.server = null;
    for (const s of this.sockets) s.destroy();
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** Accepts connections again, on the same port. */
  restore(): Promise<void> {
    return this.start(this.port);
  }

  stop(): Promise<void> {
    return this.cut();
  }
}

/** The broker's address as the proxy needs it. */
export function brokerAddress(): { host: string; port: number } {
  const u = new URL(RABBITMQ_URL);
  return { host: u.hostname, port: Number(u.port || 5672) };
}

/** RABBITMQ_URL with its host and port replaced by the proxy's. */
export function urlThrough(proxy: TcpProxy): string {
  const u = new URL(RABBITMQ_URL);
  u.hostname = '127.0.0.1';
  u.port = String(proxy.port);
  return u.toString();
}
