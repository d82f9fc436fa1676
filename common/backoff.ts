/**
 * Exponential backoff with jitter (half fixed, half random), capped: attempt 1 waits between
 * initialMs / 2 and initialMs, each later attempt up to twice as long, never past maxMs.
 */
export function backoffMs(attempt: number, initialMs: number, maxMs: number): number {
  const ceiling = Math.min(maxMs, initialMs * 2 ** Math.max(0, attempt - 1));
  return ceiling / 2 + Math.random() * (ceiling / 2);
}
