/**
 * Helpers for API tests: an app built from a fresh database and a test config, and a
 * real Galvanic process for end-to-end tests.
 */
import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { pino, type Logger } from 'pino';
import { buildApp } from '../../api/app.js';
import { loadConfig, type Config } from '../../common/config.js';
import { buildRegistry } from '../../drivers/build-registry.js';
import { ConductorService } from '../../conductor/service.js';
import { notifierFromConfig, type Notifier } from '../../common/notifier.js';
import { freshDatabase, type TestDatabase } from './database.js';
import { freePort } from './net.js';

/** The package root, from dist/test/helpers/. */
export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

/** A config from defaults plus `GALVANIC_*`-style overrides, never the developer's etc/ file. */
export function testConfig(env: Record<string, string> = {}): Readonly<Config> {
  return loadConfig({ env: { GALVANIC_DEFAULT__HOST: 'test-host', ...env }, path: path.join(ROOT, 'etc/galvanic.conf.sample') });
}

export interface TestApp {
  app: FastifyInstance;
  tdb: TestDatabase;
  config: Readonly<Config>;
  close(): Promise<void>;
}

export interface InjectOptions {
  body?: unknown;
  /** Microversion for X-OpenStack-Ironic-API-Version; null sends none. Default `latest`. */
  version?: string | null;
  headers?: Record<string, string>;
}

/** One request to the test app through fastify's inject. */
export function inject(t: TestApp, method: 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE', url: string, opts: InjectOptions = {}): Promise<LightMyRequestResponse> {
  const version = opts.version === undefined ? 'latest' : opts.version;
  const headers: Record<string, string> = { ...(version === null ? {} : { 'x-openstack-ironic-api-version': version }), ...opts.headers };
  return t.app.inject({ method, url, headers, ...(opts.body === undefined ? {} : { payload: opts.body as object }) });
}

/**
 * An API on a fresh database, with an in-process conductor (fake-hardware) unless
 * `conductor: false`: actions such as maintenance and boot device wait for it.
 */
export async function buildTestApp(env: Record<string, string> = {}, opts: { conductor?: boolean; log?: Logger } = {}): Promise<TestApp> {
  const tdb = await freshDatabase();
  const config = testConfig({ GALVANIC_CONDUCTOR__POLL_INTERVAL: '0.5', ...env });
  const log = opts.log ?? pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });
  const registry = buildRegistry(config);
  const app = buildApp({ config, db: tdb.knex, connectionString: tdb.url, registry, log });
  await app.ready();
  let conductor: ConductorService | undefined;
  let notifier: Notifier | undefined;
  if (opts.conductor !== false) {
    // The configured driver (noop unless a test sets GALVANIC_NOTIFICATIONS__*), as the CLI does.
    notifier = notifierFromConfig(config, 'galvanic-conductor', log);
    conductor = new ConductorService({ config, db: tdb.knex, connectionString: tdb.url, registry, notifier, log });
    await conductor.start();
  }
  return {
    app, tdb, config,
    close: async () => {
      await conductor?.stop();
      await notifier?.close();
      await app.close();
      await tdb.drop();
    },
  };
}

export interface SuiteAppOptions {
  /** `GALVANIC_*` overrides for the config. */
  env?: Record<string, string>;
  /** An in-process conductor (default true); see buildTestApp. */
  conductor?: boolean;
  /** Tables emptied before each test, in this order (children cascade with their parent). */
  clear?: readonly string[];
}

/**
 * The hooks most API suites share: an app on a fresh database for the whole suite (built in
 * `before`, closed in `after`) and the `clear` tables emptied before each test. Call it inside
 * `describe`; the object returned is filled in by the `before` hook, so read it from hooks and
 * tests only.
 */
export function suiteApp(opts: SuiteAppOptions = {}): TestApp {
  const t = {} as TestApp;
  before(async () => {
    Object.assign(t, await buildTestApp(opts.env, { conductor: opts.conductor }));
  });
  after(async () => {
    // Absent when `before` failed: nothing to close.
    await t.close?.();
  });
  const clear = opts.clear ?? [];
  if (clear.length > 0) {
    beforeEach(async () => {
      for (const table of clear) await t.tdb.knex(table).delete();
    });
  }
  return t;
}

/** Every JSON line of `file`; none while it does not exist. */
export async function readJsonLines<T>(file: string): Promise<T[]> {
  const text = await fs.readFile(file, 'utf8').catch(() => '');
  return text.split('\n').filter((l) => l.trim() !== '').map((l) => JSON.parse(l) as T);
}

/** A TestApp that writes down what its BMCs were asked and what it notified. */
export interface RecordingTestApp extends TestApp {
  /** JSON lines: each call the fake driver made to its BMC. */
  recordFile: string;
  /** JSON lines: each notification sent (the `log` notification driver). */
  notificationFile: string;
}

/**
 * suiteApp's hooks for an app whose fake driver records its BMC calls and whose notifications
 * go to a file, both in a temporary directory (`galvanic-<prefix>-*`) removed after the suite.
 */
export function suiteRecordingApp(prefix: string, env: Record<string, string> = {}): RecordingTestApp {
  const t = {} as RecordingTestApp;
  let dir: string | undefined;
  before(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), `galvanic-${prefix}-`));
    const recordFile = path.join(dir, 'bmc-calls.jsonl');
    const notificationFile = path.join(dir, 'notifications.jsonl');
    Object.assign(t, { recordFile, notificationFile }, await buildTestApp({
      ...env, GALVANIC_FAKE__RECORD_FILE: recordFile, GALVANIC_NOTIFICATIONS__DRIVER: 'log', GALVANIC_NOTIFICATIONS__LOG_FILE: notificationFile,
    }));
  });
  after(async () => {
    await t.close?.();
    if (dir) await fs.rm(dir, { recursive: true, force: true });
  });
  return t;
}

/** Creates a fake-hardware node (`body` may add fields or change the driver); expects 201. */
export async function createNode<T = { uuid: string; [key: string]: unknown }>(t: TestApp, body: Record<string, unknown> = {}, version?: string): Promise<T> {
  const res = await inject(t, 'POST', '/v1/nodes', { body: { driver: 'fake-hardware', ...body }, version });
  expect(res.statusCode, res.body).to.equal(201);
  return res.json<T>();
}

/** Before each test (after the suite's tables are cleared), nodes `node-a` and `node-b` created at `version`: their UUIDs. */
export function eachTwoNodes(t: TestApp, version?: string): { a: string; b: string } {
  const nodes = { a: '', b: '' };
  beforeEach(async () => {
    nodes.a = (await createNode(t, { name: 'node-a' }, version)).uuid;
    nodes.b = (await createNode(t, { name: 'node-b' }, version)).uuid;
  });
  return nodes;
}

/** Ironic's error body, parsed: the faultstring. */
export function faultOf(body: string): { faultcode: string; faultstring: string } {
  const outer = JSON.parse(body) as { error_message: string };
  return JSON.parse(outer.error_message) as { faultcode: string; faultstring: string };
}

/**
 * Checks that a response is Ironic's error of `status`: the error body with a faultcode that
 * matches the status family, a faultstring that says something (and includes `message` when
 * given). Returns the faultstring.
 */
export function expectFault(res: { statusCode: number; body: string }, status: number, message?: string): string {
  expect(res.statusCode, res.body).to.equal(status);
  const fault = faultOf(res.body);
  expect(fault.faultcode).to.equal(status < 500 ? 'Client' : 'Server');
  expect(fault.faultstring).to.be.a('string').and.not.equal('');
  if (message !== undefined) expect(fault.faultstring).to.include(message);
  return fault.faultstring;
}

export interface RunningGalvanic {
  url: string;
  port: number;
  proc: ChildProcess;
  output(): string;
  /** SIGTERM and wait for exit; resolves with the exit code. */
  stop(): Promise<number | null>;
}

/**
 * The environment of a spawned conductor's boot media of its own: its HTTP root and image
 * cache in a new directory and its embedded server on a free port, since test files run at
 * once and must share neither. `remove` deletes the directory once the process is gone.
 */
export function ownBootMediaEnv(): { env: Record<string, string>; remove(): Promise<void> } {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'galvanic-media-'));
  return {
    env: {
      GALVANIC_DEPLOY__HTTP_SERVER_PORT: '0',
      GALVANIC_DEPLOY__HTTP_ROOT: path.join(dir, 'httpboot'),
      GALVANIC_DEPLOY__ISO_MASTER_PATH: path.join(dir, 'cache'),
    },
    remove: () => fs.rm(dir, { recursive: true, force: true }),
  };
}

/**
 * Starts `galvanic <command>` against a database URL and waits until the API answers; on `port`
 * when given (a test that must hand out the API's URL before it starts), else a free one.
 */
export async function startGalvanic(opts: { databaseUrl: string; command?: string; env?: Record<string, string>; port?: number }): Promise<RunningGalvanic> {
  const port = opts.port ?? (await freePort());
  let out = '';
  const media = ownBootMediaEnv();
  const proc = spawn(process.execPath, [path.join(ROOT, 'dist/cli/main.js'), ...(opts.command ?? 'all-in-one').split(' '), '--config', path.join(ROOT, 'etc/galvanic.conf.sample')], {
    env: {
      ...process.env,
      ...media.env,
      GALVANIC_DATABASE__CONNECTION: opts.databaseUrl,
      GALVANIC_API__PORT: String(port),
      GALVANIC_CONDUCTOR__POLL_INTERVAL: '1',
      ...opts.env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  proc.stdout!.on('data', (d: Buffer) => { out += d.toString(); });
  proc.stderr!.on('data', (d: Buffer) => { out += d.toString(); });
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  void exited.then(() => media.remove());
  const url = `http://127.0.0.1:${port}`;
  // Seconds on a quiet machine; on one running four test files at once, a start (node, the
  // schema check, the first conductor heartbeat) has been seen to take more than 20 s.
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`galvanic exited early (${proc.exitCode}):\n${out}`);
    try {
      const res = await fetch(`${url}/`);
      if (res.ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      proc.kill('SIGKILL');
      throw new Error(`galvanic did not come up:\n${out}`);
    }
    await sleep(100);
  }
  return {
    url, port, proc,
    output: () => out,
    stop: async () => {
      if (proc.exitCode === null) proc.kill('SIGTERM');
      return exited;
    },
  };
}

export interface GalvanicOnFreshDatabase extends RunningGalvanic {
  tdb: TestDatabase;
  /** Stops galvanic, drops its database, and resolves with galvanic's exit code. */
  shutdown(): Promise<number | null>;
  /** shutdown, then expects exit code 0 with the tail of galvanic's output as the message. */
  shutdownCleanly(): Promise<void>;
}

/** startGalvanic on a database of its own, which goes with it. */
export async function startGalvanicOnFreshDatabase(opts: { command?: string; env?: Record<string, string>; port?: number } = {}): Promise<GalvanicOnFreshDatabase> {
  const tdb = await freshDatabase();
  let galvanic: RunningGalvanic;
  try {
    galvanic = await startGalvanic({ ...opts, databaseUrl: tdb.url });
  } catch (err) {
    await tdb.drop();
    throw err;
  }
  const shutdown = async (): Promise<number | null> => {
    try {
      return await galvanic.stop();
    } finally {
      await tdb.drop();
    }
  };
  return {
    ...galvanic, tdb, shutdown,
    shutdownCleanly: async () => {
      const code = await shutdown();
      expect(code, galvanic.output().slice(-3000)).to.equal(0);
    },
  };
}

export interface RunningConductor {
  host: string;
  proc: ChildProcess;
  pid: number;
  output(): string;
  /** SIGTERM and wait for exit; resolves with the exit code. */
  stop(): Promise<number | null>;
  /** SIGKILL (no shutdown at all) and wait for exit. */
  kill(): Promise<void>;
}

/**
 * Starts `galvanic conductor` (no API) as `host` against a database URL and waits until it
 * logs "conductor started" (registered, recovered, ring known, listening, claiming).
 */
export async function startConductor(opts: { databaseUrl: string; host: string; env?: Record<string, string> }): Promise<RunningConductor> {
  const maxKept = 256 * 1024;
  let out = '';
  const media = ownBootMediaEnv();
  const proc = spawn(process.execPath, [path.join(ROOT, 'dist/cli/main.js'), 'conductor', '--config', path.join(ROOT, 'etc/galvanic.conf.sample')], {
    env: {
      ...process.env,
      ...media.env,
      GALVANIC_DATABASE__CONNECTION: opts.databaseUrl,
      GALVANIC_CONDUCTOR__POLL_INTERVAL: '1',
      ...opts.env,
      GALVANIC_DEFAULT__HOST: opts.host,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let started = false;
  const onData = (d: Buffer) => {
    out += d.toString();
    if (!started && out.includes('"msg":"conductor started"')) started = true;
    // Keep the tail only: a busy conductor may log for minutes.
    if (out.length > 2 * maxKept) out = out.slice(-maxKept);
  };
  proc.stdout!.on('data', onData);
  proc.stderr!.on('data', onData);
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  void exited.then(() => media.remove());
  const deadline = Date.now() + 30_000;
  while (!started) {
    if (proc.exitCode !== null || proc.signalCode !== null) throw new Error(`galvanic conductor ${opts.host} exited early (${proc.exitCode ?? proc.signalCode}):\n${out}`);
    if (Date.now() > deadline) {
      proc.kill('SIGKILL');
      throw new Error(`galvanic conductor ${opts.host} did not start:\n${out}`);
    }
    await sleep(50);
  }
  return {
    host: opts.host,
    proc,
    pid: proc.pid!,
    output: () => out,
    stop: async () => {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
      await exited;
      return proc.exitCode;
    },
    kill: async () => {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
      await exited;
    },
  };
}
