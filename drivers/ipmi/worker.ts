/**
 * piscina worker: runs one ipmitool process per task and supervises it. The process is
 * killed when it outlives the task's timeout or when the main thread aborts the call, and the
 * task only ends once the process has exited: no ipmitool outlives its call.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { CallState, classifyFailure, summarizeStderr, type IpmitoolResult, type IpmitoolTask } from './protocol.js';

/** After SIGTERM, how long ipmitool gets before SIGKILL. */
const KILL_GRACE_MS = 500;
const MAX_STDOUT = 8 * 1024 * 1024;
const MAX_STDERR = 64 * 1024;

// Atomics.waitAsync is in Node 16+, but only in TypeScript's ES2024 lib.
type WaitAsyncResult = { async: false; value: 'not-equal' | 'timed-out' } | { async: true; value: Promise<'ok' | 'timed-out'> };
const waitAsync = (Atomics as unknown as { waitAsync(a: Int32Array, i: number, v: number): WaitAsyncResult }).waitAsync;

/** Collects a stream up to `limit` bytes; stderr keeps its tail, where the verdict is. */
class Collector {
  private chunks: Buffer[] = [];
  private size = 0;
  constructor(
    private readonly limit: number,
    private readonly keepTail: boolean,
  ) {}

  add(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.size += chunk.length;
    if (this.size > this.limit) {
      const all = Buffer.concat(this.chunks);
      const kept = this.keepTail ? all.subarray(all.length - this.limit) : all.subarray(0, this.limit);
      this.chunks = [kept];
      this.size = kept.length;
    }
  }

  text(): string {
    return Buffer.concat(this.chunks).toString('utf8');
  }
}

export default async function runIpmitool(task: IpmitoolTask): Promise<IpmitoolResult> {
  const started = performance.now();
  if (Atomics.compareExchange(task.control, 0, CallState.QUEUED, CallState.RUNNING) !== CallState.QUEUED) {
    return { ok: false, code: 'ABORTED', message: 'aborted before it started', stderr: '', exitCode: null, retryable: false, durationMs: 0 };
  }
  try {
    return await supervise(task, started);
  } finally {
    Atomics.compareExchange(task.control, 0, CallState.RUNNING, CallState.DONE);
    // Wakes this task's own abort waiter too, so that no waiter outlives the task.
    Atomics.notify(task.control, 0);
  }
}

function supervise(task: IpmitoolTask, started: number): Promise<IpmitoolResult> {
  return new Promise((resolve) => {
    const stdout = new Collector(MAX_STDOUT, false);
    const stderr = new Collector(MAX_STDERR, true);
    let killedFor: 'timeout' | 'abort' | null = null;
    let spawnError: Error | null = null;
    let settled = false;
    let escalation: NodeJS.Timeout | undefined;
    let child: ChildProcess;

    try {
      child = spawn(task.binary, task.args, {
        stdio: ['ignore', 'pipe', 'pipe'],
        // A minimal environment: C locale for parseable messages, the password for -E.
        env: { PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin', LC_ALL: 'C', IPMI_PASSWORD: task.password },
      });
    } catch (err) {
      resolve({ ok: false, code: 'SPAWN_FAILED', message: `cannot run ${task.binary}: ${(err as Error).message}`, stderr: '', exitCode: null, retryable: false, durationMs: 0 });
      return;
    }

    const kill = (why: 'timeout' | 'abort'): void => {
      if (killedFor || child.exitCode !== null || child.signalCode !== null) return;
      killedFor = why;
      child.kill('SIGTERM');
      escalation = setTimeout(() => child.kill('SIGKILL'), KILL_GRACE_MS);
    };
    const timer = setTimeout(() => kill('timeout'), task.timeoutMs);
    const wait = waitAsync(task.control, 0, CallState.RUNNING);
    if (!wait.async) kill('abort');
    else void wait.value.then(() => {
      if (Atomics.load(task.control, 0) === CallState.ABORT_REQUESTED) kill('abort');
    });

    child.stdout?.on('data', (c: Buffer) => stdout.add(c));
    child.stderr?.on('data', (c: Buffer) => stderr.add(c));
    child.on('error', (err) => {
      spawnError = err;
    });
    // 'close' comes after the process has exited and its pipes are drained.
    child.on('close', (exitCode: number | null, signal: NodeJS.Signals | null) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      clearTimeout(escalation);
      const durationMs = Math.round(performance.now() - started);
      const err = stderr.text();
      const failure = (code: 'BMC_TIMEOUT' | 'ABORTED' | 'SPAWN_FAILED', message: string): IpmitoolResult =>
        ({ ok: false, code, message, stderr: err, exitCode, retryable: false, durationMs });
      if (spawnError) return resolve(failure('SPAWN_FAILED', `cannot run ${task.binary}: ${spawnError.message}`));
      if (killedFor === 'timeout') return resolve(failure('BMC_TIMEOUT', `no answer within ${task.timeoutMs} ms, ipmitool killed`));
      if (killedFor === 'abort') return resolve(failure('ABORTED', 'aborted, ipmitool killed'));
      // A non-zero "ok" code counts only with output: `sdr -v` exits 1 for one unreadable sensor,
      // but also when it never got a session.
      if (exitCode === 0 || (exitCode !== null && task.okExitCodes.includes(exitCode) && stdout.text().trim() !== '')) {
        return resolve({ ok: true, stdout: stdout.text(), stderr: err, exitCode, durationMs });
      }
      const { code, retryable } = classifyFailure(err);
      const why = summarizeStderr(err) || (signal ? `killed by ${signal}` : 'no error message');
      resolve({ ok: false, code, message: `exit ${exitCode ?? signal}: ${why}`, stderr: err, exitCode, retryable, durationMs });
    });
  });
}
