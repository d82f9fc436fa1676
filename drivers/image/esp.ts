/**
 * The EFI System Partition image of a UEFI-bootable ISO, when `[DEFAULT] esp_image` gives none:
 * a FAT image (dosfstools, mtools) holding GRUB as \EFI\BOOT\BOOTX64.EFI, the path UEFI firmware
 * boots from removable media. GRUB is made with grub-mkimage from Debian's
 * grub-efi-amd64-bin modules, with a small configuration built in that finds the ISO and reads
 * its grub.cfg: the menu, with the kernel command line, stays on the ISO where Ironic puts it.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { runTool, type ResolvedIsoTools, type ToolRun } from './iso-tools.js';

/**
 * What the built-in configuration and the menu need: file systems and partitions to find the
 * ISO, the menu itself, the Linux loader, and video and serial output for the firmware console.
 */
const GRUB_MODULES = [
  'normal', 'configfile', 'search', 'search_fs_file', 'iso9660', 'fat', 'part_msdos', 'part_gpt',
  'linux', 'echo', 'test', 'all_video', 'efi_gop', 'efi_uga', 'gfxterm', 'serial', 'terminal', 'reboot', 'halt',
];

export interface EspOptions {
  /** A file only this ISO has, by which GRUB tells it from the machine's disks. */
  marker: string;
  /** The menu on the ISO. */
  grubConfigPath: string;
  run: ToolRun;
}

/**
 * Builds the ESP image in `work` and returns its path.
 * @throws ImageCreationFailed | ImageToolMissing
 */
export async function buildEsp(tools: ResolvedIsoTools, work: string, opts: EspOptions): Promise<string> {
  const embedded = path.join(work, 'esp-embedded.cfg');
  const efi = path.join(work, 'BOOTX64.EFI');
  const image = path.join(work, 'efiboot.img');
  const prefix = path.posix.dirname(opts.grubConfigPath);
  await fs.writeFile(embedded, [
    `search --no-floppy --set=root --file ${opts.marker}`,
    `set prefix=($root)${prefix}`,
    `configfile ($root)${opts.grubConfigPath}`,
    '',
  ].join('\n'));
  await runTool(tools.grubMkimage!, [
    '-O', 'x86_64-efi', '-d', tools.grubEfiDir!, '-o', efi, '-p', prefix, '-c', embedded, ...GRUB_MODULES,
  ], 'ESP', opts.run);

  // FAT12 holds up to about 32 MiB: the size of GRUB, a margin for the file system's own
  // structures, rounded up to a whole MiB (mkfs.vfat counts in KiB).
  const { size } = await fs.stat(efi);
  const kib = Math.ceil((size * 1.1 + 512 * 1024) / (1024 * 1024)) * 1024;
  await runTool(tools.mkfsVfat!, ['-C', '-n', 'EFIBOOT', image, String(kib)], 'ESP', opts.run);
  // mtools checks a disk's geometry against its BIOS parameter block; an image file has none to match.
  const mtoolsEnv = { MTOOLS_SKIP_CHECK: '1' };
  await runTool(tools.mmd!, ['-i', image, '::/EFI', '::/EFI/BOOT'], 'ESP', opts.run, mtoolsEnv);
  await runTool(tools.mcopy!, ['-i', image, efi, '::/EFI/BOOT/BOOTX64.EFI'], 'ESP', opts.run, mtoolsEnv);
  return image;
}
