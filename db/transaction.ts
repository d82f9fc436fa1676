import type { Knex } from 'knex';
import { backoffCeilingMs } from '../common/backoff.js';

/** Postgres SQLSTATEs we act on. */
export const SQLSTATE = {
  uniqueViolation: '23505',
  foreignKeyViolation: '23503',
  serializationFailure: '40001',
  deadlockDetected: '40P01',
  lockNotAvailable: '55P03',
  invalidTextRepresentation: '22P02',
} as const;

/** Failures that say nothing about the request itself: run the transaction again. */
const RETRYABLE = new Set<string>([SQLSTATE.serializationFailure, SQLSTATE.deadlockDetected]);

interface PgError {
  code?: string;
  constraint?: string;
  detail?: string;
}

export function pgError(err: unknown): PgError | undefined {
  if (err && typeof err === 'object' && 'code' in err && typeof (err as PgError).code === 'string') {
    return err as PgError;
  }
  return undefined;
}

/** True when `err` is a unique violation of the named constraint (or any, when none named). */
export function isUniqueViolation(err: unknown, constraint?: string): boolean {
  const e = pgError(err);
  return e?.code === SQLSTATE.uniqueViolation && (constraint === undefined || e.constraint === constraint);
}

/**
 * Runs `work` in one transaction, retrying on serialization failures and deadlocks with a
 * short jittered backoff. Other errors propagate unchanged for the caller to translate.
 */
export async function withTransaction<T>(
  knex: Knex,
  work: (trx: Knex.Transaction) => Promise<T>,
  attempts = 5,
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await knex.transaction(work);
    } catch (err) {
      const code = pgError(err)?.code;
      if (attempt >= attempts || code === undefined || !RETRYABLE.has(code)) throw err;
      await new Promise((r) => setTimeout(r, Math.random() * backoffCeilingMs(attempt + 1, 10, Number.POSITIVE_INFINITY)));
    }
  }
}

/** Socket errors of a connection to the server that is refused, lost or unreachable. */
const SOCKET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'EADDRNOTAVAIL']);

/** What node-postgres says when the server goes away under a client (no code; knex prefixes the SQL). */
const LOST_MESSAGES = /(Connection terminated|Client has encountered a connection error|Connection timeout|timeout expired|Client was closed)/;

/**
 * True when `err` says the database cannot be reached now (refused, restarting, shutting down,
 * connection lost, pool starved), not that anything is wrong with the statement: the same
 * request can succeed once the server is back.
 */
export function isDatabaseUnavailable(err: unknown): boolean {
  if (!err || typeof err !== 'object') return false;
  const e = err as { code?: unknown; name?: unknown; message?: unknown; errors?: unknown };
  if (typeof e.code === 'string') {
    // 08: connection exception; 57P01-03: admin/crash shutdown, cannot connect now; 53300: too many connections.
    if (e.code.startsWith('08') || ['57P01', '57P02', '57P03', '53300'].includes(e.code) || SOCKET_CODES.has(e.code)) return true;
  }
  if (e.name === 'KnexTimeoutError') return true;
  if (typeof e.message === 'string' && LOST_MESSAGES.test(e.message)) return true;
  // A connect to every address of a host name fails as one AggregateError.
  return Array.isArray(e.errors) && e.errors.length > 0 && e.errors.every((x) => isDatabaseUnavailable(x));
}
