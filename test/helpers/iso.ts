/**
 * Reading the ISOs the builders make (the agent's boot ISO, config drives), with the same
 * distribution tools a user would use (xorriso, mtools), independently of the builders' own
 * parsing.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { probeIsoTools } from '../../drivers/image/iso-tools.js';

const run = promisify(execFile);

/** Skips the calling suite when xorriso is missing (all a config drive needs), or fails it under CI=true. */
export async function requireXorriso(ctx: Mocha.Context): Promise<void> {
  const { missing, message } = await probeIsoTools({}, { remaster: true });
  if (missing.length === 0) return;
  if (process.env.CI === 'true') throw new Error(`${message} CI=true, so this is a failure, not a skip`);
  console.warn(`      skipped: ${message}`);
  ctx.skip();
}

/**
 * Skips the calling suite when the ISO tools are missing, saying which Debian packages to
 * install; under CI=true a missing tool is a failure, so the suite cannot silently vanish.
 */
export async function requireIsoTools(ctx: Mocha.Context): Promise<void> {
  const { missing, message } = await probeIsoTools();
  if (missing.length === 0) return;
  if (process.env.CI === 'true') throw new Error(`${message} CI=true, so this is a failure, not a skip`);
  console.warn(`      skipped: ${message}`);
  ctx.skip();
}

/** The regular files of an ISO, by their path on it. */
export async function isoFileList(iso: string): Promise<string[]> {
  const { stdout } = await run('xorriso', ['-indev', iso, '-find', '/', '-type', 'f'], { maxBuffer: 16 << 20 });
  return stdout.split('\n').filter((l) => l.startsWith("'")).map((l) => l.slice(1, -1)).sort();
}

/** Extracts the whole ISO into a new directory and returns it. */
export async function extractIso(iso: string, into: string): Promise<string> {
  await fs.mkdir(into, { recursive: true });
  await run('xorriso', ['-osirrox', 'on', '-indev', iso, '-extract', '/', into], { maxBuffer: 16 << 20 });
  return into;
}

/** `xorriso -report_el_torito plain`: the platforms of the boot images, in catalog order, and their paths. */
export async function elToritoPlatforms(iso: string): Promise<{ platforms: string[]; paths: string[]; report: string }> {
  const { stdout } = await run('xorriso', ['-indev', iso, '-report_el_torito', 'plain']);
  const platforms = [...stdout.matchAll(/^El Torito boot img :\s+\d+\s+(\S+)/gm)].map((m) => m[1]);
  const paths = [...stdout.matchAll(/^El Torito img path :\s+\d+\s+(\S+)/gm)].map((m) => m[1]);
  return { platforms, paths, report: stdout };
}

/** The files of a FAT image (mtools), by their path in it. */
export async function fatFileList(image: string): Promise<string[]> {
  const { stdout } = await run('mdir', ['-/', '-b', '-i', image, '::/'], { env: { ...process.env, MTOOLS_SKIP_CHECK: '1' } });
  return stdout.split('\n').map((l) => l.trim()).filter((l) => l !== '' && !l.endsWith('/')).map((l) => l.replace(/^::/, '')).sort();
}

/** A fresh directory under the system's temporary directory. */
export function scratchDir(prefix: string): Promise<string> {
  return fs.mkdtemp(path.join(os.tmpdir(), prefix));
}

async function walk(dir: string, prefix = ''): Promise<string[]> {
  const out: string[] = [];
  for (const e of await fs.readdir(dir, { withFileTypes: true })) {
    const rel = prefix ? `${prefix}/${e.name}` : e.name;
    if (e.isDirectory()) out.push(...(await walk(path.join(dir, e.name), rel)));
    else out.push(rel);
  }
  return out.sort();
}

/** What an ISO image (its bytes) holds: its volume id, and its files by path (Rock Ridge names). */
export async function readIso(image: Buffer): Promise<{ volumeId: string; files: Map<string, Buffer> }> {
  const work = await scratchDir('iso-read-');
  try {
    const iso = path.join(work, 'image.iso');
    await fs.writeFile(iso, image);
    const info = await run('xorriso', ['-indev', iso, '-pvd_info'], { maxBuffer: 1 << 20 });
    const volumeId = /^Volume Id\s*:\s*(.*)$/m.exec(info.stdout + info.stderr)?.[1].trim() ?? '';
    const tree = await extractIso(iso, path.join(work, 'tree'));
    // The extracted tree is read-only, as the image is.
    await run('chmod', ['-R', 'u+w', tree]);
    const files = new Map<string, Buffer>();
    for (const rel of await walk(tree)) files.set(rel, await fs.readFile(path.join(tree, rel)));
    return { volumeId, files };
  } finally {
    await fs.rm(work, { recursive: true, force: true });
  }
}
