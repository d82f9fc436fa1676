/**
 * A fleet of simulated Redfish BMCs for benchmarks: `galvanic sim redfish` child processes of
 * at most BMCS_PER_SIM BMCs each on fixed ports, their counters and request chains, and the
 * nodes enrolled for them.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { createKnex } from '../../db/connection.js';
import { nodeMapper } from '../../db/nodes.js';
import { addCounters } from '../../sim/redfish/state.js';
import { onCleanup } from './cleanup.js';
import { ROOT } from './util.js';

export const BMCS_PER_SIM = 4000;

/** What the simulators are started with. */
export interface SimFleetOptions {
  nodes: number;
  basePort: number;
  latency: string;
  slowFraction: number;
  slowBmcFraction: number;
  slowMs: number;
}

/** Soft and hard `ulimit -n` of this process (as a shell started from it sees them). */
export function fdLimits(): { soft: number; hard: number } {
  const out = execFileSync('sh', ['-c', 'ulimit -Sn; ulimit -Hn']).toString().trim().split('\n');
  const n = (s: string) => (s === 'unlimited' ? Number.MAX_SAFE_INTEGER : Number(s));
  return { soft: n(out[0]), hard: n(out[1]) };
}

const REEXEC_MARK = 'GALVANIC_BENCH_FD_RAISED';

/**
 * Makes sure a fleet of `nodes` BMCs fits the file-descriptor limit: when the soft limit is too
 * low and the hard one allows it, starts this benchmark again under a raised limit and resolves
 * with that run's exit code; resolves undefined when the limit already suffices.
 * @throws Error when even the hard limit is too low
 */
export async function ensureFdLimit(nodes: number, log: (m: string) => void): Promise<number | undefined> {
  const needFds = Math.min(BMCS_PER_SIM, nodes) * 2 + nodes + 2000;
  const { soft, hard } = fdLimits();
  if (soft >= needFds) return undefined;
  if (hard >= needFds && !process.env[REEXEC_MARK]) {
    log(`raising the file-descriptor limit from ${soft} to ${hard} (need about ${needFds}) and starting again`);
    const child = spawn('sh', ['-c', `ulimit -n ${hard} && exec "$0" "$@"`, process.execPath, ...process.execArgv, process.argv[1], ...process.argv.slice(2)], {
      stdio: 'inherit', env: { ...process.env, [REEXEC_MARK]: '1' },
    });
    return new Promise((resolve) => child.once('exit', (code) => resolve(code ?? 1)));
  }
  throw new Error(`the conductor needs about ${needFds} file descriptors for ${nodes} BMCs but ulimit -n allows ${soft} (hard ${hard}); raise it (e.g. ulimit -n ${needFds}) or use fewer --nodes`);
}

export interface Sim {
  proc: ChildProcess;
  firstPort: number;
  count: number;
}

/**
 * Starts `galvanic sim redfish` with `args` (stopped at cleanup, as `name`) and waits for the
 * JSON line it prints once its BMCs listen.
 */
export async function spawnSim(args: string[], name: string): Promise<{ proc: ChildProcess; ready: { firstPort: number; listening: number } }> {
  const proc = spawn(process.execPath, [path.join(ROOT, 'dist/cli/main.js'), 'sim', 'redfish', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  proc.stderr!.on('data', (d: Buffer) => { err += d.toString(); });
  onCleanup(name, async () => {
    if (proc.exitCode !== null) return;
    proc.kill('SIGTERM');
    await new Promise((r) => proc.once('exit', r));
  });
  const line = await new Promise<string>((resolve, reject) => {
    let out = '';
    proc.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('\n')) resolve(out.split('\n')[0]);
    });
    proc.once('exit', (code) => reject(new Error(`simulator exited (${code}): ${err}`)));
  });
  return { proc, ready: JSON.parse(line) as { firstPort: number; listening: number } };
}

export async function startSims(opts: SimFleetOptions, log: (m: string) => void): Promise<Sim[]> {
  const sims: Sim[] = [];
  for (let first = 0; first < opts.nodes; first += BMCS_PER_SIM) {
    const count = Math.min(BMCS_PER_SIM, opts.nodes - first);
    // Fixed ports (below the usual ephemeral range): nodes are enrolled by port number.
    const basePort = opts.basePort + first;
    const args = ['--count', String(count), '--base-port', String(basePort),
      '--latency', opts.latency, '--slow-fraction', String(opts.slowFraction),
      '--slow-bmc-fraction', String(opts.slowBmcFraction), '--slow', String(opts.slowMs), '--session-limit', '4'];
    const { proc, ready } = await spawnSim(args, `simulator ${first}`);
    log(`simulator ${sims.length + 1}: ${ready.listening} BMCs from port ${ready.firstPort}`);
    sims.push({ proc, firstPort: ready.firstPort, count });
  }
  return sims;
}

export interface Totals {
  requests: number;
  maxConcurrent: number;
  sessionsCreated: number;
  sessionsOpen: number;
  logins: number;
  bmcs: number;
}

export async function simTotals(sims: Sim[]): Promise<Totals> {
  const t: Totals = { requests: 0, maxConcurrent: 0, sessionsCreated: 0, sessionsOpen: 0, logins: 0, bmcs: 0 };
  for (const s of sims) addCounters(t, (await (await fetch(`http://127.0.0.1:${s.firstPort}/_sim/totals`)).json()) as Totals);
  return t;
}

export interface Chains {
  active: number;
  p50Ms: number;
  p99Ms: number;
  /** The longest: [BMC port, ms, requests]. */
  longest: [number, number, number];
}

/** The longest request chain over every simulator since the last mark, and a new mark. */
export async function markChains(sims: Sim[]): Promise<Chains> {
  const out: Chains = { active: 0, p50Ms: 0, p99Ms: 0, longest: [0, 0, 0] };
  for (const s of sims) {
    const x = (await (await fetch(`http://127.0.0.1:${s.firstPort}/_sim/chains`, { method: 'POST' })).json()) as {
      active: number; p50Ms: number; p99Ms: number; longest: Array<[number, number, number]>;
    };
    out.active += x.active;
    // Quantiles across processes: the largest of theirs (processes hold similar BMCs).
    out.p50Ms = Math.max(out.p50Ms, x.p50Ms);
    out.p99Ms = Math.max(out.p99Ms, x.p99Ms);
    const top = x.longest[0];
    if (top && top[1] > out.longest[1]) out.longest = [s.firstPort + top[0], top[1], top[2]];
  }
  return out;
}

export async function enroll(dbUrl: string, sims: Sim[]): Promise<void> {
  const knex = createKnex(dbUrl, { poolMax: 2, applicationName: 'galvanic-bench-enroll' });
  try {
    const rows = sims.flatMap((s) => Array.from({ length: s.count }, (_, i) => nodeMapper.toRow({
      uuid: randomUUID(), name: `bench-${s.firstPort + i}`, driver: 'redfish', powerInterface: 'redfish', managementInterface: 'redfish',
      provisionState: 'active', powerState: 'power on',
      driverInfo: { redfish_address: `http://127.0.0.1:${s.firstPort + i}`, redfish_username: 'admin', redfish_password: 'password' },
    })));
    for (let i = 0; i < rows.length; i += 1000) await knex('nodes').insert(rows.slice(i, i + 1000));
  } finally {
    await knex.destroy();
  }
}

