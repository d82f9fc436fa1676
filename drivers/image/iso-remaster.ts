/**
 * Re-mastering a given deploy ISO, as Ironic does with a node's deploy_iso: its kernel, initrd,
 * boot loaders and El Torito boot images stay as they are (xorriso replays the boot setup), and
 * each boot configuration that boots a kernel is replaced by Ironic's template for that kernel
 * and initrd, with the new command line.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { ImageCreationFailed, InvalidParameterValue } from '../../common/errors.js';
import {
  GRUB_TEMPLATE, ISOLINUX_TEMPLATE, firstGrubEntry, firstSyslinuxEntry, loadTemplate, renderGrubConfig, renderIsolinuxConfig,
  withEntryCommands, type BootEntry,
} from './boot-config.js';
import type { BuildContext } from './iso-builder.js';
import { runTool, type BootMode } from './iso-tools.js';

export interface RemasterOptions extends BuildContext {
  baseIso: string;
  cmdline: string;
  bootMode?: BootMode;
}

/** The El Torito boot images of an ISO: platform per entry ('BIOS', 'UEFI', …) and their paths. */
export interface ElToritoEntry {
  platform: string;
  path?: string;
}

/** Reads `xorriso -report_el_torito plain`. */
export function parseElTorito(report: string): ElToritoEntry[] {
  const entries = new Map<number, ElToritoEntry>();
  for (const line of report.split('\n')) {
    const img = /^El Torito boot img :\s+(\d+)\s+(\S+)/.exec(line);
    if (img) entries.set(Number(img[1]), { ...entries.get(Number(img[1])), platform: img[2] });
    const p = /^El Torito img path :\s+(\d+)\s+(.+)$/.exec(line);
    if (p) entries.set(Number(p[1]), { platform: entries.get(Number(p[1]))?.platform ?? '', path: p[2].trim() });
  }
  return [...entries.values()];
}

/** xorriso's `-find` prints one path a line in single quotes, a quote inside as '"'"'. */
export function parseFindOutput(out: string): string[] {
  return out.split('\n').filter((l) => l.startsWith("'") && l.endsWith("'") && l.length >= 2)
    .map((l) => l.slice(1, -1).replaceAll(`'"'"'`, "'"));
}

const SYSLINUX_CONFIGS = new Set(['isolinux.cfg', 'syslinux.cfg']);

/** One configuration to replace: where on the ISO, and what it boots. */
interface Rewrite {
  isoPath: string;
  loader: 'syslinux' | 'grub';
  entry: BootEntry;
}

/**
 * @throws ImageCreationFailed (not an ISO, no boot configuration for a mode it must boot, a tool failed)
 */
export async function remasterIso(opts: RemasterOptions): Promise<void> {
  const { xorriso } = opts.tools;
  const xorrisoRun = (args: string[]) => runTool(xorriso, args, 'iso', opts.run);
  const source = `The deploy ISO ${opts.baseIso}`;

  const { stdout: report, stderr } = await xorrisoRun(['-indev', opts.baseIso, '-report_el_torito', 'plain']);
  // xorriso takes any other file for an empty image and carries on.
  if (/No ISO 9660 image at LBA 0/.test(stderr)) throw new ImageCreationFailed('iso', `${source} is not an ISO 9660 image.`);
  const platforms = new Set(parseElTorito(report).map((e) => e.platform));
  const { stdout: found } = await xorrisoRun(['-indev', opts.baseIso, '-find', '/', '-type', 'f']);
  const files = parseFindOutput(found);
  const clash = opts.injected.find((f) => files.includes(`/${f.isoPath}`));
  if (clash) throw new InvalidParameterValue(`Cannot inject ${clash.isoPath}: the deploy ISO has a file of its own there.`);
  const cfgs = files.filter((f) => f.toLowerCase().endsWith('.cfg'));

  const extracted = path.join(opts.work, 'extracted');
  await fs.mkdir(extracted);
  const local = (isoPath: string) => path.join(extracted, String(cfgs.indexOf(isoPath)));
  if (cfgs.length > 0) {
    await xorrisoRun(['-osirrox', 'on', '-indev', opts.baseIso, ...cfgs.flatMap((c) => ['-extract', c, local(c)])]);
  }
  const text = new Map<string, string>();
  for (const c of cfgs) text.set(c, await fs.readFile(local(c), 'utf8'));

  const rewrites: Rewrite[] = [];
  for (const c of cfgs) {
    const name = path.posix.basename(c).toLowerCase();
    if (SYSLINUX_CONFIGS.has(name)) {
      // Menus often keep their entries in files the main one includes (Debian's txt.cfg): the
      // first entry of the main file, else of its directory's other files, is the one to boot.
      const dir = path.posix.dirname(c);
      const siblings = cfgs.filter((o) => o !== c && path.posix.dirname(o) === dir).sort();
      const entry = [c, ...siblings].map((f) => firstSyslinuxEntry(text.get(f)!)).find((e) => e !== undefined);
      if (entry) rewrites.push({ isoPath: c, loader: 'syslinux', entry });
    } else if (name === 'grub.cfg') {
      // A grub.cfg without a kernel (a stub that finds the ISO and sources the menu) stays.
      const entry = firstGrubEntry(text.get(c)!);
      if (entry) rewrites.push({ isoPath: c, loader: 'grub', entry });
    }
  }

  const need = (mode: BootMode, platform: string, loader: Rewrite['loader'], what: string) => {
    if (!platforms.has(platform)) throw new ImageCreationFailed('iso', `${source} has no ${platform} boot image, so it cannot boot in ${mode} mode.`);
    if (!rewrites.some((r) => r.loader === loader)) throw new ImageCreationFailed('iso', `${source} has no ${what} that boots a kernel and an initrd.`);
  };
  const modes: BootMode[] = opts.bootMode !== undefined ? [opts.bootMode]
    : [...(platforms.has('BIOS') ? ['bios' as const] : []), ...(platforms.has('UEFI') ? ['uefi' as const] : [])];
  if (modes.length === 0) throw new ImageCreationFailed('iso', `${source} has no BIOS or UEFI El Torito boot image.`);
  for (const mode of modes) {
    if (mode === 'bios') need(mode, 'BIOS', 'syslinux', 'isolinux.cfg or syslinux.cfg');
    else need(mode, 'UEFI', 'grub', 'grub.cfg');
  }

  const isolinuxTemplate = await loadTemplate(opts.paths.isolinuxConfigTemplate, ISOLINUX_TEMPLATE);
  const grubTemplate = await loadTemplate(opts.paths.grubConfigTemplate, GRUB_TEMPLATE);
  const maps: string[] = [];
  for (const [i, r] of rewrites.entries()) {
    const file = path.join(opts.work, `config-${i}`);
    await fs.writeFile(file, r.loader === 'syslinux'
      ? renderIsolinuxConfig(isolinuxTemplate, r.entry.kernel, r.entry.initrd, opts.cmdline)
      : withEntryCommands(renderGrubConfig(grubTemplate, r.entry.kernel, r.entry.initrd, opts.cmdline), r.entry));
    maps.push('-map', file, r.isoPath);
  }
  for (const f of opts.injected) maps.push('-map', f.local, `/${f.isoPath}`);
  await xorrisoRun([
    '-indev', opts.baseIso, '-outdev', opts.target, '-boot_image', 'any', 'replay',
    ...(opts.volumeId !== undefined ? ['-volid', opts.volumeId] : []), ...maps, '-commit',
  ]);
}
