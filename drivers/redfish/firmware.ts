/**
 * The `redfish` firmware interface (Ironic's RedfishFirmware, API 1.86): the versions the BMC
 * reports (BiosVersion of the system, FirmwareVersion of its manager), and the
 * `firmware.update` step, which flashes one component at a time through
 * `UpdateService.SimpleUpdate` and follows the BMC's task to its end.
 *
 * A BIOS or NIC image takes effect at the system's next boot: in cleaning the node is rebooted
 * into the agent, as Ironic's reboot to finish a step, and the step finishes
 * when that agent heartbeats (`afterReboot`), reading the versions again and going on with the
 * components left. Servicing runs its steps without an agent, so there the node is rebooted in
 * place (into its instance) and the versions are read once it is on again: the update Ironic's
 * servicing does through the agent, with the same reboot of the instance. A BMC image takes
 * effect at once; no reboot follows it.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { BmcUnreachable, FirmwareUpdateFailed, InvalidParameterValue, UnsupportedDriverExtension } from '../../common/errors.js';
import { bootAgent } from '../deploy/agent-base.js';
import { pyRepr } from '../inspection-hooks.js';
import type { DriverContext, FirmwareComponentReading, FirmwareInterface } from '../interfaces.js';
import { agentRunning, type StepArgInfo, type StepContext, type StepDeclaration, type StepRun } from '../steps.js';
import { statusError, type RedfishCall, type RedfishClient } from './client.js';
import { isObject, linkPath, linkPaths, prop, str, type Json } from './odata.js';
import { getSystem, isMissing } from './system.js';

/** Ironic's component names (redfish/utils.py). */
const BIOS = 'bios';
const BMC = 'bmc';
const NIC_PREFIX = 'nic:';
/** Task states of a task still at work (Ironic's list); any other ends it. */
const IN_PROGRESS = new Set(['New', 'Starting', 'Running', 'Pending']);
/** What driver_internal_info keeps between a reboot and the step's end: the updates still to do (Ironic's key). */
const PENDING_KEY = 'redfish_fw_updates';

const ARGS_INFO: Readonly<Record<string, StepArgInfo>> = {
  settings: { description: 'A list of dicts with firmware components to be updated', required: true },
};

/** The defaults of [redfish] firmware_update_status_interval and firmware_update_overall_timeout. */
export const DEFAULT_FIRMWARE_OPTIONS: Readonly<FirmwareOptions> = { statusIntervalMs: 5_000, overallTimeoutMs: 7_200_000 };

export interface FirmwareOptions {
  /** Between two reads of the BMC's task (Ironic's [redfish] firmware_update_status_interval). */
  statusIntervalMs: number;
  /** The longest one component's update may take (Ironic's firmware_update_overall_timeout). */
  overallTimeoutMs: number;
}

/** One entry of `settings`. */
interface Update {
  component: string;
  url: string;
  wait?: number;
}

/** How a step that must boot the system again does it. */
type Reboot = 'agent' | 'in-place';

/**
 * Ironic's validate_firmware_interface_update_args (a JSON schema): the first error, worded as
 * jsonschema words it.
 */
function schemaError(settings: unknown): string | null {
  if (!Array.isArray(settings)) return `${pyRepr(settings)} is not of type 'array'`;
  if (settings.length === 0) return '[] is too short';
  for (const item of settings) {
    if (!isObject(item)) return `${pyRepr(item)} is not of type 'object'`;
    for (const req of ['component', 'url']) if (!Object.hasOwn(item, req)) return `'${req}' is a required property`;
    const extra = Object.keys(item).filter((k) => !['component', 'url', 'wait'].includes(k));
    if (extra.length) return `Additional properties are not allowed (${extra.map(pyRepr).join(', ')} ${extra.length > 1 ? 'were' : 'was'} unexpected)`;
    const { component, url, wait } = item;
    if (typeof component !== 'string') return `${pyRepr(component)} is not of type 'string'`;
    if (component !== BIOS && component !== BMC && !component.startsWith(NIC_PREFIX)) return `${pyRepr(component)} is not valid under any of the given schemas`;
    if (typeof url !== 'string') return `${pyRepr(url)} is not of type 'string'`;
    if (url.length < 1) return `'' is too short`;
    if (wait !== undefined) {
      if (typeof wait !== 'number' || !Number.isInteger(wait)) return `${pyRepr(wait)} is not of type 'integer'`;
      if (wait < 1) return `${wait} is less than the minimum of 1`;
    }
  }
  return null;
}

function parseSettings(settings: unknown): Update[] {
  const err = schemaError(settings);
  if (err) throw new InvalidParameterValue(`Invalid firmware update ${pyRepr(settings)}. Errors: ${err}`);
  return settings as Update[];
}

/** BIOS and NIC images take effect when the system boots again (Ironic reboots for both). */
function needsReboot(component: string): boolean {
  return component === BIOS || component.startsWith(NIC_PREFIX);
}

/** A Location header as a path on the BMC. */
function locationPath(v: string | string[] | undefined): string | null {
  const raw = Array.isArray(v) ? v[0] : v;
  if (!raw) return null;
  try {
    const u = new URL(raw, 'http://bmc');
    return `${u.pathname}${u.search}`;
  } catch {
    return null;
  }
}

/** The task's messages as Ironic joins them: each Message, or its MessageId when it says nothing. */
function taskMessages(task: Json): string[] {
  const messages = prop(task, 'Messages');
  if (!Array.isArray(messages)) return [];
  const out: string[] = [];
  for (const m of messages) {
    if (!isObject(m)) continue;
    let text = str(m.Message);
    if (!text || ['unknown', 'unknown error'].includes(text.toLowerCase())) text = str(m.MessageId);
    if (text) out.push(text);
  }
  return out;
}

export class RedfishFirmware implements FirmwareInterface {
  readonly supported = true;
  readonly steps: readonly StepDeclaration[];

  constructor(
    private readonly client: RedfishClient,
    private readonly opts: FirmwareOptions,
  ) {
    const base = { step: 'update', abortable: false, argsInfo: ARGS_INFO };
    this.steps = [
      {
        // A deploy step too (Ironic 2025.1): its reboot goes into the agent, as in cleaning.
        ...base,
        priority: { clean: 0, deploy: 0 },
        requiresRamdisk: true,
        run: (ctx, args) => this.updateAll(ctx, parseSettings(args.settings), 'agent'),
        afterReboot: (ctx) => this.afterReboot(ctx),
      },
      {
        // Without an agent (no step of the servicing needs one) the instance is rebooted in place.
        ...base,
        priority: { service: 0 },
        requiresRamdisk: false,
        run: (ctx, args) => this.updateAll(ctx, parseSettings(args.settings), agentRunning(ctx) ? 'agent' : 'in-place'),
        afterReboot: (ctx) => this.afterReboot(ctx),
      },
    ];
  }

  validate(driverInfo: Readonly<Record<string, unknown>>): void {
    this.client.parse(driverInfo);
  }

  /**
   * Ironic's cache_firmware_components: the system's BiosVersion and its manager's
   * FirmwareVersion (a manager that cannot be read is left out).
   * @throws UnsupportedDriverExtension when the BMC reports neither
   */
  async readComponents(ctx: DriverContext): Promise<FirmwareComponentReading[]> {
    return this.client.run(ctx, async (call) => {
      const system = await getSystem(call);
      const out: FirmwareComponentReading[] = [];
      const bios = str(system.body.BiosVersion);
      if (bios) out.push({ component: BIOS, currentVersion: bios });
      const links = prop(system.body, 'Links');
      const manager = isObject(links) ? linkPaths(prop(links, 'ManagedBy'))[0] : undefined;
      if (manager) {
        try {
          const version = str((await call.get(manager)).body.FirmwareVersion);
          if (version) out.push({ component: BMC, currentVersion: version });
        } catch (err) {
          if (!isMissing(err)) throw err;
          call.log.warn({ node: ctx.nodeUuid, err: (err as Error).message }, 'No manager available to retrieve the BMC firmware version');
        }
      }
      if (out.length === 0) throw new UnsupportedDriverExtension(`Cannot retrieve firmware for node ${ctx.nodeUuid}: no supported components`);
      return out;
    });
  }

  /**
   * Flashes the components one after the other. One that needs a boot to take effect: in
   * place, the node is rebooted and the run goes on; through the agent, the components left
   * are kept and the node boots the agent, whose heartbeat carries on (afterReboot).
   */
  private async updateAll(ctx: StepContext, updates: readonly Update[], reboot: Reboot): Promise<StepRun> {
    for (let i = 0; i < updates.length; i++) {
      const u = updates[i];
      await this.flash(ctx, u);
      if (needsReboot(u.component)) {
        if (reboot === 'agent') {
          ctx.info[PENDING_KEY] = updates.slice(i + 1);
          await this.failing(ctx, u, 'the reboot to apply it failed', () => bootAgent(ctx));
          return 'wait';
        }
        await this.failing(ctx, u, 'the reboot to apply it failed', () => ctx.power.setPowerState(ctx.driver, 'rebooting'));
      }
      await this.recordVersions(ctx, u);
    }
    delete ctx.info[PENDING_KEY];
    return 'done';
  }

  /** The agent is up again after an image that needed a boot: versions read, the rest flashed. */
  private async afterReboot(ctx: StepContext): Promise<StepRun> {
    const pending = Array.isArray(ctx.info[PENDING_KEY]) ? (ctx.info[PENDING_KEY] as Update[]) : [];
    await this.recordVersions(ctx);
    return this.updateAll(ctx, pending, 'agent');
  }

  /** Runs `fn`; a failure fails the update, never to be retried whole (the image may be flashed). */
  private async failing<T>(ctx: StepContext, u: Update | undefined, what: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      if (err instanceof FirmwareUpdateFailed) throw err;
      const image = u ? `, firmware ${u.url}` : '';
      throw new FirmwareUpdateFailed(`Firmware update failed for node ${ctx.node.uuid}${image}: ${what}: ${(err as Error).message}`);
    }
  }

  /** The versions the BMC reports now, cached for the node. */
  private async recordVersions(ctx: StepContext, u?: Update): Promise<void> {
    const found = await this.failing(ctx, u, 'the BMC could not be read after the update', () => this.readComponents(ctx.driver));
    await ctx.record.firmware(found);
  }

  /** SimpleUpdate with the image, and its task followed to its end. */
  private async flash(ctx: StepContext, u: Update): Promise<void> {
    ctx.log.info({ node: ctx.node.uuid, component: u.component, url: u.url }, 'Applying new firmware');
    const monitor = await this.failing(ctx, u, 'the BMC refused the update', () => this.client.run(ctx.driver, (call) => this.simpleUpdate(call, u)));
    if (monitor === null) return;
    const started = Date.now();
    for (;;) {
      const task = await this.failing(ctx, u, 'its task could not be read', () => this.client.run(ctx.driver, (call) => readTask(call, monitor)));
      if (task === 'gone') {
        // The BMC deleted its task before it was seen to end: Ironic takes it as a success.
        ctx.log.warn({ node: ctx.node.uuid, url: u.url }, 'Firmware update task gone; its success is unknown, taken as done');
        return;
      }
      if (task !== 'busy') {
        const state = str(task.TaskState);
        if (state === null || !IN_PROGRESS.has(state)) {
          if (state === null || state === 'Completed') return;
          throw new FirmwareUpdateFailed(`Firmware update failed for node ${ctx.node.uuid}, firmware ${u.url}. Error: ${taskMessages(task).join(',  ')}`);
        }
      }
      const elapsed = Date.now() - started;
      if (elapsed >= this.opts.overallTimeoutMs) {
        throw new FirmwareUpdateFailed(`Firmware update on node ${ctx.node.uuid} has exceeded the overall timeout of ${Math.round(this.opts.overallTimeoutMs / 1000)} seconds. Elapsed time: ${Math.round(elapsed / 1000)} seconds.`);
      }
      await sleep(this.opts.statusIntervalMs, undefined, { signal: ctx.driver.signal });
    }
  }

  /** POSTs SimpleUpdate; the task monitor to follow, or null when the BMC gave none (done already). */
  private async simpleUpdate(call: RedfishCall, u: Update): Promise<string | null> {
    const root = await call.get('/redfish/v1');
    const service = linkPath(prop(root.body, 'UpdateService'));
    if (!service) throw new UnsupportedDriverExtension(`The BMC at ${call.info.origin} has no UpdateService.`);
    const actions = prop((await call.get(service)).body, 'Actions');
    const action = isObject(actions) ? prop(actions, '#UpdateService.SimpleUpdate') : null;
    const target = isObject(action) ? str(action.target) : null;
    if (!target) throw new UnsupportedDriverExtension(`The attribute #UpdateService.SimpleUpdate is missing on the BMC at ${call.info.origin}.`);
    const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(u.url)?.[1].toUpperCase();
    const body: Json = { ImageURI: u.url, ...(scheme ? { TransferProtocol: scheme } : {}) };
    // A BMC with several systems updates the node's only when told so (sushy-tools does).
    const systems = linkPaths(prop((await call.get('/redfish/v1/Systems')).body, 'Members'));
    if (systems.length > 1) body.Targets = [(await getSystem(call)).path];
    const r = await call.send('POST', target, { body });
    if (r.status < 200 || r.status >= 300) throw statusError(r, `Redfish POST ${target}`);
    const reply = r.json();
    return locationPath(r.headers.location) ?? (reply && str(reply.TaskState) ? linkPath(reply['@odata.id']) : null);
  }
}

/** The task behind a monitor: its body, `busy` (the BMC did not answer, as while it flashes itself), or `gone`. */
async function readTask(call: RedfishCall, monitor: string): Promise<Json | 'busy' | 'gone'> {
  let r;
  try {
    r = await call.send('GET', monitor);
  } catch (err) {
    if (err instanceof BmcUnreachable) return 'busy';
    throw err;
  }
  if (r.status === 404 || r.status === 410) return 'gone';
  if (r.status >= 500) return 'busy';
  if (r.status < 200 || r.status >= 300) throw statusError(r, `Redfish GET ${monitor}`);
  const body = r.json();
  // A monitor answers 202 while the task runs and its result once it has ended.
  if (!body || !str(body.TaskState)) return r.status === 202 ? 'busy' : {};
  return body;
}
