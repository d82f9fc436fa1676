/**
 * One run of the ramdisk, from boot to death, and the timers and counters the agent's parts
 * share. Everything is timers and promises, nothing polls, so a thousand agents cost little
 * when idle.
 */
import type { Command } from './extensions/base.js';

export type Version = [number, number];
export const MIN_IRONIC_VERSION: Version = [1, 31];

export const uniform = (lo: number, hi: number) => lo + Math.random() * Math.max(0, hi - lo);

export function timer(fn: () => void, ms: number): NodeJS.Timeout {
  const t = setTimeout(fn, Math.max(0, ms));
  t.unref();
  return t;
}

/** Resolves after `ms`, or never when the life ends first (its promise chain is simply dropped). */
export function sleep(life: Life, ms: number): Promise<void> {
  return new Promise((resolve) => {
    const t = timer(() => {
      life.sleepers.delete(t);
      resolve();
    }, ms);
    life.sleepers.add(t);
  });
}

export function bump(counts: Record<string, number>, key: string | number): void {
  counts[key] = (counts[key] ?? 0) + 1;
}

/** One run of the ramdisk, from boot to death. */
export class Life {
  readonly controller = new AbortController();
  readonly sleepers = new Set<NodeJS.Timeout>();
  readonly commands = new Map<string, Command>();
  readonly startedAt = Date.now();
  /** Resolves when the agent dies. */
  readonly died: Promise<void>;
  private onDeath!: () => void;
  dead = false;
  lockedDown = false;
  version: Version = MIN_IRONIC_VERSION;
  token: string | null = null;
  nodeUuid: string | null = null;
  heartbeatTimeoutS = 300;
  /** It serves TLS with the fleet's certificate and sends it as agent_verify_ca (API >= 1.68). */
  tls = false;
  heartbeatTimer?: NodeJS.Timeout;
  heartbeatAt = 0;
  previousHeartbeat = 0;
  heartbeating = false;
  heartbeatInFlight = false;
  forcePending = false;
  partitionUuids: Record<string, unknown> | null = null;

  constructor(
    /** `ipa-api-url`, without a trailing slash; null: no lookup, no heartbeats. */
    readonly apiUrl: string | null = null,
    /** `ipa-inspection-callback-url`; null: no inspection. */
    readonly inspectionUrl: string | null = null,
  ) {
    this.died = new Promise((resolve) => {
      this.onDeath = resolve;
    });
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** Waits for `p`, or resolves false when the agent dies first. */
  async outlives(p: Promise<void>): Promise<boolean> {
    await Promise.race([p, this.died]);
    return !this.dead;
  }

  end(): void {
    this.dead = true;
    this.onDeath();
    this.controller.abort();
    for (const t of this.sleepers) clearTimeout(t);
    this.sleepers.clear();
    if (this.heartbeatTimer) clearTimeout(this.heartbeatTimer);
  }
}
