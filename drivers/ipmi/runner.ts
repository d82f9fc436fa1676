import { Piscina } from 'piscina';
import type { Logger } from 'pino';
import {
  BmcAuthFailed, BmcBadResponse, BmcRejected, BmcTimeout, BmcUnreachable, DriverError, ServiceUnavailable,
} from '../../common/errors.js';
import type { DriverContext } from '../interfaces.js';
import { bmcKey, sessionArgs, type IpmiDriverInfo } from './driver-info.js';
import { newControl, requestAbort, type IpmitoolResult, type IpmitoolTask } from './protocol.js';
import { CommandSpacing } from './spacing.js';
import { BmcBudget } from '../bmc-budget.js';

/** How the IPMI driver runs ipmitool; built from `[ipmi]` (see buildIpmiRunnerOptions). */
export interface IpmitoolRunnerOptions {
  /** piscina threads. */
  workers: number;
  /** One ipmitool process is killed after this long. */
  commandTimeoutMs: number;
  /** Least time between the end of one command to a BMC and the start of the next. */
  minCommandIntervalMs: number;
  /** How long retryable failures (BMC busy) are retried within one call. */
  commandRetryTimeoutMs: number;
  /** Let ipmitool retry (-R/-N) instead of this runner. */
  useIpmitoolRetries: boolean;
  /** The ipmitool executable; default `ipmitool` from PATH. */
  binary?: string;
  /** For failures of the pool itself (a worker thread dying outside any task). */
  log?: Logger;
  /** The conductor's per-BMC budget, shared with its other drivers; one of its own (one command at a time) when not given. */
  budget?: BmcBudget;
}

/** What a successful ipmitool run printed. */
export interface IpmitoolOutput {
  stdout: string;
  stderr: string;
}

/**
 * ipmitool processes supervised by one worker thread at a time: they mostly wait on the BMC,
 * so a thread can watch several; the pool bounds the total to workers × this.
 */
const PROCESSES_PER_WORKER = 4;
const WORKER_FILE = new URL('./worker.js', import.meta.url);

/**
 * Runs ipmitool commands for the IPMI interfaces: per-BMC spacing on this thread, the processes
 * themselves in a piscina pool created on first use. One instance per registry (no globals).
 */
export class IpmitoolRunner {
  #pool: Piscina<IpmitoolTask, IpmitoolResult> | null = null;
  #closing = false;
  readonly #inflight = new Set<Int32Array>();
  readonly #spacing: CommandSpacing;
  readonly #binary: string;
  readonly #budget: BmcBudget;

  constructor(private readonly opts: IpmitoolRunnerOptions) {
    this.#spacing = new CommandSpacing(opts.minCommandIntervalMs);
    this.#budget = opts.budget ?? new BmcBudget(1);
    this.#binary = opts.binary ?? 'ipmitool';
  }

  /**
   * Runs `ipmitool <connection options> <command…>` against the node's BMC, in the BMC's turn.
   * @throws BmcTimeout (killed after [ipmi] command_timeout, or aborted) | BmcUnreachable |
   *   BmcAuthFailed | BmcRejected | BmcBadResponse (ipmitool missing) | ServiceUnavailable (closing)
   */
  async run(ctx: DriverContext, info: IpmiDriverInfo, command: readonly string[], okExitCodes: readonly number[] = [0]): Promise<IpmitoolOutput> {
    const deadline = performance.now() + this.opts.commandRetryTimeoutMs;
    const label = `ipmitool ${command.join(' ')} on ${info.address}:${info.port}`;
    for (let attempt = 1; ; attempt++) {
      if (this.#closing) throw new ServiceUnavailable(`The IPMI driver is shutting down; ${label} not sent.`);
      const task: IpmitoolTask = {
        binary: this.#binary,
        args: this.buildArgs(info, command),
        password: info.password,
        timeoutMs: this.opts.commandTimeoutMs,
        okExitCodes: [...okExitCodes],
        control: newControl(),
      };
      const key = bmcKey(info);
      // The budget orders this command among every path's (an intent before a periodic read); the spacing then keeps the BMC's pace.
      const result = await this.#budget.run(key, ctx.priority, () => this.#spacing.run(key, () => this.#runOnce(task, ctx.signal), ctx.signal), ctx.signal);
      if (result.ok) {
        ctx.log.debug({ bmc: `${info.address}:${info.port}`, command: command.join(' '), ms: result.durationMs }, 'ipmitool done');
        return { stdout: result.stdout, stderr: result.stderr };
      }
      const retry = result.retryable && !this.opts.useIpmitoolRetries && performance.now() < deadline && !ctx.signal?.aborted;
      ctx.log.warn({ bmc: `${info.address}:${info.port}`, command: command.join(' '), code: result.code, attempt, retry, error: result.message }, 'ipmitool failed');
      if (!retry) throw rebuildError(result, label, ctx.signal);
    }
  }

  /**
   * ipmitool's arguments for one command. The password is never among them (-E: from the
   * child's environment), since any local user can read argv.
   */
  buildArgs(info: IpmiDriverInfo, command: readonly string[]): string[] {
    const args = sessionArgs(info);
    // -N is whole seconds per try; -R 1 makes ipmitool try once and leaves retries to us (Ironic's
    // default), else ipmitool retries for about command_retry_timeout.
    const perTry = Math.max(1, Math.ceil(this.opts.minCommandIntervalMs / 1000));
    const tries = this.opts.useIpmitoolRetries ? Math.max(1, Math.floor(this.opts.commandRetryTimeoutMs / 1000 / perTry)) : 1;
    args.push('-R', String(tries), '-N', String(perTry), '-E');
    // Exactly one -v: it makes lanplus say why a session failed (bad password vs no answer)
    // without changing stdout; a second one (e.g. with `sdr -v`) would dump packets to stdout.
    if (!command.includes('-v')) args.push('-v');
    args.push(...command);
    return args;
  }

  /** Stops every running ipmitool (killed, waited for) and the worker threads. */
  async close(): Promise<void> {
    this.#closing = true;
    for (const control of this.#inflight) requestAbort(control);
    const pool = this.#pool;
    this.#pool = null;
    if (pool) await pool.close();
  }

  #getPool(): Piscina<IpmitoolTask, IpmitoolResult> {
    if (this.#pool) return this.#pool;
    const pool = new Piscina<IpmitoolTask, IpmitoolResult>({
      filename: WORKER_FILE.href,
      minThreads: 1,
      maxThreads: this.opts.workers,
      concurrentTasksPerWorker: PROCESSES_PER_WORKER,
      idleTimeout: 30_000,
    });
    // Without a listener an 'error' event (a thread dying outside a task) would crash the process.
    pool.on('error', (err: Error) => this.opts.log?.error({ err }, 'IPMI worker thread failed'));
    this.#pool = pool;
    return pool;
  }

  async #runOnce(task: IpmitoolTask, signal?: AbortSignal): Promise<IpmitoolResult> {
    // Checked again here: the turn of a queued command can come after close().
    if (this.#closing) throw new ServiceUnavailable('The IPMI driver is shutting down.');
    const control = task.control;
    this.#inflight.add(control);
    let cancelledBeforeStart!: (r: IpmitoolResult) => void;
    const cancelled = new Promise<IpmitoolResult>((r) => (cancelledBeforeStart = r));
    const onAbort = (): void => {
      // Not started yet: answer now; the worker will skip the task when it gets to it.
      if (requestAbort(control) === 'cancelled') {
        cancelledBeforeStart({ ok: false, code: 'ABORTED', message: 'aborted before it started', stderr: '', exitCode: null, retryable: false, durationMs: 0 });
      }
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    if (signal?.aborted) onAbort();
    // No piscina signal: piscina aborts a running task by terminating its thread, which would
    // orphan the ipmitool process. The worker kills it instead (see requestAbort).
    const running = this.#getPool().run(task);
    try {
      return await Promise.race([running, cancelled]);
    } catch (err) {
      throw new BmcBadResponse(`IPMI worker failed: ${(err as Error).message}`);
    } finally {
      signal?.removeEventListener('abort', onAbort);
      void running.catch(() => undefined).finally(() => this.#inflight.delete(control));
    }
  }
}

/** The typed error a failed result stands for (STYLE.md 6, 12). */
export function rebuildError(result: Extract<IpmitoolResult, { ok: false }>, label: string, signal?: AbortSignal): DriverError | Error {
  const message = `${label}: ${result.message}`;
  switch (result.code) {
    case 'BMC_TIMEOUT':
      return new BmcTimeout(message);
    case 'ABORTED':
      return signal?.reason instanceof Error ? signal.reason : new BmcTimeout(message);
    case 'BMC_UNREACHABLE':
      return new BmcUnreachable(message);
    case 'BMC_AUTH_FAILED':
      return new BmcAuthFailed(message);
    case 'BMC_REJECTED':
      return new BmcRejected(message);
    case 'SPAWN_FAILED':
      return new BmcBadResponse(message);
  }
}
