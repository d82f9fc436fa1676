/**
 * ISO images for the VM tests that do not go through Galvanic: a boot ISO of a kernel and a
 * ramdisk (isolinux for BIOS, GRUB in an EFI System Partition image for UEFI, laid out as
 * Ironic's images.create_boot_iso lays it out) and an ISO 9660 config drive, with Debian's
 * xorriso, isolinux, grub-mkimage, dosfstools and mtools.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const VOLUME = 'VMEDIA_BOOT_ISO';
const GRUB_MODULES = ['part_gpt', 'part_msdos', 'fat', 'iso9660', 'normal', 'linux', 'configfile', 'search', 'echo', 'test', 'all_video'];

/** Writes `out`: an ISO that boots `kernel` with `initrd` and `cmdline`, in BIOS and UEFI mode. */
export async function buildBootIso(opts: { kernel: string; initrd: string; cmdline: string; out: string }): Promise<void> {
  const dir = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'vm-iso-'));
  try {
    const root = path.join(dir, 'root');
    await fs.promises.mkdir(path.join(root, 'isolinux'), { recursive: true });
    await fs.promises.copyFile(opts.kernel, path.join(root, 'vmlinuz'));
    await fs.promises.copyFile(opts.initrd, path.join(root, 'initrd'));
    await fs.promises.copyFile('/usr/lib/ISOLINUX/isolinux.bin', path.join(root, 'isolinux/isolinux.bin'));
    await fs.promises.copyFile('/usr/lib/syslinux/modules/bios/ldlinux.c32', path.join(root, 'isolinux/ldlinux.c32'));
    await fs.promises.writeFile(path.join(root, 'isolinux/isolinux.cfg'), `default boot\nprompt 0\ntimeout 0\nlabel boot\n  kernel /vmlinuz\n  append initrd=/initrd ${opts.cmdline}\n`);

    // UEFI: GRUB as the removable-media loader of an ESP image, finding the kernel on the ISO by its label.
    const grubCfg = path.join(dir, 'grub.cfg');
    await fs.promises.writeFile(grubCfg, `set timeout=0\nsearch --no-floppy --set=root --label ${VOLUME}\nmenuentry boot {\n  linux /vmlinuz ${opts.cmdline}\n  initrd /initrd\n}\n`);
    const efi = path.join(dir, 'bootx64.efi');
    await run('grub-mkimage', ['-O', 'x86_64-efi', '-p', '/EFI/BOOT', '-o', efi, ...GRUB_MODULES]);
    const esp = path.join(root, 'isolinux/efiboot.img');
    await run('mkfs.vfat', ['-C', esp, '4096']);
    await run('mmd', ['-i', esp, '::/EFI', '::/EFI/BOOT']);
    await run('mcopy', ['-i', esp, efi, '::/EFI/BOOT/BOOTX64.EFI']);
    await run('mcopy', ['-i', esp, grubCfg, '::/EFI/BOOT/grub.cfg']);
    // GRUB loaded from the ESP image of a CD takes the CD itself as its root: the ISO holds the configuration too.
    await fs.promises.mkdir(path.join(root, 'EFI/BOOT'), { recursive: true });
    await fs.promises.copyFile(grubCfg, path.join(root, 'EFI/BOOT/grub.cfg'));

    await run('xorriso', [
      '-as', 'mkisofs', '-quiet', '-r', '-J', '-l', '-V', VOLUME, '-o', opts.out,
      '-b', 'isolinux/isolinux.bin', '-c', 'isolinux/boot.cat', '-no-emul-boot', '-boot-load-size', '4', '-boot-info-table',
      '-eltorito-alt-boot', '-e', 'isolinux/efiboot.img', '-no-emul-boot',
      root,
    ]);
  } finally {
    await fs.promises.rm(dir, { recursive: true, force: true });
  }
}

/** Writes `out`: an ISO 9660 config drive (label config-2) with openstack/latest/{meta_data.json,user_data}. */
export async function buildConfigDrive(opts: { metaData: object; userData: string; out: string }): Promise<void> {
  const dir = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'vm-cd-'));
  try {
    const latest = path.join(dir, 'openstack/latest');
    await fs.promises.mkdir(latest, { recursive: true });
    await fs.promises.writeFile(path.join(latest, 'meta_data.json'), JSON.stringify(opts.metaData));
    await fs.promises.writeFile(path.join(latest, 'user_data'), opts.userData);
    await run('xorriso', ['-as', 'mkisofs', '-quiet', '-r', '-J', '-V', 'config-2', '-o', opts.out, dir]);
  } finally {
    await fs.promises.rm(dir, { recursive: true, force: true });
  }
}
