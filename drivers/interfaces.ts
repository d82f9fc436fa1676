/**
 * The contract between the conductor and the drivers. Drivers know nothing of the
 * database: they get the node's identity and driver_info, and talk to the BMC.
 */
import type { Logger } from 'pino';

export type PowerStateValue = 'power on' | 'power off' | 'error';
export type PowerTarget = 'power on' | 'power off' | 'rebooting' | 'soft power off' | 'soft rebooting';

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
}

export interface PowerInterface {
  /** Parses driver_info; no I/O. @throws InvalidDriverInfo */
  validate(driverInfo: Readonly<Record<string, unknown>>): void;
  /** @throws BmcTimeout | BmcUnreachable | BmcAuthFailed | BmcRejected | BmcBadResponse */
  getPowerState(ctx: DriverContext): Promise<PowerStateValue>;
  /** Drives the node to `target`; `timeout` (s) bounds soft actions. @throws DriverError */
  setPowerState(ctx: DriverContext, target: PowerTarget, timeout?: number): Promise<void>;
  getSupportedPowerStates(ctx: DriverContext): Promise<PowerTarget[]>;
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
  setBootDevice(ctx: DriverContext, device: string, persistent: boolean): Promise<void>;
  getSupportedBootDevices(ctx: DriverContext): Promise<string[]>;
  /**
   * The boot devices this interface accepts whatever the BMC says, when that is known
   * without asking it (fake, IPMI): the API refuses any other before queuing anything.
   */
  readonly staticBootDevices?: readonly string[];
  /** Synchronous-path sensor read (run in a worker pool). */
  getSensorData?(ctx: DriverContext): Promise<SensorData>;
  /** Non-blocking sensor read, run many at once on the event loop. */
  getSensorDataAsync?(ctx: DriverContext): Promise<SensorData>;
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

export type InterfaceKind = 'power' | 'management' | 'console';
export const INTERFACE_KINDS: readonly InterfaceKind[] = ['power', 'management', 'console'];

/** A hardware type names the interfaces it supports, in order of preference. */
export interface HardwareType {
  name: string;
  supported: Record<InterfaceKind, readonly string[]>;
  /** driver_info keys and their descriptions, for GET /v1/drivers/{name}/properties. */
  properties: Readonly<Record<string, string>>;
}

/** Interface implementations by kind and name. */
export interface InterfaceImplementations {
  power: Record<string, PowerInterface>;
  management: Record<string, ManagementInterface>;
  console: Record<string, ConsoleInterface>;
}
