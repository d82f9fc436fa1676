/**
 * The keep-alive connections of one BMC: undici Clients opened on demand, at most one per
 * request in flight (the endpoint's semaphore bounds those), and forgotten once idle and
 * disconnected. An undici Pool would do the same with a 2,048-slot request queue and a
 * Client per connection allocated up front; at 10,000 BMCs that queue alone is ~156 MiB.
 *
 * A BMC keeps at most one idle connection: the one a later request (of any path: power sync,
 * sensors, intents) reuses. Those opened for a burst of requests (a sensor read's parallel
 * GETs, discovery) close as they finish, so that a pass over thousands of BMCs does not hold
 * several sockets per BMC until their keep-alive runs out. An idle connection whose socket
 * closes (keep-alive over, the BMC hung up) is dropped too; the next request opens another.
 *
 * An idle connection lasts `keepAliveMs` (30 s) at most, whatever keep-alive the BMC advertises
 * (a Node server says 65 s, which kept every BMC's socket through a fleet loop of a minute).
 * 30 s covers the next request of a chain and the pauses of a power-state poll or a
 * virtual-media retry; 10 s measured no lower peak and may cost a connect per read.
 */
import { buildConnector, Client } from 'undici';

/** TLS and connect options of a BMC's connections. */
export interface ConnectOptions {
  rejectUnauthorized: boolean;
  ca?: Buffer;
  /** Connect timeout, ms. */
  timeout: number;
  /** How long an idle connection stays open, ms; 30 s when absent. */
  keepAliveMs?: number;
}

const KEEP_ALIVE_MS = 30_000;

/**
 * What a discarded Client is destroyed with. Without one undici makes an error (and its stack)
 * per Client, which the socket keeps until it is gone: thousands at a time in a fleet pass.
 * No request is pending on a Client given back, so none is failed with it.
 */
const DISCARDED = new Error('Redfish connection discarded');

function discard(client: Client): void {
  void client.destroy(DISCARDED).catch(() => undefined);
}

export class Connections {
  /** The idle connection (connected, or not yet: a failed connect is retried by the next request). */
  private idle: Client | null = null;
  private readonly busy = new Set<Client>();
  private readonly connector: buildConnector.connector;
  private readonly keepAliveMs: number;
  private closing = false;

  constructor(
    readonly origin: string,
    connect: ConnectOptions,
  ) {
    // One connector per BMC: its TLS session cache then serves every connection to it.
    const { keepAliveMs, ...options } = connect;
    this.connector = buildConnector(options);
    this.keepAliveMs = keepAliveMs ?? KEEP_ALIVE_MS;
  }

  /**
   * A Client for one request: the idle one, else a new one. Give it back with `release`.
   * After `close` a new Client serves the request and is closed when given back (a logout
   * after the BMC's endpoint was evicted).
   */
  acquire(): Client {
    const client = this.idle ?? this.open();
    this.idle = null;
    this.busy.add(client);
    return client;
  }

  /** Gives a Client back; one whose request failed at the connection level is not reused. */
  release(client: Client, healthy: boolean): void {
    if (!this.busy.delete(client)) return;
    if (healthy && !this.closing && !this.idle) this.idle = client;
    else discard(client);
  }

  /** Closes the idle connection now and the others once their request ends. */
  async close(): Promise<void> {
    this.closing = true;
    const idle = this.idle;
    this.idle = null;
    await idle?.close().catch(() => undefined);
  }

  /** Closes every connection at once, requests in flight included. */
  async destroy(): Promise<void> {
    this.closing = true;
    const all = [...this.busy];
    if (this.idle) all.push(this.idle);
    this.idle = null;
    this.busy.clear();
    await Promise.all(all.map((c) => c.destroy().catch(() => undefined)));
  }

  private open(): Client {
    // keepAliveMaxTimeout caps the BMC's advertised keep-alive; keepAliveTimeout is for BMCs that advertise none.
    const client = new Client(this.origin, { pipelining: 1, keepAliveTimeout: this.keepAliveMs, keepAliveMaxTimeout: this.keepAliveMs, connect: this.connector });
    client.on('disconnect', () => {
      if (this.idle !== client) return;
      this.idle = null;
      discard(client);
    });
    return client;
  }
}
