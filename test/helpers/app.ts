/**
 * Helpers for API tests: an app built from a fresh database and a test config, and a
 * real Galvanic process for end-to-end tests.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { buildApp } from '../../api/app.js';
import { loadConfig, type Config } from '../../common/config.js';
import { buildRegistry } from '../../drivers/build-registry.js';
import { ConductorService } from '../../conductor/service.js';
import { createNotifier } from '../../common/notifier.js';
import { freshDatabase, freePort, type TestDatabase } from './database.js';

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

/**
 * An API on a fresh database, with an in-process conductor (fake-hardware) unless
 * `conductor: false`: actions such as maintenance and boot device wait for it.
 */
export async function buildTestApp(env: Record<string, string> = {}, opts: { conductor?: boolean } = {}): Promise<TestApp> {
  const tdb = await freshDatabase();
  const config = testConfig({ GALVANIC_CONDUCTOR__POLL_INTERVAL: '0.5', ...env });
  const log = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });
  const registry = buildRegistry(config);
  const app = buildApp({ config, db: tdb.knex, connectionString: tdb.url, registry, log });
  await app.ready();
  let conductor: ConductorService | undefined;
  if (opts.conductor !== false) {
    const notifier = createNotifier({ driver: 'noop', logFile: '', host: config.DEFAULT.host, service: 'test', log });
    conductor = new ConductorService({ config, db: tdb.knex, connectionString: tdb.url, registry, notifier, log });
    await conductor.start();
  }
  return {
    app, tdb, config,
    close: async () => {
      await conductor?.stop();
      await app.close();
      await tdb.drop();
    },
  };
}

/** Ironic's error body, parsed: the faultstring. */
export function faultOf(body: string): { faultcode: string; faultstring: string } {
  const outer = JSON.parse(body) as { error_message: string };
  return JSON.parse(outer.error_message) as { faultcode: string; faultstring: string };
}

export interface RunningGalvanic {
  url: string;
  port: number;
  proc: ChildProcess;
  output(): string;
  /** SIGTERM and wait for exit; resolves with the exit code. */
  stop(): Promise<number | null>;
}

/** Starts `galvanic <command>` against a database URL and waits until the API answers. */
export async function startGalvanic(opts: { databaseUrl: string; command?: string; env?: Record<string, string> }): Promise<RunningGalvanic> {
  const port = await freePort();
  let out = '';
  const proc = spawn(process.execPath, [path.join(ROOT, 'dist/cli/main.js'), ...(opts.command ?? 'all-in-one').split(' '), '--config', path.join(ROOT, 'etc/galvanic.conf.sample')], {
    env: {
      ...process.env,
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
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 20_000;
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
    await new Promise((r) => setTimeout(r, 100));
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
