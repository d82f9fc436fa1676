/**
 * The agent's boot ISO, as Ironic's images.create_boot_iso builds it with the distribution's
 * tools: the kernel and ramdisk with isolinux (BIOS) and an EFI System Partition holding GRUB
 * (UEFI), both by default so that one ISO boots under SeaBIOS-like and UEFI firmware alike; or a
 * given deploy ISO re-mastered, its kernel and initrd kept and its boot configurations rewritten
 * with the new command line. The command line is the caller's; it is written as given.
 */
import { randomUUID } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { GalvanicError, ImageCreationFailed, InvalidParameterValue } from '../../common/errors.js';
import {
  GRUB_TEMPLATE, ISOLINUX_TEMPLATE, checkCmdline, loadTemplate, renderGrubConfig, renderIsolinuxConfig,
} from './boot-config.js';
import { buildEsp } from './esp.js';
import { remasterIso } from './iso-remaster.js';
import {
  DEFAULT_TOOL_TIMEOUT_MS, resolveIsoTools, runTool, tempRoot, type BootMode, type IsoToolPaths, type ResolvedIsoTools, type ToolRun,
} from './iso-tools.js';

/** What a build works with, beside its options. */
export interface BuildContext {
  tools: ResolvedIsoTools;
  paths: IsoToolPaths;
  /** A private temporary directory. */
  work: string;
  /** The file to write. */
  target: string;
  injected: readonly StagedFile[];
  /** Overrides the volume label (config-2 when OpenStack metadata is injected). */
  volumeId?: string;
  run: ToolRun;
}

/** Where a fresh ISO's parts go, as Ironic lays them out. */
const ISO_KERNEL = 'vmlinuz';
const ISO_RAMDISK = 'initrd';
const ISOLINUX_BIN = 'isolinux/isolinux.bin';
const ISOLINUX_CFG = 'isolinux/isolinux.cfg';
const LDLINUX_C32 = 'isolinux/ldlinux.c32';
const BOOT_CATALOG = 'boot.cat';
const EFIBOOT_IMG = 'boot/grub/efiboot.img';
/** Ironic's volume label for a boot ISO (images._label). */
const VOLUME_ID = 'VMEDIA_BOOT_ISO';
/** Ironic's label when the ISO carries OpenStack metadata (network_data.json), which the agent looks for. */
const CONFIG_DRIVE_VOLUME_ID = 'config-2';

/** What to boot: a kernel and ramdisk, or a deploy ISO to re-master. */
export type AgentIsoSource =
  | { kernel: string; ramdisk: string; baseIso?: undefined }
  | { baseIso: string; kernel?: undefined; ramdisk?: undefined };

export type BuildAgentIsoOptions = AgentIsoSource & {
  /** The kernel command line, written into isolinux.cfg and grub.cfg as given. */
  cmdline: string;
  /** undefined: both, one hybrid ISO. For a re-mastered ISO, the mode it must be able to boot. */
  bootMode?: BootMode;
  /** Where the ISO is written, atomically (a temporary file beside it, then renamed). */
  output: string;
  /** Ironic's publisher_id: the ISO's publisher field (Ironic puts a fresh UUID, also given as ir_pub_id). */
  publisherId?: string;
  /**
   * Ironic's inject_files: more files for the ISO, by their path on it (`openstack/latest/
   * network_data.json`, the agent's TLS configuration), from a local file or given content.
   * A file under `openstack/` labels the ISO `config-2`, as Ironic does.
   */
  injectFiles?: Readonly<Record<string, InjectedFile>>;
  tools?: IsoToolPaths;
  /** Stops the build (conductor shutdown): the running tool is killed and nothing is left. */
  signal?: AbortSignal;
};

/** A file to put on the ISO. */
export type InjectedFile = { readonly file: string } | { readonly content: string | Uint8Array };

/** An injected file staged for the tools: its path on the ISO and on this machine. */
export interface StagedFile {
  isoPath: string;
  local: string;
}

/**
 * Builds the agent's boot ISO at `output`. Nothing is left behind on failure: no `output`, no
 * temporary file or directory.
 * @throws InvalidParameterValue (a command line the boot loaders cannot carry, a bad source) |
 *   ImageToolMissing (names the Debian package) | ImageCreationFailed (a tool failed: its stderr)
 */
export async function buildAgentIso(opts: BuildAgentIsoOptions): Promise<void> {
  checkCmdline(opts.cmdline);
  if (opts.bootMode !== undefined && opts.bootMode !== 'bios' && opts.bootMode !== 'uefi') {
    throw new InvalidParameterValue(`Boot mode ${String(opts.bootMode)} is not one of bios, uefi.`);
  }
  const paths = opts.tools ?? {};
  const remaster = opts.baseIso !== undefined;
  if (remaster ? opts.kernel !== undefined || opts.ramdisk !== undefined : opts.kernel === undefined || opts.ramdisk === undefined) {
    throw new InvalidParameterValue('An agent ISO is built from a kernel and a ramdisk, or re-mastered from a deploy ISO: not both.');
  }
  const injectPaths = Object.keys(opts.injectFiles ?? {}).map((p) => isoRelative(p, InvalidParameterValue));
  for (const file of remaster ? [opts.baseIso] : [opts.kernel, opts.ramdisk]) await requireFile(file);
  const tools = await resolveIsoTools(paths, { bootMode: opts.bootMode, remaster });
  const run = { timeoutMs: paths.timeoutMs ?? DEFAULT_TOOL_TIMEOUT_MS, signal: opts.signal };
  const volumeId = injectPaths.some((p) => p.startsWith('openstack/')) ? CONFIG_DRIVE_VOLUME_ID : undefined;

  const work = await fs.mkdtemp(path.join(tempRoot(paths), 'galvanic-iso-')).catch((err: Error) => {
    throw new ImageCreationFailed('iso', `Cannot create a work directory in ${tempRoot(paths)}: ${err.message}`);
  });
  const partial = path.join(path.dirname(opts.output), `.${path.basename(opts.output)}.${randomUUID()}.tmp`);
  try {
    const injected = await stageInjectedFiles(opts.injectFiles ?? {}, work);
    if (opts.baseIso !== undefined) {
      await remasterIso({ ...opts, baseIso: opts.baseIso, tools, paths, work, target: partial, injected, volumeId, run });
    } else {
      await buildFresh({ ...opts, kernel: opts.kernel, ramdisk: opts.ramdisk }, { tools, paths, work, target: partial, injected, volumeId, run });
    }
    await syncFile(partial);
    await fs.rename(partial, opts.output);
  } catch (err) {
    await fs.rm(partial, { force: true });
    // A file system's own failure (no space, no permission) is the build's failure too.
    throw err instanceof GalvanicError ? err : new ImageCreationFailed('iso', (err as Error).message);
  } finally {
    await fs.rm(work, { recursive: true, force: true });
  }
}

/** @throws ImageCreationFailed */
async function requireFile(file: string): Promise<void> {
  let st;
  try {
    st = await fs.stat(file);
  } catch (err) {
    throw new ImageCreationFailed('iso', `Cannot read ${file}: ${(err as Error).message}`);
  }
  if (!st.isFile()) throw new ImageCreationFailed('iso', `${file} is not a regular file.`);
}

/** A crash after the rename must not leave a renamed but empty ISO. */
async function syncFile(file: string): Promise<void> {
  const handle = await fs.open(file, 'r');
  try {
    await handle.datasync();
  } finally {
    await handle.close();
  }
}

/** xorriso's pathspec `iso_path=disk_path`: `=` and `\` in either are escaped. */
function graft(isoPath: string, diskPath: string): string {
  const esc = (p: string) => p.replace(/[\\=]/g, (c) => `\\${c}`);
  return `${esc(isoPath)}=${esc(diskPath)}`;
}

async function writeFileIn(root: string, rel: string, data: string | Buffer): Promise<void> {
  const file = path.join(root, rel);
  await fs.mkdir(path.dirname(file), { recursive: true });
  await fs.writeFile(file, data);
}

/**
 * ISO paths are relative to its root; Ironic's grub_config_path is written with or without a
 * leading slash.
 * @throws ImageCreationFailed, or `invalid` for a path the caller gave
 */
function isoRelative(p: string, invalid: new (message: string) => Error = ImageCreationFailedIso): string {
  const rel = path.posix.normalize(p.replace(/^[\s/]+/, ''));
  if (rel === '.' || rel === '..' || rel.startsWith('../')) throw new invalid(`${p} is not a path inside the ISO.`);
  return rel;
}

class ImageCreationFailedIso extends ImageCreationFailed {
  constructor(message: string) {
    super('iso', message);
  }
}

/** Content is written into the work directory; files are used where they are. @throws ImageCreationFailed */
async function stageInjectedFiles(files: Readonly<Record<string, InjectedFile>>, work: string): Promise<StagedFile[]> {
  const staged: StagedFile[] = [];
  for (const [i, [isoPath, f]] of Object.entries(files).entries()) {
    let local: string;
    if ('file' in f) {
      await requireFile(f.file);
      local = f.file;
    } else {
      local = path.join(work, `inject-${i}`);
      await fs.writeFile(local, f.content);
    }
    staged.push({ isoPath: isoRelative(isoPath), local });
  }
  return staged;
}

/** @throws InvalidParameterValue when an injected file would replace one of the ISO's own. */
function refuseOverlap(injected: readonly StagedFile[], own: (isoPath: string) => boolean): void {
  const clash = injected.find((f) => own(f.isoPath));
  if (clash) throw new InvalidParameterValue(`Cannot inject ${clash.isoPath}: the boot ISO has a file of its own there.`);
}

/**
 * A new ISO from the kernel and ramdisk (Ironic's create_isolinux_image_for_bios and
 * create_esp_image_for_uefi in one): both are grafted from where they are, not copied.
 */
async function buildFresh(opts: BuildAgentIsoOptions & { kernel: string; ramdisk: string }, build: BuildContext): Promise<void> {
  const { tools, paths, work, target, run } = build;
  const bios = opts.bootMode !== 'uefi';
  const uefi = opts.bootMode !== 'bios';
  const root = path.join(work, 'root');
  await fs.mkdir(root);
  const grubCfg = isoRelative(paths.grubConfigPath ?? 'EFI/BOOT/grub.cfg');
  refuseOverlap(build.injected, (p) => [ISO_KERNEL, ISO_RAMDISK, BOOT_CATALOG, EFIBOOT_IMG, grubCfg].includes(p)
    || p.startsWith('isolinux/') || p.startsWith('.disk/'));
  const grafts = [graft(ISO_KERNEL, opts.kernel), graft(ISO_RAMDISK, opts.ramdisk), ...build.injected.map((f) => graft(f.isoPath, f.local))];
  const bootArgs: string[] = [];

  if (bios) {
    // Copied, not grafted: the boot info table is patched into the ISO's copy of isolinux.bin.
    await writeFileIn(root, ISOLINUX_BIN, await fs.readFile(tools.isolinuxBin!));
    await writeFileIn(root, LDLINUX_C32, await fs.readFile(tools.ldlinuxC32!));
    const template = await loadTemplate(paths.isolinuxConfigTemplate, ISOLINUX_TEMPLATE);
    await writeFileIn(root, ISOLINUX_CFG, renderIsolinuxConfig(template, `/${ISO_KERNEL}`, `/${ISO_RAMDISK}`, opts.cmdline));
    bootArgs.push('-b', ISOLINUX_BIN, '-no-emul-boot', '-boot-load-size', '4', '-boot-info-table');
  }
  if (uefi) {
    const template = await loadTemplate(paths.grubConfigTemplate, GRUB_TEMPLATE);
    await writeFileIn(root, grubCfg, renderGrubConfig(template, `/${ISO_KERNEL}`, `/${ISO_RAMDISK}`, opts.cmdline));
    let esp = paths.espImage;
    if (esp === undefined) {
      // GRUB finds this ISO among the machine's disks by a file only it has: a search for
      // grub.cfg alone could pick the machine's own disk.
      const marker = `.disk/id/${randomUUID()}`;
      await writeFileIn(root, marker, '');
      esp = await buildEsp(tools, work, { marker: `/${marker}`, grubConfigPath: `/${grubCfg}`, run });
    } else {
      await requireFile(esp);
    }
    grafts.push(graft(EFIBOOT_IMG, esp));
    if (bios) bootArgs.push('-eltorito-alt-boot');
    bootArgs.push('-e', EFIBOOT_IMG, '-no-emul-boot');
  }

  await runTool(tools.xorriso, [
    '-as', 'mkisofs', '-quiet', '-r', '-V', build.volumeId ?? VOLUME_ID, '-J', '-l',
    ...(opts.publisherId !== undefined ? ['-publisher', opts.publisherId] : []),
    '-c', BOOT_CATALOG, ...bootArgs,
    '-o', target, '-graft-points', graft('/', root), ...grafts,
  ], 'iso', run);
}
