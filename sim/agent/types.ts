/**
 * Options, fault knobs and the witness read-out of the ironic-python-agent simulator.
 */
import type { SoftRaidDevice } from './raid.js';
import type { Dispatcher } from 'undici';
import type { SimBmc } from '../redfish/state.js';
import type { IsoCmdlineReader } from './iso-cmdline.js';

/** How the agents of a Redfish simulator fleet behave (`startRedfishSim({agent})`). */
export interface AgentSimOptions {
  /** Galvanic's API, as IPA's `ipa-api-url` kernel argument: `http://127.0.0.1:6385`. */
  apiUrl: string;
  /**
   * A booted virtual-media image whose URL matches this is an agent ISO, which calls `apiUrl`.
   * Any other http(s) image is read as a BMC reads it (byte ranges): an ISO whose boot loader
   * passes `ipa-api-url` (or `ipa-inspection-callback-url`) is an agent ISO that calls that URL.
   */
  isoPattern?: RegExp;
  /** An agent comes up this long (s, uniform in [min, max]) after its host booted the ISO (default [1, 2]). */
  bootSeconds?: [number, number];
  /** write_image takes image bytes / (writeMBps × 10⁶) s at least (default 200). */
  writeMBps?: number;
  /** A forced heartbeat (after an async command) comes at least this long after the previous one (ms, default 5000). */
  heartbeatMinGapMs?: number;
  /** The longest wait between lookup retries (ms, default 2000); waits grow exponentially with jitter up to it. */
  lookupRetryMs?: number;
  /**
   * The ramdisk also carries OpenShift's CoreOSInstallHardwareManager (ironic-agent-image), whose
   * `install_coreos` deploy step Metal3's custom deploy runs (default false).
   */
  coreosInstaller?: boolean;
  /** Address and first port of the agents' shared server (default 127.0.0.1, a free port). */
  host?: string;
  port?: number;
  /**
   * IPA's `enable_auto_tls` (default true, as IPA >= 7): against an API of 1.68 or later the
   * agents serve HTTPS with a self-signed certificate for `host` and send it as agent_verify_ca.
   */
  autoTls?: boolean;
}

/** What every agent of a fleet shares: its options, resolved. */
export interface AgentEnv {
  apiUrl: string;
  /** `host:port` of each port of the agents' shared server. */
  authorities: string[];
  /** The PEM certificate of automatic TLS, or null when it is off. */
  certificate: string | null;
  dispatcher: Dispatcher;
  bootMs: [number, number];
  writeBytesPerMs: number;
  heartbeatMinGapMs: number;
  lookupRetryMs: number;
  /** Reads the kernel command line of the ISOs the hosts boot. */
  isoReader: IsoCmdlineReader;
  coreosInstaller: boolean;
  /** Asks the host's BMC for a reset (ForceOff, ForceRestart), as the OS of the host would cause. */
  power(bmc: SimBmc, sysPath: string, type: 'ForceOff' | 'ForceRestart'): void;
}

export const DEFAULT_ISO_PATTERN = /(^|[/_.-])(ipa|agent)([/_.-]|$)/i;

/** Faults of one host's agent, set with `POST /_sim/agent/faults` on its BMC; `{}` clears them. */
export interface AgentFaults {
  /** This step (clean or deploy, by name) fails: FAILED with a CleaningError/DeploymentError. */
  failStep?: string;
  /** The error details of `failStep` (default: "Simulated failure of step <name>"). */
  failMessage?: string;
  /** This step never ends: RUNNING until the agent dies. */
  hangStep?: string;
  /** get_clean_steps reports this step as not abortable (as a vendor's firmware step is). */
  unabortableStep?: string;
  /** How long steps run (s), by name, instead of their usual time. */
  stepSeconds?: Record<string, number>;
  /** The agent dies halfway through this step: its API answers 404, its heartbeats stop; the host stays on. */
  crashDuringStep?: string;
  /** The host restarts halfway through this step (a ForceRestart at its BMC). */
  rebootDuringStep?: string;
  /** The next n command POSTs are executed but their responses are lost (the connection is reset). */
  loseResponse?: number;
  /**
   * The next execute_*_step that carries a hardware manager version answers
   * CLEAN_VERSION_MISMATCH, and the agent reports a newer version from then on (as a newer
   * agent would); the fault then clears itself.
   */
  versionMismatch?: boolean;
  /** `agent_version` sent in heartbeats (default "10.1.0"). */
  agentVersion?: string;
  /** Heartbeats carry a token that is not the one the agent was given. */
  wrongToken?: boolean;
  /** The agent never comes up, whatever the host boots. */
  noBoot?: boolean;
  /** Overrides the fleet's boot delay for this host (s). */
  bootSeconds?: [number, number];
  /**
   * One-shot: the next POST of this command (`<extension>.<command>`) is executed and recorded
   * at once, but answered only `ms` later; the fault then clears itself.
   */
  holdAnswer?: { command: string; ms: number };
  /**
   * Clean steps of a vendor's hardware manager (`SimulatedHardwareManager` 1.0, listed and
   * versioned beside the generic one), as real hardware managers add them: a firmware update
   * with `reboot_requested: true`, after which the conductor reboots the node into a new agent.
   * Each runs as the generic steps without real work do.
   */
  extraCleanSteps?: ExtraStep[];
}

/** A step of the vendor's hardware manager (`extraCleanSteps`): its defaults are interface deploy, priority 0, no reboot, abortable. */
export interface ExtraStep {
  step: string;
  interface?: string;
  priority?: number;
  reboot_requested?: boolean;
  abortable?: boolean;
}

/** Why `extraCleanSteps` is not a list of steps, or null when it is. */
export function extraStepsProblem(v: unknown): string | null {
  if (!Array.isArray(v)) return 'extraCleanSteps must be a list';
  for (const s of v as unknown[]) {
    const o = s as Record<string, unknown> | null;
    if (!o || typeof o !== 'object' || typeof o.step !== 'string' || !o.step) return 'each of extraCleanSteps needs a "step" name';
    if (o.interface !== undefined && typeof o.interface !== 'string') return 'extraCleanSteps: "interface" must be a string';
    if (o.priority !== undefined && !Number.isInteger(o.priority)) return 'extraCleanSteps: "priority" must be an integer';
    if ((o.reboot_requested !== undefined && typeof o.reboot_requested !== 'boolean') || (o.abortable !== undefined && typeof o.abortable !== 'boolean')) {
      return 'extraCleanSteps: "reboot_requested" and "abortable" must be booleans';
    }
  }
  return null;
}

export const FAULT_KEYS: ReadonlySet<string> = new Set([
  'failStep',
  'failMessage',
  'hangStep',
  'unabortableStep',
  'stepSeconds',
  'crashDuringStep',
  'rebootDuringStep',
  'loseResponse',
  'versionMismatch',
  'agentVersion',
  'wrongToken',
  'noBoot',
  'bootSeconds',
  'holdAnswer',
  'extraCleanSteps',
]);

export type CommandStatus = 'RUNNING' | 'SUCCEEDED' | 'FAILED' | 'CLEAN_VERSION_MISMATCH';

/** IPA's serialised RESTError. */
export interface CommandError {
  type: string;
  code: number;
  message: string;
  details: string;
}

/** A command as IPA serialises it (`BaseCommandResult`). */
export interface CommandResult {
  id: string;
  command_name: string;
  command_status: CommandStatus;
  command_error: CommandError | null;
  command_result: unknown;
}

/** What the host's disk holds; it outlives the agent. */
export interface DiskState {
  imageUrl: string;
  bytes: number;
  sha256: string;
  /** Epoch ms. */
  writtenAt: number;
  /** Whether the image was written whole or into partitions. */
  imageType: 'whole-disk' | 'partition';
  /** What image.install_bootloader installed, or null. */
  bootloader: { rootUuid: string; efiSystemPartUuid: string | null; targetBootMode: string } | null;
  /**
   * The config drive written with the image: handed inline (gzip + base64) or as a URL, and the
   * size and SHA-256 of its image, which `GET /_sim/agent/configdrive` serves; null for none.
   */
  configdrive: { source: 'inline' | 'url'; url?: string; bytes: number; sha256: string } | null;
  /** What install_coreos was given as the Ignition config (the config drive's user_data); absent for other writes. */
  ignition?: string | null;
}

/** `GET /_sim/agent` on a BMC's port. */
export interface AgentWitness {
  running: boolean;
  /** Epoch ms at which the current (or last) agent came up; null when none ever did. */
  bootedAt: number | null;
  /** Agents started on this host so far. */
  boots: number;
  /** `https://<host>:<port>/<id>` (http:// without automatic TLS): the agent's callback_url (also when it is not running). */
  callbackUrl: string;
  /** The certificate (PEM) the agent serves and sends as agent_verify_ca; null when it runs plain HTTP. */
  verifyCa: string | null;
  /** The node UUID the last lookup gave, else null. */
  nodeUuid: string | null;
  lookups: number;
  lookupStatuses: Record<string, number>;
  inspections: number;
  inspectionStatuses: Record<string, number>;
  heartbeats: number;
  heartbeatStatuses: Record<string, number>;
  /** The token the agent holds, or null. */
  token: string | null;
  /** The current (or last) agent's commands, in order. */
  commands: CommandResult[];
  /**
   * Command POSTs received, by `<extension>.<command>` (with `/<step>` for execute_*_step),
   * refused ones (busy, bad parameters) included.
   */
  received: Record<string, number>;
  /** The `node` parameter of the last such POST that had one, by the keys of `received`. */
  nodeReceived: Record<string, unknown>;
  /**
   * What the agents of this host did, oldest first: `api <method> <path> <status>` for a call to
   * Galvanic's API, `serve <method> <path> <status>` for a request to the command API, `run
   * <command>` for an asynchronous command's run; each with its start and end (epoch ms).
   */
  calls: Array<[string, number, number]>;
  /** The agent locked itself down (system.lockdown): no API, no heartbeats. */
  lockedDown: boolean;
  disk: DiskState | null;
  /** The software RAID devices on the host's disks (raid steps), or null. */
  softwareRaid: SoftRaidDevice[] | null;
  /** What the host runs from its disk; null when the disk is empty. */
  instance: { running: boolean; imageUrl: string } | null;
  faults: AgentFaults;
}
