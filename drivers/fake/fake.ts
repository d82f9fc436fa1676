import { appendFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { BmcTimeout, BmcUnreachable, InvalidDriverInfo } from '../../common/errors.js';
import type {
  BootInterface, InspectInterface, InspectionResult, InstanceBootRequest, BootDevice, ConsoleCommand, ConsoleInterface, DriverContext, HardwareType, ManagementInterface, PowerInterface,
  PowerStateValue, PowerTarget,
} from '../interfaces.js';

/**
 * fake-hardware: in-memory power and boot device, for the API and conductor tests.
 * Behaviour knobs live in driver_info so tests can steer one node without touching others:
 *  - `fake_delay_ms`: how long each call takes;
 *  - `fake_fail`: `transient` | `permanent` makes every call fail that way;
 *  - `fake_fail_attempts`: N makes the first N attempts of each request fail transiently;
 *  - `fake_power_state`: the state a node starts in (default `power off`).
 */
export const FAKE_PROPERTIES = {
  fake_delay_ms: 'Milliseconds each call to the fake BMC takes. Optional.',
  fake_fail: 'Make every BMC call fail: "transient" (retried) or "permanent". Optional.',
  fake_fail_attempts: 'Make the first N attempts of each request fail transiently (a flaky BMC). Optional.',
  fake_power_state: 'Initial power state of the fake BMC: "power on" or "power off". Optional.',
  fake_console_interval_ms: 'Milliseconds between the lines the fake console prints; 0 prints none. Optional; default 1000.',
  fake_console_line_bytes: 'Pad each line the fake console prints to this many bytes (a busy console). Optional; default 0 (no padding).',
  fake_console_ignore_eof: 'The fake console keeps running at stdin EOF and when its output has no reader, as a hung console command does. Optional; default false.',
};

export const fakeHardware: HardwareType = {
  name: 'fake-hardware',
  supported: {
    bios: ['fake', 'no-bios'], boot: ['fake'], console: ['fake', 'no-console'], deploy: ['fake', 'ramdisk'],
    firmware: ['fake', 'no-firmware'], inspect: ['fake', 'agent', 'no-inspect'], management: ['fake'], network: ['noop'],
    power: ['fake'], raid: ['fake', 'no-raid'], rescue: ['fake', 'no-rescue'], storage: ['noop'], vendor: ['fake', 'no-vendor'],
  },
  properties: FAKE_PROPERTIES,
};

interface FakeBmc {
  power: PowerStateValue;
  boot: BootDevice;
}

const BOOT_DEVICES = ['pxe', 'disk', 'cdrom', 'bios', 'safe'];

/** One fake "BMC" per node, held by the process that drives it. */
/** One line of the record file (`[fake] record_file`): one call to the fake BMC, as tests read it. */
export interface FakeBmcRecord {
  node: string;
  action: string;
  args: unknown;
  trace: string | null;
  /** Epoch milliseconds, fractional. */
  start: number;
  end: number;
  pid: number;
  failed: string | null;
}

export class FakeBmcs {
  private readonly bmcs = new Map<string, FakeBmc>();

  /** `recordFile`: where each call is appended as a JSON line (see [fake] record_file). */
  constructor(private readonly recordFile = '') {}

  get(ctx: DriverContext): FakeBmc {
    let bmc = this.bmcs.get(ctx.nodeUuid);
    if (!bmc) {
      const initial = ctx.driverInfo.fake_power_state === 'power on' ? 'power on' : 'power off';
      bmc = { power: initial, boot: { bootDevice: 'disk', persistent: true } };
      this.bmcs.set(ctx.nodeUuid, bmc);
    }
    return bmc;
  }

  /** One call to the fake BMC: waits `fake_delay_ms`, fails as `fake_fail` says, records it. */
  async act(ctx: DriverContext, action: string, args: unknown = null): Promise<FakeBmc> {
    const start = performance.timeOrigin + performance.now();
    const delay = Number(ctx.driverInfo.fake_delay_ms ?? 0);
    if (delay > 0) await new Promise((r) => setTimeout(r, delay));
    let failure: Error | undefined;
    if (ctx.driverInfo.fake_fail === 'transient') failure = new BmcTimeout(`Fake BMC of node ${ctx.nodeUuid} timed out`);
    if (ctx.driverInfo.fake_fail === 'permanent') failure = new BmcUnreachableForever(`Fake BMC of node ${ctx.nodeUuid} refused the request`);
    const flaky = Number(ctx.driverInfo.fake_fail_attempts ?? 0);
    if (!failure && (ctx.attempt ?? 1) <= flaky) failure = new BmcTimeout(`Fake BMC of node ${ctx.nodeUuid} timed out (attempt ${ctx.attempt ?? 1})`);
    if (this.recordFile) {
      const end = performance.timeOrigin + performance.now();
      // One write per line with O_APPEND: lines from several processes never interleave.
      const line: FakeBmcRecord = { node: ctx.nodeUuid, action, args, trace: ctx.trace ?? null, start, end, pid: process.pid, failed: failure ? failure.message : null };
      appendFileSync(this.recordFile, `${JSON.stringify(line)}\n`);
    }
    if (failure) throw failure;
    return this.get(ctx);
  }
}

/** A permanent failure: not retried. */
class BmcUnreachableForever extends BmcUnreachable {
  override get transient(): boolean {
    return false;
  }
}

function validateFakeInfo(info: Readonly<Record<string, unknown>>): void {
  const delay = info.fake_delay_ms;
  if (delay !== undefined && !(Number.isFinite(Number(delay)) && Number(delay) >= 0)) {
    throw new InvalidDriverInfo(`fake_delay_ms must be a non-negative number, got ${JSON.stringify(delay)}`);
  }
  const fail = info.fake_fail;
  if (fail !== undefined && fail !== 'transient' && fail !== 'permanent') {
    throw new InvalidDriverInfo(`fake_fail must be "transient" or "permanent", got ${JSON.stringify(fail)}`);
  }
  const flaky = info.fake_fail_attempts;
  if (flaky !== undefined && !(Number.isInteger(Number(flaky)) && Number(flaky) >= 0)) {
    throw new InvalidDriverInfo(`fake_fail_attempts must be a non-negative integer, got ${JSON.stringify(flaky)}`);
  }
}

export class FakePower implements PowerInterface {
  constructor(private readonly bmcs: FakeBmcs) {}

  validate(info: Readonly<Record<string, unknown>>): void {
    validateFakeInfo(info);
  }

  async getPowerState(ctx: DriverContext): Promise<PowerStateValue> {
    return (await this.bmcs.act(ctx, 'get_power_state')).power;
  }

  async setPowerState(ctx: DriverContext, target: PowerTarget): Promise<void> {
    const bmc = await this.bmcs.act(ctx, 'set_power_state', target);
    bmc.power = target === 'power off' || target === 'soft power off' ? 'power off' : 'power on';
  }

  async getSupportedPowerStates(): Promise<PowerTarget[]> {
    return ['power on', 'power off', 'rebooting', 'soft power off', 'soft rebooting'];
  }
}

export class FakeManagement implements ManagementInterface {
  readonly staticBootDevices: readonly string[] = BOOT_DEVICES;
  constructor(private readonly bmcs: FakeBmcs) {}

  validate(info: Readonly<Record<string, unknown>>): void {
    validateFakeInfo(info);
  }

  async getBootDevice(ctx: DriverContext): Promise<BootDevice> {
    return { ...(await this.bmcs.act(ctx, 'get_boot_device')).boot };
  }

  async setBootDevice(ctx: DriverContext, device: string, persistent: boolean): Promise<void> {
    if (!BOOT_DEVICES.includes(device)) throw new InvalidDriverInfo(`Boot device ${device} is not supported by the fake management interface`);
    (await this.bmcs.act(ctx, 'set_boot_device', { device, persistent })).boot = { bootDevice: device, persistent };
  }

  async getSupportedBootDevices(): Promise<string[]> {
    return [...BOOT_DEVICES];
  }
}

/** no-console: a node without a serial console. */
export class NoConsole implements ConsoleInterface {
  /** Ironic's no-console: validate reports the console as unsupported. */
  readonly supported = false;
  validate(): void {}

  command(): null {
    return null;
  }
}

/** The fake console's child process script, next to this module (in dist/ once built). */
const FAKE_CONSOLE_CHILD = fileURLToPath(new URL('./console-child.js', import.meta.url));

/**
 * fake: a small child process that prints a numbered line every `fake_console_interval_ms`
 * (driver_info; default 1000, 0 for none) and echoes its input, for tests without a BMC.
 */
export class FakeConsole implements ConsoleInterface {
  validate(info: Readonly<Record<string, unknown>>): void {
    validateFakeInfo(info);
    consoleArgs(info);
  }

  command(nodeUuid: string, info: Readonly<Record<string, unknown>>): ConsoleCommand {
    return { command: process.execPath, args: [FAKE_CONSOLE_CHILD, nodeUuid, ...consoleArgs(info)], env: {} };
  }
}

/** The child's arguments after the node: interval, line size, and whether it ignores EOF. */
function consoleArgs(info: Readonly<Record<string, unknown>>): string[] {
  const interval = consoleInterval(info);
  const pad = info.fake_console_line_bytes ?? 0;
  if (!Number.isInteger(Number(pad)) || Number(pad) < 0 || Number(pad) > 1048576) {
    throw new InvalidDriverInfo(`fake_console_line_bytes must be an integer from 0 to 1048576, got ${JSON.stringify(pad)}`);
  }
  const ignoreEof = info.fake_console_ignore_eof ?? false;
  if (typeof ignoreEof !== 'boolean') throw new InvalidDriverInfo(`fake_console_ignore_eof must be a boolean, got ${JSON.stringify(ignoreEof)}`);
  const args = [String(interval)];
  if (Number(pad) > 0 || ignoreEof) args.push(String(Number(pad)), ignoreEof ? 'ignore-eof' : 'eof');
  return args;
}

function consoleInterval(info: Readonly<Record<string, unknown>>): number {
  const v = info.fake_console_interval_ms;
  if (v === undefined || v === null) return 1000;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new InvalidDriverInfo(`fake_console_interval_ms must be a non-negative integer, got ${JSON.stringify(v)}`);
  return n;
}

/**
 * Ironic's fake boot: nothing to insert. It records the calls, so that tests of the ramdisk
 * deploy on fake-hardware can see the order of power and boot steps.
 */
export class FakeBoot implements BootInterface {
  readonly ramdiskBoot = true;
  constructor(private readonly bmcs: FakeBmcs) {}
  validate(): void {}
  async prepareInstance(ctx: DriverContext, req: InstanceBootRequest): Promise<void> {
    await this.bmcs.act(ctx, 'prepare_instance', { boot_iso: req.bootIso });
  }
  async cleanUpInstance(ctx: DriverContext): Promise<void> {
    await this.bmcs.act(ctx, 'clean_up_instance');
  }
}

/** Ironic's fake inspection: finds nothing and changes nothing. */
export class FakeInspect implements InspectInterface {
  validate(): void {}
  async inspectHardware(): Promise<InspectionResult | null> {
    return null;
  }
}
