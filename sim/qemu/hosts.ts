/**
 * QEMU-backed hosts for the Redfish simulator: each BMC's ComputerSystem is a QEMU virtual
 * machine. The simulator keeps its Redfish model (power, boot override, virtual media) and tells
 * this class what happens through its hooks; this class makes the machine follow:
 *
 *   power on        QEMU starts, booting what the override picked (SeaBIOS for Legacy, OVMF for
 *                   UEFI), with the inserted images in its CD drive and USB stick
 *   restart         QMP system_reset after the boot order is set (a new QEMU if the boot mode changed)
 *   ForceOff        QMP quit
 *   GracefulShutdown  ACPI power button, then quit if the guest is still up after a grace period
 *   InsertMedia     the BMC downloads the image (as a BMC that mounts an image fetches it), then
 *                   puts it into the running machine (QMP blockdev-change-medium)
 *   EjectMedia      QMP eject, and the download is removed
 *
 * A guest that powers itself off (or a QEMU that dies) turns the system Off. Machines live in a
 * work directory of their own, removed at stop unless given.
 */
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import type { MediaSlot, SimModel } from '../redfish/model.js';
import { nicMacs } from '../redfish/model-synthetic.js';
import type { SimBmc, SystemHooks, SystemState } from '../redfish/state.js';
import type { MediaHooks, VirtualMedia } from '../redfish/vmedia.js';
import { Machine, type BootDevice, type BootSetup, type MachineSpec, type MediaDevice } from './machine.js';

export interface QemuOptions {
  /** `kvm` or `tcg` (default): see accel.ts for finding out whether KVM boots Linux here. */
  accel?: 'kvm' | 'tcg';
  /** Guest memory in MiB (default 256). */
  memoryMiB?: number;
  /** Virtual CPUs (default 1). */
  cpus?: number;
  /** Size of the (sparse) disk in MiB (default 1024). */
  diskMiB?: number;
  /** Where the machines live; default a new directory under the OS temp dir, removed at stop. */
  workDir?: string;
  /** The QEMU binary (default qemu-system-x86_64). */
  qemu?: string;
  /** OVMF's code and variables template, for UEFI (Debian's ovmf). */
  ovmfCode?: string;
  ovmfVars?: string;
  /** Forward a free 127.0.0.1 port to the guest's 9999 (the agent's port), for a conductor to call. */
  agentPort?: boolean;
  /** GracefulShutdown presses the power button; QEMU is stopped after this many seconds (default 30). */
  shutdownGraceSeconds?: number;
  /** Longest a BMC takes to download an image (default 300 s). */
  fetchTimeoutSeconds?: number;
}

const RESTARTS = new Set(['ForceRestart', 'GracefulRestart', 'PowerCycle']);
const GRACEFUL = new Set(['GracefulShutdown', 'PushPowerButton']);
const MARK = '[galvanic-sim]';

interface Host {
  bmc: SimBmc;
  sysPath: string;
  spec: MachineSpec;
  machine: Machine | null;
  /** Operations on the machine, one at a time and in order. */
  queue: Promise<unknown>;
  /** A restart stopped the host; the boot that follows resets the machine instead of starting one. */
  restart: boolean;
  /** Downloaded images by device. */
  media: Map<MediaDevice, { url: string; file: string }>;
  downloads: number;
  lastError: string | null;
  /** The boot device the machine was last started or reset with. */
  first: BootDevice | null;
}

/** The device a slot's media go into. */
function deviceOf(slot: MediaSlot): MediaDevice {
  return slot.mediaTypes.includes('USBStick') ? 'usb' : 'cd';
}

/** The machine's device for a Redfish boot source. */
function bootDevice(redfish: string): BootDevice {
  if (redfish === 'Cd' || redfish === 'UsbCd') return 'cd';
  if (redfish === 'Usb') return 'usb';
  if (redfish === 'Pxe' || redfish === 'UefiHttp') return 'nic0';
  return 'disk';
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

/** Downloads an image as a BMC fetches it; resolves with null, or why it could not. */
export async function fetchImage(url: string, file: string, timeoutMs: number): Promise<string | null> {
  const part = `${file}.part`;
  try {
    await fs.promises.mkdir(path.dirname(file), { recursive: true });
    if (url.startsWith('file:')) {
      await fs.promises.copyFile(fileURLToPath(url), part);
    } else if (/^https?:\/\//i.test(url)) {
      const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
      if (!res.ok || !res.body) {
        await res.body?.cancel();
        return `${url}: the image server answered HTTP ${res.status}`;
      }
      await pipeline(Readable.fromWeb(res.body as import('node:stream/web').ReadableStream), fs.createWriteStream(part));
    } else {
      return `${url}: only http, https and file URLs can be fetched`;
    }
    await fs.promises.rename(part, file);
    return null;
  } catch (err) {
    await fs.promises.rm(part, { force: true });
    return `${url} could not be fetched: ${(err as Error).message}`;
  }
}

export class QemuHosts implements SystemHooks, MediaHooks {
  /** By BMC; a promise, so that calls that come at once for a new BMC share one host. */
  private readonly hosts = new Map<SimBmc, Promise<Host>>();
  private readonly opts: Required<Omit<QemuOptions, 'workDir'>>;

  private constructor(
    opts: QemuOptions,
    private readonly workDir: string,
    private readonly ownsWorkDir: boolean,
    private readonly model: SimModel,
    private readonly vmedia: VirtualMedia,
    private readonly fleet: number,
  ) {
    this.opts = {
      accel: opts.accel ?? 'tcg',
      memoryMiB: opts.memoryMiB ?? 256,
      cpus: opts.cpus ?? 1,
      diskMiB: opts.diskMiB ?? 1024,
      qemu: opts.qemu ?? 'qemu-system-x86_64',
      ovmfCode: opts.ovmfCode ?? '/usr/share/OVMF/OVMF_CODE.fd',
      ovmfVars: opts.ovmfVars ?? '/usr/share/OVMF/OVMF_VARS.fd',
      agentPort: opts.agentPort ?? false,
      shutdownGraceSeconds: opts.shutdownGraceSeconds ?? 30,
      fetchTimeoutSeconds: opts.fetchTimeoutSeconds ?? 300,
    };
  }

  static async start(opts: QemuOptions, model: SimModel, vmedia: VirtualMedia, fleet: number): Promise<QemuHosts> {
    const own = opts.workDir === undefined;
    const dir = opts.workDir ?? (await fs.promises.mkdtemp(path.join(os.tmpdir(), 'galvanic-qemu-')));
    await fs.promises.mkdir(dir, { recursive: true });
    return new QemuHosts(opts, dir, own, model, vmedia, fleet);
  }

  /** The host of `bmc`'s (only) system, made on first use. */
  private host(bmc: SimBmc): Promise<Host> {
    let host = this.hosts.get(bmc);
    if (!host) {
      host = this.makeHost(bmc);
      this.hosts.set(bmc, host);
    }
    return host;
  }

  private async makeHost(bmc: SimBmc): Promise<Host> {
    const sysPath = [...this.model.systemPaths][0];
    let system = bmc.systems.get(sysPath);
    if (!system) {
      system = this.model.initialSystem(sysPath);
      bmc.systems.set(sysPath, system);
    }
    // The machine says what the BMC says: the same UUID, serial number and MACs.
    const body = JSON.parse(this.model.systemBody(sysPath, system, bmc.index)) as { UUID: string; SerialNumber: string };
    const macs = nicMacs(this.fleet, bmc.index);
    const spec: MachineSpec = {
      name: `galvanic-sim-${bmc.index}`,
      dir: path.join(this.workDir, `bmc-${bmc.index}`),
      qemu: this.opts.qemu,
      accel: this.opts.accel,
      memoryMiB: this.opts.memoryMiB,
      cpus: this.opts.cpus,
      uuid: body.UUID,
      serial: body.SerialNumber,
      macs: [macs[0], macs[1]],
      diskBytes: this.opts.diskMiB * 1024 * 1024,
      ovmfCode: this.opts.ovmfCode,
      ovmfVars: this.opts.ovmfVars,
      ...(this.opts.agentPort ? { agentPort: await freePort() } : {}),
    };
    await fs.promises.mkdir(spec.dir, { recursive: true });
    return { bmc, sysPath, spec, machine: null, queue: Promise.resolve(), restart: false, media: new Map(), downloads: 0, lastError: null, first: null };
  }

  /** Runs `op` after the host's earlier operations; its failure is the host's last error. */
  private enqueue<T>(host: Host, what: string, op: () => Promise<T>): Promise<T> {
    const run = host.queue.then(op);
    host.queue = run.catch((err: unknown) => {
      host.lastError = `${what}: ${(err as Error).message}`;
      host.bmc.event('vm', { what: 'error', error: host.lastError });
    });
    return run;
  }

  private serialLog(host: Host): string {
    return path.join(host.spec.dir, 'serial.log');
  }

  /** A line in the serial log, so that a reader can tell one boot's output from the last. */
  private async mark(host: Host, text: string): Promise<void> {
    await fs.promises.appendFile(this.serialLog(host), `\n${MARK} ${new Date().toISOString()} ${text}\n`);
  }

  // ---- SystemHooks ----

  booted(bmc: SimBmc, system: SystemState): void {
    const running = system.running;
    if (!running) return;
    void this.host(bmc).then((host) =>
      this.enqueue(host, 'power on', async () => {
        if (system.running !== running) return; // stopped again before its turn
        const setup = await this.bootSetup(host, system, running.device);
        const m = host.machine;
        if (m?.running && host.restart && m.boot.firmware === setup.firmware) {
          await this.mark(host, `reset: boot ${setup.first}`);
          await m.setBootOrder(setup.first);
          await m.reset();
          bmc.event('vm', { what: 'reset', first: setup.first });
        } else {
          if (m) {
            host.machine = null;
            await m.quit();
          }
          await this.mark(host, `power on: boot ${setup.first} (${setup.firmware}), cd ${setup.media.cd ? 'inserted' : 'empty'}, usb ${setup.media.usb ? 'inserted' : 'empty'}`);
          const started = await Machine.start(host.spec, setup).catch((err: unknown) => {
            running.phase = 'failed';
            running.error = (err as Error).message;
            bmc.event('boot-failed', { device: running.device, image: running.image, slot: running.slot, error: running.error });
            throw err;
          });
          host.machine = started;
          started.on('exit', (exit) => {
            if (host.machine !== started) return;
            host.machine = null;
            if (!exit.asked && system.running !== null) bmc.hostOff(system, { code: exit.code, signal: exit.signal, ...(exit.stderr ? { stderr: exit.stderr } : {}) });
          });
          bmc.event('vm', { what: 'started', first: setup.first, firmware: setup.firmware, pid: started.pid });
        }
        host.restart = false;
        host.first = setup.first;
        // A Once override is used up: a reboot by the guest itself boots the default order.
        if (system.boot.BootSourceOverrideEnabled !== 'Continuous' && setup.first !== 'disk') await host.machine?.setBootOrder('disk');
      }),
    ).catch(() => {});
  }

  stopped(bmc: SimBmc, _system: SystemState, cause: string): void {
    void this.host(bmc).then((host) => {
      if (RESTARTS.has(cause)) {
        host.restart = true;
        return;
      }
      host.restart = false;
      if (cause === 'power-lost') this.forgetMedia(host);
      return this.enqueue(host, 'power off', async () => {
        const m = host.machine;
        if (!m?.running) return;
        host.machine = null;
        if (GRACEFUL.has(cause)) {
          await m.powerDown();
          const gone = await Promise.race([
            new Promise<boolean>((resolve) => m.once('exit', () => resolve(true))),
            new Promise<boolean>((resolve) => setTimeout(() => resolve(false), this.opts.shutdownGraceSeconds * 1000).unref()),
          ]);
          if (gone) return;
        }
        await m.quit();
        await this.mark(host, `power off (${cause})`);
      });
    }).catch(() => {});
  }

  /**
   * What a power on boots: the firmware of the boot mode, the device the override picked, and
   * the images in the slots as the BMC shows them (fetched now if an image got there without
   * an insert, through the control API).
   */
  private async bootSetup(host: Host, system: SystemState, device: string): Promise<BootSetup> {
    const media: Record<MediaDevice, string | null> = { cd: null, usb: null };
    for (const slot of this.model.mediaSlots.values()) {
      if (slot.system !== host.sysPath) continue;
      const dev = deviceOf(slot);
      const m = this.vmedia.state(host.bmc, slot);
      const have = host.media.get(dev);
      if (!m.inserted || !m.image) {
        if (have) await this.drop(host, dev);
        continue;
      }
      if (have?.url !== m.image) {
        const file = this.mediaFile(host, dev);
        const problem = await fetchImage(m.image, file, this.opts.fetchTimeoutSeconds * 1000);
        if (problem) {
          host.lastError = problem;
          continue;
        }
        if (have) await fs.promises.rm(have.file, { force: true });
        host.media.set(dev, { url: m.image, file });
      }
      media[dev] = host.media.get(dev)?.file ?? null;
    }
    return { firmware: system.boot.BootSourceOverrideMode === 'Legacy' ? 'bios' : 'uefi', first: bootDevice(device), media };
  }

  private mediaFile(host: Host, dev: MediaDevice): string {
    return path.join(host.spec.dir, 'media', `${dev}-${++host.downloads}.img`);
  }

  private async drop(host: Host, dev: MediaDevice): Promise<void> {
    const have = host.media.get(dev);
    host.media.delete(dev);
    if (have) await fs.promises.rm(have.file, { force: true });
  }

  private forgetMedia(host: Host): void {
    for (const dev of [...host.media.keys()]) void this.drop(host, dev);
  }

  // ---- MediaHooks ----

  async insert(bmc: SimBmc, slot: MediaSlot, image: string): Promise<string | null> {
    const host = await this.host(bmc);
    const dev = deviceOf(slot);
    const file = this.mediaFile(host, dev);
    const problem = await fetchImage(image, file, this.opts.fetchTimeoutSeconds * 1000);
    if (problem) return problem;
    return this.enqueue(host, `insert ${dev}`, async () => {
      const old = host.media.get(dev);
      host.media.set(dev, { url: image, file });
      if (host.machine?.running) await host.machine.changeMedium(dev, file);
      if (old) await fs.promises.rm(old.file, { force: true });
      bmc.event('vm', { what: 'medium', device: dev, image });
      return null;
    }).catch((err: unknown) => `the host could not take the image: ${(err as Error).message}`);
  }

  ejected(bmc: SimBmc, slot: MediaSlot): void {
    void this.host(bmc).then((host) => {
      const dev = deviceOf(slot);
      return this.enqueue(host, `eject ${dev}`, async () => {
        if (host.machine?.running) await host.machine.changeMedium(dev, null);
        await this.drop(host, dev);
        bmc.event('vm', { what: 'medium', device: dev, image: null });
      });
    }).catch(() => {});
  }

  // ---- control API ----

  /** `GET /_sim/vm`: the machine as it is. */
  async describe(bmc: SimBmc): Promise<Record<string, unknown>> {
    const host = await this.host(bmc);
    await host.queue;
    const m = host.machine;
    const log = this.serialLog(host);
    const size = await fs.promises.stat(log).then((s) => s.size, () => 0);
    return {
      running: m?.running ?? false,
      pid: m?.pid ?? null,
      accel: host.spec.accel,
      firmware: m?.boot.firmware ?? null,
      boot: m ? host.first : null,
      media: { cd: host.media.get('cd')?.url ?? null, usb: host.media.get('usb')?.url ?? null },
      mediaFiles: [...host.media.values()].map((v) => v.file),
      uuid: host.spec.uuid,
      macs: host.spec.macs,
      agentPort: host.spec.agentPort ?? null,
      dir: host.spec.dir,
      serialLog: log,
      serialBytes: size,
      lastError: host.lastError,
    };
  }

  /** `GET /_sim/vm/console?from=N`: the serial log from byte N. */
  async console(bmc: SimBmc, from: number): Promise<string> {
    const host = await this.host(bmc);
    const fh = await fs.promises.open(this.serialLog(host), 'r').catch(() => null);
    if (!fh) return '';
    try {
      const { size } = await fh.stat();
      const start = Math.min(Math.max(0, from), size);
      const buf = Buffer.alloc(size - start);
      await fh.read(buf, 0, buf.length, start);
      return buf.toString('utf8');
    } finally {
      await fh.close();
    }
  }

  async stop(): Promise<void> {
    await Promise.all(
      [...this.hosts.values()].map(async (made) => {
        const host = await made.catch(() => null);
        if (!host) return;
        await host.queue.catch(() => {});
        const m = host.machine;
        host.machine = null;
        if (m) await m.quit();
      }),
    );
    if (this.ownsWorkDir) await fs.promises.rm(this.workDir, { recursive: true, force: true });
  }
}
