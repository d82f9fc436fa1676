import { spawn, type ChildProcess } from 'node:child_process';
import { EventEmitter } from 'node:events';
import type { Logger } from 'pino';
import type { ConsoleCommand } from '../../drivers/interfaces.js';
import { backoffMs } from '../../common/backoff.js';
import { OWNER_ENV, WRAPPER, WRAPPER_NAME, killGroup, ownerMarker, processStartTicks } from './processes.js';
import { RingBuffer } from './ring-buffer.js';
import type { RotatingLog } from './rotating-log.js';

export interface ConsoleProcessOptions {
  nodeUuid: string;
  command: ConsoleCommand;
  /** Run before each restart (not before the first start) to clear a stale BMC session. */
  reset?: ConsoleCommand;
  bufferBytes: number;
  log?: RotatingLog;
  restartInitialMs: number;
  restartMaxMs: number;
  logger: Logger;
  /** Called with each new child's pid and kernel start time, to record it. */
  onSpawn(pid: number, startTicks: number | null): void;
  /** Called once a child and its group are gone. */
  onExit?(pid: number): void;
}

/** A run this long resets the restart backoff: the console worked. */
const STABLE_RUN_MS = 30_000;
/** How long a stopped console gets to end after stdin EOF, then after SIGTERM. */
const EOF_GRACE_MS = 1000;
const TERM_GRACE_MS = 2000;
const RESET_TIMEOUT_MS = 15_000;

/**
 * One node's console process, restarted with backoff while wanted. It runs under the wrapper
 * of processes.ts, leader of a process group of its own (so that stopping it kills whatever
 * it started): if this conductor dies, the wrapper kills the group, whether or not the
 * command ends at stdin EOF. Output goes to the ring buffer, the optional log and `data`
 * listeners.
 */
export class ConsoleProcess extends EventEmitter<{ data: [Buffer] }> {
  private child?: ChildProcess;
  private readonly ring: RingBuffer;
  private stopping = false;
  private restartTimer?: NodeJS.Timeout;
  private failures = 0;
  private exited?: Promise<void>;
  private resetChild?: ChildProcess;
  starts = 0;

  constructor(private readonly opts: ConsoleProcessOptions) {
    super();
    this.ring = new RingBuffer(opts.bufferBytes);
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** The recent output, oldest first. */
  backlog(): Buffer {
    return this.ring.contents();
  }

  start(): void {
    if (this.stopping) return;
    const { command, logger } = this.opts;
    const child = spawn('/bin/sh', ['-c', WRAPPER, WRAPPER_NAME, command.command, ...command.args], {
      detached: true,
      // fd 3: the pipe whose EOF tells the wrapper that this conductor is gone.
      stdio: ['pipe', 'pipe', 'pipe', 'pipe'],
      env: { PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin', ...command.env, [OWNER_ENV]: ownerMarker() },
    });
    this.child = child;
    this.starts++;
    const startedAt = Date.now();
    this.exited = new Promise((resolve) => child.once('close', () => resolve()));
    child.on('error', (err) => logger.warn({ err: err.message }, 'console process could not start'));
    child.stdin!.on('error', () => undefined);
    child.stdout!.on('data', (d: Buffer) => this.output(d));
    child.stderr!.on('data', (d: Buffer) => {
      const text = d.toString('utf8').replace(/tcgetattr: Inappropriate ioctl for device\n?/g, '').trim();
      if (text) logger.info({ stderr: text.slice(0, 500) }, 'console process said');
    });
    if (child.pid !== undefined) {
      this.opts.onSpawn(child.pid, processStartTicks(child.pid));
      logger.info({ consolePid: child.pid, start: this.starts }, 'console process started');
    }
    child.once('close', (code, signal) => {
      if (this.child === child) this.child = undefined;
      // Nothing else of its group may outlive it.
      if (child.pid !== undefined) {
        killGroup(child.pid, 'SIGKILL');
        this.opts.onExit?.(child.pid);
      }
      if (this.stopping) return;
      this.failures = Date.now() - startedAt >= STABLE_RUN_MS ? 1 : this.failures + 1;
      const delay = backoffMs(this.failures, this.opts.restartInitialMs, this.opts.restartMaxMs);
      logger.warn({ code, signal, restartInMs: Math.round(delay) }, 'console process ended; restarting');
      this.restartTimer = setTimeout(() => void this.restart(), delay);
    });
  }

  /** Input written but not yet taken by the console process. */
  get inputQueued(): number {
    return this.child?.stdin?.writableLength ?? 0;
  }

  /** Sends input to the console. */
  write(data: Buffer): void {
    const stdin = this.child?.stdin;
    if (stdin && !stdin.destroyed) stdin.write(data);
  }

  /** Ends the console for good: stdin EOF, then SIGTERM, then SIGKILL to its group. */
  async stop(): Promise<void> {
    this.stopping = true;
    clearTimeout(this.restartTimer);
    if (this.resetChild?.pid !== undefined) killGroup(this.resetChild.pid, 'SIGKILL');
    const child = this.child;
    if (child && child.pid !== undefined && this.exited) {
      child.stdin?.end();
      if (!(await within(this.exited, EOF_GRACE_MS))) {
        killGroup(child.pid, 'SIGTERM');
        if (!(await within(this.exited, TERM_GRACE_MS))) {
          killGroup(child.pid, 'SIGKILL');
          await this.exited;
        }
      }
    }
    this.opts.log?.close();
    this.removeAllListeners('data');
  }

  private output(d: Buffer): void {
    this.ring.push(d);
    try {
      this.opts.log?.write(d);
    } catch (err) {
      this.opts.logger.warn({ err: (err as Error).message }, 'console log write failed');
    }
    this.emit('data', d);
  }

  private async restart(): Promise<void> {
    if (this.stopping) return;
    if (this.opts.reset) await this.runReset(this.opts.reset);
    this.start();
  }

  /** Runs the reset command to its end (bounded); its outcome only goes to the log. */
  private runReset(cmd: ConsoleCommand): Promise<void> {
    return new Promise((resolve) => {
      const child = spawn(cmd.command, cmd.args, {
        detached: true,
        stdio: ['ignore', 'ignore', 'pipe'],
        env: { PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin', ...cmd.env },
      });
      this.resetChild = child;
      let stderr = '';
      child.stderr!.on('data', (d: Buffer) => { stderr += d.toString('utf8'); });
      const timer = setTimeout(() => child.pid !== undefined && killGroup(child.pid, 'SIGKILL'), RESET_TIMEOUT_MS);
      child.on('error', () => undefined);
      child.once('close', (code) => {
        clearTimeout(timer);
        this.resetChild = undefined;
        this.opts.logger.info({ code, stderr: stderr.trim().slice(0, 300) }, 'console reset before restart');
        resolve();
      });
    });
  }
}

function within(p: Promise<void>, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    void p.then(() => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}
