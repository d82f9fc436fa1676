/**
 * One QEMU virtual machine: the command line it is started with, and what a BMC does to it
 * through QMP (reset, boot order, media change, power down, quit). Its devices are fixed for its
 * life, so that media and boot order change without a restart, as on a server:
 *
 *   disk  virtio-blk, a sparse raw file                      (boot target Hdd)
 *   cd    IDE CD-ROM on the second channel (removable)       (Cd, UsbCd)
 *   usb   removable SCSI disk on virtio-scsi, write-protected (Usb: the virtual USB stick; a
 *         guest sees it as a removable disk, as a USB stick appears)
 *   nic0  virtio-net with its option ROM (iPXE), on QEMU's user network (Pxe), or on a tap of a
 *         network namespace (spec.tap)
 *   nic1  virtio-net on a user network that reaches nothing (a second port, as the inventory says)
 *
 * The serial console goes to a file (appended over the machine's life); QEMU's own messages to
 * qemu.log beside it.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { EventEmitter } from 'node:events';
import fs from 'node:fs';
import path from 'node:path';
import { Qmp } from './qmp.js';

export type Firmware = 'bios' | 'uefi';
/** The machine's devices that can be booted. */
export type BootDevice = 'disk' | 'cd' | 'usb' | 'nic0';
/** The devices that take removable media. */
export type MediaDevice = 'cd' | 'usb';

/** What does not change over the machine's life. */
export interface MachineSpec {
  name: string;
  /** The machine's own directory (QMP socket, serial log, disk, UEFI variables). */
  dir: string;
  qemu: string;
  accel: 'kvm' | 'tcg';
  memoryMiB: number;
  cpus: number;
  /** SMBIOS system UUID (what the BMC reports as the system's UUID). */
  uuid: string;
  serial: string;
  /** MACs of the two NICs. */
  macs: [string, string];
  diskBytes: number;
  ovmfCode: string;
  ovmfVars: string;
  /** A host port forwarded to the guest's 9999 (the agent's port), on 127.0.0.1. */
  agentPort?: number;
  /**
   * nic0 on a tap device of a network namespace instead of QEMU's user network (a provisioning
   * network with a DHCP server of its own): QEMU runs in that namespace.
   */
  tap?: { netns: string; ifname: string };
}

/** What a power on boots. */
export interface BootSetup {
  firmware: Firmware;
  /** Tried first; the others follow in the default order. */
  first: BootDevice;
  /** Image files in the removable devices (null: empty). */
  media: Record<MediaDevice, string | null>;
}

const DEFAULT_ORDER: readonly BootDevice[] = ['disk', 'cd', 'usb', 'nic0'];
const QMP_TIMEOUT_MS = 10_000;
const QUIT_GRACE_MS = 5_000;
const RESET_TIMEOUT_MS = 10_000;

/** Boot indexes: `first` at 0, the rest in the default order after it. */
export function bootOrder(first: BootDevice): Record<BootDevice, number> {
  const order = [first, ...DEFAULT_ORDER.filter((d) => d !== first)];
  return Object.fromEntries(order.map((d, i) => [d, i])) as Record<BootDevice, number>;
}

/** A comma in a QEMU option value is written twice. */
function esc(value: string): string {
  return value.replace(/,/g, ',,');
}

let setprivChecked: boolean | undefined;

/** Whether setpriv can tie QEMU's life to ours (util-linux's --pdeathsig). */
function hasSetpriv(): boolean {
  if (setprivChecked === undefined) {
    const r = spawnSync('setpriv', ['--help'], { encoding: 'utf8' });
    setprivChecked = r.status === 0 && r.stdout.includes('--pdeathsig');
  }
  return setprivChecked;
}

/** QEMU's arguments for a power on with `boot`. */
export function qemuArgs(spec: MachineSpec, boot: BootSetup): string[] {
  const order = bootOrder(boot.first);
  const media = (device: MediaDevice, extra: string) => {
    const file = boot.media[device];
    return `if=none,id=${device}-drive,readonly=on${extra}${file ? `,file=${esc(file)},format=raw` : ''}`;
  };
  const args = [
    '-name', spec.name,
    '-machine', `pc,accel=${spec.accel}`,
    ...(spec.accel === 'kvm' ? ['-cpu', 'host'] : []),
    '-m', String(spec.memoryMiB),
    '-smp', String(spec.cpus),
    '-nodefaults', '-no-user-config', '-nographic',
    '-smbios', `type=1,manufacturer=Galvanic,product=QEMU virtual machine,serial=${esc(spec.serial)},uuid=${spec.uuid}`,
    '-chardev', `file,id=serial0,path=${esc(path.join(spec.dir, 'serial.log'))},append=on`,
    '-serial', 'chardev:serial0',
    '-qmp', `unix:${esc(path.join(spec.dir, 'qmp.sock'))},server=on,wait=off`,
    '-drive', `if=none,id=disk-drive,file=${esc(path.join(spec.dir, 'disk.img'))},format=raw`,
    '-device', `virtio-blk-pci,drive=disk-drive,id=disk,bootindex=${order.disk}`,
    '-drive', media('cd', ',media=cdrom'),
    '-device', `ide-cd,drive=cd-drive,bus=ide.1,unit=0,id=cd,bootindex=${order.cd}`,
    '-device', 'virtio-scsi-pci,id=scsi0',
    '-drive', media('usb', ''),
    '-device', `scsi-hd,drive=usb-drive,removable=on,id=usb,bootindex=${order.usb}`,
    '-netdev', spec.tap
      ? `tap,id=net0,ifname=${esc(spec.tap.ifname)},script=no,downscript=no`
      : `user,id=net0${spec.agentPort ? `,hostfwd=tcp:127.0.0.1:${spec.agentPort}-:9999` : ''}`,
    '-device', `virtio-net-pci,netdev=net0,mac=${spec.macs[0]},id=nic0,bootindex=${order.nic0}`,
    '-netdev', 'user,id=net1,restrict=on',
    '-device', `virtio-net-pci,netdev=net1,mac=${spec.macs[1]},id=nic1,romfile=`,
  ];
  if (boot.firmware === 'uefi') {
    args.push('-drive', `if=pflash,format=raw,unit=0,readonly=on,file=${esc(spec.ovmfCode)}`);
    args.push('-drive', `if=pflash,format=raw,unit=1,file=${esc(path.join(spec.dir, 'OVMF_VARS.fd'))}`);
  }
  return args;
}

export interface MachineExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Whether we asked for it (a power off), or the guest or QEMU ended it. */
  asked: boolean;
  /** The end of QEMU's own messages, when it ended on its own. */
  stderr: string;
}

/** A running QEMU process and its QMP connection. */
export class Machine extends EventEmitter<{ exit: [MachineExit] }> {
  private asked = false;
  private readonly exited: Promise<MachineExit>;

  private constructor(
    readonly spec: MachineSpec,
    readonly boot: BootSetup,
    private readonly child: ChildProcess,
    readonly qmp: Qmp,
    ended: Promise<{ code: number | null; signal: NodeJS.Signals | null }>,
  ) {
    super();
    this.exited = ended.then(({ code, signal }) => {
      qmp.close();
      const exit = { code, signal, asked: this.asked, stderr: this.asked ? '' : tail(path.join(spec.dir, 'qemu.log')) };
      this.emit('exit', exit);
      return exit;
    });
  }

  /** Prepares the machine's directory (disk, UEFI variables) and starts QEMU; resolves once QMP answers. */
  static async start(spec: MachineSpec, boot: BootSetup): Promise<Machine> {
    await fs.promises.mkdir(spec.dir, { recursive: true });
    const disk = path.join(spec.dir, 'disk.img');
    if (!fs.existsSync(disk)) await fs.promises.writeFile(disk, '').then(() => fs.promises.truncate(disk, spec.diskBytes));
    const vars = path.join(spec.dir, 'OVMF_VARS.fd');
    // The machine's UEFI variables (its NVRAM) live as long as it does.
    if (boot.firmware === 'uefi' && !fs.existsSync(vars)) await fs.promises.copyFile(spec.ovmfVars, vars);
    const sock = path.join(spec.dir, 'qmp.sock');
    await fs.promises.rm(sock, { force: true });
    const log = await fs.promises.open(path.join(spec.dir, 'qemu.log'), 'a');
    // `ip netns exec` enters the namespace and execs QEMU: one process, whose death we see.
    const qemu = spec.tap ? ['ip', 'netns', 'exec', spec.tap.netns, spec.qemu] : [spec.qemu];
    const args = [...qemu.slice(1), ...qemuArgs(spec, boot)];
    // QEMU dies with us: a test that crashes must not leave machines running.
    const [cmd, argv] = hasSetpriv() ? ['setpriv', ['--pdeathsig', 'KILL', '--', qemu[0], ...args]] : [qemu[0], args];
    const child = spawn(cmd, argv, { stdio: ['ignore', 'ignore', log.fd] });
    await log.close();
    const ended = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
    const early = new Promise<never>((_, reject) => {
      child.once('error', reject);
      void ended.then(({ code, signal }) => reject(new Error(`QEMU exited at start (${signal ?? `code ${code}`}): ${tail(path.join(spec.dir, 'qemu.log'))}`)));
    });
    let qmp: Qmp;
    try {
      qmp = await Promise.race([Qmp.connect(sock, QMP_TIMEOUT_MS), early]);
    } catch (err) {
      child.kill('SIGKILL');
      throw err;
    }
    early.catch(() => {});
    return new Machine(spec, boot, child, qmp, ended);
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  /** Makes the next reset (and a reboot by the guest) boot `first`, then the default order. */
  async setBootOrder(first: BootDevice): Promise<void> {
    const order = bootOrder(first);
    // Indexes must stay unique at every step: clear them all, then set them.
    for (const d of DEFAULT_ORDER) await this.qmp.execute('qom-set', { path: `/machine/peripheral/${d}`, property: 'bootindex', value: -1 });
    for (const d of DEFAULT_ORDER) await this.qmp.execute('qom-set', { path: `/machine/peripheral/${d}`, property: 'bootindex', value: order[d] });
  }

  /** Puts an image file into a removable device, or empties it (null). */
  async changeMedium(device: MediaDevice, file: string | null): Promise<void> {
    if (file === null) {
      await this.qmp.execute('eject', { id: device, force: true });
      return;
    }
    await this.qmp.execute('blockdev-change-medium', { id: device, filename: file, format: 'raw', 'read-only-mode': 'read-only' });
  }

  /**
   * A hard reset (the reset button): the firmware runs again with the boot order in force.
   * Resolves once QEMU has reset the machine (its RESET event), which is when it reads the boot
   * order: a change made after that is for the next reset.
   */
  async reset(): Promise<void> {
    let onEvent: (name: string) => void = () => {};
    let timer: NodeJS.Timeout | undefined;
    const done = new Promise<void>((resolve, reject) => {
      timer = setTimeout(() => reject(new Error('QEMU did not report the reset')), RESET_TIMEOUT_MS);
      onEvent = (name) => {
        if (name === 'RESET') resolve();
      };
      this.qmp.on('event', onEvent);
    });
    // Handled here too: it may time out while system_reset is still being answered.
    done.catch(() => {});
    try {
      await this.qmp.execute('system_reset');
      await done;
    } finally {
      clearTimeout(timer);
      this.qmp.off('event', onEvent);
    }
  }

  /** Presses the power button (ACPI): the guest may shut down, or not. */
  async powerDown(): Promise<void> {
    await this.qmp.execute('system_powerdown');
  }

  /** Pulls the plug: QMP quit, SIGKILL when QEMU does not go. Resolves once it has exited. */
  async quit(): Promise<MachineExit> {
    this.asked = true;
    if (this.child.exitCode === null && this.child.signalCode === null) {
      await this.qmp.execute('quit').catch(() => this.child.kill('SIGKILL'));
      const timer = setTimeout(() => this.child.kill('SIGKILL'), QUIT_GRACE_MS);
      const exit = await this.exited;
      clearTimeout(timer);
      return exit;
    }
    return this.exited;
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }
}

/** The last lines of a log file, for an error message. */
function tail(file: string, max = 2000): string {
  try {
    const text = fs.readFileSync(file, 'utf8');
    return text.slice(-max).trim();
  } catch {
    return '';
  }
}
