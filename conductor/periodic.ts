import cron, { type ScheduledTask } from 'node-cron';
import type { Logger } from 'pino';

/** What one iteration did, for the task's statistics. */
export interface IterationReport {
  nodes?: number;
  errors?: number;
}

/**
 * Options a reload (SIGHUP) changed while a task runs: merged over what is already pending,
 * and taken at the start of its next iteration, never in the middle of one.
 */
export class PendingOptions<T extends object, K extends keyof T> {
  private pending: Readonly<T> | null = null;

  constructor(private readonly keys: readonly K[]) {}

  /** Records the keys of `next` that differ from those in force (or pending); returns them. */
  offer(current: Readonly<T>, next: Readonly<T>): K[] {
    const base = this.pending ?? current;
    const changed = this.keys.filter((k) => JSON.stringify(base[k]) !== JSON.stringify(next[k]));
    if (changed.length) this.pending = { ...base, ...Object.fromEntries(changed.map((k) => [k, next[k]])) };
    return changed;
  }

  /** The options for the iteration starting now, when a reload changed any. */
  take(): Readonly<T> | null {
    const next = this.pending;
    this.pending = null;
    return next;
  }
}

/**
 * Logs the end of an iteration of a task that reports its own overruns (`reportsOverruns`):
 * once, with its figures, as cut short, overrun (and counted) or done.
 */
export function logIterationEnd(
  log: Logger, signal: AbortSignal, figures: { durationMs: number }, intervalMs: number, stats: { overruns: number },
  messages: { cut: string; overran: string; done: string },
): void {
  if (signal.aborted) {
    log.info(figures, messages.cut);
  } else if (figures.durationMs > intervalMs) {
    stats.overruns++;
    log.warn({ ...figures, intervalMs, overruns: stats.overruns }, messages.overran);
  } else {
    log.info(figures, messages.done);
  }
}

/** A periodic task declaration. Exactly one of `spacingSeconds` and `cron`. */
export interface PeriodicTask {
  name: string;
  spacingSeconds?: number;
  cron?: string;
  runAtStart?: boolean;
  /**
   * A tick that finds the previous iteration still running is not lost but deferred: the
   * iteration runs as soon as the previous one ends (once, however many ticks it missed).
   * Without it such a tick is skipped, and an iteration that overruns its spacing by a little
   * halves the task's rate.
   */
  catchUp?: boolean;
  /**
   * The task logs and counts its own overruns, once per iteration with its figures: the ticks
   * it misses are then logged at debug level only, not once each.
   */
  reportsOverruns?: boolean;
  run(signal: AbortSignal): Promise<IterationReport | void>;
}

export interface TaskStats {
  runs: number;
  overruns: number;
  failures: number;
  lastDurationMs: number;
  lastNodes: number;
  lastErrors: number;
}

/**
 * Runs declared periodic tasks. An iteration never overlaps the previous one of the same
 * task: a tick that finds it still running is counted as an overrun and skipped (or, for a
 * `catchUp` task, run right after the running one ends). Stop
 * cancels the schedules, aborts the signal and waits (bounded) for running iterations.
 */
export class PeriodicRunner {
  private readonly tasks: PeriodicTask[] = [];
  private readonly running = new Map<string, Promise<void>>();
  /** catchUp tasks with a tick that came while they ran. */
  private readonly deferred = new Set<string>();
  readonly stats = new Map<string, TaskStats>();
  private readonly abort = new AbortController();
  private timers: Array<NodeJS.Timeout> = [];
  private cronTasks: ScheduledTask[] = [];
  private readonly started = new Set<string>();

  constructor(private readonly log: Logger) {}

  register(task: PeriodicTask): void {
    if ((task.spacingSeconds === undefined) === (task.cron === undefined)) {
      throw new Error(`periodic task ${task.name}: give exactly one of spacingSeconds and cron`);
    }
    if (task.cron !== undefined && !cron.validate(task.cron)) throw new Error(`periodic task ${task.name}: invalid cron expression "${task.cron}"`);
    this.tasks.push(task);
    this.stats.set(task.name, { runs: 0, overruns: 0, failures: 0, lastDurationMs: 0, lastNodes: 0, lastErrors: 0 });
  }

  /**
   * Starts the schedules of the named tasks, or of every task not started yet: a service
   * can start its own liveness tasks before the work that depends on its start-up.
   */
  start(names?: readonly string[]): void {
    for (const task of this.tasks) {
      if (this.started.has(task.name) || (names && !names.includes(task.name))) continue;
      this.started.add(task.name);
      if (task.spacingSeconds !== undefined) {
        // Jitter the first tick so conductors started together do not hit the database in step.
        const spacingMs = task.spacingSeconds * 1000;
        const first = task.runAtStart ? 0 : spacingMs * (0.5 + Math.random() / 2);
        const t = setTimeout(() => {
          void this.tick(task);
          this.timers.push(setInterval(() => void this.tick(task), spacingMs));
        }, first);
        this.timers.push(t);
      } else {
        this.cronTasks.push(cron.schedule(task.cron!, () => this.tick(task), { name: task.name }));
        if (task.runAtStart) void this.tick(task);
      }
    }
  }

  /** Runs one iteration now unless one is under way. Returns the iteration's promise. */
  tick(task: PeriodicTask): Promise<void> | undefined {
    const stats = this.stats.get(task.name)!;
    if (this.abort.signal.aborted) return undefined;
    if (this.running.has(task.name)) {
      stats.overruns++;
      if (task.catchUp) this.deferred.add(task.name);
      this.log[task.reportsOverruns ? 'debug' : 'warn']({ task: task.name, overruns: stats.overruns, lastDurationMs: stats.lastDurationMs },
        task.catchUp ? 'periodic task still running: the next iteration starts when it ends' : 'periodic task still running: skipping this iteration');
      return undefined;
    }
    const started = Date.now();
    const p = (async () => {
      try {
        const report = (await task.run(this.abort.signal)) ?? {};
        stats.lastNodes = report.nodes ?? 0;
        stats.lastErrors = report.errors ?? 0;
      } catch (err) {
        stats.failures++;
        this.log.error({ err, task: task.name }, 'periodic task failed');
      } finally {
        stats.runs++;
        stats.lastDurationMs = Date.now() - started;
        this.running.delete(task.name);
        this.log.debug({ task: task.name, ...stats }, 'periodic task iteration');
      }
      if (this.deferred.delete(task.name)) void this.tick(task);
    })();
    this.running.set(task.name, p);
    return p;
  }

  async stop(timeoutMs: number): Promise<void> {
    for (const t of this.timers) {
      clearTimeout(t);
      clearInterval(t);
    }
    this.timers = [];
    for (const c of this.cronTasks) await c.stop();
    this.cronTasks = [];
    this.abort.abort();
    const all = Promise.all(this.running.values());
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([all, new Promise((r) => { timer = setTimeout(r, timeoutMs); })]);
    clearTimeout(timer);
  }
}
