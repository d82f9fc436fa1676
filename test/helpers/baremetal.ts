/** Shared by the end-to-end tests that drive Galvanic with the real `baremetal` CLI. */
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
