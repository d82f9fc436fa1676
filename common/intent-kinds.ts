/**
 * The contract of each intent kind: the type of its arguments, the parser the API checks a
 * step's arguments with, and whether a run may be repeated after its conductor died mid-way.
 * The API validates with it, the actions read their arguments through it, and recovery asks it
 * what to requeue. A leaf: no I/O, nothing of ours but errors and states.
 */
import { InvalidParameterValue, NotAcceptable } from './errors.js';
import { ProvisionState, type ProvisionWork } from './states.js';

export const POWER_TARGETS = ['power on', 'power off', 'rebooting', 'soft power off', 'soft rebooting'] as const;
export type PowerTargetName = (typeof POWER_TARGETS)[number];
/** Ironic's boot_devices.VMEDIA_DEVICES. */
export const VIRTUAL_MEDIA_DEVICES = ['disk', 'cdrom', 'floppy'] as const;
export type VirtualMediaDevice = (typeof VIRTUAL_MEDIA_DEVICES)[number];

/** What a parser needs of the request's microversion. */
export interface VersionGate {
  atLeast(minor: number): boolean;
}

export interface PowerArgs {
  target: PowerTargetName;
  timeout?: number;
}
export interface BootDeviceArgs {
  boot_device: string;
  persistent: boolean;
}
export interface MaintenanceArgs {
  maintenance: boolean;
  reason: string | null;
}
export interface ConsoleArgs {
  enabled: boolean;
}
/** A clean, service or deploy step as a request names it. */
export interface RequestedStep {
  interface: string;
  step: string;
  args?: Record<string, unknown>;
  priority?: number;
}
/** What the API queues for a provision state change: the verb, the transition it started and its arguments. */
export interface ProvisionArgs {
  verb: string;
  target: string;
  onFail: string;
  work?: ProvisionWork;
  /** Manual cleaning's steps (`clean` with `clean_steps`). */
  cleanSteps?: RequestedStep[];
  /** Servicing's steps (`service` with `service_steps`). */
  serviceSteps?: RequestedStep[];
  /** Whether tear-down is followed by automated cleaning (decided when it was asked). */
  automatedClean?: boolean;
  /** What the agent posted to /v1/continue_inspection (`process_inspection`). */
  inventory?: Record<string, unknown>;
  pluginData?: Record<string, unknown>;
  /** `[inspector]` options in force when the inspection was asked for or continued. */
  inspector?: { powerOff: boolean; preCreatePorts: boolean };
  /** The user's deploy steps (1.69). */
  deploySteps?: RequestedStep[];
  /** Manual cleaning without booting the agent (1.70). */
  disableRamdisk?: boolean;
}
/** What an agent posted to /v1/continue_inspection, and the `[inspector]` options then in force. */
export interface InspectionData {
  inventory: Record<string, unknown>;
  pluginData: Record<string, unknown>;
  inspector: { powerOff: boolean; preCreatePorts: boolean };
}
/** What a group operation queues for a provision step: the verb, not yet a transition. */
export interface ProvisionStepArgs {
  verb: string;
  /** `[conductor] automated_clean` when the operation was created, for nodes that do not say. */
  automatedCleanDefault: boolean;
  /** An in-band inspection's data, handed to the step waiting for it (api/inspection.ts). */
  inspection?: InspectionData;
}

/** The processing of an agent's inspection data: Ironic's continue_inspection (inspecting → manageable). */
export function processInspectionArgs(data: InspectionData): ProvisionArgs {
  return { verb: 'continue_inspection', target: ProvisionState.MANAGEABLE, onFail: ProvisionState.INSPECTFAIL, work: 'process_inspection', ...data };
}
export interface AttachMediaArgs {
  device_type: VirtualMediaDevice;
  image_url: string;
  image_download_source: 'http' | 'local' | 'swift';
}
export interface DetachMediaArgs {
  device_types: VirtualMediaDevice[] | null;
}
/** A node vendor passthru call: the method, the HTTP verb it came with, and its body. */
export interface VendorPassthruArgs {
  method: string;
  http_method: string;
  args: Record<string, unknown>;
}
export type NoArgs = Record<string, never>;

/** The arguments of each kind. */
export interface IntentArgsByKind {
  power: PowerArgs;
  get_power_state: NoArgs;
  set_boot_device: BootDeviceArgs;
  get_boot_device: NoArgs;
  get_supported_boot_devices: NoArgs;
  maintenance: MaintenanceArgs;
  console: ConsoleArgs;
  provision: ProvisionArgs;
  provision_step: ProvisionStepArgs;
  /** What a heartbeat queues: look at the agent and carry the deploy or cleaning on. */
  agent_continue: NoArgs;
  attach_virtual_media: AttachMediaArgs;
  detach_virtual_media: DetachMediaArgs;
  get_virtual_media: NoArgs;
  vendor_passthru: VendorPassthruArgs;
}
export type IntentKind = keyof IntentArgsByKind;

interface KindContract<A> {
  /**
   * Checks a step's arguments as `POST /v1/nodes/{n}/intents` and group operations take them;
   * kinds without one are queued only by their own endpoints, which check their bodies.
   */
  parse?(raw: Record<string, unknown>, version: VersionGate): A;
  /**
   * Whether a run cut short by its conductor's death may simply run again. A reboot half done
   * and done again reboots the machine twice; a half-done provision transition needs a look.
   */
  safeToRepeat(args: A): boolean;
}

const always = () => true;
const never = () => false;
const noArgs = (): NoArgs => ({});

export function parsePowerArgs(body: Record<string, unknown>, version: VersionGate): PowerArgs {
  const extra = Object.keys(body).filter((k) => k !== 'target' && k !== 'timeout');
  if (extra.length) throw new InvalidParameterValue(`Unknown attribute(s) for power state change: ${extra.join(', ')}`);
  const { target, timeout } = body;
  if (typeof target !== 'string' || !(POWER_TARGETS as readonly string[]).includes(target)) {
    throw new InvalidParameterValue(`Invalid power target ${JSON.stringify(target)}: expected one of ${POWER_TARGETS.join(', ')}.`);
  }
  if ((target.startsWith('soft') || timeout !== undefined) && !version.atLeast(27)) {
    throw new NotAcceptable('Soft power actions and "timeout" require API version 1.27 or later.');
  }
  if (timeout !== undefined && timeout !== null && (!Number.isInteger(timeout) || (timeout as number) < 1)) {
    throw new InvalidParameterValue(`Invalid timeout value ${JSON.stringify(timeout)}: it must be a positive integer.`);
  }
  const t = target as PowerTargetName;
  return timeout === undefined || timeout === null ? { target: t } : { target: t, timeout: timeout as number };
}

/**
 * Boot device names any management interface may accept: Ironic's `boot_devices` (with
 * `uefihttp` of newer releases) and the Redfish names Galvanic maps (`usb`, `uefi-http`).
 */
const KNOWN_BOOT_DEVICES: ReadonlySet<string> = new Set([
  'pxe', 'disk', 'cdrom', 'bios', 'safe', 'wanboot', 'iscsiboot', 'floppy', 'uefihttp', 'usb', 'uefi-http',
]);

export function parseBootDeviceArgs(body: Record<string, unknown>): BootDeviceArgs {
  const extra = Object.keys(body).filter((k) => k !== 'boot_device' && k !== 'persistent');
  if (extra.length) throw new InvalidParameterValue(`Unknown attribute(s) for boot device: ${extra.join(', ')}`);
  if (typeof body.boot_device !== 'string' || !body.boot_device) throw new InvalidParameterValue('"boot_device" is required and must be a string.');
  if (!KNOWN_BOOT_DEVICES.has(body.boot_device)) throw new InvalidParameterValue(`Invalid boot device ${body.boot_device} specified.`);
  if (body.persistent !== undefined && typeof body.persistent !== 'boolean') throw new InvalidParameterValue('"persistent" must be a boolean.');
  return { boot_device: body.boot_device, persistent: body.persistent ?? false };
}

function parseMaintenanceArgs(args: Record<string, unknown>): MaintenanceArgs {
  if (typeof args.maintenance !== 'boolean') throw new InvalidParameterValue('maintenance step needs "maintenance": true or false.');
  if (args.reason !== undefined && args.reason !== null && typeof args.reason !== 'string') throw new InvalidParameterValue('maintenance reason must be a string.');
  return { maintenance: args.maintenance, reason: (args.reason as string | null | undefined) ?? null };
}

/** Every kind's contract; its keys are the kinds there are. */
export const INTENT_KINDS: { readonly [K in IntentKind]: KindContract<IntentArgsByKind[K]> } = {
  power: { parse: parsePowerArgs, safeToRepeat: (a) => a.target !== 'rebooting' && a.target !== 'soft rebooting' },
  set_boot_device: { parse: parseBootDeviceArgs, safeToRepeat: always },
  get_boot_device: { parse: noArgs, safeToRepeat: always },
  get_power_state: { parse: noArgs, safeToRepeat: always },
  maintenance: { parse: parseMaintenanceArgs, safeToRepeat: always },
  get_supported_boot_devices: { safeToRepeat: always },
  console: { safeToRepeat: always },
  provision: { safeToRepeat: never },
  provision_step: { safeToRepeat: never },
  // The run's state is the node's (the step at work, recorded before it runs) and the agent's
  // (its command list): a repeat reads both and sends no command the agent already has.
  agent_continue: { safeToRepeat: always },
  attach_virtual_media: { safeToRepeat: always },
  detach_virtual_media: { safeToRepeat: always },
  get_virtual_media: { safeToRepeat: always },
  // A read may run again; a change (a subscription created twice) may not.
  vendor_passthru: { safeToRepeat: (a) => a.http_method === 'GET' },
};

function isKind(kind: string): kind is IntentKind {
  return Object.hasOwn(INTENT_KINDS, kind);
}

/** The kinds a step may name (those with a parser), in the order they are listed. */
export const STEP_KINDS: readonly IntentKind[] = (Object.keys(INTENT_KINDS) as IntentKind[]).filter((k) => INTENT_KINDS[k].parse !== undefined);

/** Checks one step's arguments by its kind's parser; undefined when the kind takes no steps. */
export function parseStepArgs(kind: string, raw: Record<string, unknown>, version: VersionGate): Record<string, unknown> | undefined {
  if (!isKind(kind)) return undefined;
  const parse = INTENT_KINDS[kind].parse as ((raw: Record<string, unknown>, version: VersionGate) => object) | undefined;
  return parse ? { ...parse(raw, version) } : undefined;
}

/**
 * An intent's arguments as `kind`'s type. The one place stored arguments become typed: they
 * were checked by the kind's parser (or built typed, see intentArgs) when queued. An action
 * may run another kind's work with its own arguments (a provision step runs a provision).
 */
export function argsOf<K extends IntentKind>(intent: { args: Record<string, unknown> }, _kind: K): IntentArgsByKind[K] {
  return intent.args as unknown as IntentArgsByKind[K];
}

/** Typed arguments as an intent stores them. */
export function intentArgs<K extends IntentKind>(_kind: K, args: IntentArgsByKind[K]): Record<string, unknown> {
  return { ...args };
}

/** Whether a running intent cut short by its conductor's death may run again (see KindContract). */
export function safeToRepeat(intent: { kind: string; args: Record<string, unknown> }): boolean {
  if (!isKind(intent.kind)) return false;
  const contract = INTENT_KINDS[intent.kind] as KindContract<unknown>;
  return contract.safeToRepeat(intent.args);
}
