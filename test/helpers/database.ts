/**
 * Test databases. Once per run a template database is created and migrated; each test file
 * clones it (CREATE DATABASE … TEMPLATE, cheap) so files share no state. The server is
 * DATABASE_URL when set (CI), otherwise an embedded Postgres in a temporary directory.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Knex } from 'knex';
import { createKnex } from '../../db/connection.js';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../db/embedded.js';
import { migrateLatest } from '../../db/migrate.js';
import { freePort } from './net.js';

export interface TestDatabase {
  url: string;
  knex: Knex;
  /** Closes the pool and drops the database, unless KEEP_TEST_DB=1. */
  drop(): Promise<void>;
}

interface State {
  adminUrl: string;
  admin: Knex;
  template: string;
  /** The runner's server and template: this process neither drops the template nor stops the server. */
  shared?: boolean;
  embedded?: EmbeddedPostgres;
  tempDir?: string;
}

let state: State | undefined;
const created = new Set<string>();
const runId = `${process.pid}_${randomBytes(3).toString('hex')}`;
let counter = 0;

const keepDatabases = (): boolean => process.env.KEEP_TEST_DB === '1';

/**
 * A server and template set up by the test runner (test/run.ts) for all of its mocha
 * processes: they clone it and leave it, and the server, to the runner.
 */
export const SHARED_SERVER_ENV = 'GALVANIC_TEST_SERVER';
export const SHARED_TEMPLATE_ENV = 'GALVANIC_TEST_TEMPLATE';

/** The server's admin URL and the template to export to mocha processes (the runner's). */
export function sharedDatabaseEnv(): Record<string, string> {
  const s = requireState();
  return { [SHARED_SERVER_ENV]: s.adminUrl, [SHARED_TEMPLATE_ENV]: s.template };
}

/** Starts (or connects to) the server and builds the migrated template. Root hook only. */
export async function setUpTestDatabases(): Promise<void> {
  if (state !== undefined) return;
  const sharedServer = process.env[SHARED_SERVER_ENV];
  const sharedTemplate = process.env[SHARED_TEMPLATE_ENV];
  if (sharedServer && sharedTemplate) {
    state = { adminUrl: sharedServer, admin: createKnex(sharedServer, { poolMax: 4, applicationName: 'galvanic-test-admin' }), template: sharedTemplate, shared: true };
    return;
  }
  let embedded: EmbeddedPostgres | undefined;
  let tempDir: string | undefined;
  let adminUrl = process.env.DATABASE_URL;
  if (adminUrl === undefined || adminUrl === '') {
    tempDir = await fs.mkdtemp(path.join(os.tmpdir(), 'galvanic-test-'));
    // mkdtemp makes it 0700; when the tests run as root the server runs as 'postgres'.
    await fs.chmod(tempDir, 0o711);
    const pgLog = process.env.GALVANIC_TEST_PG_LOG === '1';
    embedded = await startEmbeddedPostgres({
      dataDir: path.join(tempDir, 'pg'),
      port: await freePort(),
      log: (msg) => {
        if (pgLog) process.stderr.write(`[pg] ${msg}\n`);
      },
      // Durability buys nothing for throwaway test data, and costs seconds per run.
      extraFlags: ['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off'],
    });
    adminUrl = embedded.connectionString;
  }
  const admin = createKnex(adminUrl, { poolMax: 4, applicationName: 'galvanic-test-admin' });
  const template = `galvanic_tpl_${runId}`;
  await admin.raw('create database ??', [template]);
  const tplKnex = createKnex(databaseUrl(adminUrl, template), { poolMax: 2 });
  try {
    await migrateLatest(tplKnex);
  } finally {
    // A template must have no connections when it is cloned.
    await tplKnex.destroy();
  }
  state = { adminUrl, admin, template, embedded, tempDir };
}

/** Drops what this run created and stops the embedded server. Root hook only. */
export async function tearDownTestDatabases(): Promise<void> {
  const s = state;
  if (s === undefined) return;
  state = undefined;
  try {
    if (!keepDatabases()) {
      for (const name of created) await dropDatabase(s.admin, name);
      created.clear();
    }
    if (!s.shared) await dropDatabase(s.admin, s.template);
    await s.admin.destroy();
  } finally {
    await s.embedded?.stop();
    if (s.tempDir !== undefined) {
      if (keepDatabases()) {
        process.stderr.write(`KEEP_TEST_DB: kept the embedded server's data directory ${s.tempDir}\n`);
      } else {
        await fs.rm(s.tempDir, { recursive: true, force: true });
      }
    }
  }
}

/** The server's admin URL (its `postgres` database). */
export function serverUrl(): string {
  return requireState().adminUrl;
}

/** A database of its own, migrated; call in `before` and `drop()` in `after`. */
export async function freshDatabase(): Promise<TestDatabase> {
  const s = requireState();
  const name = nextName();
  await createFromTemplate(s.admin, name, s.template);
  return open(s, name);
}

/** A database of its own with no schema at all, for migration tests. */
export async function emptyDatabase(): Promise<TestDatabase> {
  const s = requireState();
  const name = nextName();
  // template0 rather than the default template1, which a server may have been customised in.
  await s.admin.raw('create database ?? template template0', [name]);
  created.add(name);
  return open(s, name);
}

function open(s: State, name: string): TestDatabase {
  const url = databaseUrl(s.adminUrl, name);
  const knex = createKnex(url, { applicationName: 'galvanic-test' });
  let dropped = false;
  return {
    url,
    knex,
    async drop() {
      if (dropped) return;
      dropped = true;
      await knex.destroy();
      if (keepDatabases()) {
        process.stderr.write(`KEEP_TEST_DB: kept ${url}\n`);
        return;
      }
      // The run may already be over (state cleared) if a file drops late; teardown handles it.
      if (state === undefined) return;
      await dropDatabase(state.admin, name);
      created.delete(name);
    },
  };
}

function requireState(): State {
  if (state === undefined) {
    throw new Error('Test databases are not set up: run mocha with --require dist/test/helpers/root-hooks.js');
  }
  return state;
}

function nextName(): string {
  counter += 1;
  return `galvanic_test_${runId}_${counter}`;
}

/**
 * Cloning fails with 55006 "source database is being accessed by other users" while a backend
 * of a just-closed connection to the template is still exiting; that clears within moments.
 */
async function createFromTemplate(admin: Knex, name: string, template: string): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await admin.raw('create database ?? template ??', [name, template]);
      created.add(name);
      // Throwaway data: a commit need not wait for its WAL flush (the embedded server runs
      // without fsync altogether). A database's settings are not cloned with its template.
      await admin.raw('alter database ?? set synchronous_commit = off', [name]);
      return;
    } catch (err) {
      if ((err as { code?: string }).code !== '55006' || attempt >= 10) throw err;
      await sleep(50 * attempt);
    }
  }
}

async function dropDatabase(admin: Knex, name: string): Promise<void> {
  // WITH (FORCE) so that a pool a failed test leaked does not keep the database alive.
  await admin.raw('drop database if exists ?? with (force)', [name]);
}

function databaseUrl(adminUrl: string, database: string): string {
  const url = new URL(adminUrl);
  url.pathname = `/${database}`;
  return url.toString();
}


/**
 * A database of its own for a suite: migrated, or `empty` (no schema), made before the suite
 * (before each test with `each`) and dropped after it. Call it inside `describe`; the object
 * returned is filled in by the hook, so read it from hooks and tests only.
 */
export function suiteDatabase(opts: { empty?: boolean; each?: boolean } = {}): TestDatabase {
  const db = {} as TestDatabase;
  const make = async () => {
    Object.assign(db, await (opts.empty ? emptyDatabase() : freshDatabase()));
  };
  // Absent when making it failed: nothing to drop.
  const drop = async () => db.drop?.();
  if (opts.each) {
    beforeEach(make);
    afterEach(drop);
  } else {
    before(make);
    after(drop);
  }
  return db;
}
