/**
 * The `redfish` BIOS interface (ironic/drivers/modules/redfish/bios.py): the BIOS settings read
 * with the attribute registry's details for the conductor to cache, and the
 * `apply_configuration` and `factory_reset` steps. Both change what the BMC applies at the next
 * boot (the `@Redfish.Settings` resource, the `#Bios.ResetBios` action), then reboot the node
 * (Ironic's reboot_to_finish_step) and check that the BMC applied them (Ironic's
 * _get_unapplied_bios_attrs); the cache is refreshed.
 *
 * In cleaning and deploying the reboot is into the agent, whose first heartbeat finishes the
 * step (`afterReboot`). In servicing the same happens when the servicing runs the agent (a
 * step of it needs one); otherwise the instance is rebooted in place and the step finished once
 * the node is on again, as Ironic reboots a node it booted no ramdisk for and polls the BMC.
 */
import { BiosStepFailed, InvalidParameterValue, UnsupportedDriverExtension } from '../../common/errors.js';
import type { BiosSetting } from '../../common/bios.js';
import { pyRepr } from '../../common/py-repr.js';
import { ProvisionState } from '../../common/states.js';
import { bootAgent } from '../deploy/agent-base.js';
import type { BiosInterface, DriverContext } from '../interfaces.js';
import { agentRunning, type StepArgInfo, type StepContext, type StepDeclaration, type StepRun } from '../steps.js';
import { statusError, type RedfishCall, type RedfishClient } from './client.js';
import { isObject, lastSegment, linkPath, linkPaths, prop, str, type Json } from './odata.js';
import { getSystem } from './system.js';

/** driver_internal_info key of a step waiting for its reboot (Ironic's _DII_STATE). */
const DII_STATE = 'redfish_bios_state';

const APPLY_ARGSINFO: Readonly<Record<string, StepArgInfo>> = { settings: { description: 'A list of BIOS settings to be applied', required: true } };

/** The node's Bios resource as read now. */
interface BiosRead {
  path: string;
  attributes: Json;
  settingsPath: string | null;
  applyTimes: string[];
  resetTarget: string | null;
  registry: string | null;
}

interface RequestedSetting {
  name: string;
  value: unknown;
}

async function readBios(call: RedfishCall, nodeUuid: string, unsupported: string): Promise<BiosRead> {
  const system = await getSystem(call);
  const path = linkPath(prop(system.body, 'Bios'));
  if (!path) throw new UnsupportedDriverExtension(unsupported.replace('%s', nodeUuid));
  const { body } = await call.get(path);
  const settings = prop(body, '@Redfish.Settings');
  const actions = prop(body, 'Actions');
  const reset = isObject(actions) ? prop(actions, '#Bios.ResetBios') : undefined;
  const times = isObject(settings) ? prop(settings, 'SupportedApplyTimes') : undefined;
  return {
    path,
    attributes: isObject(body.Attributes) ? body.Attributes : {},
    settingsPath: isObject(settings) ? linkPath(prop(settings, 'SettingsObject')) : null,
    applyTimes: Array.isArray(times) ? times.filter((t): t is string => typeof t === 'string') : [],
    resetTarget: isObject(reset) ? linkPath(reset.target) : null,
    registry: str(body.AttributeRegistry),
  };
}

/** The attributes waiting for the next boot (sushy's pending_attributes); {} when the BMC shows none. */
async function pendingAttributes(call: RedfishCall, bios: BiosRead): Promise<Json> {
  if (!bios.settingsPath) return {};
  try {
    const { body } = await call.get(bios.settingsPath);
    return isObject(body.Attributes) ? body.Attributes : {};
  } catch {
    return {};
  }
}

/**
 * The registry's attribute entries (sushy's get_attribute_registry): the registry file named
 * as the Bios names its registry, its English location. Null when the BMC has none.
 */
async function registryEntries(call: RedfishCall, name: string): Promise<Map<string, Json> | null> {
  const root = await call.get('/redfish/v1');
  const collection = linkPath(prop(root.body, 'Registries'));
  if (!collection) return null;
  const members = linkPaths(prop((await call.get(collection)).body, 'Members'));
  let file = members.find((m) => lastSegment(m).toLowerCase() === name.toLowerCase());
  if (!file) {
    for (const m of members) {
      const { body } = await call.get(m);
      if (str(body.Registry) === name || str(body.Id) === name) {
        file = m;
        break;
      }
    }
  }
  if (!file) return null;
  const locations = prop((await call.get(file)).body, 'Location');
  const list = Array.isArray(locations) ? locations.filter(isObject) : [];
  const location = list.find((l) => str(l.Language) === 'en') ?? list[0];
  const uri = location ? linkPath(location.Uri) : null;
  if (!uri) return null;
  const entries = prop((await call.get(uri)).body, 'RegistryEntries');
  const attrs = isObject(entries) ? prop(entries, 'Attributes') : undefined;
  if (!Array.isArray(attrs)) return null;
  return new Map(attrs.filter(isObject).flatMap((a) => (typeof a.AttributeName === 'string' ? [[a.AttributeName, a] as [string, Json]] : [])));
}

/** A value as Ironic stores it (a StringField: Python's str()). */
function storedValue(v: unknown): string | null {
  if (v === null || v === undefined) return null;
  if (typeof v === 'string') return v;
  if (typeof v === 'boolean' || typeof v === 'number') return pyRepr(v);
  return JSON.stringify(v);
}

const intOrNull = (v: unknown): number | null => (typeof v === 'number' && Number.isInteger(v) ? v : null);
const boolOrNull = (v: unknown): boolean | null => (typeof v === 'boolean' ? v : null);

/** A setting with the registry's description of it (Ironic's cache_bios_settings). */
function setting(name: string, value: unknown, reg: Json | undefined): BiosSetting {
  const values = reg?.Value;
  return {
    name,
    value: storedValue(value),
    attributeType: reg ? str(reg.Type) : null,
    // Ironic's _parse_allowable_values: ValueName, else ValueDisplayName.
    allowableValues: Array.isArray(values)
      ? values.filter(isObject).flatMap((v) => {
        const key = str(v.ValueName) || str(v.ValueDisplayName);
        return key ? [key] : [];
      })
      : null,
    lowerBound: intOrNull(reg?.LowerBound),
    maxLength: intOrNull(reg?.MaxLength),
    minLength: intOrNull(reg?.MinLength),
    readOnly: boolOrNull(reg?.ReadOnly),
    resetRequired: boolOrNull(reg?.ResetRequired),
    unique: boolOrNull(reg?.IsSystemUniqueProperty),
    upperBound: intOrNull(reg?.UpperBound),
  };
}

/** The `settings` argument: a list of {name, value}. @throws InvalidParameterValue */
function requestedSettings(nodeUuid: string, raw: unknown): RequestedSetting[] {
  const bad = () => new InvalidParameterValue(`Redfish BIOS apply_configuration failed for node ${nodeUuid}: "settings" must be a list of objects with a "name" and a "value", got ${JSON.stringify(raw)}.`);
  if (!Array.isArray(raw)) throw bad();
  return raw.map((s: unknown) => {
    if (!isObject(s) || typeof s.name !== 'string' || !Object.hasOwn(s, 'value')) throw bad();
    return { name: s.name, value: s.value };
  });
}

/**
 * Ironic's _validate_and_convert_settings, against the BMC's registry: read-only settings and
 * values the registry does not allow are refused; Integer and Boolean values given as strings
 * become the JSON types the BMC expects. Settings the registry does not know are left to the BMC.
 * @throws InvalidParameterValue
 */
function validateAndConvert(nodeUuid: string, settings: RequestedSetting[], registry: Map<string, Json> | null): void {
  const invalid: string[] = [];
  for (const s of settings) {
    const reg = registry?.get(s.name);
    if (!reg) continue;
    const cached = setting(s.name, null, reg);
    if (cached.readOnly) {
      invalid.push(s.name);
      continue;
    }
    if (cached.attributeType === 'Enumeration' && cached.allowableValues?.length && !cached.allowableValues.includes(s.value as string)) {
      invalid.push(s.name);
    } else if (cached.attributeType === 'Integer') {
      const n = typeof s.value === 'number' ? s.value : typeof s.value === 'string' && /^\s*[-+]?\d+\s*$/.test(s.value) ? Number(s.value) : NaN;
      if (!Number.isInteger(n) || (cached.lowerBound !== null && n < cached.lowerBound) || (cached.upperBound !== null && n > cached.upperBound)) invalid.push(s.name);
      else s.value = n;
    } else if (cached.attributeType === 'Boolean') {
      if (typeof s.value === 'string') s.value = s.value.toLowerCase() === 'true';
    } else if (cached.attributeType === 'String') {
      const len = String(s.value).length;
      if ((cached.minLength !== null && len < cached.minLength) || (cached.maxLength !== null && len > cached.maxLength)) invalid.push(s.name);
    }
  }
  if (invalid.length) throw new InvalidParameterValue(`Redfish BIOS apply_configuration failed for node ${nodeUuid}: invalid value for setting(s): ${invalid.join(', ')}`);
}

/** Ironic's _get_unapplied_bios_attrs: requested attributes the BMC does not show applied. */
function unapplied(requested: Json, current: Json, pending: Json): Json {
  // Some BMCs keep only the changed attributes pending (Dell), others every writable one (HPE, Lenovo).
  const purgePending = Object.keys(pending).length <= Object.keys(requested).length;
  const out: Json = {};
  for (const [name, value] of Object.entries(requested)) {
    if (value !== current[name] || (purgePending && Object.hasOwn(pending, name))) out[name] = value;
  }
  return out;
}

/**
 * Ironic's reboot_to_finish_step: into the agent, whose heartbeat calls `finish` (afterReboot);
 * in servicing without the agent, the instance in place, and `finish` at once.
 */
async function rebootToFinish(ctx: StepContext, finish: (ctx: StepContext) => Promise<StepRun>): Promise<StepRun> {
  if (ctx.node.provisionState !== ProvisionState.SERVICING || agentRunning(ctx)) {
    await bootAgent(ctx);
    return 'wait';
  }
  await ctx.power.setPowerState(ctx.driver, 'rebooting');
  return finish(ctx);
}

export class RedfishBios implements BiosInterface {
  readonly supported = true;
  readonly steps: readonly StepDeclaration[];

  constructor(private readonly client: RedfishClient) {
    const apply: Omit<StepDeclaration, 'priority'> = {
      step: 'apply_configuration', abortable: false, argsInfo: APPLY_ARGSINFO,
      run: (ctx, args) => this.applyConfiguration(ctx, args),
      afterReboot: (ctx) => this.verifyConfiguration(ctx),
    };
    const reset: Omit<StepDeclaration, 'priority'> = {
      step: 'factory_reset', abortable: false,
      run: (ctx) => this.factoryReset(ctx),
      afterReboot: (ctx) => this.finishReset(ctx),
    };
    this.steps = [
      { ...apply, priority: { clean: 0, deploy: 0 } },
      { ...reset, priority: { clean: 0, deploy: 0 } },
      // A servicing need not boot the agent for them: without it the instance reboots in place (rebootToFinish).
      { ...apply, priority: { service: 0 }, requiresRamdisk: false },
      { ...reset, priority: { service: 0 }, requiresRamdisk: false },
    ];
  }

  validate(driverInfo: Readonly<Record<string, unknown>>): void {
    this.client.parse(driverInfo);
  }

  readSettings(ctx: DriverContext): Promise<BiosSetting[]> {
    return this.client.run(ctx, async (call) => {
      const bios = await readBios(call, ctx.nodeUuid, 'Cannot fetch BIOS attributes for node %s, BIOS settings are not supported.');
      let registry: Map<string, Json> | null = null;
      try {
        registry = bios.registry ? await registryEntries(call, bios.registry) : null;
      } catch (err) {
        ctx.log.info({ err: (err as Error).message }, `Cannot get BIOS Registry attributes for node ${ctx.nodeUuid}`);
      }
      return Object.entries(bios.attributes).map(([name, value]) => setting(name, value, registry?.get(name)));
    });
  }

  private async cache(ctx: StepContext): Promise<void> {
    await ctx.record.biosSettings(await this.readSettings(ctx.driver));
  }

  private async applyConfiguration(ctx: StepContext, args: Record<string, unknown>): Promise<StepRun> {
    const uuid = ctx.node.uuid;
    const settings = requestedSettings(uuid, args.settings);
    const attributes = await this.client.run(ctx.driver, async (call) => {
      const bios = await readBios(call, uuid, 'Redfish BIOS factory reset failed for node %s, because BIOS settings are not supported.');
      validateAndConvert(uuid, settings, bios.registry ? await registryEntries(call, bios.registry).catch(() => null) : null);
      const wanted: Json = Object.fromEntries(settings.map((s) => [s.name, s.value]));
      // A request sent again after it was applied needs no reboot (Ironic's all_match).
      const pending = await pendingAttributes(call, bios);
      if (settings.every((s) => bios.attributes[s.name] === s.value && (!Object.hasOwn(pending, s.name) || pending[s.name] === s.value))) return null;
      if (!bios.settingsPath) throw new BiosStepFailed(`Redfish BIOS apply configuration failed for node ${uuid}. Error: the BIOS resource has no settings resource.`);
      const body: Json = { Attributes: wanted };
      if (bios.applyTimes.includes('OnReset')) body['@Redfish.SettingsApplyTime'] = { ApplyTime: 'OnReset' };
      const r = await call.send('PATCH', bios.settingsPath, { body });
      if (r.status < 200 || r.status >= 300) {
        throw new BiosStepFailed(`Redfish BIOS apply configuration failed for node ${uuid}. Error: ${statusError(r, `PATCH ${bios.settingsPath}`).message}`);
      }
      return wanted;
    });
    if (!attributes) {
      ctx.log.info(`All requested BIOS settings for node ${uuid} already match the current values, skipping apply and reboot.`);
      await this.cache(ctx);
      return 'done';
    }
    ctx.info[DII_STATE] = { reboot_requested: true, requested_bios_attrs: attributes };
    return rebootToFinish(ctx, (c) => this.verifyConfiguration(c));
  }

  private async verifyConfiguration(ctx: StepContext): Promise<StepRun> {
    const state = ctx.info[DII_STATE];
    delete ctx.info[DII_STATE];
    const requested = isObject(state) && isObject(state.requested_bios_attrs) ? state.requested_bios_attrs : {};
    const notUpdated = await this.client.run(ctx.driver, async (call) => {
      const bios = await readBios(call, ctx.node.uuid, 'Cannot fetch BIOS attributes for node %s, BIOS settings are not supported.');
      return unapplied(requested, bios.attributes, await pendingAttributes(call, bios));
    });
    await this.cache(ctx);
    if (Object.keys(notUpdated).length) {
      throw new BiosStepFailed(`Redfish BIOS apply_configuration step failed. Attributes ${pyRepr(notUpdated)} are not updated.`);
    }
    return 'done';
  }

  private async factoryReset(ctx: StepContext): Promise<StepRun> {
    const uuid = ctx.node.uuid;
    await this.client.run(ctx.driver, async (call) => {
      const bios = await readBios(call, uuid, 'Redfish BIOS factory reset failed for node %s, because BIOS settings are not supported.');
      if (!bios.resetTarget) throw new BiosStepFailed(`Redfish BIOS factory reset failed for node ${uuid}. Error: the BIOS resource has no #Bios.ResetBios action.`);
      const r = await call.send('POST', bios.resetTarget, { body: {} });
      if (r.status < 200 || r.status >= 300) {
        throw new BiosStepFailed(`Redfish BIOS factory reset failed for node ${uuid}. Error: ${statusError(r, `POST ${bios.resetTarget}`).message}`);
      }
    });
    ctx.info[DII_STATE] = { reboot_requested: true };
    return rebootToFinish(ctx, (c) => this.finishReset(c));
  }

  private async finishReset(ctx: StepContext): Promise<StepRun> {
    delete ctx.info[DII_STATE];
    await this.cache(ctx);
    return 'done';
  }
}
