/**
 * The ISOs the builder makes boot: a real Debian kernel and a busybox initramfs, in a QEMU
 * machine with SeaBIOS and with OVMF, print the kernel command line they were given. This is
 * the proof that isolinux, the GRUB EFI System Partition, GRUB's escaping and a re-mastered
 * ISO's replayed boot setup all work; the VM end-to-end tests drive whole deployments.
 */
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { buildAgentIso } from '../../drivers/image/iso-builder.js';
import { bootIso, debianKernel, missingBootProbeTools, probeInitrd, type Accel, type BootResult } from '../helpers/boot-probe.js';
import { vmAccel } from '../helpers/vm-lab.js';
import { requireIsoTools, scratchDir } from '../helpers/iso.js';

/** Under TCG on a busy 2-core machine OVMF alone takes tens of seconds to reach GRUB. */
const BOOT_TIMEOUT_MS = 240_000;

describe('agent ISO boot', function () {
  this.timeout(BOOT_TIMEOUT_MS + 60_000);
  let dir: string;
  let kernel: string;
  let ramdisk: string;
  let accel: Accel;
  let hybrid: string;
  // GRUB's special characters, which the builder escapes, and a value unique to this run.
  const cmdline = `console=ttyS0 panic=-1 galvanic.probe=${randomUUID()} ipa-api-url=http://10.0.2.2:6385 x=$y;z&w|v<u>t{s}r#q*p?o[n]m`;

  before(async function () {
    this.timeout(600_000);
    await requireIsoTools(this);
    const missing = await missingBootProbeTools();
    if (missing !== undefined) {
      if (process.env.CI === 'true') throw new Error(`${missing}; CI=true, so this is a failure, not a skip`);
      console.warn(`      skipped: ${missing}`);
      this.skip();
    }
    dir = await scratchDir('iso-boot-test-');
    kernel = await debianKernel();
    ramdisk = path.join(dir, 'probe-initrd.gz');
    await fs.writeFile(ramdisk, await probeInitrd());
    hybrid = path.join(dir, 'hybrid.iso');
    await buildAgentIso({ kernel, ramdisk, cmdline, output: hybrid });
    accel = (await vmAccel(kernel)).accel;
  });

  after(async () => {
    if (dir) await fs.rm(dir, { recursive: true, force: true });
  });

  async function boot(iso: string, firmware: 'bios' | 'uefi'): Promise<BootResult> {
    const result = await bootIso(iso, firmware, accel, BOOT_TIMEOUT_MS, dir);
    console.log(`      ${path.basename(iso)} under ${firmware === 'bios' ? 'SeaBIOS' : 'OVMF'} (${result.accel}): ${result.seconds.toFixed(1)} s`);
    expect(result.cmdline, `no command line on the serial console; it printed:\n${result.serial.slice(-3000)}`).to.be.a('string');
    return result;
  }

  it('boots the hybrid ISO under SeaBIOS through isolinux, with the command line as given', async () => {
    const { cmdline: seen } = await boot(hybrid, 'bios');
    expect(seen).to.equal(`BOOT_IMAGE=/vmlinuz initrd=/initrd text ${cmdline} --`);
  });

  it('boots the same ISO under OVMF through GRUB on its EFI System Partition, with the command line as given', async () => {
    const { cmdline: seen } = await boot(hybrid, 'uefi');
    expect(seen).to.equal(`BOOT_IMAGE=/vmlinuz ${cmdline} --`);
  });

  it('boots a re-mastered ISO with its new command line, under SeaBIOS and OVMF', async () => {
    const remastered = path.join(dir, 'remastered.iso');
    const newCmdline = `console=ttyS0 panic=-1 remastered=${randomUUID()}`;
    await buildAgentIso({ baseIso: hybrid, cmdline: newCmdline, output: remastered });
    expect((await boot(remastered, 'bios')).cmdline).to.equal(`BOOT_IMAGE=/vmlinuz initrd=/initrd text ${newCmdline} --`);
    expect((await boot(remastered, 'uefi')).cmdline).to.equal(`BOOT_IMAGE=/vmlinuz ${newCmdline} --`);
  });
});
