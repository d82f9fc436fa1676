/**
 * Shared by the VM tests: which accelerator boots the test kernel here, the serial console of a
 * QEMU-backed BMC (GET /_sim/vm/console) and what the test ramdisk said on it.
 */
import { probeKvm } from '../../sim/qemu/index.js';
import { until } from './until.js';

export type Accel = 'kvm' | 'tcg';

let reported = false;

/**
 * KVM when this host's KVM boots `kernel`, else TCG (the probe runs once per process);
 * GALVANIC_QEMU_ACCEL=kvm|tcg skips the probe.
 */
export async function vmAccel(kernel: string): Promise<{ accel: Accel; detail: string }> {
  const forced = process.env.GALVANIC_QEMU_ACCEL;
  const chosen: { accel: Accel; detail: string } = forced === 'kvm' || forced === 'tcg'
    ? { accel: forced, detail: 'GALVANIC_QEMU_ACCEL' }
    : await probeKvm(kernel).then((p) => ({ accel: p.kvm ? ('kvm' as const) : ('tcg' as const), detail: p.detail }));
  if (!reported) {
    reported = true;
    process.stderr.write(`      VM lab: ${chosen.accel.toUpperCase()} (${chosen.detail})\n`);
  }
  return chosen;
}

export interface VmState {
  running: boolean;
  pid: number | null;
  firmware: 'bios' | 'uefi' | null;
  boot: string | null;
  media: { cd: string | null; usb: string | null };
  mediaFiles: string[];
  macs: [string, string];
  uuid: string;
  serialBytes: number;
  lastError: string | null;
}

export async function vmState(bmcUrl: string): Promise<VmState> {
  const res = await fetch(`${bmcUrl}/_sim/vm`);
  if (!res.ok) throw new Error(`/_sim/vm: ${res.status} ${await res.text()}`);
  return (await res.json()) as VmState;
}

/** The serial console from byte `from`. */
export async function vmConsole(bmcUrl: string, from = 0): Promise<string> {
  const res = await fetch(`${bmcUrl}/_sim/vm/console?from=${from}`);
  if (!res.ok) throw new Error(`/_sim/vm/console: ${res.status} ${await res.text()}`);
  return res.text();
}

/** The console's output since `from` once it matches `re`; on a timeout the error shows its end. */
export async function waitForConsole(bmcUrl: string, re: RegExp, opts: { from?: number; timeoutMs?: number; what?: string } = {}): Promise<string> {
  let text = '';
  return until(
    () => `${opts.what ?? re.source} on the serial console; it ends with:\n${text.slice(-2500)}`,
    async () => {
      text = await vmConsole(bmcUrl, opts.from ?? 0);
      return re.test(text) ? text : null;
    },
    opts.timeoutMs ?? 180_000,
    500,
  );
}

/** What the test ramdisk reported (its `vmlab: ` lines): the last boot's, when given its output. */
export interface RamdiskReport {
  cmdline: string | null;
  /** Kernel parameters by name (the last of each). */
  params: Record<string, string>;
  nic: { name: string; mac: string } | null;
  configDrive: string | null;
  /** Files read from the config drive, decoded; null when missing. */
  files: Record<string, string | null>;
  lookups: string[];
  heartbeats: Array<{ n: number; ok: boolean; text: string }>;
  /** The inventory posted to ipa-inspection-callback-url, when it was taken. */
  inspection: Record<string, unknown> | null;
  inspectionError: string | null;
}

export function ramdiskReport(output: string): RamdiskReport {
  const r: RamdiskReport = { cmdline: null, params: {}, nic: null, configDrive: null, files: {}, lookups: [], heartbeats: [], inspection: null, inspectionError: null };
  for (const raw of output.split('\n')) {
    const at = raw.indexOf('vmlab: ');
    if (at < 0) continue;
    const line = raw.slice(at + 7).trim();
    const [word, ...rest] = line.split(' ');
    if (word === 'cmdline') {
      r.cmdline = rest.join(' ');
      for (const p of rest) {
        const eq = p.indexOf('=');
        if (eq > 0) r.params[p.slice(0, eq)] = p.slice(eq + 1);
      }
    } else if (word === 'nic') {
      r.nic = { name: rest[0], mac: rest[1] };
    } else if (word === 'config-drive') {
      r.configDrive = rest.join(' ');
    } else if (word === 'file') {
      r.files[rest[0]] = rest[1] === 'missing' ? null : Buffer.from(rest[2] ?? '', 'base64').toString('utf8');
    } else if (word === 'lookup') {
      r.lookups.push(rest.join(' '));
    } else if (word === 'inspection') {
      if (rest[0] === 'ok') r.inspection = (JSON.parse(Buffer.from(rest[1], 'base64').toString('utf8')) as { inventory: Record<string, unknown> }).inventory;
      else r.inspectionError = rest.slice(1).join(' ');
    } else if (word === 'heartbeat') {
      r.heartbeats.push({ n: Number(rest[0]), ok: rest[1] === 'ok', text: rest.slice(1).join(' ') });
    }
  }
  return r;
}

/** The console output of the last power on or reset (after the simulator's last mark). */
export function lastBoot(output: string): string {
  const at = output.lastIndexOf('[galvanic-sim]');
  return at < 0 ? output : output.slice(at);
}
