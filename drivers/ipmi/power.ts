import { setTimeout as sleep } from 'node:timers/promises';
import { BmcTimeout, InvalidParameterValue } from '../../common/errors.js';
import type { DriverContext, PowerInterface, PowerStateValue, PowerTarget } from '../interfaces.js';
import { parseIpmiDriverInfo, type IpmiDriverInfo } from './driver-info.js';
import { parsePowerStatus } from './parse.js';
import type { IpmitoolRunner } from './runner.js';

export interface IpmitoolPowerOptions {
  /** Seconds to reach a power state when the caller gives no timeout (Ironic: [conductor] power_state_change_timeout). */
  defaultTimeoutS: number;
  /** Pause between two `power status` polls, on top of the per-BMC command spacing. */
  pollIntervalMs: number;
}

const SUPPORTED: readonly PowerTarget[] = ['power on', 'power off', 'rebooting', 'soft power off', 'soft rebooting'];

/**
 * Power through `ipmitool power …` (Ironic's `ipmitool` power interface): each action is sent
 * once, then `power status` is polled until the node reaches the target or the timeout passes.
 */
export class IpmitoolPower implements PowerInterface {
  constructor(
    private readonly runner: IpmitoolRunner,
    private readonly opts: IpmitoolPowerOptions = { defaultTimeoutS: 60, pollIntervalMs: 250 },
  ) {}

  /** @throws InvalidDriverInfo */
  validate(driverInfo: Readonly<Record<string, unknown>>): void {
    parseIpmiDriverInfo(driverInfo);
  }

  /**
   * `power status`; 'error' when the BMC answers something else (as Ironic does).
   * @throws InvalidDriverInfo | BmcTimeout | BmcUnreachable | BmcAuthFailed | BmcRejected
   */
  async getPowerState(ctx: DriverContext): Promise<PowerStateValue> {
    return this.status(ctx, parseIpmiDriverInfo(ctx.driverInfo));
  }

  /**
   * Reboot is `power cycle` when the node is on and `power on` when it is off; soft reboot is a
   * soft power off then power on, both within `timeout`.
   * @throws InvalidDriverInfo | InvalidParameterValue (unknown target) | BmcTimeout (target not
   *   reached in time, or no answer) | BmcUnreachable | BmcAuthFailed | BmcRejected
   */
  async setPowerState(ctx: DriverContext, target: PowerTarget, timeout?: number): Promise<void> {
    const info = parseIpmiDriverInfo(ctx.driverInfo);
    const deadline = performance.now() + (timeout ?? this.opts.defaultTimeoutS) * 1000;
    switch (target) {
      case 'power on':
        return this.act(ctx, info, 'on', 'power on', deadline);
      case 'power off':
        return this.act(ctx, info, 'off', 'power off', deadline);
      case 'soft power off':
        return this.act(ctx, info, 'soft', 'power off', deadline);
      case 'rebooting': {
        const now = await this.status(ctx, info);
        return this.act(ctx, info, now === 'power on' ? 'cycle' : 'on', 'power on', deadline);
      }
      case 'soft rebooting':
        await this.act(ctx, info, 'soft', 'power off', deadline);
        return this.act(ctx, info, 'on', 'power on', deadline);
      default:
        throw new InvalidParameterValue(`set_power_state called with invalid power state ${String(target)}.`);
    }
  }

  async getSupportedPowerStates(): Promise<PowerTarget[]> {
    return [...SUPPORTED];
  }

  private async status(ctx: DriverContext, info: IpmiDriverInfo): Promise<PowerStateValue> {
    const { stdout } = await this.runner.run(ctx, info, ['power', 'status']);
    const state = parsePowerStatus(stdout);
    if (state === 'error') ctx.log.warn({ node: ctx.nodeUuid, output: stdout.slice(0, 200) }, 'unexpected ipmitool power status output');
    return state;
  }

  /** Sends `power <action>` and polls until `want`. */
  private async act(ctx: DriverContext, info: IpmiDriverInfo, action: string, want: PowerStateValue, deadline: number): Promise<void> {
    await this.runner.run(ctx, info, ['power', action]);
    let last: PowerStateValue = 'error';
    do {
      await pause(this.opts.pollIntervalMs, ctx.signal);
      last = await this.status(ctx, info);
      if (last === want) return;
    } while (performance.now() < deadline);
    throw new BmcTimeout(`IPMI power ${action} of node ${ctx.nodeUuid}: still ${last} instead of ${want} after the timeout.`);
  }
}

/** Sleeps; an abort rejects with the signal's reason, as the runner's calls do. */
async function pause(ms: number, signal?: AbortSignal): Promise<void> {
  try {
    await sleep(ms, undefined, { signal });
  } catch (err) {
    throw signal?.aborted ? signal.reason : err;
  }
}
