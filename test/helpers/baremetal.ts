/** Shared by the end-to-end tests that drive Galvanic with the real `baremetal` CLI. */
import { execFile } from 'node:child_process';
import { accessSync, constants as fsConstants } from 'node:fs';
import path from 'node:path';

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
