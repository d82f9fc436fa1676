/** Small helpers shared by the benchmarks: ports, statistics, tables, machine and code info, results. */
import { execFileSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';

/** The package root, from dist/bench/lib/. */
export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
export const RESULTS_DIR = path.join(ROOT, 'bench/results');

export { setTimeout as sleep } from 'node:timers/promises';

export { freePort } from '../../test/helpers/net.js';

/** `serverUrl` with its database replaced by `database`. */
export function databaseUrl(serverUrl: string, database: string): string {
  const url = new URL(serverUrl);
  url.pathname = `/${database}`;
  return url.toString();
}

export function redactUrl(raw: string): string {
  const url = new URL(raw);
  if (url.password) url.password = '***';
  return url.toString();
}

/**
 * A bench's command line: each of `strings` takes a value, each of `flags` none, and
 * `--help`/`-h` prints `usage` and gives undefined. Unknown options and positionals throw.
 */
export function parseBenchArgs<S extends string, F extends string>(
  argv: string[], usage: string, strings: readonly S[], flags: readonly F[] = [],
): ({ [K in S]?: string } & { [K in F]?: boolean }) | undefined {
  const options: Record<string, { type: 'string' | 'boolean'; short?: string }> = { help: { type: 'boolean', short: 'h' } };
  for (const name of strings) options[name] = { type: 'string' };
  for (const name of flags) options[name] = { type: 'boolean' };
  const { values } = parseArgs({ args: argv, options });
  if (values.help) {
    process.stdout.write(`${usage}\n`);
    return undefined;
  }
  return values as { [K in S]?: string } & { [K in F]?: boolean };
}

export function positiveInt(name: string, raw: string | undefined, dflt: number, allowZero = false): number {
  if (raw === undefined) return dflt;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < (allowZero ? 0 : 1)) {
    throw new Error(`--${name} must be a ${allowZero ? 'non-negative' : 'positive'} integer, not "${raw}"`);
  }
  return n;
}

export const round2 = (x: number) => Math.round(x * 100) / 100;

export interface LatencySummary {
  count: number;
  meanMs: number;
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
  maxMs: number;
}

/** Nearest-rank percentiles, in milliseconds rounded to 0.01. */
export function summarize(samples: number[]): LatencySummary {
  const s = Float64Array.from(samples).sort();
  const at = (p: number) => (s.length ? s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))] : NaN);
  const sum = s.reduce((a, b) => a + b, 0);
  return {
    count: s.length,
    meanMs: round2(s.length ? sum / s.length : NaN),
    p50Ms: round2(at(50)),
    p90Ms: round2(at(90)),
    p99Ms: round2(at(99)),
    maxMs: round2(s.length ? s[s.length - 1] : NaN),
  };
}

/** A text table; the first row is the header, the first column left-aligned, the rest right-aligned. */
export function table(rows: string[][]): string {
  const widths = rows[0].map((_, c) => Math.max(...rows.map((r) => (r[c] ?? '').length)));
  return rows.map((r, i) => {
    const line = r.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]) : cell.padStart(widths[c]))).join('  ');
    return i === 0 ? `${line}\n${widths.map((w) => '-'.repeat(w)).join('  ')}` : line;
  }).join('\n');
}

export const fmt = (x: number | undefined, digits = 1) => (x !== undefined && Number.isFinite(x) ? x.toFixed(digits) : '-');

/** Which code was measured: the commit, and the files changed on top of it. */
export function gitState(): { commit: string; modifiedFiles: string[] } | undefined {
  try {
    const git = (...args: string[]) => execFileSync('git', args, { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
    const modifiedFiles = git('status', '--porcelain').split('\n').filter(Boolean).map((l) => l.slice(3));
    return { commit: git('rev-parse', 'HEAD').trim(), modifiedFiles };
  } catch {
    return undefined;
  }
}

export interface MachineInfo {
  cpuModel: string;
  cpuCount: number;
  totalMemGiB: number;
  node: string;
  platform: string;
  hostname: string;
  loadAvgAtStart: number[];
}

export function machineInfo(): MachineInfo {
  const cpus = os.cpus();
  return {
    cpuModel: cpus[0]?.model ?? 'unknown',
    cpuCount: cpus.length,
    totalMemGiB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    platform: `${os.platform()} ${os.release()} ${os.arch()}`,
    hostname: os.hostname(),
    loadAvgAtStart: loadAvg(),
  };
}

export const loadAvg = () => os.loadavg().map(round2);

/** A logger prefixed with the seconds since this process started. */
export function benchLog(): (m: string) => void {
  return (m: string) => process.stdout.write(`[bench ${(performance.now() / 1000).toFixed(1)}s] ${m}\n`);
}

/**
 * Writes `result` to bench/results/<name>-<timestamp>.json and <name>-latest.json; returns the
 * first path.
 */
export async function writeResults(name: string, startedAt: Date, result: unknown): Promise<string> {
  await fs.mkdir(RESULTS_DIR, { recursive: true });
  const stamp = startedAt.toISOString().replace(/:/g, '-');
  const json = `${JSON.stringify(result, null, 2)}\n`;
  const file = path.join(RESULTS_DIR, `${name}-${stamp}.json`);
  await fs.writeFile(file, json);
  await fs.writeFile(path.join(RESULTS_DIR, `${name}-latest.json`), json);
  return file;
}

export interface Calibration {
  /** Sequential `SELECT 1` round trips through knex: wall and this process's CPU per query. */
  selectOneWallP50Ms: number;
  selectOneWallP99Ms: number;
  selectOneClientCpuUs: number;
  /** fdatasync of an 8 KiB write in `dir` (the database's file system), when given. */
  fdatasyncP50Ms?: number;
  fdatasyncP99Ms?: number;
  note: string;
}

/**
 * How busy the machine is, in units a reader can compare across runs: a quiet machine answers
 * a local `SELECT 1` in well under 0.2 ms and syncs a small write in about a millisecond or less.
 */
export async function calibrate(query: () => Promise<unknown>, fsyncDir?: string, rounds = 500): Promise<Calibration> {
  for (let i = 0; i < 20; i++) await query();
  const wall: number[] = [];
  const c0 = process.cpuUsage();
  for (let i = 0; i < rounds; i++) {
    const t0 = performance.now();
    await query();
    wall.push(performance.now() - t0);
  }
  const cpu = process.cpuUsage(c0);
  const q = summarize(wall);
  const out: Calibration = {
    selectOneWallP50Ms: q.p50Ms,
    selectOneWallP99Ms: q.p99Ms,
    selectOneClientCpuUs: Math.round((cpu.user + cpu.system) / rounds),
    note: 'quiet machine: SELECT 1 p50 well under 0.2 ms and client CPU under ~100 µs; larger values mean contention',
  };
  if (fsyncDir !== undefined) {
    const file = path.join(fsyncDir, `fsync-probe-${process.pid}`);
    const fh = await fs.open(file, 'w', 0o600);
    try {
      const buf = Buffer.alloc(8192, 120);
      const lat: number[] = [];
      for (let i = 0; i < 200; i++) {
        await fh.write(buf, 0, buf.length, (i % 16) * 8192);
        const t0 = performance.now();
        await fh.datasync();
        lat.push(performance.now() - t0);
      }
      const f = summarize(lat);
      out.fdatasyncP50Ms = f.p50Ms;
      out.fdatasyncP99Ms = f.p99Ms;
    } finally {
      await fh.close();
      await fs.rm(file, { force: true });
    }
  }
  return out;
}

/** The newest modification time of the .js files directly in `dirs`, as ISO text (undefined if none). */
export function newestMtime(dirs: string[]): string | undefined {
  let newest = 0;
  for (const dir of dirs) {
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch {
      continue;
    }
    for (const name of names) {
      if (!name.endsWith('.js')) continue;
      try {
        newest = Math.max(newest, statSync(path.join(dir, name)).mtimeMs);
      } catch {
        // vanished meanwhile
      }
    }
  }
  return newest ? new Date(newest).toISOString() : undefined;
}
