/**
 * Exponential backoff: every retry loop of Galvanic waits by these, each with the jitter its
 * peers need (see the callers).
 */

/** The capped exponential delay of an attempt: initialMs for attempt 1, twice as long each later one, never past maxMs. */
export function backoffCeilingMs(attempt: number, initialMs: number, maxMs: number): number {
  return Math.min(maxMs, initialMs * 2 ** Math.max(0, attempt - 1));
}

/**
 * Exponential backoff with jitter (half fixed, half random), capped: attempt 1 waits between
 * initialMs / 2 and initialMs, each later attempt up to twice as long, never past maxMs.
 */
export function backoffMs(attempt: number, initialMs: number, maxMs: number): number {
  const ceiling = backoffCeilingMs(attempt, initialMs, maxMs);
  return ceiling / 2 + Math.random() * (ceiling / 2);
}
