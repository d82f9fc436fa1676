import type { Knex } from 'knex';

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
      await new Promise((r) => setTimeout(r, Math.random() * 10 * 2 ** attempt));
    }
  }
}
