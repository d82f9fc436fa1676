/**
 * Databases for benchmarks: an embedded Postgres in a temporary directory, or the server of
 * DATABASE_URL when set; on it, uniquely named databases, migrated, dropped at the end.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Knex } from 'knex';
import pg from 'pg';
import { createKnex } from '../../db/connection.js';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../db/embedded.js';
import { migrateLatest } from '../../db/migrate.js';
import { onCleanup } from './cleanup.js';
import { databaseUrl, freePort } from './util.js';

/** Relaxed durability: for throwaway data, not for figures meant to match production. */
export const PG_FAST_FLAGS = ['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off'];

export interface DatabaseServer {
  kind: 'embedded' | 'external';
  /** URL of the server's maintenance database. */
  url: string;
  admin: Knex;
  /** The embedded server's postmaster, whose children are the backends (undefined with DATABASE_URL). */
  postmasterPid?: number;
  /** The embedded server's temporary directory (on the file system of its data). */
  tempDir?: string;
  /** version() and a few settings that matter for performance. */
  info: Record<string, string>;
}

export interface ServerOptions {
  /** The server's maintenance database URL; '' for an embedded server; default DATABASE_URL, else embedded. */
  url?: string;
  /** Extra `-c name=value` flags for an embedded server (ignored with DATABASE_URL). */
  extraFlags?: string[];
  log: (m: string) => void;
  /** Name prefix of the temporary directory. */
  tempPrefix?: string;
}

/** Starts the embedded server (or connects to DATABASE_URL); registers its shutdown. */
export async function startDatabaseServer(opts: ServerOptions): Promise<DatabaseServer> {
  let serverUrl = opts.url ?? process.env.DATABASE_URL;
  let kind: DatabaseServer['kind'] = 'external';
  let postmasterPid: number | undefined;
  let tempDir: string | undefined;
  if (serverUrl === undefined || serverUrl === '') {
    kind = 'embedded';
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), opts.tempPrefix ?? 'galvanic-bench-'));
    tempDir = dir;
    onCleanup('temporary directory', () => fs.rm(dir, { recursive: true, force: true }));
    // mkdtemp makes it 0700; as root, Postgres runs as 'postgres' and must reach pg/ below.
    await fs.chmod(dir, 0o711);
    const pgTail: string[] = [];
    opts.log(`starting embedded Postgres in ${dir}`);
    let embedded: EmbeddedPostgres;
    try {
      embedded = await startEmbeddedPostgres({
        dataDir: path.join(dir, 'pg'),
        port: await freePort(),
        log: (m) => {
          pgTail.push(m);
          if (pgTail.length > 30) pgTail.shift();
        },
        extraFlags: opts.extraFlags ?? [],
      });
    } catch (err) {
      process.stderr.write(`${pgTail.join('\n')}\n`);
      throw err;
    }
    onCleanup('embedded Postgres', () => embedded.stop());
    serverUrl = embedded.connectionString;
    try {
      const pid = Number.parseInt((await fs.readFile(path.join(dir, 'pg', 'postmaster.pid'), 'utf8')).split('\n')[0], 10);
      if (Number.isInteger(pid) && pid > 0) postmasterPid = pid;
    } catch {
      // Without it, CPU accounting falls back to every postgres process on the host.
    }
  }
  const admin = createKnex(serverUrl, { poolMax: 2, applicationName: 'galvanic-bench-admin' });
  onCleanup('admin pool', () => admin.destroy());
  const info = await serverInfo(serverUrl, admin);
  return { kind, url: serverUrl, admin, postmasterPid, tempDir, info };
}

/** Settings in which distributions' servers and the embedded one differ, and which move figures. */
const INFO_SETTINGS = [
  'jit', 'jit_above_cost', 'fsync', 'synchronous_commit', 'full_page_writes', 'shared_buffers', 'max_connections', 'random_page_cost',
  'effective_io_concurrency', 'work_mem', 'autovacuum', 'shared_preload_libraries',
];

/**
 * version() and the settings above as the server is configured (read on a plain connection:
 * Galvanic's own sessions set some of them, see db/connection.ts), whether it has a JIT
 * provider, and `jit` as Galvanic's sessions run.
 */
async function serverInfo(serverUrl: string, admin: Knex): Promise<Record<string, string>> {
  const info: Record<string, string> = {};
  const plain = new pg.Client({ connectionString: serverUrl, application_name: 'galvanic-bench-info' });
  await plain.connect();
  try {
    info.version = (await plain.query<{ v: string }>('select version() as v')).rows[0].v;
    for (const setting of INFO_SETTINGS) {
      info[setting] = (await plain.query<Record<string, string>>(`show ${setting}`)).rows[0][setting];
    }
    await plain.query('set jit = on');
    info.jitProviderAvailable = String((await plain.query<{ a: boolean }>('select pg_jit_available() as a')).rows[0].a);
  } finally {
    await plain.end();
  }
  info.jitInGalvanicSessions = ((await admin.raw('show jit')) as { rows: Array<{ jit: string }> }).rows[0].jit;
  return info;
}

export interface BenchDatabase {
  name: string;
  url: string;
  /** Drops it now (WITH FORCE); otherwise that happens at cleanup. Idempotent. */
  drop(): Promise<void>;
}

/** Creates a uniquely named database on `server` and migrates it; registers its drop. */
export async function createBenchDatabase(server: DatabaseServer, prefix: string, log: (m: string) => void): Promise<BenchDatabase> {
  const name = `${prefix}_${process.pid}_${randomBytes(3).toString('hex')}`;
  await server.admin.raw('create database ??', [name]);
  // WITH (FORCE): a process under test may have left connections behind if it was killed.
  const drop = onCleanup(`database ${name}`, async () => {
    await server.admin.raw('drop database if exists ?? with (force)', [name]);
  });
  const url = databaseUrl(server.url, name);
  const knex = createKnex(url, { poolMax: 2, applicationName: 'galvanic-bench-migrate' });
  try {
    const applied = await migrateLatest(knex);
    log(`database ${name} created and migrated (${applied.length} migration(s))`);
  } finally {
    await knex.destroy();
  }
  return { name, url, drop };
}
