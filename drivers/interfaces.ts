/**
 * The contract between the conductor and the drivers. Drivers know nothing of the
 * database: they get the node's identity and driver_info, and talk to the BMC.
 */
import type { Logger } from 'pino';
import type { ExistingPort, HooksOutcome } from './inspection-hooks.js';
import type { BmcPriority } from './bmc-budget.js';
import type { PowerTargetName, VirtualMediaDevice } from '../common/intent-kinds.js';
import type { StepContext, StepDeclaration } from './steps.js';
import type { BiosSetting } from '../common/bios.js';

export type PowerStateValue = 'power on' | 'power off' | 'error';
export type PowerTarget = PowerTargetName;

/** What a driver call gets to know about its node. */
export interface DriverContext {
  nodeUuid: string;
  driverInfo: Readonly<Record<string, unknown>>;
  log: Logger;
  /** Aborted when the caller gives up (timeout, shutdown): sockets and processes must close. */
  signal?: AbortSignal;
  /** An opaque label of the request being served, for BMC-side logs and the fake driver's record. */
  trace?: string;
  /** Which attempt at the request this call serves (1 for the first); retries count up. */
  attempt?: number;
  /** Its place when it waits for the BMC's budget (bmc-budget.ts); `intent` unless a periodic task says otherwise. */
  priority?: BmcPriority;
  /** The node beyond driver_info, where the caller holds it (the conductor's tasks); network boot needs it. */
  access?: NodeAccess;
}

/** A port as network boot sees it. */
export interface BootPort {
  /** The MAC address, lower case. */
  address: string;
  pxeEnabled: boolean;
  /** extra `client-id`: an InfiniBand port, whose PXELINUX configuration is named 20-<mac>. */
  clientId?: string;
}

/** The node fields a boot interface reads beyond driver_info; the conductor's node fits as it is. */
export interface BootNodeView {
  readonly uuid: string;
  readonly provisionState: string;
  readonly properties: Readonly<Record<string, unknown>>;
  readonly instanceInfo: Readonly<Record<string, unknown>>;
  readonly driverInfo: Readonly<Record<string, unknown>>;
  readonly driverInternalInfo: Readonly<Record<string, unknown>> | null;
}

/**
 * What the conductor lets a driver read of its node beyond driver_info, and write back
 * (drivers know no database): Ironic's `task.node`, `task.ports` and `node.save()`.
 */
export interface NodeAccess {
  /** The node as the task last wrote it. */
  readonly node: BootNodeView;
  /** The node's ports, read when asked. */
  ports(): Promise<readonly BootPort[]>;
  /**
   * Ironic's node_set_boot_device through the node's management interface, `bootMode` telling
   * it UEFI from BIOS where it must say (ipmitool's efiboot); driver_info
   * force_persistent_boot_device applies. @throws DriverError
   */
  setBootDevice(device: string, persistent: boolean, bootMode?: 'uefi' | 'bios'): Promise<void>;
  /**
   * Merges `patch` into driver_internal_info at once, and into every later write of the task,
   * so that a step's own copy of driver_internal_info does not undo it; `null` removes a key.
   */
  saveInternalInfo(patch: Readonly<Record<string, unknown>>): Promise<void>;
}

export interface PowerInterface {
  /** Parses driver_info; no I/O. @throws InvalidDriverInfo */
  validate(driverInfo: Readonly<Record<string, unknown>>): void;
  /** @throws BmcTimeout | BmcUnreachable | BmcAuthFailed | BmcRejected | BmcBadResponse */
  getPowerState(ctx: DriverContext): Promise<PowerStateValue>;
  /**
   * The same read, non-blocking: the power state sync runs many of these at once on the event
   * loop. Absent when a read needs a lane of its own (ipmi's ipmitool processes).
   */
  getPowerStateAsync?(ctx: DriverContext): Promise<PowerStateValue>;
  /** Drives the node to `target`; `timeout` (s) bounds soft actions. @throws DriverError */
  setPowerState(ctx: DriverContext, target: PowerTarget, timeout?: number): Promise<void>;
  getSupportedPowerStates(ctx: DriverContext): Promise<PowerTarget[]>;
}

export interface BootDeviceOptions {
  bootMode?: 'uefi' | 'bios';
}

export interface BootDevice {
  bootDevice: string | null;
  persistent: boolean | null;
}

/** Sensor data in Ironic's structure: {<SensorType>: {<sensor id>: {…}}}. */
export type SensorData = Record<string, Record<string, Record<string, unknown>>>;

export interface ManagementInterface {
  validate(driverInfo: Readonly<Record<string, unknown>>): void;
  getBootDevice(ctx: DriverContext): Promise<BootDevice>;
  /** `options.bootMode` says UEFI or BIOS where the BMC must be told (IPMI's efiboot flag). */
  setBootDevice(ctx: DriverContext, device: string, persistent: boolean, options?: BootDeviceOptions): Promise<void>;
  getSupportedBootDevices(ctx: DriverContext): Promise<string[]>;
  /**
   * The boot devices this interface accepts whatever the BMC says, when that is known
   * without asking it (fake, IPMI): the API refuses any other before queuing anything.
   */
  readonly staticBootDevices?: readonly string[];
  /** The MACs of the node's enabled NICs as the BMC reports them, lower-case (ports created before in-band inspection). */
  getMacAddresses?(ctx: DriverContext): Promise<string[]>;
  /** Synchronous-path sensor read (run in a worker pool). */
  getSensorData?(ctx: DriverContext): Promise<SensorData>;
  /** Non-blocking sensor read, run many at once on the event loop. */
  getSensorDataAsync?(ctx: DriverContext): Promise<SensorData>;
  /** The hardware's vendor as the BMC reports it (Ironic's detect_vendor), null when it says none. @throws DriverError */
  detectVendor?(ctx: DriverContext): Promise<string | null>;
}

/** A process to run: argv plus extra environment (credentials go there, never on argv). */
export interface ConsoleCommand {
  command: string;
  args: string[];
  env: Record<string, string>;
}

/**
 * A serial console. The conductor runs `command` as one long-lived process per node: its
 * stdout (and stderr) is the console output, its stdin the console input; at stdin EOF it
 * must end. `reset`, when given, is run before a restart to clear a session the BMC may
 * still hold for a process that died (IPMI's "SOL payload already active").
 */
export interface ConsoleInterface {
  validate(driverInfo: Readonly<Record<string, unknown>>): void;
  /** Null for an interface without a console (no-console). @throws InvalidDriverInfo */
  command(nodeUuid: string, driverInfo: Readonly<Record<string, unknown>>): ConsoleCommand | null;
  reset?(driverInfo: Readonly<Record<string, unknown>>): ConsoleCommand;
}

/** What a boot interface needs to boot a node into an instance image (Ironic's `prepare_instance`). */
export interface InstanceBootRequest {
  /** URL of a bootable ISO (ramdisk deploy: `instance_info.boot_iso`), handed to the BMC as is. */
  bootIso?: string;
  /** A kernel and ramdisk to boot instead (`instance_info.kernel` / `ramdisk`), where the interface `bootsKernel`. */
  kernel?: string;
  ramdisk?: string;
  /** The node's wanted boot mode (`properties.capabilities` boot_mode), when it names one. */
  bootMode?: 'uefi' | 'bios';
  /** A config drive to attach as a second medium where the BMC offers one (URL or gzip+base64 ISO). */
  configdrive?: string;
  /** driver_info `force_persistent_boot_device`: Default, Always or Never. */
  forcePersistentBootDevice?: 'Default' | 'Always' | 'Never';
}

/** What booting the agent needs beyond the node's driver_info, where the interface finds its image. */
export interface RamdiskBootRequest {
  /** The node's boot mode (`properties.capabilities` boot_mode), when it names one. */
  bootMode?: 'uefi' | 'bios';
  /** Why the agent boots: an inspection gives it the inspection callback (Ironic's managed inspection). Default deploy. */
  purpose?: 'deploy' | 'inspect';
  /** The node's instance_info `kernel_append_params`, which takes precedence over driver_info's. */
  instanceKernelAppendParams?: unknown;
  /** The node's vendor as cached in `properties.vendor`, when it is known (Ironic's _validate_vendor reads it). */
  vendor?: string;
}

/** What a boot interface's validation reads of its node beyond driver_info (Ironic's task.node and task.ports). */
export interface BootValidation {
  uuid: string;
  driverInfo: Readonly<Record<string, unknown>>;
  instanceInfo: Readonly<Record<string, unknown>>;
  properties: Readonly<Record<string, unknown>>;
  /** Undefined where the caller did not read them; the boot itself checks them then. */
  ports?: readonly BootPort[];
}

/**
 * Boots a node from media (Ironic's BootInterface, the part a deploy without an agent uses).
 * Implementations touch only the BMC; power is the deploy interface's job.
 */
export interface BootInterface {
  /** Parses driver_info; no I/O. @throws InvalidDriverInfo | MissingParameterValue */
  validate(driverInfo: Readonly<Record<string, unknown>>): void;
  /** Whether this interface can boot a ramdisk deploy's ISO (Ironic's `ramdisk_boot` capability). */
  readonly ramdiskBoot: boolean;
  /** Whether it can also boot a ramdisk deploy's kernel and ramdisk instead of an ISO (network boot). */
  readonly bootsKernel?: boolean;
  /** Checks what the node needs beyond driver_info (its ports, boot mode, instance_info). @throws MissingParameterValue | InvalidParameterValue */
  validateNode?(node: BootValidation): void;
  /**
   * Ejects whatever is inserted, inserts the ISO, syncs the boot mode and sets the next boot
   * to it. Does not power on. @throws DriverError (BmcRejected, BmcTimeout, …)
   */
  prepareInstance(ctx: DriverContext, req: InstanceBootRequest): Promise<void>;
  /** Ejects every medium this interface may have inserted and clears the boot override. */
  cleanUpInstance(ctx: DriverContext): Promise<void>;
  /**
   * Checks that the node's agent ramdisk can be found (Ironic's parameters of prepare_ramdisk,
   * and validate_inspection). Absent on an interface that cannot boot the agent.
   * @throws MissingParameterValue | InvalidParameterValue
   */
  validateRamdisk?(nodeUuid: string, driverInfo: Readonly<Record<string, unknown>>): void;
  /**
   * Sets the node up to boot the agent once at its next power on (Ironic's prepare_ramdisk).
   * Does not power on. @throws DriverError | MissingParameterValue | InvalidParameterValue
   */
  prepareRamdisk?(ctx: DriverContext, req: RamdiskBootRequest): Promise<void>;
  /** Undoes prepareRamdisk (Ironic's clean_up_ramdisk). */
  cleanUpRamdisk?(ctx: DriverContext): Promise<void>;
  /**
   * Inserts `imageUrl` as a virtual medium of `device` (`POST /v1/nodes/{n}/vmedia`); absent
   * when the interface has no virtual media. @throws DriverError
   */
  attachMedia?(ctx: DriverContext, device: VirtualMediaDevice, imageUrl: string): Promise<void>;
  /** Ejects the media of these devices, or of every device when none are named. @throws DriverError */
  detachMedia?(ctx: DriverContext, devices?: readonly VirtualMediaDevice[]): Promise<void>;
  /** The virtual media slots as the BMC shows them now (`GET /v1/nodes/{n}/vmedia`). @throws DriverError */
  getMedia?(ctx: DriverContext): Promise<VirtualMediaSlot[]>;
}

export { VIRTUAL_MEDIA_DEVICES, type VirtualMediaDevice } from '../common/intent-kinds.js';

/** One virtual media slot, in Ironic's shape. */
export interface VirtualMediaSlot {
  media_types: string[];
  inserted: boolean;
  image: string | null;
}

/** What out-of-band inspection found. */
export interface InspectionResult {
  /** Node properties to merge (memory_mb, local_gb, cpu_arch, cpus, capabilities…). */
  properties: Record<string, unknown>;
  /** The inventory in IPA's shape, served at GET /v1/nodes/{n}/inventory. */
  inventory: Record<string, unknown>;
  /** Plugin data stored beside the inventory. */
  pluginData: Record<string, unknown>;
  /** NIC MAC addresses (lowercase) for which ports should exist. */
  macs: string[];
}

/**
 * Inspection (Ironic's InspectInterface). Out-of-band interfaces read the hardware in
 * `inspectHardware`; an in-band one (`inBand`) boots the agent, which posts its inventory to
 * `/v1/continue_inspection`, and `processInventory` turns that into what changes.
 */
export interface InspectInterface {
  validate(driverInfo: Readonly<Record<string, unknown>>): void;
  /** The node waits in `inspect wait` for the agent's inventory; the conductor boots the agent. */
  readonly inBand?: boolean;
  /**
   * What an agent's inventory changes on its node (in-band interfaces only).
   * @throws HardwareInspectionFailure
   */
  processInventory?(
    node: { uuid: string; properties: Readonly<Record<string, unknown>> },
    inventory: Record<string, unknown>,
    pluginData: Record<string, unknown>,
    ports: readonly ExistingPort[],
  ): HooksOutcome;
  /**
   * Reads the hardware. `existingCapabilities` is the node's `properties.capabilities`, so that
   * a boot_mode already set is kept. Null: nothing was read and nothing is to change (fake).
   * @throws HardwareInspectionFailure | DriverError
   */
  inspectHardware(ctx: DriverContext, existingCapabilities: string | undefined): Promise<InspectionResult | null>;
}

/**
 * An interface that Galvanic resolves, stores and validates but whose steps are run by the
 * conductor (deploy) or that has no operations yet (raid, bios, vendor, …). `supported: false`
 * is Ironic's `no-*` interface: validate reports it as unsupported.
 */
export interface GenericInterface {
  readonly supported: boolean;
  validate(driverInfo: Readonly<Record<string, unknown>>): void;
  /** The clean, deploy and service steps it offers. */
  readonly steps?: readonly StepDeclaration[];
}

/**
 * A node vendor passthru method (Ironic's `@passthru`): the HTTP verbs it answers, whether the
 * API answers before it runs (`async`, 202) or with its value (200), and its work.
 */
export interface VendorMethod {
  readonly httpMethods: readonly string[];
  readonly async: boolean;
  readonly description: string;
  /** Ironic's `attach`: the value is the response body itself, not JSON. */
  readonly attach: boolean;
  readonly requireExclusiveLock: boolean;
  /** Checks the arguments without the BMC, before anything is queued. @throws InvalidParameterValue | MissingParameterValue */
  validate?(args: Readonly<Record<string, unknown>>): void;
  /** Checks what needs the BMC, then does the work; the value is a synchronous method's answer. @throws InvalidParameterValue | DriverError */
  run(ctx: DriverContext, args: Readonly<Record<string, unknown>>): Promise<unknown>;
}

/** Ironic's VendorInterface: a generic interface with passthru methods (none for `no-vendor`). */
export interface VendorInterface extends GenericInterface {
  readonly methods?: Readonly<Record<string, VendorMethod>>;
}

/** A RAID interface (Ironic's RAIDInterface): its steps, and its check of a target configuration. */
export interface RaidInterface extends GenericInterface {
  /**
   * Ironic's validate_raid_config: the schema (common/raid.ts) and what the interface adds to
   * it; no I/O. Absent: the schema alone. @throws InvalidParameterValue
   */
  validateRaidConfig?(config: Record<string, unknown>): void;
}

/** A BIOS interface: its steps, and (where it talks to the BMC) the reading the conductor caches. */
export interface BiosInterface extends GenericInterface {
  /**
   * The BIOS settings as the BMC has them now, with their registry details (the reading of
   * Ironic's cache_bios_settings; the conductor stores it). Absent: nothing to cache.
   * @throws UnsupportedDriverExtension (the system has no BIOS resource) | DriverError
   */
  readSettings?(ctx: DriverContext): Promise<BiosSetting[]>;
}

/** A firmware component's version as the BMC reports it (`bios`, `bmc`, `nic:<id>`). */
export interface FirmwareComponentReading {
  component: string;
  currentVersion: string;
}

/** A firmware interface (Ironic's FirmwareInterface): its update steps, and what it reads of the node's firmware. */
export interface FirmwareInterface extends GenericInterface {
  /**
   * Ironic's cache_firmware_components: the versions the BMC reports now, for the conductor to cache.
   * @throws UnsupportedDriverExtension when the BMC reports none
   */
  readComponents?(ctx: DriverContext): Promise<FirmwareComponentReading[]>;
}

/** What a deploy interface's validation reads of its node. */
export interface DeployValidation extends BootValidation {
  /** The node's boot interface, when it is enabled here. */
  boot: BootInterface | undefined;
}

/**
 * How an instance gets onto a node (Ironic's DeployInterface). Its deploy steps are its own
 * declarations; `deploy.deploy` is the core step every deploy runs. The conductor's step
 * framework runs them, and the cleaning, from the node's state.
 */
export interface DeployInterface {
  readonly supported: true;
  /** Works through the agent (Ironic's AgentBaseMixin): cleaning boots it, and it offers in-band steps. */
  readonly usesAgent: boolean;
  /** How the instance boots (Ironic's boot option): from the disk, or from a ramdisk the boot interface serves. */
  readonly bootOption: 'local' | 'ramdisk';
  /** Parses driver_info; no I/O. */
  validate(driverInfo: Readonly<Record<string, unknown>>): void;
  /** Ironic's DeployInterface.validate: what a deploy needs of the node. @throws InvalidParameterValue | MissingParameterValue */
  validateDeploy(node: DeployValidation): void;
  readonly steps: readonly StepDeclaration[];
  /** Ironic's tear_down: the instance's boot undone and the node powered off; whether it was. */
  tearDown(ctx: Pick<StepContext, 'node' | 'driver' | 'boot' | 'power'>): Promise<{ poweredOff: boolean }>;
}

export type InterfaceKind =
  | 'bios' | 'boot' | 'console' | 'deploy' | 'firmware' | 'inspect' | 'management' | 'network' | 'power' | 'raid'
  | 'rescue' | 'storage' | 'vendor';
/** Every interface kind a node has, in Ironic's order. */
export const INTERFACE_KINDS: readonly InterfaceKind[] = [
  'bios', 'boot', 'console', 'deploy', 'firmware', 'inspect', 'management', 'network', 'power', 'raid', 'rescue', 'storage', 'vendor',
];

/** A hardware type names the interfaces it supports, in order of preference. */
export interface HardwareType {
  name: string;
  supported: Record<InterfaceKind, readonly string[]>;
  /** driver_info keys and their descriptions, for GET /v1/drivers/{name}/properties. */
  properties: Readonly<Record<string, string>>;
}

/** Interface implementations by kind and name. */
export interface InterfaceImplementations {
  bios: Record<string, BiosInterface>;
  boot: Record<string, BootInterface>;
  console: Record<string, ConsoleInterface>;
  deploy: Record<string, DeployInterface>;
  firmware: Record<string, FirmwareInterface>;
  inspect: Record<string, InspectInterface>;
  management: Record<string, ManagementInterface>;
  network: Record<string, GenericInterface>;
  power: Record<string, PowerInterface>;
  raid: Record<string, RaidInterface>;
  rescue: Record<string, GenericInterface>;
  storage: Record<string, GenericInterface>;
  vendor: Record<string, VendorInterface>;
}
