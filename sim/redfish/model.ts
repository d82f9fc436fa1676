/**
 * What a simulated BMC serves, behind one interface so that the request handler does not
 * care whether bodies are synthetic (model-synthetic.ts) or come from a recorded mockup tree
 * (model-mockup.ts). Paths given to a model are normalised: lower case, no query, no
 * fragment, no trailing slash.
 */
import type { BootOverride, MediaState, SystemState } from './state.js';

/** A virtual media slot (a VirtualMedia resource) as the model serves it. */
export interface MediaSlot {
  /** `@odata.id` as served (canonical case). */
  id: string;
  /** Normalised path. */
  path: string;
  /** Normalised path of the system that boots from it. */
  system: string;
  mediaTypes: readonly string[];
  /** Normalised action targets; null when the slot has no such action. */
  insertTarget: string | null;
  ejectTarget: string | null;
}

export interface SimModel {
  /** Normalised paths of the ComputerSystems whose power and boot the simulator changes. */
  readonly systemPaths: ReadonlySet<string>;
  /** Normalised path of the session collection (`POST` logs in). */
  readonly sessionsPath: string;
  /** The state a BMC's system starts in. */
  initialSystem(path: string): SystemState;
  /** The body of a system, with the live power and boot state. */
  systemBody(path: string, state: SystemState, bmcIndex: number): string;
  /** Normalised path of the system's Reset action target. */
  resetTarget(path: string): string;
  resetTypes(path: string): readonly string[];
  /** Allowed BootSourceOverrideTarget values; null when the system has no Boot object. */
  bootTargets(path: string): readonly string[] | null;
  /** Virtual media slots by normalised path. */
  readonly mediaSlots: ReadonlyMap<string, MediaSlot>;
  /** Normalised InsertMedia/EjectMedia targets → their slot. */
  readonly mediaActions: ReadonlyMap<string, { slot: MediaSlot; action: 'insert' | 'eject' }>;
  /** The state a slot starts in. */
  initialMedia(slot: MediaSlot): MediaState;
  /** The body of a slot showing `view` (what a GET shows, which a sticky eject may hold back). */
  mediaBody(slot: MediaSlot, view: MediaState): string;
  /** The body of any other resource, or null when there is none. `query` is the raw query string. */
  get(path: string, query: string, bmcIndex: number): string | null;
  /** Normalised system path → `@odata.id` of its Bios, for the systems whose BIOS is simulated (bios.ts). */
  readonly biosOf?: ReadonlyMap<string, string>;
  /** `@odata.id` of the manager whose Dell OEM services the simulator serves (an iDRAC, dell.ts). */
  readonly dellManager?: string;
  /** The manager's firmware version, where the model says (the UpdateService's BMC starts from it). */
  readonly bmcFirmwareVersion?: string;
  /** Paths that answer without authentication (service root and friends). */
  isPublic(path: string): boolean;
}

/** Lower case, no query or fragment, no trailing slash; `%xx` decoded. */
export function normalisePath(raw: string): string {
  let p = raw;
  const q = p.search(/[?#]/);
  if (q >= 0) p = p.slice(0, q);
  try {
    p = decodeURIComponent(p);
  } catch {
    // A malformed escape stays as it is and will simply not be found.
  }
  p = p.toLowerCase();
  while (p.length > 1 && p.endsWith('/')) p = p.slice(0, -1);
  return p;
}

export const STANDARD_RESET_TYPES = ['On', 'ForceOff', 'GracefulShutdown', 'GracefulRestart', 'ForceRestart', 'Nmi', 'ForceOn', 'PushPowerButton', 'PowerCycle'];
export const STANDARD_BOOT_TARGETS = ['None', 'Pxe', 'Cd', 'Usb', 'Hdd', 'BiosSetup', 'Utilities', 'Diags', 'UefiShell', 'UefiTarget', 'UefiHttp'];

/** An empty slot. */
export function emptyMedia(): MediaState {
  return { image: '', imageName: '', inserted: false, writeProtected: true, connectedVia: 'NotConnected', transferProtocolType: null, userName: '', version: 1, ejectedAt: 0 };
}

export function defaultBoot(): BootOverride {
  return { BootSourceOverrideTarget: 'None', BootSourceOverrideEnabled: 'Disabled', BootSourceOverrideMode: 'UEFI' };
}
