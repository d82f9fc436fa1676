/** Shared by the end-to-end tests that drive Galvanic with the real `baremetal` CLI. */
import { execFile } from 'node:child_process';
import { accessSync, constants as fsConstants } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { until } from './until.js';

export const CLI = 'baremetal';

export function onPath(cmd: string): boolean {
  return (process.env.PATH ?? '').split(path.delimiter).some((dir) => {
    if (!dir) return false;
    try {
      accessSync(path.join(dir, cmd), fsConstants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

/** Skips the suite when the CLI is missing, or fails it under CI. `what` names the suite. */
export function requireCli(ctx: Mocha.Context, what: string): void {
  if (onPath(CLI)) return;
  const msg = `'${CLI}' (python3-ironicclient) is not on PATH`;
  if (process.env.CI === 'true') throw new Error(`${msg}; CI must install it (apt-get install python3-ironicclient, as .ci/run does).`);
  process.stderr.write(`      skipping the ${what}: ${msg} (apt-get install python3-ironicclient).\n`);
  ctx.skip();
}

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** The environment without the caller's OpenStack settings, so only our flags count. */
export function cleanEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('OS_')));
}

/** Runs `baremetal` without auth against `endpoint`; never rejects. */
export function runBaremetal(endpoint: string, args: readonly string[], timeoutMs = 90_000): Promise<CliResult> {
  const argv = ['--os-auth-type', 'none', '--os-endpoint', endpoint, ...args];
  return new Promise((resolve) => {
    execFile(CLI, argv, { env: cleanEnv(), timeout: timeoutMs }, (err, stdout, stderr) => {
      const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : 1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

/** `baremetal` against one Galvanic, for a suite's tests. */
export interface BaremetalCli {
  /** Runs the CLI; never rejects. */
  run(...args: string[]): Promise<CliResult>;
  /** Runs the CLI, expects exit 0 (else fails with its output and Galvanic's): its stdout. */
  ok(...args: string[]): Promise<string>;
  /**
   * The node's FIELDs as `node show NODE -f json -c FIELD...` would print them, read over the
   * API: a check between CLI steps need not cost a Python start (2-3 s of CPU each; the CLI's
   * own `node show` is tested where it is the subject).
   */
  show<T = Record<string, unknown>>(node: string, ...fields: string[]): Promise<T>;
  /**
   * Runs a verb on `node` (`args` after `node VERB NODE`) without `--wait`, then polls the
   * API until the node's transition has ended: the node as `show` reads it. `--wait` on the
   * long verbs (deploy, rebuild, provide, undeploy, clean) polls every 10 s, ironicclient's
   * fixed long interval, which a test pays in full however fast Galvanic is; suites whose
   * subject is `--wait` use it, the others this.
   */
  settle<T = Record<string, unknown>>(verb: string, node: string, ...args: string[]): Promise<T>;
}

/**
 * The CLI against the Galvanic `galvanic()` returns (read at each run, so that a suite may
 * call this before its `before` hook has started Galvanic). AGENT_CLI_TRACE=1 prints each
 * run's exit code and time to stderr.
 */
export function baremetalCli(galvanic: () => { url: string; output(): string }, timeoutMs?: number): BaremetalCli {
  const run = (...args: string[]): Promise<CliResult> => runBaremetal(galvanic().url, args, timeoutMs);
  const ok = async (...args: string[]): Promise<string> => {
    const t0 = Date.now();
    const r = await run(...args);
    if (process.env.AGENT_CLI_TRACE) process.stderr.write(`baremetal ${args.slice(0, 3).join(' ')}: ${r.code} in ${Date.now() - t0} ms\n`);
    expect(r.code, `baremetal ${args.join(' ')}\nstdout: ${r.stdout}\nstderr: ${r.stderr}\n${galvanic().output().slice(-3000)}`).to.equal(0);
    return r.stdout;
  };
  const show = async <T>(node: string, ...fields: string[]): Promise<T> => {
    const res = await fetch(`${galvanic().url}/v1/nodes/${encodeURIComponent(node)}`, { headers: { 'X-OpenStack-Ironic-API-Version': 'latest' } });
    const body = await res.text();
    expect(res.status, `GET /v1/nodes/${node}: ${body}`).to.equal(200);
    const all = JSON.parse(body) as Record<string, unknown>;
    return (fields.length === 0 ? all : Object.fromEntries(fields.map((f) => [f, all[f]]))) as T;
  };
  const settle = async <T>(verb: string, node: string, ...args: string[]): Promise<T> => {
    await ok('node', verb, node, ...args);
    let last: Record<string, unknown> | undefined;
    return await until(() => `node ${node} to end its ${verb}: ${JSON.stringify(last)}`, async () => {
      last = await show<Record<string, unknown>>(node);
      return last.target_provision_state === null && last.reservation === null && last;
    }, 120_000, 100) as T;
  };
  return { run, ok, show, settle };
}
