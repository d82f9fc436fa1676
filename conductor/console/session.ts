import type { WebSocket } from 'ws';
import { CloseCode, MAX_VIEWER_BUFFERED_BYTES } from '../../common/console-protocol.js';
import type { ConsoleMode } from '../../db/console.js';

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
    if (this.ws.bufferedAmount > MAX_VIEWER_BUFFERED_BYTES) {
      this.close(CloseCode.TOO_SLOW, `viewer too slow: more than ${MAX_VIEWER_BUFFERED_BYTES} bytes of output not read`);
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
