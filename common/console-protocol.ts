/**
 * What an API server and a conductor agree on for relaying a console viewer: the headers of
 * the relay request, its proof of origin, and the close codes a viewer may see.
 */
import { createHmac } from 'node:crypto';

/** The viewer's console token, passed on by the API server. */
export const TOKEN_HEADER = 'x-galvanic-console-token';
/** relayAuth(secret, token): proves the request comes from an API server. */
export const AUTH_HEADER = 'x-galvanic-console-auth';

/** HMAC-SHA256 of the token under the secret API servers and conductors share (in the database). */
export function relayAuth(secret: string, token: string): string {
  return createHmac('sha256', secret).update(token).digest('hex');
}

/**
 * Output queued for one viewer beyond this (websocket bufferedAmount), on the conductor's
 * session or on the API server's relay: the viewer is not reading and is closed (TOO_SLOW)
 * rather than held in memory or allowed to slow the console's other viewers.
 */
export const MAX_VIEWER_BUFFERED_BYTES = 4 * 1024 * 1024;
/** Input a viewer may send before its session is attached (token checked, relay open). */
export const MAX_PENDING_INPUT_BYTES = 64 * 1024;
/** Input written to a console process and not yet read by it, beyond which the writer is closed. */
export const MAX_QUEUED_INPUT_BYTES = 1024 * 1024;

/** Close codes a viewer may see (4000-4999: ours), with the reason text sent along. */
export const CloseCode = {
  /** Owner, lessee or maintenance changed: the token no longer holds. */
  ACCESS_CHANGED: 4001,
  /** The console was disabled, the node deleted, or the console moved to another conductor. */
  CONSOLE_DISABLED: 4002,
  TOKEN_REFUSED: 4003,
  CONSOLE_NOT_HERE: 4004,
  IDLE: 4008,
  WRITER_PRESENT: 4009,
  TOO_SLOW: 4010,
  SHUTDOWN: 4011,
  /** More input than MAX_PENDING_INPUT_BYTES before attachment, or than MAX_QUEUED_INPUT_BYTES unread. */
  INPUT_OVERFLOW: 4012,
} as const;
