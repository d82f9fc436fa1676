/** Set-up: the nodes, inserted with SQL, and the api and conductor processes of one run. */
import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { loadConfig } from '../../common/config.js';
import { nodeMapper } from '../../db/nodes.js';
import { waitForApi } from '../lib/http.js';
import { spawnGalvanic, type GalvanicProcess } from '../lib/proc.js';
import { freePort, sleep } from '../lib/util.js';
import { CONFIG_FILE, SERVER_LOG_LEVEL, type Options } from './options.js';

export interface BenchNode {
  id: number;
  uuid: string;
}

/** Inserts `count` fake-hardware nodes in batches, with the columns createNode would write. */
export async function insertNodes(knex: Knex, count: number): Promise<BenchNode[]> {
  const out: BenchNode[] = [];
  const BATCH = 1000;
  for (let first = 0; first < count; first += BATCH) {
    const rows = [];
    for (let i = first; i < Math.min(count, first + BATCH); i++) {
      rows.push(nodeMapper.toRow({
        uuid: randomUUID(),
        name: `bench-node-${String(i).padStart(6, '0')}`,
        driver: 'fake-hardware',
        powerInterface: 'fake',
        managementInterface: 'fake',
        consoleInterface: 'no-console',
        provisionState: 'enroll',
        powerState: 'power off',
      }));
    }
    const inserted = (await knex('nodes').insert(rows).returning(['id', 'uuid'])) as BenchNode[];
    out.push(...inserted);
  }
  await knex.raw('ANALYZE nodes');
  return out;
}

export interface Fleet {
  /** The embedded Postgres' postmaster, for CPU accounting. */
  postmasterPid?: number;
  api: GalvanicProcess;
  apiPort: number;
  conductors: GalvanicProcess[];
  pids: Record<string, number>;
  stop(): Promise<void>;
  output(): string;
}

function serverEnv(opts: Options, dbUrl: string): Record<string, string> {
  const env: Record<string, string> = {
    GALVANIC_DATABASE__CONNECTION: dbUrl,
    GALVANIC_DEFAULT__LOG_LEVEL: SERVER_LOG_LEVEL,
    GALVANIC_CONDUCTOR__SYNC_POWER_STATE_INTERVAL: '0',
  };
  if (opts.workers !== undefined) env.GALVANIC_CONDUCTOR__WORKERS_POOL_SIZE = String(opts.workers);
  if (opts.poolMax !== undefined) env.GALVANIC_DATABASE__MAX_POOL_SIZE = String(opts.poolMax);
  return env;
}

const conductorHost = (k: number, i: number) => `bench-conductor-${k}-${i + 1}`;

export async function startFleet(opts: Options, k: number, dbUrl: string, knex: Knex, log: (m: string) => void): Promise<Fleet> {
  const env = serverEnv(opts, dbUrl);
  const apiPort = await freePort();
  const api = await spawnGalvanic({
    label: 'api', command: 'api', env: { ...env, GALVANIC_API__PORT: String(apiPort) }, cpuProfDir: opts.cpuProf,
  });
  const conductors: GalvanicProcess[] = [];
  for (let i = 0; i < k; i++) {
    conductors.push(await spawnGalvanic({
      label: `conductor-${i + 1}`,
      command: 'conductor',
      // No port: a conductor does not listen (one picked while the API was starting could be
      // the API's own, which it then failed to bind).
      env: { ...env, GALVANIC_DEFAULT__HOST: conductorHost(k, i) },
      cpuProfDir: opts.cpuProf,
      stopGraceMs: 90_000,
    }));
  }
  const all = [api, ...conductors];
  const output = () => all.map((p) => p.output()).join('\n');
  const died = () => {
    const dead = all.find((p) => p.proc.exitCode !== null || p.proc.signalCode !== null);
    return dead ? `galvanic ${dead.label} exited early (${dead.proc.exitCode ?? dead.proc.signalCode}):\n${dead.output()}` : undefined;
  };
  const stop = async () => {
    // Conductors first (they drain and go offline), then the API.
    await Promise.all(conductors.map((c) => c.stop()));
    await api.stop();
  };
  try {
    await waitForApi(apiPort, 60_000, died);
    // Conductors are ready once registered; their hash rings agree after one heartbeat.
    const hosts = conductors.map((_, i) => conductorHost(k, i));
    const deadline = Date.now() + 60_000;
    for (;;) {
      const why = died();
      if (why) throw new Error(why);
      const rows = (await knex('conductors').whereIn('hostname', hosts).where('online', true).count({ n: '*' })) as Array<{ n: number }>;
      if (Number(rows[0].n) === k) break;
      if (Date.now() > deadline) throw new Error(`conductors did not register within 60 s:\n${output()}`);
      await sleep(100);
    }
    if (k > 1) {
      const hb = loadConfig({ path: CONFIG_FILE, env: { ...process.env, ...env } }).conductor.heartbeat_interval;
      log(`${k} conductors registered; waiting ${hb + 1} s (one heartbeat) for their hash rings to agree`);
      await sleep((hb + 1) * 1000);
    }
  } catch (err) {
    await stop();
    throw err;
  }
  const pids: Record<string, number> = { api: api.pid };
  for (const c of conductors) pids[c.label] = c.pid;
  log(`galvanic api (pid ${api.pid}) on 127.0.0.1:${apiPort}, ${k} conductor(s) (pids ${conductors.map((c) => c.pid).join(', ')})`);
  return { api, apiPort, conductors, pids, stop, output, postmasterPid: undefined };
}
