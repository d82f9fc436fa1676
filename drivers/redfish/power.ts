/**
 * The `redfish` power interface: PowerState of the system, changed through
 * `ComputerSystem.Reset` with a reset type the BMC advertises (Ironic's mapping first, then
 * fallbacks: ForceOn, the non-standard Off of EX425 blades, PowerCycle), then polled until the
 * state is reached. A 400/409 to a Reset is success when the node is already there (as Ironic).
 */
import { BmcBadResponse, BmcRejected, BmcTimeout } from '../../common/errors.js';
import type { DriverContext, PowerInterface, PowerStateValue, PowerTarget } from '../interfaces.js';
import { statusError, type RedfishCall, type RedfishClient, type Resource } from './client.js';
import { pause } from './http.js';
import { str } from './odata.js';
import { getSystem, resetInfo, type ResetInfo } from './system.js';

type Raw = 'On' | 'Off';

const POWER_MAP: Readonly<Record<string, PowerStateValue>> = {
  On: 'power on',
  PoweringOn: 'power on',
  Off: 'power off',
  PoweringOff: 'power off',
};

/** Reset types by purpose, preferred first. */
const RESET = {
  on: ['On', 'ForceOn'],
  off: ['ForceOff', 'Off'],
  softOff: ['GracefulShutdown'],
  reboot: ['ForceRestart', 'PowerCycle'],
  softReboot: ['GracefulRestart'],
} as const;

/**
 * Poll delays after a Reset: at once, then backing off to 1 s. The last delay is what a boot's
 * end waits, half of it on average, before the node goes on: at 2 s, the two boots of a deploy
 * through the agent (the agent's ISO, then the disk) cost a node 2.6 s over its BMC's own time
 * (the slowest 50 of 1,000), and at 1 s one GET a second is still a light load on a BMC (Ironic
 * starts at 1 s and backs off from there).
 */
const POLL_MS = [0, 250, 500, 1000];

function rawPower(system: Resource): string {
  const s = str(system.body.PowerState);
  if (s === null) throw new BmcBadResponse(`Redfish system ${system.path} has no PowerState.`);
  return s;
}

function pick(reset: ResetInfo, prefs: readonly string[]): string | null {
  if (reset.allowed === null) return prefs[0];
  return prefs.find((t) => reset.allowed?.includes(t)) ?? null;
}

async function resetTo(call: RedfishCall, reset: ResetInfo, prefs: readonly string[], want: Raw, purpose: string, waitUntil: number): Promise<void> {
  const type = pick(reset, prefs);
  if (!type) {
    throw new BmcRejected(`The BMC at ${call.info.origin} offers no reset type for "${purpose}" (wanted one of ${prefs.join(', ')}; it offers ${reset.allowed?.join(', ') || 'none'}).`);
  }
  const what = `Redfish ${type} reset of ${call.info.origin}${reset.target}`;
  const r = await call.send('POST', reset.target, { body: { ResetType: type } });
  if (r.status < 200 || r.status >= 300) {
    // Some BMCs refuse a reset to the state the node is already in.
    if ((r.status === 400 || r.status === 409) && rawPower(await getSystem(call)) === want) return;
    throw statusError(r, what);
  }
  call.log.debug({ bmc: call.info.origin, resetType: type }, 'Redfish reset sent');
  await waitForPower(call, want, waitUntil);
}

async function waitForPower(call: RedfishCall, want: Raw, waitUntil: number): Promise<void> {
  let last = '';
  for (let i = 0; ; i++) {
    const delay = POLL_MS[Math.min(i, POLL_MS.length - 1)];
    if (Date.now() + delay > waitUntil) break;
    if (delay) await pause(delay, call, `Waiting for ${call.info.origin} to reach ${want}`);
    last = rawPower(await getSystem(call));
    if (last === want) return;
  }
  throw new BmcTimeout(`The BMC at ${call.info.origin} did not reach PowerState ${want} in time (last seen: ${last || 'unknown'}).`);
}

/**
 * Drives the system of `call` to `target` and waits (until `waitUntil`) for the BMC to report
 * it: the power interface's work, also for a driver that must cycle the power inside a call
 * of its own (iDRAC's pending configuration).
 * @throws BmcTimeout | BmcRejected | DriverError
 */
export async function drivePower(call: RedfishCall, target: PowerTarget, waitUntil: number): Promise<void> {
  const system = await getSystem(call);
  const reset = await resetInfo(call, system);
  const current = rawPower(system);
  const on = current === 'On' || current === 'PoweringOn';
  const run = (types: readonly string[], want: Raw, purpose: string) => resetTo(call, reset, types, want, purpose, waitUntil);
  switch (target) {
    case 'power on':
      if (current === 'On') return;
      if (current === 'PoweringOn') return waitForPower(call, 'On', waitUntil);
      return run(RESET.on, 'On', target);
    case 'power off':
      if (current === 'Off') return;
      return run(RESET.off, 'Off', target);
    case 'soft power off':
      if (current === 'Off') return;
      return run(RESET.softOff, 'Off', target);
    case 'rebooting':
      if (!on) return run(RESET.on, 'On', target);
      if (pick(reset, RESET.reboot)) return run(RESET.reboot, 'On', target);
      await run(RESET.off, 'Off', target);
      return run(RESET.on, 'On', target);
    case 'soft rebooting':
      if (!on) return run(RESET.on, 'On', target);
      if (pick(reset, RESET.softReboot)) return run(RESET.softReboot, 'On', target);
      await run(RESET.softOff, 'Off', target);
      return run(RESET.on, 'On', target);
  }
}

export class RedfishPower implements PowerInterface {
  constructor(private readonly client: RedfishClient) {}

  validate(driverInfo: Readonly<Record<string, unknown>>): void {
    this.client.parse(driverInfo);
  }

  /** @throws BmcTimeout | BmcUnreachable | BmcAuthFailed | BmcRejected | BmcBadResponse */
  async getPowerState(ctx: DriverContext): Promise<PowerStateValue> {
    const system = await this.client.run(ctx, getSystem);
    return POWER_MAP[rawPower(system)] ?? 'error';
  }

  /** Redfish reads are HTTP requests on the event loop: the power state sync runs them all at once. */
  getPowerStateAsync(ctx: DriverContext): Promise<PowerStateValue> {
    return this.getPowerState(ctx);
  }

  /**
   * Drives the node to `target` and waits until the BMC reports it; `timeout` (s) bounds the
   * wait (default [redfish] power_state_change_timeout).
   * @throws BmcTimeout when the state is not reached in time; BmcRejected when the BMC offers no suitable reset type
   */
  async setPowerState(ctx: DriverContext, target: PowerTarget, timeout?: number): Promise<void> {
    const waitMs = timeout !== undefined && timeout > 0 ? timeout * 1000 : this.client.options.powerStateChangeTimeoutMs;
    await this.client.run(ctx, (call) => drivePower(call, target, Date.now() + waitMs), waitMs);
  }


  /** What the BMC's advertised reset types allow. */
  async getSupportedPowerStates(ctx: DriverContext): Promise<PowerTarget[]> {
    const reset = await this.client.run(ctx, async (call) => resetInfo(call, await getSystem(call)));
    const has = (types: readonly string[]) => pick(reset, types) !== null;
    const out: PowerTarget[] = [];
    if (has(RESET.on)) out.push('power on');
    if (has(RESET.off)) out.push('power off');
    if (has(RESET.reboot) || (has(RESET.on) && has(RESET.off))) out.push('rebooting');
    if (has(RESET.softOff)) out.push('soft power off');
    if (has(RESET.softReboot) || (has(RESET.on) && has(RESET.softOff))) out.push('soft rebooting');
    return out;
  }


}
