import { setTimeout as sleep } from 'node:timers/promises';

type Falsy = undefined | null | false | 0 | '';

/**
 * Polls `probe` every `everyMs` until it returns something truthy, and returns that. After
 * `timeoutMs` it fails with "timed out after N ms waiting for <what>"; `what` may be a
 * function, called then, to say what was seen last.
 */
export async function until<T>(
  what: string | (() => string),
  probe: () => T | Promise<T>,
  timeoutMs = 10_000,
  everyMs = 25,
): Promise<Exclude<T, Falsy>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value as Exclude<T, Falsy>;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${typeof what === 'string' ? what : what()}`);
    await sleep(everyMs);
  }
}
