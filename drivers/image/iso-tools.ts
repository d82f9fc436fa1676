/**
 * The distribution's programs and files that build boot ISOs (Debian's xorriso, isolinux,
 * syslinux-common, grub-efi-amd64-bin, mtools, dosfstools), as Ironic uses them: where they are,
 * which are missing (named by their Debian package), and running one with a timeout and bounded
 * output.
 */
import { execFile } from 'node:child_process';
import { constants } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Config } from '../../common/config-schema.js';
import { ImageCreationFailed, ImageToolMissing } from '../../common/errors.js';

/** How an ISO boots: 'bios' (isolinux), 'uefi' (GRUB in an EFI System Partition). */
export type BootMode = 'bios' | 'uefi';

/**
 * Where the tools and files are, and the option of Ironic's that names each. Every field is
 * optional: an absent one is looked for where Debian installs it.
 */
export interface IsoToolPaths {
  /** `[DEFAULT] isolinux_bin`. */
  isolinuxBin?: string;
  /** `[DEFAULT] ldlinux_c32`. */
  ldlinuxC32?: string;
  /** `[DEFAULT] isolinux_config_template`; absent: Ironic's template, built in. */
  isolinuxConfigTemplate?: string;
  /** `[DEFAULT] grub_config_template`; absent: Ironic's template, built in. */
  grubConfigTemplate?: string;
  /** `[DEFAULT] grub_config_path`: where grub.cfg goes on the ISO. */
  grubConfigPath?: string;
  /** `[DEFAULT] esp_image`: a ready EFI System Partition image; absent: one is built with GRUB. */
  espImage?: string;
  /** `[DEFAULT] tempdir`. */
  tempDir?: string;
  /** GRUB's x86_64-efi modules (grub-efi-amd64-bin). */
  grubEfiDir?: string;
  /** Programs, by name; absent ones are looked for on PATH, then in /usr/sbin and /sbin. */
  xorriso?: string;
  grubMkimage?: string;
  mkfsVfat?: string;
  mmd?: string;
  mcopy?: string;
  /** Each tool run is killed after this long (default 300 s: xorriso writes a large ramdisk). */
  timeoutMs?: number;
}

/** The tool options of a loaded configuration (`[DEFAULT]`, with Ironic's names). */
export function isoToolPathsFromConfig(config: Readonly<Config>): IsoToolPaths {
  const d = config.DEFAULT;
  const set = (v: string): string | undefined => (v === '' ? undefined : v);
  return {
    isolinuxBin: set(d.isolinux_bin),
    ldlinuxC32: set(d.ldlinux_c32),
    isolinuxConfigTemplate: set(d.isolinux_config_template),
    grubConfigTemplate: set(d.grub_config_template),
    grubConfigPath: set(d.grub_config_path),
    espImage: set(d.esp_image),
    tempDir: set(d.tempdir),
  };
}

/** One thing a build needs: a program, a file or a directory. */
interface Need {
  readonly what: string;
  readonly kind: 'program' | 'file' | 'directory';
  /** The configured path, or the places Debian (and other distributions) put it. */
  readonly candidates: readonly string[];
  readonly debianPackage: string;
  /** The option that sets it, when there is one. */
  readonly option?: string;
}

/** Something a build needs and this conductor lacks. */
export interface MissingIsoTool {
  readonly what: string;
  readonly debianPackage: string;
  readonly lookedIn: readonly string[];
  readonly option?: string;
}

/** The tools resolved to paths. */
export interface ResolvedIsoTools {
  xorriso: string;
  isolinuxBin?: string;
  ldlinuxC32?: string;
  grubMkimage?: string;
  grubEfiDir?: string;
  mkfsVfat?: string;
  mmd?: string;
  mcopy?: string;
}

/** What a build will do, which decides what it needs. */
export interface IsoBuildKind {
  /** Boot modes of a fresh build; undefined: both. */
  bootMode?: BootMode;
  /** Re-mastering a given ISO needs xorriso only. */
  remaster?: boolean;
}

const SBIN_DIRS = ['/usr/sbin', '/sbin'];

function programCandidates(name: string, configured: string | undefined): string[] {
  if (configured !== undefined) return [configured];
  const dirs = (process.env.PATH ?? '').split(path.delimiter).filter(Boolean);
  return [...new Set([...dirs, ...SBIN_DIRS])].map((d) => path.join(d, name));
}

function needs(paths: IsoToolPaths, kind: IsoBuildKind): Record<keyof ResolvedIsoTools, Need | undefined> {
  const bios = !kind.remaster && kind.bootMode !== 'uefi';
  const buildEsp = !kind.remaster && kind.bootMode !== 'bios' && paths.espImage === undefined;
  const program = (what: string, configured: string | undefined, debianPackage: string): Need =>
    ({ what, kind: 'program', candidates: programCandidates(what, configured), debianPackage });
  return {
    xorriso: program('xorriso', paths.xorriso, 'xorriso'),
    isolinuxBin: bios ? {
      what: 'isolinux.bin', kind: 'file', debianPackage: 'isolinux', option: '[DEFAULT] isolinux_bin',
      candidates: paths.isolinuxBin !== undefined ? [paths.isolinuxBin]
        : ['/usr/lib/ISOLINUX/isolinux.bin', '/usr/lib/syslinux/isolinux.bin', '/usr/share/syslinux/isolinux.bin'],
    } : undefined,
    ldlinuxC32: bios ? {
      what: 'ldlinux.c32', kind: 'file', debianPackage: 'syslinux-common', option: '[DEFAULT] ldlinux_c32',
      candidates: paths.ldlinuxC32 !== undefined ? [paths.ldlinuxC32]
        : ['/usr/lib/syslinux/modules/bios/ldlinux.c32', '/usr/share/syslinux/ldlinux.c32'],
    } : undefined,
    grubMkimage: buildEsp ? program('grub-mkimage', paths.grubMkimage, 'grub-common') : undefined,
    grubEfiDir: buildEsp ? {
      what: "GRUB's x86_64-efi modules", kind: 'directory', debianPackage: 'grub-efi-amd64-bin',
      candidates: [paths.grubEfiDir ?? '/usr/lib/grub/x86_64-efi'],
    } : undefined,
    mkfsVfat: buildEsp ? program('mkfs.vfat', paths.mkfsVfat, 'dosfstools') : undefined,
    mmd: buildEsp ? program('mmd', paths.mmd, 'mtools') : undefined,
    mcopy: buildEsp ? program('mcopy', paths.mcopy, 'mtools') : undefined,
  };
}

async function usable(need: Need, candidate: string): Promise<boolean> {
  try {
    if (need.kind === 'program') {
      await fs.access(candidate, constants.X_OK);
      return (await fs.stat(candidate)).isFile();
    }
    const st = await fs.stat(candidate);
    return need.kind === 'directory' ? st.isDirectory() : st.isFile();
  } catch {
    return false;
  }
}

/** Resolves what a build needs; `missing` lists what is not there. */
async function resolve(paths: IsoToolPaths, kind: IsoBuildKind): Promise<{ tools: Partial<ResolvedIsoTools>; missing: MissingIsoTool[] }> {
  const tools: Partial<ResolvedIsoTools> = {};
  const missing: MissingIsoTool[] = [];
  for (const [key, need] of Object.entries(needs(paths, kind)) as [keyof ResolvedIsoTools, Need | undefined][]) {
    if (need === undefined) continue;
    let found: string | undefined;
    for (const candidate of need.candidates) {
      if (await usable(need, candidate)) {
        found = candidate;
        break;
      }
    }
    if (found !== undefined) tools[key] = found;
    else {
      missing.push({ what: need.what, debianPackage: need.debianPackage, lookedIn: need.kind === 'program' && need.candidates.length > 1 ? ['PATH', ...SBIN_DIRS] : need.candidates, option: need.option });
    }
  }
  return { tools, missing };
}

/** One sentence per missing thing, naming its Debian package and the option that points at it. */
export function describeMissing(missing: readonly MissingIsoTool[]): string {
  return missing.map((m) => `${m.what} not found (looked in ${m.lookedIn.join(', ')}): install the Debian package ${m.debianPackage}${m.option ? ` or set ${m.option}` : ''}.`).join(' ');
}

/**
 * What building an ISO of this kind needs and this conductor lacks (empty when all is there),
 * with `message` saying which Debian packages to install. For a conductor's start-up check and
 * for the tests; a build checks again itself.
 */
export async function probeIsoTools(paths: IsoToolPaths = {}, kind: IsoBuildKind = {}): Promise<{ missing: MissingIsoTool[]; message: string }> {
  const { missing } = await resolve(paths, kind);
  return { missing, message: describeMissing(missing) };
}

/** @throws ImageToolMissing */
export async function resolveIsoTools(paths: IsoToolPaths, kind: IsoBuildKind): Promise<ResolvedIsoTools> {
  const { tools, missing } = await resolve(paths, kind);
  if (missing.length > 0) throw new ImageToolMissing('iso', describeMissing(missing));
  return tools as ResolvedIsoTools;
}

/** The temporary directory: `[DEFAULT] tempdir`, else the system's. */
export function tempRoot(paths: IsoToolPaths): string {
  return paths.tempDir ?? os.tmpdir();
}

/** What a tool printed is kept up to this much (a chatty xorriso is killed past it). */
const MAX_OUTPUT_BYTES = 4 * 1024 * 1024;
/** The end of stderr quoted in an error. */
const ERROR_TAIL_CHARS = 1500;
export const DEFAULT_TOOL_TIMEOUT_MS = 300_000;

function tail(text: string): string {
  const t = text.trim();
  return t.length <= ERROR_TAIL_CHARS ? t : `…${t.slice(-ERROR_TAIL_CHARS)}`;
}

/** How a tool runs: killed after `timeoutMs`, or when `signal` aborts. */
export interface ToolRun {
  timeoutMs: number;
  signal?: AbortSignal;
}

/**
 * Runs one tool (no shell).
 * @throws ImageToolMissing (the program vanished) | ImageCreationFailed (non-zero exit, killed,
 *   aborted, too much output), with the end of its stderr
 */
export function runTool(
  program: string,
  args: readonly string[],
  imageType: string,
  run: ToolRun,
  env: Readonly<Record<string, string>> = {},
): Promise<{ stdout: string; stderr: string }> {
  const name = path.basename(program);
  const { timeoutMs, signal } = run;
  if (signal?.aborted) return Promise.reject(new ImageCreationFailed(imageType, `The build was stopped before ${name} ran.`));
  return new Promise((resolvePromise, reject) => {
    execFile(program, args, {
      timeout: timeoutMs, signal, killSignal: 'SIGKILL', maxBuffer: MAX_OUTPUT_BYTES, encoding: 'utf8', env: { ...process.env, LC_ALL: 'C', ...env },
    }, (err, stdout, stderr) => {
      if (err === null) {
        resolvePromise({ stdout, stderr });
        return;
      }
      const e = err as NodeJS.ErrnoException & { killed?: boolean; code?: string | number; signal?: string | null };
      const output = tail(stderr);
      const quoted = output ? `: ${output}` : '.';
      if (e.code === 'ENOENT') {
        reject(new ImageToolMissing(imageType, `${program} not found.`));
      } else if (e.name === 'AbortError' || signal?.aborted) {
        reject(new ImageCreationFailed(imageType, `The build was stopped while ${name} ran.`, output));
      } else if (e.code === 'ERR_CHILD_PROCESS_STDIO_MAXBUFFER') {
        reject(new ImageCreationFailed(imageType, `${name} printed more than ${MAX_OUTPUT_BYTES} bytes and was stopped.`, output));
      } else if (e.killed === true && e.signal === 'SIGKILL') {
        reject(new ImageCreationFailed(imageType, `${name} timed out after ${timeoutMs / 1000} s${quoted}`, output));
      } else if (e.signal != null) {
        reject(new ImageCreationFailed(imageType, `${name} was killed by ${e.signal}${quoted}`, output));
      } else {
        reject(new ImageCreationFailed(imageType, `${name} exited with status ${String(e.code)}${quoted}`, output));
      }
    });
  });
}
