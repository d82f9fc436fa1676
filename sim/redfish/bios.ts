/**
 * The BIOS of a simulated system (Redfish `Bios`, DSP0266's settings resources): the current
 * `Attributes`, a settings resource (`@Redfish.Settings`) that takes a PATCH of pending
 * attributes, applied when the system next boots as a real BMC applies them at POST, the
 * `#Bios.ResetBios` action (factory defaults at the next boot) and the attribute registry
 * (`/redfish/v1/Registries`, with the registry itself under a Location as HPE serves it).
 * Strict as a real BMC: an unknown or read-only attribute, or a value the registry does not
 * allow, refuses the whole PATCH with a Redfish error.
 */
import type { SimModel } from './model.js';
import { parseJsonObject, redfishError, type SimBmc, type SystemState } from './state.js';
import type { Reply } from './vmedia.js';

/** An attribute of the registry (AttributeRegistry's RegistryEntries.Attributes[]). */
interface AttributeDef {
  AttributeName: string;
  Type: 'Enumeration' | 'Integer' | 'String' | 'Boolean';
  ReadOnly: boolean;
  ResetRequired: boolean;
  DefaultValue: string | number | boolean;
  Value?: Array<{ ValueName: string; ValueDisplayName: string }>;
  LowerBound?: number;
  UpperBound?: number;
  MinLength?: number;
  MaxLength?: number;
}

const REGISTRY = 'BiosAttributeRegistrySIM.v1_0_0';
const REGISTRIES = '/redfish/v1/Registries';
const REGISTRY_FILE = `${REGISTRIES}/${REGISTRY}`;
const REGISTRY_BODY = `/redfish/v1/RegistryStore/registries/en/${REGISTRY}`;
const APPLY_TIMES = ['OnReset'];

const enumeration = (name: string, values: string[], dflt: string, resetRequired = true): AttributeDef => ({
  AttributeName: name, Type: 'Enumeration', ReadOnly: false, ResetRequired: resetRequired, DefaultValue: dflt,
  Value: values.map((v) => ({ ValueName: v, ValueDisplayName: v })),
});

/** The synthetic server's attributes, named as the DMTF mockup names its own. */
const ATTRIBUTES: readonly AttributeDef[] = [
  enumeration('BootMode', ['Uefi', 'Bios'], 'Uefi'),
  enumeration('EmbeddedSata', ['Raid', 'Ahci', 'Off'], 'Raid'),
  enumeration('NicBoot1', ['NetworkBoot', 'Disabled'], 'NetworkBoot'),
  enumeration('PowerProfile', ['MaxPerf', 'Balanced', 'PowerSaver'], 'MaxPerf'),
  enumeration('ProcHyperthreading', ['Enabled', 'Disabled'], 'Enabled'),
  enumeration('ProcTurboMode', ['Enabled', 'Disabled'], 'Enabled'),
  enumeration('ProcVirtualization', ['Enabled', 'Disabled'], 'Enabled'),
  { AttributeName: 'ProcCoreDisable', Type: 'Integer', ReadOnly: false, ResetRequired: true, DefaultValue: 0, LowerBound: 0, UpperBound: 32 },
  { AttributeName: 'SriovGlobalEnable', Type: 'Boolean', ReadOnly: false, ResetRequired: true, DefaultValue: false },
  { AttributeName: 'AdminPhone', Type: 'String', ReadOnly: false, ResetRequired: false, DefaultValue: '', MinLength: 0, MaxLength: 32 },
  { AttributeName: 'SystemBiosVersion', Type: 'String', ReadOnly: true, ResetRequired: false, DefaultValue: 'SIM.2.4.1' },
];
const BY_NAME = new Map(ATTRIBUTES.map((a) => [a.AttributeName, a]));

function defaults(): Record<string, unknown> {
  return Object.fromEntries(ATTRIBUTES.map((a) => [a.AttributeName, a.DefaultValue]));
}

interface BiosState {
  current: Record<string, unknown>;
  /** What the settings resource holds: only the attributes changed since the last boot (as iDRAC). */
  pending: Record<string, unknown>;
  resetPending: boolean;
  /** The outcome of the last boot's settings job, shown in `@Redfish.Settings.Messages`. */
  messages: Array<{ MessageId: string; RelatedProperties?: string[] }>;
  time: string;
}

const json = (status: number, body: unknown): Reply => ({ status, body: JSON.stringify(body) });
const error = (status: number, id: string, message: string, related?: string[]): Reply => ({ status, body: redfishError(id, message, related) });

/** Why `value` is not a value of `def`, or null when it is. */
function refusal(def: AttributeDef, value: unknown): Reply | null {
  const at = [`#/Attributes/${def.AttributeName}`];
  const notInList = () => error(400, 'PropertyValueNotInList', `The value ${JSON.stringify(value)} for the property ${def.AttributeName} is not in the list of acceptable values.`, at);
  const wrongType = () => error(400, 'PropertyValueTypeError', `The value ${JSON.stringify(value)} for the property ${def.AttributeName} is of a different type than the property can accept.`, at);
  switch (def.Type) {
    case 'Enumeration':
      if (typeof value !== 'string') return wrongType();
      return def.Value?.some((v) => v.ValueName === value) ? null : notInList();
    case 'Integer':
      if (typeof value !== 'number' || !Number.isInteger(value)) return wrongType();
      if ((def.LowerBound !== undefined && value < def.LowerBound) || (def.UpperBound !== undefined && value > def.UpperBound)) {
        return error(400, 'PropertyValueOutOfRange', `The value ${value} for the property ${def.AttributeName} is not in the supported range of acceptable values.`, at);
      }
      return null;
    case 'Boolean':
      return typeof value === 'boolean' ? null : wrongType();
    case 'String':
      if (typeof value !== 'string') return wrongType();
      if ((def.MinLength !== undefined && value.length < def.MinLength) || (def.MaxLength !== undefined && value.length > def.MaxLength)) {
        return error(400, 'PropertyValueFormatError', `The value ${JSON.stringify(value)} for the property ${def.AttributeName} is of a different format than the property can accept.`, at);
      }
      return null;
  }
}

export class Bios {
  private readonly states = new WeakMap<SystemState, BiosState>();
  /** Normalised path of each system's Bios → the system's normalised path and its Bios `@odata.id`. */
  private readonly byBiosPath = new Map<string, { system: string; id: string }>();

  constructor(model: SimModel) {
    for (const [system, id] of model.biosOf ?? []) this.byBiosPath.set(id.toLowerCase(), { system, id });
  }

  private state(system: SystemState): BiosState {
    let s = this.states.get(system);
    if (!s) {
      s = { current: defaults(), pending: {}, resetPending: false, messages: [], time: new Date().toISOString() };
      this.states.set(system, s);
    }
    return s;
  }

  /** The answer to a request for a BIOS resource or the registry, or null for any other path. */
  route(bmc: SimBmc, method: string, p: string, body: string, systemOf: (path: string) => SystemState): Reply | null {
    if (this.byBiosPath.size === 0) return null;
    if (p === REGISTRIES.toLowerCase() || p === REGISTRY_FILE.toLowerCase() || p === REGISTRY_BODY.toLowerCase()) {
      return method === 'GET' ? json(200, this.registryBody(p)) : error(405, 'OperationNotAllowed', `${method} is not allowed on ${p}`);
    }
    for (const [path, { system, id }] of this.byBiosPath) {
      if (p === path) {
        if (method !== 'GET') return error(405, 'OperationNotAllowed', 'The current BIOS settings are read-only: PATCH the settings resource.');
        return json(200, this.biosBody(id, this.state(systemOf(system))));
      }
      if (p === `${path}/settings`) {
        const s = this.state(systemOf(system));
        if (method === 'GET') return json(200, this.settingsBody(id, s));
        if (method === 'PATCH') return this.patch(bmc, s, body);
        return error(405, 'OperationNotAllowed', `${method} is not allowed on ${id}/Settings`);
      }
      if (p === `${path}/actions/bios.resetbios`) {
        if (method !== 'POST') return error(405, 'OperationNotAllowed', 'Actions need POST');
        const s = this.state(systemOf(system));
        s.resetPending = true;
        s.pending = {};
        bmc.event('bios', { change: 'reset-pending' });
        return { status: 204 };
      }
    }
    return null;
  }

  /** Whether settings wait for the system's next boot (a pending configuration job, on an iDRAC). */
  hasPending(system: SystemState): boolean {
    const s = this.states.get(system);
    return s !== undefined && (s.resetPending || Object.keys(s.pending).length > 0);
  }

  /** Drops what waits for the next boot (an iDRAC's job queue cleared); the names of the attributes dropped. */
  discardPending(bmc: SimBmc, system: SystemState): string[] {
    const s = this.states.get(system);
    if (!s || (!s.resetPending && Object.keys(s.pending).length === 0)) return [];
    const dropped = Object.keys(s.pending);
    s.pending = {};
    s.resetPending = false;
    bmc.event('bios', { change: 'discarded', dropped });
    return dropped;
  }

  /** The system booted: a factory reset, then the pending attributes, take effect (except those the faults drop). */
  booted(bmc: SimBmc, system: SystemState): void {
    const s = this.states.get(system);
    if (!s || (!s.resetPending && Object.keys(s.pending).length === 0)) return;
    if (s.resetPending) s.current = defaults();
    const dropped = Object.keys(s.pending).filter((k) => bmc.faults.biosUnapplied.includes(k));
    for (const [k, v] of Object.entries(s.pending)) if (!dropped.includes(k)) s.current[k] = v;
    s.messages = dropped.length ? [{ MessageId: 'Base.1.8.SettingsFailed', RelatedProperties: dropped.map((k) => `#/Attributes/${k}`) }] : [{ MessageId: 'Base.1.8.Success' }];
    bmc.event('bios', { change: 'applied', reset: s.resetPending, applied: Object.keys(s.pending).filter((k) => !dropped.includes(k)), dropped });
    s.pending = {};
    s.resetPending = false;
    s.time = new Date().toISOString();
  }

  private patch(bmc: SimBmc, s: BiosState, body: string): Reply {
    const patch = parseJsonObject(body);
    if (!patch) return error(400, 'MalformedJSON', 'The request body submitted was malformed JSON and could not be parsed by the receiving service.');
    for (const key of Object.keys(patch)) {
      if (key !== 'Attributes' && key !== '@Redfish.SettingsApplyTime') {
        return error(400, 'PropertyUnknown', `The property ${key} is not in the list of valid properties for the resource.`, [`#/${key}`]);
      }
    }
    const applyTime = patch['@Redfish.SettingsApplyTime'] as Record<string, unknown> | undefined;
    if (applyTime !== undefined && (typeof applyTime !== 'object' || applyTime === null || !APPLY_TIMES.includes(applyTime.ApplyTime as string))) {
      return error(400, 'PropertyValueNotInList', `The value ${JSON.stringify(applyTime)} for the property @Redfish.SettingsApplyTime is not in the list of acceptable values.`, ['#/@Redfish.SettingsApplyTime/ApplyTime']);
    }
    const attrs = patch.Attributes;
    if (typeof attrs !== 'object' || attrs === null || Array.isArray(attrs)) {
      return error(400, 'PropertyValueTypeError', 'The property Attributes must be an object.', ['#/Attributes']);
    }
    for (const [name, value] of Object.entries(attrs as Record<string, unknown>)) {
      const def = BY_NAME.get(name);
      const at = [`#/Attributes/${name}`];
      const refused = !def
        ? error(400, 'PropertyUnknown', `The property ${name} is not in the list of valid properties for the resource.`, at)
        : def.ReadOnly ? error(400, 'PropertyNotWritable', `The property ${name} is a read only property and cannot be assigned a value.`, at) : refusal(def, value);
      if (refused) {
        bmc.event('refused', { call: 'PATCH Bios/Settings', status: refused.status, attribute: name });
        return refused;
      }
    }
    Object.assign(s.pending, attrs);
    bmc.event('bios', { change: 'pending', attributes: attrs });
    return { status: 204 };
  }

  private biosBody(id: string, s: BiosState): Record<string, unknown> {
    return {
      '@odata.type': '#Bios.v1_2_0.Bios',
      '@odata.id': id,
      Id: 'Bios',
      Name: 'BIOS Configuration Current Settings',
      AttributeRegistry: REGISTRY,
      Attributes: s.current,
      ResetBiosToDefaultsPending: s.resetPending,
      '@Redfish.Settings': {
        '@odata.type': '#Settings.v1_3_5.Settings',
        SettingsObject: { '@odata.id': `${id}/Settings` },
        SupportedApplyTimes: APPLY_TIMES,
        Messages: s.messages,
        Time: s.time,
      },
      Actions: { '#Bios.ResetBios': { target: `${id}/Actions/Bios.ResetBios` } },
    };
  }

  private settingsBody(id: string, s: BiosState): Record<string, unknown> {
    return {
      '@odata.type': '#Bios.v1_2_0.Bios',
      '@odata.id': `${id}/Settings`,
      Id: 'Settings',
      Name: 'BIOS Configuration Pending Settings',
      AttributeRegistry: REGISTRY,
      Attributes: s.pending,
    };
  }

  private registryBody(p: string): Record<string, unknown> {
    if (p === REGISTRIES.toLowerCase()) {
      return { '@odata.type': '#MessageRegistryFileCollection.MessageRegistryFileCollection', '@odata.id': REGISTRIES, Name: 'Registry File Repository', 'Members@odata.count': 1, Members: [{ '@odata.id': REGISTRY_FILE }] };
    }
    if (p === REGISTRY_FILE.toLowerCase()) {
      return {
        '@odata.type': '#MessageRegistryFile.v1_1_0.MessageRegistryFile', '@odata.id': REGISTRY_FILE, Id: REGISTRY, Name: `${REGISTRY} Registry File`,
        Registry: REGISTRY, Languages: ['en'], Location: [{ Language: 'en', Uri: REGISTRY_BODY }],
      };
    }
    return {
      '@odata.type': '#AttributeRegistry.v1_3_0.AttributeRegistry', Id: REGISTRY, Name: 'Simulated BIOS Attribute Registry', Language: 'en',
      OwningEntity: 'Galvanic', RegistryVersion: '1.0.0', RegistryEntries: { Attributes: ATTRIBUTES },
    };
  }
}
