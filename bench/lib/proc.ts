/** Galvanic processes for benchmarks, and their CPU and memory from /proc. */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, readdirSync, readFileSync, type WriteStream } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { onCleanup } from './cleanup.js';
import { ROOT, round2, sleep } from './util.js';

const CLK_TCK = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

export function rssKiB(pid: number): number | undefined {
  try {
    const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

/** utime + stime of a process in seconds, and its command name. */
export function cpuOf(pid: number): { comm: string; cpuS: number } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // fields[0] is field 3 (state); utime and stime are fields 14 and 15.
    return { comm, cpuS: (Number(fields[11]) + Number(fields[12])) / CLK_TCK };
  } catch {
    return undefined;
  }
}

/** The parent pid of a process, from /proc. */
function ppidOf(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return undefined;
  }
}

/** The pids in /proc now, or undefined where there is no /proc to read. */
export function livePids(): number[] | undefined {
  try {
    return readdirSync('/proc').filter((e) => /^\d+$/.test(e)).map(Number);
  } catch {
    return undefined;
  }
}

/**
 * CPU seconds of the live `postgres` processes: the postmaster `postmasterPid` and its children
 * (the database side of the work), or, without a pid, every postgres process on this host
 * (which on a shared machine includes other users' servers). Backends that exit during a
 * phase take their time with them.
 */
export function postgresCpuS(postmasterPid?: number): number {
  const pids = livePids();
  if (pids === undefined) return NaN;
  let total = 0;
  for (const pid of pids) {
    const c = cpuOf(pid);
    if (!c || c.comm !== 'postgres') continue;
    if (postmasterPid !== undefined && pid !== postmasterPid && ppidOf(pid) !== postmasterPid) continue;
    total += c.cpuS;
  }
  return total;
}

/** Total CPU time of the machine (all CPUs, all states but idle and iowait) from /proc/stat. */
export function machineBusyS(): number {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n')[0];
    const v = line.trim().split(/\s+/).slice(1).map(Number);
    // user nice system idle iowait irq softirq steal ...
    const busy = v[0] + v[1] + v[2] + v[5] + v[6] + (v[7] ?? 0);
    return busy / CLK_TCK;
  } catch {
    return NaN;
  }
}

export interface CpuWatch {
  /** CPU seconds per labelled process, Postgres, this process, and the whole machine, since start. */
  stop(): { processes: Record<string, { cpuS: number; maxRssMiB: number }>; postgresCpuS: number; benchClientCpuS: number; machineBusyCpuS: number };
}

/**
 * Measures the CPU of `pids` (and RSS, sampled every 250 ms), of Postgres (see postgresCpuS)
 * and of the machine from now until stop().
 */
export function watchCpu(pids: Record<string, number>, postmasterPid?: number): CpuWatch {
  const start: Record<string, number> = {};
  const maxRss: Record<string, number> = {};
  for (const [label, pid] of Object.entries(pids)) {
    start[label] = cpuOf(pid)?.cpuS ?? NaN;
    maxRss[label] = rssKiB(pid) ?? 0;
  }
  const sample = () => {
    for (const [label, pid] of Object.entries(pids)) maxRss[label] = Math.max(maxRss[label], rssKiB(pid) ?? 0);
  };
  const timer = setInterval(sample, 250);
  const pg0 = postgresCpuS(postmasterPid);
  const machine0 = machineBusyS();
  const client0 = process.cpuUsage();
  return {
    stop() {
      clearInterval(timer);
      sample();
      const processes: Record<string, { cpuS: number; maxRssMiB: number }> = {};
      for (const [label, pid] of Object.entries(pids)) {
        processes[label] = { cpuS: round2((cpuOf(pid)?.cpuS ?? NaN) - start[label]), maxRssMiB: round2(maxRss[label] / 1024) };
      }
      const client = process.cpuUsage(client0);
      return {
        processes,
        postgresCpuS: round2(postgresCpuS(postmasterPid) - pg0),
        benchClientCpuS: round2((client.user + client.system) / 1e6),
        machineBusyCpuS: round2(machineBusyS() - machine0),
      };
    },
  };
}

export interface GalvanicProcess {
  label: string;
  pid: number;
  proc: ChildProcess;
  exited: Promise<void>;
  /** The last lines of its output, for error messages. */
  output(): string;
  /** SIGTERM, then SIGKILL after the grace period; resolves once it has exited. Idempotent. */
  stop(): Promise<void>;
}

export interface StartOptions {
  /** A label for messages, e.g. "api" or "conductor-2". */
  label: string;
  /** `api`, `conductor`, `all-in-one`. */
  command: string;
  /** Added to process.env. */
  env: Record<string, string>;
  /** When set, the process runs with --cpu-prof and writes its profile into this directory. */
  cpuProfDir?: string;
  /** Further options of node itself (e.g. --trace-gc, which NODE_OPTIONS does not take). */
  nodeArgs?: string[];
  /** Config file; default etc/galvanic.conf.sample. */
  config?: string;
  /** How long stop() waits after SIGTERM before SIGKILL; default 30 s. */
  stopGraceMs?: number;
  /** When set, all of the process's output is also written to `<logDir>/<label>.log`. */
  logDir?: string;
}

/**
 * Spawns `node dist/cli/main.js <command> --config …` and registers its stop as a cleanup
 * step. Readiness is the caller's business (an API answers HTTP, a conductor registers).
 */
export async function spawnGalvanic(opts: StartOptions): Promise<GalvanicProcess> {
  const nodeArgs: string[] = [...(opts.nodeArgs ?? [])];
  if (opts.cpuProfDir) {
    await fs.mkdir(opts.cpuProfDir, { recursive: true });
    nodeArgs.push('--cpu-prof', '--cpu-prof-dir', opts.cpuProfDir, '--cpu-prof-name', `${opts.label}-${Date.now()}.cpuprofile`);
  }
  const args = [...nodeArgs, path.join(ROOT, 'dist/cli/main.js'), ...opts.command.split(' '), '--config', opts.config ?? path.join(ROOT, 'etc/galvanic.conf.sample')];
  // Each conductor has its own HTTP root, image cache and server port: several run on one machine.
  const media = path.join(os.tmpdir(), `galvanic-bench-${process.pid}-${opts.label}`);
  const mediaEnv = {
    GALVANIC_DEPLOY__HTTP_SERVER_PORT: '0', GALVANIC_DEPLOY__HTTP_ROOT: path.join(media, 'httpboot'), GALVANIC_DEPLOY__ISO_MASTER_PATH: path.join(media, 'cache'),
  };
  onCleanup(`remove ${media}`, () => fs.rm(media, { recursive: true, force: true }));
  const proc: ChildProcess = spawn(process.execPath, args, { env: { ...process.env, ...mediaEnv, ...opts.env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let tail: string[] = [];
  let lines = 0;
  let logFile: WriteStream | undefined;
  if (opts.logDir) {
    await fs.mkdir(opts.logDir, { recursive: true });
    logFile = createWriteStream(path.join(opts.logDir, `${opts.label}.log`));
  }
  const collect = (d: Buffer) => {
    logFile?.write(d);
    for (const line of d.toString('utf8').split('\n')) {
      if (line === '') continue;
      lines += 1;
      tail.push(line);
    }
    if (tail.length > 50) tail = tail.slice(-50);
  };
  proc.stdout!.on('data', collect);
  proc.stderr!.on('data', collect);
  const exited = new Promise<void>((resolve) => proc.once('exit', () => {
    logFile?.end();
    resolve();
  }));
  const output = () => `${opts.label}: ${lines} line(s) of output; last ${tail.length}:\n${tail.join('\n')}`;
  const graceMs = opts.stopGraceMs ?? 30_000;
  const terminate = async () => {
    if (proc.exitCode !== null || proc.signalCode !== null) return;
    proc.kill('SIGTERM');
    const done = await Promise.race([exited.then(() => true), sleep(graceMs).then(() => false)]);
    if (!done) {
      process.stderr.write(`bench: ${opts.label} did not stop within ${graceMs / 1000} s of SIGTERM; killing it\n`);
      proc.kill('SIGKILL');
      await exited;
    }
  };
  const stop = onCleanup(`galvanic ${opts.label}`, terminate);
  if (proc.pid === undefined) throw new Error(`could not start galvanic ${opts.command}`);
  return { label: opts.label, pid: proc.pid, proc, exited, output, stop };
}
