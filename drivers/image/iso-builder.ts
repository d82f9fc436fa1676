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
import { ImageCreationFailed, InvalidParameterValue } from '../../common/errors.js';
import {
  GRUB_TEMPLATE, ISOLINUX_TEMPLATE, checkCmdline, loadTemplate, renderGrubConfig, renderIsolinuxConfig,
} from './boot-config.js';
import { buildEsp } from './esp.js';
import { remasterIso } from './iso-remaster.js';
import {
  DEFAULT_TOOL_TIMEOUT_MS, resolveIsoTools, runTool, tempRoot, type BootMode, type IsoToolPaths, type ResolvedIsoTools,
} from './iso-tools.js';

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
  tools?: IsoToolPaths;
};

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
  for (const file of remaster ? [opts.baseIso] : [opts.kernel, opts.ramdisk]) await requireFile(file);
  const tools = await resolveIsoTools(paths, { bootMode: opts.bootMode, remaster });

  const work = await fs.mkdtemp(path.join(tempRoot(paths), 'galvanic-iso-'));
  const partial = path.join(path.dirname(opts.output), `.${path.basename(opts.output)}.${randomUUID()}.tmp`);
  try {
    if (opts.baseIso !== undefined) {
      await remasterIso({ ...opts, baseIso: opts.baseIso, tools, paths, work, target: partial });
    } else {
      await buildFresh({ ...opts, kernel: opts.kernel, ramdisk: opts.ramdisk }, tools, paths, work, partial);
    }
    await syncFile(partial);
    await fs.rename(partial, opts.output);
  } catch (err) {
    await fs.rm(partial, { force: true });
    throw err;
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

/** ISO paths are relative to its root; Ironic's grub_config_path is written with or without a leading slash. */
function isoRelative(p: string): string {
  const rel = path.posix.normalize(p.replace(/^[\s/]+/, ''));
  if (rel === '.' || rel.startsWith('..')) throw new ImageCreationFailed('iso', `${p} is not a path inside the ISO.`);
  return rel;
}

/**
 * A new ISO from the kernel and ramdisk (Ironic's create_isolinux_image_for_bios and
 * create_esp_image_for_uefi in one): both are grafted from where they are, not copied.
 */
async function buildFresh(
  opts: BuildAgentIsoOptions & { kernel: string; ramdisk: string },
  tools: ResolvedIsoTools,
  paths: IsoToolPaths,
  work: string,
  target: string,
): Promise<void> {
  const bios = opts.bootMode !== 'uefi';
  const uefi = opts.bootMode !== 'bios';
  const root = path.join(work, 'root');
  await fs.mkdir(root);
  const timeoutMs = paths.timeoutMs ?? DEFAULT_TOOL_TIMEOUT_MS;
  const grafts = [graft(ISO_KERNEL, opts.kernel), graft(ISO_RAMDISK, opts.ramdisk)];
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
    const grubCfg = isoRelative(paths.grubConfigPath ?? 'EFI/BOOT/grub.cfg');
    const template = await loadTemplate(paths.grubConfigTemplate, GRUB_TEMPLATE);
    await writeFileIn(root, grubCfg, renderGrubConfig(template, `/${ISO_KERNEL}`, `/${ISO_RAMDISK}`, opts.cmdline));
    let esp = paths.espImage;
    if (esp === undefined) {
      // GRUB finds this ISO among the machine's disks by a file only it has: a search for
      // grub.cfg alone could pick the machine's own disk.
      const marker = `.disk/id/${randomUUID()}`;
      await writeFileIn(root, marker, '');
      esp = await buildEsp(tools, work, { marker: `/${marker}`, grubConfigPath: `/${grubCfg}`, timeoutMs });
    } else {
      await requireFile(esp);
    }
    grafts.push(graft(EFIBOOT_IMG, esp));
    if (bios) bootArgs.push('-eltorito-alt-boot');
    bootArgs.push('-e', EFIBOOT_IMG, '-no-emul-boot');
  }

  await runTool(tools.xorriso, [
    '-as', 'mkisofs', '-quiet', '-r', '-V', VOLUME_ID, '-J', '-l',
    ...(opts.publisherId !== undefined ? ['-publisher', opts.publisherId] : []),
    '-c', BOOT_CATALOG, ...bootArgs,
    '-o', target, '-graft-points', graft('/', root), ...grafts,
  ], 'iso', timeoutMs);
}
