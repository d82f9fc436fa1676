/**
 * Reading ISO 9660 images back in tests, with Debian's xorriso (`-osirrox`): the files an
 * image holds and its volume id, so that a test checks what a machine would mount.
 */
import { execFile, execFileSync } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

function hasXorriso(): boolean {
  try {
    execFileSync('xorriso', ['-version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** Skips the suite when xorriso is missing, or fails it under CI (CI=true). */
export function requireXorriso(ctx: Mocha.Context): void {
  if (hasXorriso()) return;
  const msg = 'xorriso is not on PATH (apt-get install xorriso)';
  if (process.env.CI === 'true') throw new Error(`${msg}; CI=true, so this is a failure, not a skip`);
  process.stderr.write(`      skipped: ${msg}\n`);
  ctx.skip();
}

async function walk(dir: string, prefix = ''): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(dir, { withFileTypes: true })) {
    const rel = prefix ? `${prefix}/${e.name}` : e.name;
    if (e.isDirectory()) out.push(...(await walk(path.join(dir, e.name), rel)));
    else out.push(rel);
  }
  return out.sort();
}

/** What an ISO image holds: its volume id, and its files by path (Rock Ridge names). */
export async function readIso(image: Buffer): Promise<{ volumeId: string; files: Map<string, Buffer> }> {
  const work = await mkdtemp(path.join(os.tmpdir(), 'iso-test-'));
  try {
    const iso = path.join(work, 'image.iso');
    const tree = path.join(work, 'tree');
    await writeFile(iso, image);
    const info = await run('xorriso', ['-indev', iso, '-pvd_info'], { maxBuffer: 1 << 20 });
    const volumeId = /^Volume Id\s*:\s*(.*)$/m.exec(info.stdout + info.stderr)?.[1].trim() ?? '';
    await run('xorriso', ['-osirrox', 'on', '-indev', iso, '-extract', '/', tree], { maxBuffer: 1 << 20 });
    // The extracted tree is read-only, as the image is.
    await run('chmod', ['-R', 'u+w', tree]);
    const files = new Map<string, Buffer>();
    for (const rel of await walk(tree)) files.set(rel, await readFile(path.join(tree, rel)));
    return { volumeId, files };
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}
