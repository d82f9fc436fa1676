/**
 * Booting an ISO in a QEMU virtual machine, far enough to read the kernel command line: a real
 * Debian kernel (linux-image-*-cloud-amd64) and an initramfs of Debian's busybox-static whose
 * init prints /proc/cmdline on the serial console and powers off. The packages come from the
 * VM lab's cache (vm-ramdisk.ts).
 */
import { execFile, spawn } from 'node:child_process';
import { constants } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { gzipSync } from 'node:zlib';
import { cpioNewc, debianPackage } from './vm-ramdisk.js';
import type { Accel } from './vm-lab.js';

export { debianKernel } from './vm-ramdisk.js';
export type { Accel } from './vm-lab.js';

const run = promisify(execFile);

export const OVMF_CODE = ['/usr/share/OVMF/OVMF_CODE_4M.fd', '/usr/share/OVMF/OVMF_CODE.fd'];
const OVMF_VARS: Record<string, string> = {
  '/usr/share/OVMF/OVMF_CODE_4M.fd': '/usr/share/OVMF/OVMF_VARS_4M.fd',
  '/usr/share/OVMF/OVMF_CODE.fd': '/usr/share/OVMF/OVMF_VARS.fd',
};

async function exists(p: string, mode = constants.R_OK): Promise<boolean> {
  return fs.access(p, mode).then(() => true, () => false);
}

/** What the boot probe lacks on this machine (qemu, OVMF, apt-get), with the Debian packages. */
export async function missingBootProbeTools(): Promise<string | undefined> {
  const missing: string[] = [];
  if (!(await run('qemu-system-x86_64', ['--version']).then(() => true, () => false))) missing.push('qemu-system-x86_64 (Debian package qemu-system-x86)');
  if (!(await Promise.all(OVMF_CODE.map((f) => exists(f)))).some(Boolean)) missing.push('OVMF (Debian package ovmf)');
  if (!(await run('apt-get', ['--version']).then(() => true, () => false))) missing.push('apt-get, to fetch a Debian kernel and busybox-static');
  return missing.length > 0 ? `the ISO boot probe needs ${missing.join(', ')}` : undefined;
}

/** The line the probe's init prints, then the command line. */
export const CMDLINE_MARK = 'BOOT-PROBE-CMDLINE:';

/** An initramfs whose init prints /proc/cmdline after CMDLINE_MARK and powers the machine off. */
export async function probeInitrd(): Promise<Buffer> {
  const busybox = await fs.readFile(path.join(await debianPackage('busybox-static'), 'bin/busybox'));
  const init = [
    '#!/bin/busybox sh',
    '/bin/busybox mkdir -p /proc',
    '/bin/busybox mount -t proc proc /proc',
    `echo "${CMDLINE_MARK} $(/bin/busybox cat /proc/cmdline)"`,
    '/bin/busybox poweroff -f',
    '',
  ].join('\n');
  return gzipSync(cpioNewc([
    { name: 'bin', mode: 0o40755 },
    { name: 'dev', mode: 0o40755 },
    { name: 'dev/console', mode: 0o20600, rdev: [5, 1] },
    { name: 'bin/busybox', mode: 0o100755, data: busybox },
    { name: 'init', mode: 0o100755, data: Buffer.from(init) },
  ]));
}

export interface BootResult {
  /** The kernel command line the machine printed, or undefined when it printed none in time. */
  cmdline?: string;
  serial: string;
  accel: Accel;
  seconds: number;
}

/**
 * Boots `iso` from a CD-ROM in a q35 machine with SeaBIOS ('bios') or OVMF ('uefi'), until the
 * machine powers off or `timeoutMs` passes.
 */
export async function bootIso(iso: string, firmware: 'bios' | 'uefi', accel: Accel, timeoutMs: number, work: string): Promise<BootResult> {
  const serialLog = path.join(work, `serial-${firmware}-${accel}-${Date.now()}.log`);
  const args = ['-machine', `q35,accel=${accel}`, '-m', '256', '-display', 'none', '-monitor', 'none', '-nic', 'none',
    '-no-reboot', '-serial', `file:${serialLog}`, '-cdrom', iso];
  if (firmware === 'uefi') {
    const code = (await Promise.all(OVMF_CODE.map(async (f) => ((await exists(f)) ? f : undefined)))).find((f) => f !== undefined)!;
    const vars = path.join(work, `ovmf-vars-${Date.now()}.fd`);
    await fs.copyFile(OVMF_VARS[code], vars);
    args.push('-drive', `if=pflash,format=raw,unit=0,readonly=on,file=${code}`, '-drive', `if=pflash,format=raw,unit=1,file=${vars}`);
  }
  const started = performance.now();
  await new Promise<void>((resolve, reject) => {
    const child = spawn('qemu-system-x86_64', args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => { stderr += d.toString(); });
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    // A machine stuck at GRUB's prompt or in a kernel panic will not power off: stop waiting.
    const watch = setInterval(() => {
      fs.readFile(serialLog, 'latin1').then((text) => {
        if (/grub> |Kernel panic/.test(text)) child.kill('SIGKILL');
      }, () => undefined);
    }, 1000);
    child.once('error', reject);
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      clearInterval(watch);
      if (code !== 0 && signal !== 'SIGKILL') reject(new Error(`qemu exited with ${code ?? signal}: ${stderr}`));
      else resolve();
    });
  });
  const seconds = (performance.now() - started) / 1000;
  const serial = (await fs.readFile(serialLog, 'latin1').catch(() => '')).replace(/\r/g, '');
  const line = serial.split('\n').find((l) => l.startsWith(CMDLINE_MARK));
  return { cmdline: line?.slice(CMDLINE_MARK.length + 1), serial, accel, seconds };
}
