/**
 * Booting an ISO in a QEMU virtual machine, far enough to read the kernel command line: a real
 * Debian kernel (linux-image-*-cloud-amd64) and an initramfs of Debian's busybox-static whose
 * init prints /proc/cmdline on the serial console and powers off. The packages are fetched
 * with `apt-get download` once, into a cache outside the repository (GALVANIC_TEST_CACHE, else
 * ~/.cache/galvanic-test).
 */
import { execFile, spawn } from 'node:child_process';
import { constants } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { gzipSync } from 'node:zlib';

const run = promisify(execFile);

export const OVMF_CODE = ['/usr/share/OVMF/OVMF_CODE_4M.fd', '/usr/share/OVMF/OVMF_CODE.fd'];
const OVMF_VARS: Record<string, string> = {
  '/usr/share/OVMF/OVMF_CODE_4M.fd': '/usr/share/OVMF/OVMF_VARS_4M.fd',
  '/usr/share/OVMF/OVMF_CODE.fd': '/usr/share/OVMF/OVMF_VARS.fd',
};

export function cacheDir(): string {
  return process.env.GALVANIC_TEST_CACHE ?? path.join(process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), '.cache'), 'galvanic-test');
}

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

/**
 * The package's files, extracted under the cache (downloaded on first use). Extraction goes to
 * a temporary directory renamed into place, so a concurrent or interrupted run never sees half.
 */
async function debianPackage(name: string): Promise<string> {
  const dir = path.join(cacheDir(), name);
  if (await exists(dir)) return dir;
  await fs.mkdir(cacheDir(), { recursive: true });
  const work = await fs.mkdtemp(path.join(cacheDir(), `.${name}-`));
  try {
    await run('apt-get', ['download', name], { cwd: work, timeout: 300_000 });
    const deb = (await fs.readdir(work)).find((f) => f.endsWith('.deb'));
    if (deb === undefined) throw new Error(`apt-get download ${name} left no .deb`);
    await run('dpkg-deb', ['-x', path.join(work, deb), path.join(work, 'root')]);
    await fs.rename(path.join(work, 'root'), dir).catch(async (err: NodeJS.ErrnoException) => {
      if (!(await exists(dir))) throw err;
    });
  } finally {
    await fs.rm(work, { recursive: true, force: true });
  }
  return dir;
}

/** The current Debian cloud kernel's image, by the metapackage's dependency. */
export async function debianKernel(): Promise<string> {
  const { stdout } = await run('apt-cache', ['depends', 'linux-image-cloud-amd64']);
  const pkg = /Depends: (linux-image-[^\s]+-cloud-amd64)/.exec(stdout)?.[1];
  if (pkg === undefined) throw new Error(`apt-cache depends linux-image-cloud-amd64 names no kernel:\n${stdout}`);
  const boot = path.join(await debianPackage(pkg), 'boot');
  const image = (await fs.readdir(boot)).find((f) => f.startsWith('vmlinuz-'));
  if (image === undefined) throw new Error(`${pkg} has no /boot/vmlinuz-*`);
  return path.join(boot, image);
}

/** One entry of a cpio "newc" archive, the format of an initramfs. */
function cpioEntry(name: string, mode: number, data: Buffer = Buffer.alloc(0), rdev: [number, number] = [0, 0]): Buffer {
  const hex = (n: number) => n.toString(16).padStart(8, '0');
  const nameBytes = Buffer.from(`${name}\0`);
  const header = Buffer.from(`070701${[0, mode, 0, 0, 1, 0, data.length, 0, 0, rdev[0], rdev[1], nameBytes.length, 0].map(hex).join('')}`);
  const pad = (n: number) => Buffer.alloc((4 - (n % 4)) % 4);
  return Buffer.concat([header, nameBytes, pad(header.length + nameBytes.length), data, pad(data.length)]);
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
  return gzipSync(Buffer.concat([
    cpioEntry('bin', 0o40755),
    cpioEntry('dev', 0o40755),
    cpioEntry('dev/console', 0o20600, undefined, [5, 1]),
    cpioEntry('bin/busybox', 0o100755, busybox),
    cpioEntry('init', 0o100755, Buffer.from(init)),
    cpioEntry('TRAILER!!!', 0),
  ]));
}

export type Accel = 'kvm' | 'tcg';

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
    child.once('error', reject);
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      if (code !== 0 && signal !== 'SIGKILL') reject(new Error(`qemu exited with ${code ?? signal}: ${stderr}`));
      else resolve();
    });
  });
  const seconds = (performance.now() - started) / 1000;
  const serial = (await fs.readFile(serialLog, 'latin1').catch(() => '')).replace(/\r/g, '');
  const line = serial.split('\n').find((l) => l.startsWith(CMDLINE_MARK));
  return { cmdline: line?.slice(CMDLINE_MARK.length + 1), serial, accel, seconds };
}

/**
 * KVM when /dev/kvm is usable and boots a kernel (some nested hosts' KVM boots SeaBIOS but
 * stalls in the kernel), else TCG. GALVANIC_QEMU_ACCEL=kvm|tcg skips the probe.
 */
export async function chooseAccel(probeIso: string, work: string): Promise<{ accel: Accel; probe?: BootResult }> {
  const forced = process.env.GALVANIC_QEMU_ACCEL;
  if (forced === 'kvm' || forced === 'tcg') return { accel: forced };
  if (!(await exists('/dev/kvm', constants.R_OK | constants.W_OK))) return { accel: 'tcg' };
  const probe = await bootIso(probeIso, 'bios', 'kvm', 10_000, work).catch(() => undefined);
  return { accel: probe?.cmdline !== undefined ? 'kvm' : 'tcg', probe };
}
