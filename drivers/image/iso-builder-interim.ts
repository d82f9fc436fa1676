/**
 * A stand-in for the agent ISO builder (BIOS only: isolinux, through xorriso), behind the
 * builder's signature, until the real one (BIOS and UEFI) replaces it.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface BuildAgentIsoRequest {
  kernel: string;
  ramdisk: string;
  cmdline: string;
  bootMode?: 'uefi' | 'bios';
  output: string;
  baseIso?: string;
}

/** Writes a bootable ISO with the kernel, the ramdisk and the command line at `output`. */
export async function buildAgentIso(req: BuildAgentIsoRequest): Promise<void> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'galvanic-iso-'));
  try {
    await fs.mkdir(path.join(dir, 'isolinux'));
    await fs.copyFile(req.kernel, path.join(dir, 'vmlinuz'));
    await fs.copyFile(req.ramdisk, path.join(dir, 'initrd'));
    await fs.copyFile('/usr/lib/ISOLINUX/isolinux.bin', path.join(dir, 'isolinux/isolinux.bin'));
    await fs.copyFile('/usr/lib/syslinux/modules/bios/ldlinux.c32', path.join(dir, 'isolinux/ldlinux.c32'));
    await fs.writeFile(path.join(dir, 'isolinux/isolinux.cfg'), `default boot\nlabel boot\nkernel /vmlinuz\nappend initrd=/initrd text ${req.cmdline} --\n`);
    await run('xorriso', ['-as', 'mkisofs', '-r', '-V', 'VMEDIA_BOOT_ISO', '-J', '-l', '-no-emul-boot', '-boot-load-size', '4', '-boot-info-table',
      '-b', 'isolinux/isolinux.bin', '-o', req.output, dir]);
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
}
