/**
 * The test ramdisk of the VM tests, built from Debian packages by the test (never committed):
 * Debian's cloud kernel (linux-image-cloud-amd64's versioned package) and busybox-static, with
 * the init of test/fixtures/vm-ramdisk/ and the kernel modules a QEMU machine of sim/qemu needs
 * (virtio NIC and SCSI, IDE CD-ROM, ISO 9660). Packages come through apt-get download and
 * dpkg-deb, unpacked once per version into a cache outside the repository (GALVANIC_TEST_CACHE,
 * else $XDG_CACHE_HOME or ~/.cache, /galvanic-test); the ramdisk is cached there too, keyed by the
 * packages' versions and the init's content, so that a build happens once per machine.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { gzipSync } from 'node:zlib';
import { onPath } from './baremetal.js';

const run = promisify(execFile);
/** The package root (this file runs as dist/test/helpers/vm-ramdisk.js); fixtures stay in the source tree. */
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

export const RAMDISK_FIXTURES = path.join(ROOT, 'test/fixtures/vm-ramdisk');
const KERNEL_META = 'linux-image-cloud-amd64';
const BUSYBOX = 'busybox-static';
/** What the machine's devices need, beyond what the kernel has built in; dependencies follow. */
const MODULES = ['virtio_net', 'virtio_pci', 'virtio_blk', 'virtio_scsi', 'sd_mod', 'sr_mod', 'ata_piix', 'isofs'];

export interface TestRamdisk {
  kernel: string;
  initrd: string;
  /** The versioned kernel package, e.g. linux-image-6.1.0-28-cloud-amd64 6.1.119-1. */
  packages: string[];
}

export function cacheDir(): string {
  return process.env.GALVANIC_TEST_CACHE || path.join(process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache'), 'galvanic-test');
}

/** Why the VM tests cannot run here (a tool missing), or null. */
export function vmLabMissing(): string | null {
  const tools = ['qemu-system-x86_64', 'apt-get', 'apt-cache', 'dpkg-deb', 'xorriso', 'grub-mkimage', 'mkfs.vfat', 'mmd', 'mcopy'];
  const missing = tools.filter((t) => !onPath(t));
  if (missing.length) return `${missing.join(', ')} not on PATH`;
  for (const f of ['/usr/share/OVMF/OVMF_CODE.fd', '/usr/share/OVMF/OVMF_VARS.fd', '/usr/lib/ISOLINUX/isolinux.bin', '/usr/lib/syslinux/modules/bios/ldlinux.c32', '/usr/lib/grub/x86_64-efi/linux.mod']) {
    if (!fs.existsSync(f)) return `${f} is missing`;
  }
  return null;
}

/** Skips the suite when the VM lab's tools are missing, or fails it under CI. */
export function requireVmLab(ctx: Mocha.Context, what: string): void {
  const missing = vmLabMissing();
  if (!missing) return;
  const msg = `${missing} (apt-get install qemu-system-x86 ovmf xorriso isolinux syslinux-common grub-efi-amd64-bin dosfstools mtools)`;
  if (process.env.CI === 'true') throw new Error(`${msg}; CI=true, so this is a failure, not a skip`);
  process.stderr.write(`      skipping the ${what}: ${msg}.\n`);
  ctx.skip();
}

/** The version apt would install. */
async function candidate(pkg: string): Promise<string> {
  const { stdout } = await run('apt-cache', ['show', '--no-all-versions', pkg]);
  const m = /^Version: (\S+)$/m.exec(stdout);
  if (!m) throw new Error(`apt-cache knows no version of ${pkg}: run apt-get update`);
  return m[1];
}

/** The versioned kernel package that the cloud kernel's metapackage depends on. */
async function kernelPackage(): Promise<string> {
  const { stdout } = await run('apt-cache', ['depends', KERNEL_META]).catch(() => ({ stdout: '' }));
  const m = /Depends: (linux-image-\S+)/.exec(stdout);
  if (!m) throw new Error(`apt-cache depends ${KERNEL_META} names no kernel package: run apt-get update`);
  return m[1];
}

/** Downloads and unpacks a package's candidate version once; returns the directory it is unpacked in. */
export async function debianPackage(pkg: string): Promise<string> {
  return unpacked(pkg, await candidate(pkg));
}

/** The current Debian cloud kernel's image (/boot/vmlinuz-*), by the metapackage's dependency. */
export async function debianKernel(): Promise<string> {
  const boot = path.join(await debianPackage(await kernelPackage()), 'boot');
  const image = (await fs.promises.readdir(boot)).find((f) => f.startsWith('vmlinuz-'));
  if (image === undefined) throw new Error(`the kernel package has no ${boot}/vmlinuz-*`);
  return path.join(boot, image);
}

/** Downloads and unpacks a package once; returns the directory it is unpacked in. */
async function unpacked(pkg: string, version: string): Promise<string> {
  const dir = path.join(cacheDir(), 'debs', `${pkg}_${version.replace(/[^\w.+~-]/g, '_')}`);
  if (fs.existsSync(path.join(dir, '.done'))) return dir;
  await fs.promises.mkdir(cacheDir(), { recursive: true });
  const work = await fs.promises.mkdtemp(path.join(cacheDir(), 'tmp-'));
  try {
    await run('apt-get', ['download', `${pkg}=${version}`], { cwd: work, maxBuffer: 1 << 24, timeout: 300_000 });
    const deb = (await fs.promises.readdir(work)).find((f) => f.endsWith('.deb'));
    if (!deb) throw new Error(`apt-get download ${pkg}=${version} left no .deb`);
    const into = path.join(work, 'root');
    await run('dpkg-deb', ['-x', path.join(work, deb), into]);
    await fs.promises.writeFile(path.join(into, '.done'), `${pkg} ${version}\n`);
    await fs.promises.rm(dir, { recursive: true, force: true });
    await fs.promises.mkdir(path.dirname(dir), { recursive: true });
    await fs.promises.rename(into, dir).catch((err: NodeJS.ErrnoException) => {
      // Another process unpacked it first.
      if (!fs.existsSync(path.join(dir, '.done'))) throw err;
    });
    return dir;
  } finally {
    await fs.promises.rm(work, { recursive: true, force: true });
  }
}

/** `depends=` of a kernel module's .modinfo section. */
function moduleDepends(ko: Buffer): string[] {
  const at = ko.indexOf('\0depends=');
  if (at < 0) return [];
  const end = ko.indexOf(0, at + 1);
  return ko.subarray(at + 9, end).toString('utf8').split(',').filter(Boolean);
}

/** The modules to load, dependencies first, as [name, file]. */
function moduleOrder(modulesDir: string, wanted: readonly string[]): Array<[string, string]> {
  const files = new Map<string, string>();
  const walk = (dir: string) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith('.ko')) files.set(e.name.slice(0, -3).replace(/-/g, '_'), p);
    }
  };
  walk(path.join(modulesDir, 'kernel'));
  const order: Array<[string, string]> = [];
  const seen = new Set<string>();
  const visit = (name: string) => {
    const key = name.replace(/-/g, '_');
    if (seen.has(key)) return;
    seen.add(key);
    const file = files.get(key);
    // Not a module of this kernel: built in (modules.builtin) or not needed on this kernel.
    if (!file) return;
    for (const dep of moduleDepends(fs.readFileSync(file))) visit(dep);
    order.push([key, file]);
  };
  for (const w of wanted) {
    if (!files.has(w) && !fs.readFileSync(path.join(modulesDir, 'modules.builtin'), 'utf8').includes(`/${w}.ko`)) throw new Error(`the kernel has no module ${w}`);
    visit(w);
  }
  return order;
}

interface CpioEntry {
  name: string;
  mode: number;
  data?: Buffer;
  /** Device numbers of a character device. */
  rdev?: [number, number];
}

/** An archive in the "newc" cpio format the kernel unpacks as its initramfs. */
export function cpioNewc(entries: readonly CpioEntry[]): Buffer {
  const parts: Buffer[] = [];
  const pad = (n: number) => Buffer.alloc((4 - (n % 4)) % 4);
  const hex = (n: number) => n.toString(16).padStart(8, '0');
  let ino = 1;
  const trailer: CpioEntry = { name: 'TRAILER!!!', mode: 0 };
  for (const e of [...entries, trailer]) {
    const data = e.data ?? Buffer.alloc(0);
    const name = Buffer.from(`${e.name}\0`);
    const rdev = e.rdev ?? [0, 0];
    const header = `070701${[e === trailer ? 0 : ino++, e.mode, 0, 0, 1, 0, data.length, 0, 0, rdev[0], rdev[1], name.length, 0].map(hex).join('')}`;
    parts.push(Buffer.from(header), name, pad(110 + name.length), data, pad(data.length));
  }
  return Buffer.concat(parts);
}

const DIR = 0o040755;
const EXEC = 0o100755;
const FILE = 0o100644;
const CHAR = 0o020600;

let built: Promise<TestRamdisk> | undefined;

/** Builds (or finds in the cache) the test kernel and ramdisk; once per process. */
export function testRamdisk(): Promise<TestRamdisk> {
  built ??= build();
  return built;
}

async function build(): Promise<TestRamdisk> {
  await fs.promises.mkdir(cacheDir(), { recursive: true });
  const kpkg = await kernelPackage();
  const [kver, bver] = await Promise.all([candidate(kpkg), candidate(BUSYBOX)]);
  const init = await fs.promises.readFile(path.join(RAMDISK_FIXTURES, 'init'));
  const script = await fs.promises.readFile(path.join(RAMDISK_FIXTURES, 'udhcpc.script'));
  const key = createHash('sha256').update(`${kpkg} ${kver}\n${BUSYBOX} ${bver}\n${MODULES.join(',')}\n`).update(init).update(script).digest('hex').slice(0, 16);
  const out = path.join(cacheDir(), `ramdisk-${key}`);
  const result: TestRamdisk = { kernel: path.join(out, 'vmlinuz'), initrd: path.join(out, 'initrd.gz'), packages: [`${kpkg} ${kver}`, `${BUSYBOX} ${bver}`] };
  if (fs.existsSync(result.initrd) && fs.existsSync(result.kernel)) return result;

  const [kdir, bdir] = await Promise.all([unpacked(kpkg, kver), unpacked(BUSYBOX, bver)]);
  const release = (await fs.promises.readdir(path.join(kdir, 'lib/modules')))[0];
  const modules = moduleOrder(path.join(kdir, 'lib/modules', release), MODULES);
  const entries: CpioEntry[] = [
    ...['bin', 'dev', 'etc', 'lib', 'lib/modules', 'mnt', 'proc', 'sys', 'tmp'].map((name) => ({ name, mode: DIR })),
    { name: 'dev/console', mode: CHAR, rdev: [5, 1] },
    { name: 'bin/busybox', mode: EXEC, data: await fs.promises.readFile(path.join(bdir, 'bin/busybox')) },
    { name: 'init', mode: EXEC, data: init },
    { name: 'etc/udhcpc.script', mode: EXEC, data: script },
    { name: 'lib/modules/load-order', mode: FILE, data: Buffer.from(modules.map(([n]) => `${n}\n`).join('')) },
  ];
  for (const [name, file] of modules) entries.push({ name: `lib/modules/${name}.ko`, mode: FILE, data: await fs.promises.readFile(file) });

  const tmp = await fs.promises.mkdtemp(path.join(cacheDir(), 'tmp-'));
  try {
    await fs.promises.writeFile(path.join(tmp, 'initrd.gz'), gzipSync(cpioNewc(entries), { level: 6 }));
    await fs.promises.copyFile(path.join(kdir, 'boot', `vmlinuz-${release}`), path.join(tmp, 'vmlinuz'));
    await fs.promises.rename(tmp, out).catch((err: NodeJS.ErrnoException) => {
      if (!fs.existsSync(result.initrd)) throw err;
    });
  } finally {
    await fs.promises.rm(tmp, { recursive: true, force: true });
  }
  return result;
}
