/**
 * Runs one job per item with at most `limit` running at once and at most `perKey` of the
 * same key (a BMC address) at once. Items of a busy key wait without holding a global slot,
 * so a few BMCs serving many nodes never idle the rest of the fleet. With `weightOf`, a job
 * takes that many of the `limit` slots (one job always runs, whatever its weight).
 */
export async function runKeyedBounded<T>(
  items: readonly T[],
  opts: { limit: number; perKey: number; keyOf(item: T): string; weightOf?(item: T): number; signal?: AbortSignal },
  job: (item: T) => Promise<void>,
): Promise<void> {
  const queues = new Map<string, T[]>();
  for (const item of items) {
    const k = opts.keyOf(item);
    const q = queues.get(k);
    if (q) q.push(item);
    else queues.set(k, [item]);
  }
  // One token per start a key may make now; a finished job hands its key's token back.
  const tokens: string[] = [];
  for (const [k, q] of queues) for (let i = 0; i < Math.min(opts.perKey, q.length); i++) tokens.push(k);
  let head = 0;
  let running = 0;
  /** Slots taken by the running jobs: their weights. */
  let taken = 0;
  let remaining = items.length;
  if (remaining === 0) return;
  await new Promise<void>((resolve) => {
    const startMore = (): void => {
      while (taken < opts.limit && head < tokens.length && !opts.signal?.aborted) {
        const k = tokens[head];
        const q = queues.get(k)!;
        // A token can outlive its key's items: two of the key's jobs ended while the token one
        // of them handed back still waited. It starts nothing (the key's running jobs and
        // tokens together never exceed perKey).
        if (q.length === 0) {
          head++;
          continue;
        }
        const weight = opts.weightOf ? Math.max(1, opts.weightOf(q[0])) : 1;
        if (running > 0 && taken + weight > opts.limit) break;
        head++;
        const item = q.shift()!;
        running++;
        taken += weight;
        job(item)
          .catch(() => undefined)
          .finally(() => {
            running--;
            taken -= weight;
            remaining--;
            if (queues.get(k)!.length > 0) tokens.push(k);
            // Compact the token list now and then: it grows by one per job.
            if (head > 4096 && head * 2 > tokens.length) {
              tokens.splice(0, head);
              head = 0;
            }
            if (remaining === 0 || (opts.signal?.aborted && running === 0)) resolve();
            else startMore();
          });
      }
      if (opts.signal?.aborted && running === 0) resolve();
    };
    startMore();
  });
}
