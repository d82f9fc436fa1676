import type { WebSocket } from 'ws';
import type { ConsoleMode } from '../../db/console.js';

/** Close codes a viewer may see (4000-4999: ours), with the reason text sent along. */
export const CloseCode = {
  /** Owner, lessee, maintenance or console state changed: the token no longer holds. */
  ACCESS_CHANGED: 4001,
  CONSOLE_DISABLED: 4002,
  TOKEN_REFUSED: 4003,
  CONSOLE_NOT_HERE: 4004,
  IDLE: 4008,
  WRITER_PRESENT: 4009,
  TOO_SLOW: 4010,
  SHUTDOWN: 4011,
} as const;

/** A viewer's bytes waiting to go out beyond this: it cannot keep up and is dropped. */
export const MAX_BUFFERED_BYTES = 4 * 1024 * 1024;

/** One viewer of one node's console, as this conductor sees it. */
export class ConsoleSession {
  /** Null until the token has been checked; output flows only once set. */
  epoch: number | null = null;
  mode: ConsoleMode = 'ro';
  lastActivity = Date.now();
  closed = false;

  constructor(readonly ws: WebSocket, readonly nodeId: number) {}

  get live(): boolean {
    return this.epoch !== null && !this.closed;
  }

  send(data: Buffer): void {
    if (!this.live) return;
    if (this.ws.bufferedAmount > MAX_BUFFERED_BYTES) {
      this.close(CloseCode.TOO_SLOW, 'viewer too slow: output was not read');
      return;
    }
    this.ws.send(data, { binary: true });
  }

  close(code: number, reason: string): void {
    if (this.closed) return;
    this.closed = true;
    // A close reason is at most 123 bytes.
    this.ws.close(code, Buffer.from(reason).subarray(0, 123).toString());
    // A peer that does not answer the close handshake is cut off.
    setTimeout(() => this.ws.terminate(), 2000).unref();
  }
}
