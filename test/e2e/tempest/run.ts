/**
 * Runs ironic-tempest-plugin's API tests (ironic_tempest_plugin.tests.api) against a noauth
 * baremetal API, through the Keystone stand-in, and counts the results.
 *
 * From the command line, against a running server (after `npm run build`):
 *   node dist/test/e2e/tempest/run.js http://127.0.0.1:6385 [REGEX]
 * REGEX selects tests within the API suite (e.g. `test_ports_negative`, `TestNodes\.test_create`);
 * TEMPEST_CONCURRENCY sets the workers (default 1), TEMPEST_KEEP=1 keeps the workspace.
 * It prints the summary and exits 0 only when nothing failed.
 */
import { spawn, spawnSync } from 'node:child_process';
import { accessSync, constants as fsConstants, readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describeTarget, writeTempestConfig, type TargetInfo } from './config.js';
import { startKeystoneStub } from './keystone-stub.js';
import { parseSubunit } from './subunit.js';
import { summarize, type Summary } from './summary.js';

const API_TESTS = '^ironic_tempest_plugin\\.tests\\.api\\.';

/** Where `tempest` is and the Python it runs on. */
interface Tempest {
  tempest: string;
  python: string;
}

function findOnPath(cmd: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    if (!dir) continue;
    const file = path.join(dir, cmd);
    try {
      accessSync(file, fsConstants.X_OK);
      return file;
    } catch {
      // not here
    }
  }
  return undefined;
}

/**
 * Finds tempest and checks that its Python has the plugin. Returns why not when it cannot:
 * a pyenv or virtualenv `python3` on PATH need not be the one tempest is installed in, so the
 * interpreter is read from tempest's own `#!` line.
 */
export function findTempest(): Tempest | string {
  const tempest = findOnPath('tempest');
  if (!tempest) return "'tempest' is not on PATH";
  const shebang = readFileSync(tempest, 'utf8').split('\n', 1)[0];
  const m = /^#!\s*(\S+)(?:\s+(\S+))?/.exec(shebang);
  if (!m) return `${tempest} is not a Python script`;
  const python = m[1].endsWith('/env') && m[2] ? m[2] : m[1];
  const probe = spawnSync(python, ['-c', 'import ironic_tempest_plugin'], { encoding: 'utf8' });
  if (probe.status !== 0) return `the Python of ${tempest} (${python}) has no ironic_tempest_plugin: ${(probe.stderr ?? String(probe.error)).trim().split('\n').at(-1)}`;
  return { tempest, python };
}

function run(cmd: string, args: string[], opts: { cwd: string; env: NodeJS.ProcessEnv; timeoutMs: number }): Promise<{ code: number | null; stdout: Buffer; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: opts.cwd, env: opts.env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    const out: Buffer[] = [];
    let err = '';
    child.stdout.on('data', (d: Buffer) => out.push(d));
    child.stderr.on('data', (d: Buffer) => { err += d.toString(); });
    // Workers are grandchildren: end the whole process group.
    const timer = setTimeout(() => { try { process.kill(-child.pid!, 'SIGKILL'); } catch { /* gone */ } }, opts.timeoutMs);
    child.once('error', (e) => { clearTimeout(timer); reject(e); });
    child.once('close', (code) => { clearTimeout(timer); resolve({ code, stdout: Buffer.concat(out), stderr: err }); });
  });
}

export interface TempestRun {
  summary: Summary;
  target: TargetInfo;
  /** How many tests the regex selected. */
  selected: number;
  seconds: number;
  /** What tempest wrote on stderr (its log goes to tempest.log in the workspace). */
  stderr: string;
  /** Identity requests the stub could not answer. */
  unhandled: string[];
  /** The workspace (removed unless `keep`). */
  workdir: string;
}

/**
 * Runs the API suite (or the tests `regex` selects within it) against `target`, e.g.
 * http://127.0.0.1:6385, at the microversions the target advertises.
 */
export async function runTempest(opts: { target: string; regex?: string; concurrency?: number; keep?: boolean; timeoutMs?: number }): Promise<TempestRun> {
  const found = findTempest();
  if (typeof found === 'string') throw new Error(found);
  const target = opts.target.replace(/\/+$/, '');
  const concurrency = opts.concurrency ?? 1;
  const timeoutMs = opts.timeoutMs ?? 600_000;
  const regex = !opts.regex ? API_TESTS : opts.regex.startsWith('^ironic_tempest_plugin') ? opts.regex : `${API_TESTS}.*(${opts.regex})`;
  const info = await describeTarget(target);
  const stub = await startKeystoneStub(target);
  const workdir = await fs.mkdtemp(path.join(os.tmpdir(), 'galvanic-tempest-'));
  try {
    const config = await writeTempestConfig({ workdir, identity: stub.url, target: info, accounts: concurrency + 2 });
    const env: NodeJS.ProcessEnv = { ...process.env, PYTHON: found.python, TEMPEST_CONFIG_DIR: path.dirname(config), TEMPEST_CONFIG: 'tempest.conf' };
    const init = await run(found.python, ['-m', 'stestr', 'init'], { cwd: workdir, env, timeoutMs });
    if (init.code !== 0) throw new Error(`stestr init failed (${init.code}): ${init.stderr.slice(-2000)}`);
    const base = ['run', '--config-file', config, '--regex', regex];
    const list = await run(found.tempest, [...base, '--list-tests'], { cwd: workdir, env, timeoutMs });
    const listed = list.stdout.toString().split('\n').map((l) => l.trim()).filter((l) => l.startsWith('ironic_tempest_plugin.'));
    if (listed.length === 0) throw new Error(`tempest selected no tests for ${regex}:\n${list.stderr.slice(-2000)}`);
    const started = Date.now();
    const result = await run(found.tempest, [...base, '--concurrency', String(concurrency), '--subunit'], { cwd: workdir, env, timeoutMs });
    const seconds = Math.round((Date.now() - started) / 1000);
    // Kept with the workspace (`keep`) for a closer look: `stestr last` reads them too.
    await fs.writeFile(path.join(workdir, 'results.subunit'), result.stdout);
    await fs.writeFile(path.join(workdir, 'tests.list'), `${listed.join('\n')}\n`);
    const label = `ironic-tempest-plugin API tests against ${target} (microversions ${info.minMicroversion}..${info.maxMicroversion}, ${listed.length} selected, ${seconds} s)`;
    const summary = summarize(parseSubunit(result.stdout), listed, label);
    return { summary, target: info, selected: listed.length, seconds, stderr: result.stderr, unhandled: [...new Set(stub.unhandled)], workdir };
  } finally {
    await stub.close();
    if (!opts.keep) await fs.rm(workdir, { recursive: true, force: true });
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const [url, regex] = process.argv.slice(2);
  if (!url) {
    process.stderr.write('usage: node dist/test/e2e/tempest/run.js URL [REGEX]\n');
    process.exit(2);
  }
  runTempest({ target: url, regex, concurrency: Number(process.env.TEMPEST_CONCURRENCY ?? 1), keep: process.env.TEMPEST_KEEP === '1' })
    .then((r) => {
      process.stdout.write(`${r.summary.text}\n`);
      if (r.unhandled.length) process.stdout.write(`keystone stub could not answer: ${r.unhandled.join(', ')}\n`);
      if (process.env.TEMPEST_KEEP === '1') process.stdout.write(`workspace kept: ${r.workdir}\n`);
      process.exit(r.summary.failed ? 1 : 0);
    })
    .catch((err: unknown) => {
      process.stderr.write(`${(err as Error).message}\n`);
      process.exit(3);
    });
}
