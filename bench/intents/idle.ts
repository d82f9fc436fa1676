/** The idle phase: each process's CPU with nothing queued. */
import { watchCpu } from '../lib/proc.js';
import type { Fleet } from './fleet.js';

export const IDLE_S = 30;

export interface IdleResult {
  seconds: number;
  /** CPU seconds of each process while nothing was queued. */
  cpuS: Record<string, number>;
}

/**
 * What the processes cost with nothing to do (periodic tasks, timers): paid once per process,
 * so K conductors pay it K times whatever the work.
 */
export async function idlePhase(fleet: Fleet): Promise<IdleResult> {
  // The start-up's last writes (registration, first heartbeats) settle first.
  await new Promise((r) => setTimeout(r, 5000));
  const watch = watchCpu(fleet.pids);
  await new Promise((r) => setTimeout(r, IDLE_S * 1000));
  const usage = watch.stop();
  return { seconds: IDLE_S, cpuS: Object.fromEntries(Object.entries(usage.processes).map(([label, u]) => [label, u.cpuS])) };
}
