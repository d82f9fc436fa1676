import type { Knex } from 'knex';
import type { FastifyBaseLogger } from 'fastify';
import { WebSocket } from 'ws';
import {
  AUTH_HEADER, CloseCode, MAX_PENDING_INPUT_BYTES, MAX_QUEUED_INPUT_BYTES, MAX_VIEWER_BUFFERED_BYTES, TOKEN_HEADER, relayAuth,
} from '../common/console-protocol.js';
import { consoleEnabled, consoleEndpoint, type TokenGrant } from '../db/console.js';

/** How long a viewer waits for a just-enabled console to come up before being told to retry. */
const ENDPOINT_WAIT_MS = 10_000;
/** Relays of one viewer to a console restarted under it, and the pause before each. */
const MAX_RELAY_RECONNECTS = 5;
const RELAY_RECONNECT_DELAY_MS = 250;
const ENDPOINT_POLLS_PER_RECONNECT = 8;
/**
 * Output queued for a viewer beyond which the relay stops reading from the conductor until
 * the viewer catches up: a slow viewer's backlog waits on the conductor (bounded there by
 * the same limit), not here.
 */
const PAUSE_AT_BYTES = 256 * 1024;
/** A viewer that does not answer our close handshake (it is not reading) is cut off after this. */
const CLOSE_GRACE_MS = 2000;

/** Close codes a websocket may carry on the wire (1005, 1006 and 1015 are reserved for "none"). */
function sendableCode(code: number): boolean {
  return (code >= 1000 && code <= 1014 && ![1004, 1005, 1006].includes(code)) || (code >= 3000 && code <= 4999);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * One viewer's websocket on an API server, relayed to the conductor holding the node's
 * console. States: `connecting` (finding the console's endpoint, opening the upstream; input
 * is held, bounded), `attached` (upstream open: frames pass both ways, output bounded by what
 * the viewer has not read), `reconnecting` (the console restarted on its conductor: followed
 * there) and `closed`. What it never does is queue without bound: a viewer that stops reading
 * is closed with TOO_SLOW once MAX_VIEWER_BUFFERED_BYTES are waiting for it, and its upstream
 * goes with it, so it costs the others nothing.
 */
export class ConsoleRelay {
  private state: 'connecting' | 'attached' | 'reconnecting' | 'closed' = 'connecting';
  private upstream?: WebSocket;
  private readonly pending: Array<{ data: Buffer; binary: boolean }> = [];
  private pendingBytes = 0;
  private reconnects = 0;
  /** What the viewer is told if it is not relayed again: the first reason, not a later one. */
  private firstClose?: { code: number; reason: string };

  constructor(
    private readonly socket: WebSocket,
    private readonly grant: TokenGrant,
    private readonly token: string,
    private readonly deps: { db: Knex; secret: () => Promise<string>; log: FastifyBaseLogger },
  ) {
    socket.on('message', (data: Buffer, binary: boolean) => this.input(data, binary));
    socket.on('close', () => {
      this.state = 'closed';
      if (this.upstream && this.upstream.readyState !== WebSocket.CLOSED) this.upstream.close(1000);
    });
    socket.on('error', () => undefined);
  }

  /** Starts relaying. */
  start(): void {
    this.relay(this.grant.endpoint ?? undefined).catch((err) => this.fail(err));
  }

  private get closed(): boolean {
    return this.state === 'closed';
  }

  private input(data: Buffer, binary: boolean): void {
    if (this.closed) return;
    const up = this.upstream;
    if (this.state === 'attached' && up?.readyState === WebSocket.OPEN) {
      if (up.bufferedAmount + data.length > MAX_QUEUED_INPUT_BYTES) {
        return this.close(CloseCode.INPUT_OVERFLOW, `more than ${MAX_QUEUED_INPUT_BYTES} bytes of input not taken by the console`);
      }
      up.send(data, { binary });
      return;
    }
    if (this.pendingBytes + data.length > MAX_PENDING_INPUT_BYTES) {
      return this.close(CloseCode.INPUT_OVERFLOW, `more than ${MAX_PENDING_INPUT_BYTES} bytes of input before the session was attached`);
    }
    this.pending.push({ data, binary });
    this.pendingBytes += data.length;
  }

  private output(data: Buffer, binary: boolean): void {
    // Output means the session is attached: a later close has a reason of its own.
    this.firstClose = undefined;
    if (this.socket.readyState !== WebSocket.OPEN) return;
    if (this.socket.bufferedAmount + data.length > MAX_VIEWER_BUFFERED_BYTES) {
      this.close(CloseCode.TOO_SLOW, `viewer too slow: more than ${MAX_VIEWER_BUFFERED_BYTES} bytes of output not read`);
      return;
    }
    this.socket.send(data, { binary }, () => this.drained());
    const up = this.upstream;
    if (up && this.socket.bufferedAmount > PAUSE_AT_BYTES && !up.isPaused) up.pause();
  }

  /** Called as queued output reaches the viewer's socket: reading from the conductor resumes. */
  private drained(): void {
    const up = this.upstream;
    if (up?.isPaused && !this.closed && this.socket.bufferedAmount <= PAUSE_AT_BYTES / 2) up.resume();
  }

  /** Closes the viewer (and the upstream); one that does not take the close frame is cut off. */
  private close(code: number, reason: string): void {
    if (this.closed) return;
    this.state = 'closed';
    if (code === CloseCode.TOO_SLOW) this.deps.log.warn({ queued: this.socket.bufferedAmount }, 'console viewer too slow: closed');
    if (this.upstream && this.upstream.readyState !== WebSocket.CLOSED) this.upstream.close(1000);
    const s = this.socket;
    if (s.readyState === WebSocket.OPEN || s.readyState === WebSocket.CONNECTING) {
      s.close(sendableCode(code) ? code : 1011, Buffer.from(reason).subarray(0, 123).toString());
      setTimeout(() => s.terminate(), CLOSE_GRACE_MS).unref();
    }
  }

  private fail(err: unknown): void {
    this.deps.log.error({ err }, 'console relay failed');
    this.close(1011, 'console relay failed');
  }

  private async relay(endpointHint: string | undefined): Promise<void> {
    const auth = relayAuth(await this.deps.secret(), this.token);
    const endpoint = endpointHint ?? await this.waitForEndpoint();
    if (this.closed) return;
    if (!endpoint) return this.close(CloseCode.CONSOLE_NOT_HERE, 'the console is not running yet; try again shortly');
    const up = new WebSocket(`ws://${endpoint}/console/${this.grant.nodeId}`, { headers: { [TOKEN_HEADER]: this.token, [AUTH_HEADER]: auth } });
    this.upstream = up;
    up.on('open', () => {
      if (this.closed) return void up.close(1000);
      this.state = 'attached';
      for (const p of this.pending.splice(0)) up.send(p.data, { binary: p.binary });
      this.pendingBytes = 0;
    });
    up.on('message', (data: Buffer, binary: boolean) => this.output(data, binary));
    up.on('close', (code: number, reason: Buffer) => this.upstreamClosed(endpoint, code, reason.toString()));
    up.on('unexpected-response', (_r, res) => {
      this.deps.log.warn({ status: res.statusCode, endpoint }, 'console endpoint refused the relay');
      this.close(1011, 'the console endpoint refused the relay');
    });
    up.on('error', (err) => {
      this.deps.log.warn({ err: err.message, endpoint }, 'console relay failed');
      this.close(1011, 'the console endpoint is unreachable');
    });
  }

  /**
   * A console stopped and started again on its conductor (a disable and an enable in quick
   * succession, or new settings) closes the sessions of the old process; a viewer whose
   * node's console is still enabled is relayed to the new one instead of being dropped. Its
   * token is checked again there: one issued before a disable no longer works.
   */
  private upstreamClosed(endpoint: string, code: number, reason: string): void {
    if (this.closed) return;
    const restarted = code === CloseCode.CONSOLE_DISABLED || code === CloseCode.CONSOLE_NOT_HERE;
    this.firstClose ??= { code, reason: reason || 'the console endpoint closed the session' };
    if (!restarted || this.reconnects >= MAX_RELAY_RECONNECTS) return this.close(this.firstClose.code, this.firstClose.reason);
    this.reconnects++;
    this.state = 'reconnecting';
    void (async () => {
      // The conductor records the restarted console a moment after it stopped the old one.
      let next: string | undefined;
      for (let i = 0; i < ENDPOINT_POLLS_PER_RECONNECT && !this.closed && next === undefined; i++) {
        await sleep(RELAY_RECONNECT_DELAY_MS);
        if (!(await consoleEnabled(this.deps.db, this.grant.nodeId))) break;
        next = await consoleEndpoint(this.deps.db, this.grant.nodeId);
      }
      if (this.closed) return;
      // Only a console started again on the same conductor is followed; one that moved to
      // another conductor (or was disabled) ends the session, and the viewer reconnects.
      if (!next || next !== endpoint) return this.close(this.firstClose!.code, this.firstClose!.reason);
      await this.relay(next);
    })().catch((err) => this.fail(err));
  }

  /** The endpoint of a console that is starting; undefined when none appears in time. */
  private async waitForEndpoint(): Promise<string | undefined> {
    const deadline = Date.now() + ENDPOINT_WAIT_MS;
    while (!this.closed && Date.now() < deadline) {
      const endpoint = await consoleEndpoint(this.deps.db, this.grant.nodeId);
      if (endpoint) return endpoint;
      await sleep(200);
    }
    return undefined;
  }
}
