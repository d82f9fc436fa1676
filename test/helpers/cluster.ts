/**
 * A cluster of real processes on one fresh database: an API process and N conductor
 * processes sharing the fake BMC's record file ([fake] record_file), the ground truth of
 * what ran, where and when.
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { startConductor, startGalvanic, type RunningConductor, type RunningGalvanic } from './app.js';
import { freshDatabase, type TestDatabase } from './database.js';

import type { FakeBmcRecord as BmcRecord } from '../../drivers/fake/fake.js';

export type { BmcRecord };

export interface Cluster {
  tdb: TestDatabase;
  dir: string;
  recordFile: string;
  api: RunningGalvanic;
  conductors: RunningConductor[];
}

/**
 * Starts the API and `conductors` conductors named `<prefix>-c<i>`, and waits until every
 * conductor sees all of them on its ring (until then the first one up would take everything).
 */
export interface ClusterOptions {
  conductors: number;
  env: Record<string, string>;
  /** Added to `env` for the conductors only. */
  conductorEnv?: Record<string, string>;
}

export async function startCluster(prefix: string, opts: ClusterOptions): Promise<Cluster> {
  const tdb = await freshDatabase();
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'galvanic-races-'));
  const recordFile = path.join(dir, 'bmc.jsonl');
  const env = { ...opts.env, GALVANIC_FAKE__RECORD_FILE: recordFile };
  const hosts = Array.from({ length: opts.conductors }, (_, i) => `${prefix}-c${i + 1}`);
  let api: RunningGalvanic | undefined;
  const conductors: RunningConductor[] = [];
  try {
    // One after the other: several Node processes starting at once on a busy 2-core machine
    // can miss startGalvanic's deadline.
    api = await startGalvanic({ databaseUrl: tdb.url, command: 'api', env: { ...env, GALVANIC_DEFAULT__LOG_LEVEL: 'warn' } });
    for (const host of hosts) conductors.push(await startConductor({ databaseUrl: tdb.url, host, env: { ...env, ...opts.conductorEnv } }));
    const full = `"ring":${JSON.stringify([...hosts].sort())}`;
    const deadline = Date.now() + 20_000;
    while (!conductors.every((c) => c.output().includes(full))) {
      if (Date.now() > deadline) throw new Error(`the conductors never saw a ring of ${hosts.join(', ')}:\n${conductors.map((c) => c.output()).join('\n')}`);
      await sleep(100);
    }
    return { tdb, dir, recordFile, api, conductors };
  } catch (err) {
    await Promise.all([api?.stop(), ...conductors.map((x) => x.stop())]);
    await tdb.drop();
    await fs.rm(dir, { recursive: true, force: true });
    throw err;
  }
}

export async function stopCluster(c: Cluster | undefined): Promise<void> {
  if (!c) return;
  await Promise.all([c.api.stop(), ...c.conductors.map((x) => x.stop())]);
  await c.tdb.drop();
  await fs.rm(c.dir, { recursive: true, force: true });
}

/**
 * A cluster for the enclosing `describe`: startCluster in `before`, stopCluster in `after`.
 * The function returned gives it to hooks and tests (it throws before `before` has run).
 */
export function suiteCluster(prefix: string, opts: ClusterOptions): () => Cluster {
  let c: Cluster | undefined;
  before(async () => {
    c = await startCluster(prefix, opts);
  });
  after(async () => {
    await stopCluster(c);
  });
  return () => {
    if (!c) throw new Error(`the cluster ${prefix} is not started`);
    return c;
  };
}

/**
 * Starts conductor `i` again under its host name (after a kill or a stop), with `env` and the
 * cluster's record file, in its place in the cluster (so that stopCluster stops it).
 */
export async function restartConductor(c: Cluster, i: number, env: Record<string, string>): Promise<RunningConductor> {
  c.conductors[i] = await startConductor({ databaseUrl: c.tdb.url, host: c.conductors[i].host, env: { ...env, GALVANIC_FAKE__RECORD_FILE: c.recordFile } });
  return c.conductors[i];
}

/** Every line of the record file; each must parse (a torn line would mean interleaved writes). */
export async function readRecords(file: string): Promise<BmcRecord[]> {
  let text: string;
  try {
    text = await fs.readFile(file, 'utf8');
  } catch (err) {
    if ((err as { code?: string }).code === 'ENOENT') return [];
    throw err;
  }
  return text.split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as BmcRecord);
}
