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
