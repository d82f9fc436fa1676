/**
 * Per-BMC state of the Redfish simulator: power and boot of each system, sessions, fault
 * knobs, counters and the ordered request log. Kept small on purpose: one process serves
 * up to 10,000 of these, so nothing here is built before a request needs it.
 */
import { randomBytes } from 'node:crypto';

/** Fault and behaviour knobs; settable at start (CLI) and at run time (`POST /_sim/faults`). */
export interface SimFaults {
  /** Every request waits a uniformly random time in [min, max] ms before it is handled. */
  latencyMs: [number, number];
  /** This fraction of requests waits `slowMs` instead. */
  slowFraction: number;
  slowMs: number;
  /** Fraction answered 500 with a Redfish error body. */
  failRate: number;
  /** Fraction never answered (the socket stays open until the client gives up). */
  timeoutRate: number;
  /** Fraction answered 200 with a body that is not JSON. */
  garbageRate: number;
  /** Fraction whose connection is reset without an answer. */
  resetRate: number;
  /** Never answer anything (a hung BMC). */
  hang: boolean;
  /** The next `count` requests get 503 with `Retry-After: retryAfter` (s). */
  unavailable: { count: number; retryAfter: number };
  /** Sessions open at once; one more login is refused with `sessionLimitStatus`. */
  sessionLimit: number;
  /** 503 (with Retry-After, like bmcweb) or 400 (like iDRAC) when the session limit is reached. */
  sessionLimitStatus: 400 | 503;
  /** Answer 428 to a PATCH without If-Match. */
  requireIfMatch: boolean;
  /** A Reset goes through PoweringOn/PoweringOff for this long before reaching its state. */
  powerDelayMs: number;
  /**
   * A boot (a power on or a restart) takes a uniformly random time in [min, max] ms, during
   * which PowerState is PoweringOn (after `powerDelayMs`, when both are set).
   */
  bootMs: [number, number];
  /** 0, or the status every InsertMedia (and inserting PATCH) is refused with: 400 or 500. */
  insertMediaStatus: number;
  /**
   * The BMC has lost power: every Redfish request has its connection reset, the host is off
   * and the virtual media are gone. Clearing it brings the BMC back with the host off.
   */
  powerLost: boolean;
  /** BIOS attributes whose pending values the next boot leaves unapplied (a settings job that fails for them). */
  biosUnapplied: string[];
  /** iDRAC (quirk `idrac`): how long the BMC is gone after an iDRACReset, then not ready for a quarter of it. */
  idracResetMs: number;
}

export const DEFAULT_FAULTS: Readonly<SimFaults> = Object.freeze({
  latencyMs: [0, 0] as [number, number],
  slowFraction: 0,
  slowMs: 0,
  failRate: 0,
  timeoutRate: 0,
  garbageRate: 0,
  resetRate: 0,
  hang: false,
  unavailable: { count: 0, retryAfter: 1 },
  sessionLimit: 4,
  sessionLimitStatus: 503,
  requireIfMatch: false,
  powerDelayMs: 0,
  bootMs: [0, 0] as [number, number],
  insertMediaStatus: 0,
  powerLost: false,
  biosUnapplied: [],
  idracResetMs: 1500,
});

export type PowerState = 'On' | 'Off' | 'PoweringOn' | 'PoweringOff';

export interface BootOverride {
  BootSourceOverrideTarget: string;
  BootSourceOverrideEnabled: string;
  BootSourceOverrideMode: string;
  /** The URI a `UefiHttp` boot fetches; absent or null: the one DHCP would name (none here). */
  HttpBootUri?: string | null;
}

/** What a powered-on system runs, as the last boot left it. */
export interface Running {
  /** The device booted: `Cd`, `UsbCd`, `Usb`, `Hdd`, `Pxe`, … (`Hdd` when an override found no media). */
  device: string;
  /** The ISO or image booted from virtual media, else null. */
  image: string | null;
  /** The `@odata.id` of the virtual media slot booted from, else null. */
  slot: string | null;
  /** The override target asked for, when it differs from `device`. */
  requested?: string;
  phase: 'booting' | 'up' | 'failed';
  /** Why the boot failed (the image URL answered 404, …). */
  error?: string;
  /** Epoch ms at which the boot started. */
  since: number;
}

/** The mutable part of one ComputerSystem. */
export interface SystemState {
  power: PowerState;
  boot: BootOverride;
  /** Bumped on every change; the ETag is derived from it. */
  version: number;
  timer?: NodeJS.Timeout;
  /** Null while off. */
  running: Running | null;
  /**
   * iDRAC before firmware 6: whether the `Cd` override points at the virtual CD (set through the
   * OEM configuration import's `VCD-DVD`) rather than the physical optical drive.
   */
  virtualCd?: boolean;
  /** While a boot is in progress: when it started and how long it takes (ms), for the chain. */
  bootStartedAt?: number;
  bootMs?: number;
}

/** One virtual media slot. */
export interface MediaState {
  image: string;
  imageName: string;
  inserted: boolean;
  writeProtected: boolean;
  connectedVia: string;
  transferProtocolType: string | null;
  userName: string;
  version: number;
  /** Epoch ms of the last eject (0: never), for the sticky-inserted and eject-in-progress quirks. */
  ejectedAt: number;
  /** What the slot held before the last eject, shown while it is sticky. */
  before?: Pick<MediaState, 'image' | 'imageName' | 'inserted' | 'writeProtected' | 'connectedVia' | 'transferProtocolType'>;
}

/** An entry of a BMC's event log: the calls that matter to provisioning, in order. */
export interface SimEvent {
  seq: number;
  /** Epoch ms. */
  at: number;
  type: 'insert' | 'eject' | 'refused' | 'boot-override' | 'reset' | 'boot-started' | 'boot-finished' | 'boot-failed' | 'power-lost' | 'power-restored' | 'agent-started' | 'agent-stopped' | 'vm'
    | 'subscription-created' | 'subscription-deleted' | 'bios' | 'volume' | 'firmware-task' | 'firmware-activated' | 'idrac';
  [detail: string]: unknown;
}

/**
 * Who sent the request behind an event: the client's trace header (what the request served,
 * which process sent it) and the connection (client port / n-th request on it), so that a
 * request seen twice shows whether one client re-sent it, on which connection, or two did.
 */
export interface RequestOrigin {
  trace?: string | null;
  conn?: string;
}

/** Events kept per BMC; the oldest half goes when it is full, so memory stays bounded. */
export const EVENT_LIMIT = 512;

export interface Session {
  id: string;
  token: string;
  user: string;
}

/**
 * One request as the log records it: [method, path, status, start ms, end ms, imposed latency
 * ms]; status 0 = no answer. The end less the start less the latency is the simulator's own time.
 */
export type LogEntry = [string, string, number, number, number, number];

export interface BmcCounters {
  requests: number;
  concurrent: number;
  maxConcurrent: number;
  sessionsOpen: number;
  sessionsCreated: number;
  logins: number;
  unauthorized: number;
}

/** A request body that is a JSON object, or null for anything else (a client error to answer). */
export function parseJsonObject(text: string): Record<string, unknown> | null {
  try {
    const v: unknown = JSON.parse(text);
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/**
 * Adds counters into a total of BMCs (or of simulators): each a sum, but maxConcurrent the
 * largest. Only the total's own keys count; a key `more` lacks is left as it is.
 */
export function addCounters<T extends object>(total: T, more: Partial<T>): void {
  const t = total as Record<string, number>;
  const m = more as Record<string, number | undefined>;
  for (const key of Object.keys(t)) {
    const v = m[key];
    if (v === undefined) continue;
    t[key] = key === 'maxConcurrent' ? Math.max(t[key], v) : t[key] + v;
  }
}

/**
 * Told when a system has finished booting (its `running.phase` is `up`) and when whatever ran
 * on it stops (power off, restart, lost power, a failed boot): the hook of the agent simulator
 * and of the QEMU-backed hosts. `cause` is the reset type that stopped it, or `power-lost`,
 * `control` (the control API) or `boot-failed`; a restart is a `stopped` with its reset type
 * followed by a `booted`.
 */
export interface SystemHooks {
  booted(bmc: SimBmc, system: SystemState): void;
  stopped(bmc: SimBmc, system: SystemState, cause: string): void;
}

function now(): number {
  return performance.timeOrigin + performance.now();
}

export class SimBmc {
  faults: SimFaults;
  readonly systems = new Map<string, SystemState>();
  readonly sessions = new Map<string, Session>();
  private nextSessionId = 1;
  requests = 0;
  concurrent = 0;
  maxConcurrent = 0;
  sessionsCreated = 0;
  logins = 0;
  unauthorized = 0;
  /**
   * Simulated latency (ms) of this BMC's requests answered since the last mark: with one
   * request at a time, the shortest time in which a client can have had those answers.
   */
  chainMs = 0;
  chainRequests = 0;
  /** Latency of requests answered during the boot in progress, which the boot's time overlaps. */
  private bootOverlapMs = 0;
  log: LogEntry[] = [];
  /** Virtual media slots by normalised path, made on first use. */
  readonly media = new Map<string, MediaState>();
  events: SimEvent[] = [];
  private eventSeq = 0;
  /** Set by the fleet when it simulates agents. */
  hooks?: SystemHooks;

  constructor(
    readonly index: number,
    faults: Readonly<SimFaults>,
    private readonly logLimit: number,
  ) {
    // Shared until a test changes this BMC's faults (copy on write).
    this.faults = faults as SimFaults;
  }

  /**
   * Counts a request in; `end` records its end (status 0 when unanswered), `delayed` the latency
   * it is about to wait (see below).
   */
  begin(method: string, path: string): { end(status: number): void; delayed(ms: number): void } {
    this.requests++;
    this.concurrent++;
    if (this.concurrent > this.maxConcurrent) this.maxConcurrent = this.concurrent;
    const entry: LogEntry = [method, path, 0, now(), 0, 0];
    if (this.logLimit > 0) {
      // Drop the oldest half at once: amortised O(1) instead of a shift per request.
      if (this.log.length >= this.logLimit) this.log = this.log.slice(this.log.length - Math.floor(this.logLimit / 2));
      this.log.push(entry);
    }
    let done = false;
    return {
      end: (status) => {
        if (done) return;
        done = true;
        this.concurrent--;
        entry[2] = status;
        entry[4] = now();
      },
      delayed: (ms) => {
        entry[5] = Math.round(ms);
        this.delayed(ms);
      },
    };
  }

  /** Records the delay a request of this BMC is about to wait. */
  private delayed(ms: number): void {
    this.chainMs += ms;
    this.chainRequests++;
    // A request made while the host boots (a client polling for On) overlaps the boot.
    for (const system of this.systems.values()) {
      if (system.bootStartedAt !== undefined) {
        this.bootOverlapMs += ms;
        break;
      }
    }
  }

  setFaults(patch: Partial<SimFaults>): void {
    const wasLost = this.faults.powerLost;
    this.faults = { ...this.faults, ...patch, unavailable: { ...this.faults.unavailable, ...(patch.unavailable ?? {}) } };
    if (this.faults.powerLost && !wasLost) {
      for (const s of this.systems.values()) {
        this.endBoot(s, false);
        this.hooks?.stopped(this, s, 'power-lost');
        if (s.timer) clearTimeout(s.timer);
        s.timer = undefined;
        s.power = 'Off';
        s.running = null;
        s.version++;
      }
      this.media.clear();
      this.event('power-lost', {});
    } else if (wasLost && !this.faults.powerLost) {
      this.event('power-restored', {});
    }
  }

  /** Appends to the event log. */
  event(type: SimEvent['type'], detail: Record<string, unknown>): void {
    if (this.events.length >= EVENT_LIMIT) this.events = this.events.slice(this.events.length - EVENT_LIMIT / 2);
    this.events.push({ seq: ++this.eventSeq, at: Math.round(now()), type, ...detail });
  }

  counters(): BmcCounters {
    return {
      requests: this.requests,
      concurrent: this.concurrent,
      maxConcurrent: this.maxConcurrent,
      sessionsOpen: this.sessions.size,
      sessionsCreated: this.sessionsCreated,
      logins: this.logins,
      unauthorized: this.unauthorized,
    };
  }

  resetCounters(): void {
    this.requests = 0;
    this.maxConcurrent = this.concurrent;
    this.sessionsCreated = 0;
    this.logins = 0;
    this.unauthorized = 0;
    this.chainMs = 0;
    this.chainRequests = 0;
    this.bootOverlapMs = 0;
    this.log = [];
    this.events = [];
  }

  /** Opens a session, or returns null when the session limit is reached. */
  openSession(user: string): Session | null {
    if (this.sessions.size >= this.faults.sessionLimit) return null;
    const session = { id: String(this.nextSessionId++), token: randomBytes(16).toString('hex'), user };
    this.sessions.set(session.token, session);
    this.sessionsCreated++;
    return session;
  }

  sessionById(id: string): Session | undefined {
    for (const s of this.sessions.values()) if (s.id === id) return s;
    return undefined;
  }

  /** Forgets every session, so that the next request with an old token gets 401. */
  expireSessions(): number {
    const n = this.sessions.size;
    this.sessions.clear();
    return n;
  }

  /**
   * Applies a reset to a system. A reset that ends On from Off, and every restart, is a boot:
   * `boot` (called then) says what the system boots, and consumes a Once override. With
   * `powerDelayMs` or `bootMs` the system passes through PoweringOn/PoweringOff first.
   * Returns the state the reset leads to, or null when the type changes nothing.
   */
  reset(system: SystemState, type: string, boot: () => Omit<Running, 'phase' | 'since'>, origin: RequestOrigin = {}): 'On' | 'Off' | null {
    const current = system.power === 'On' || system.power === 'PoweringOn';
    let target: 'On' | 'Off' | null;
    let restart = false;
    switch (type) {
      case 'On':
      case 'ForceOn':
        target = 'On';
        break;
      case 'ForceRestart':
      case 'GracefulRestart':
      case 'PowerCycle':
        target = 'On';
        restart = true;
        break;
      case 'ForceOff':
      case 'GracefulShutdown':
      case 'Off':
        target = 'Off';
        break;
      case 'PushPowerButton':
        target = current ? 'Off' : 'On';
        break;
      default:
        target = null;
    }
    if (target === null) return null;
    this.event('reset', { resetType: type, from: system.power, to: target, ...origin });
    system.version++;
    if (system.timer) clearTimeout(system.timer);
    system.timer = undefined;
    const boots = target === 'On' && (restart || !current);
    if (target === 'Off' || boots) {
      this.endBoot(system, false);
      this.hooks?.stopped(this, system, type);
    }
    if (target === 'Off') system.running = null;
    let delay = this.faults.powerDelayMs;
    let bootMs = 0;
    if (boots) {
      const [lo, hi] = this.faults.bootMs;
      bootMs = Math.round(lo + Math.random() * Math.max(0, hi - lo));
      delay += bootMs;
      system.running = { ...boot(), phase: 'booting', since: Math.round(now()) };
      system.bootStartedAt = now();
      system.bootMs = bootMs;
      this.event('boot-started', { device: system.running.device, image: system.running.image, slot: system.running.slot, ...(system.running.requested ? { requested: system.running.requested } : {}), bootMs });
    } else if (target === 'On' && system.power === 'PoweringOn' && system.bootStartedAt !== undefined) {
      // An On during a boot lets the boot go on: the rest of it is still to wait.
      delay = Math.max(0, (system.bootStartedAt + (system.bootMs ?? 0)) - now());
    }
    if (delay <= 0) {
      system.power = target;
      if (boots) this.endBoot(system, true);
      return target;
    }
    system.power = target === 'On' ? 'PoweringOn' : 'PoweringOff';
    const final = target;
    system.timer = setTimeout(() => {
      system.power = final;
      system.version++;
      system.timer = undefined;
      if (final === 'On') this.endBoot(system, true);
    }, delay);
    system.timer.unref();
    return target;
  }

  /**
   * Ends the boot in progress, finished or interrupted. The time it took counts in the
   * request chain: a client that waits for PowerState On cannot see it sooner.
   */
  endBoot(system: SystemState, finished: boolean): void {
    if (system.bootStartedAt === undefined) return;
    const took = Math.min(system.bootMs ?? 0, Math.max(0, now() - system.bootStartedAt));
    // Only the part of the boot that no request of the chain already covers: a client that
    // polls one request at a time waits for the boot and its polls at once, not one after the other.
    this.chainMs += Math.max(0, (finished ? (system.bootMs ?? 0) : took) - this.bootOverlapMs);
    this.bootOverlapMs = 0;
    system.bootStartedAt = undefined;
    system.bootMs = undefined;
    const r = system.running;
    if (!finished || !r || r.phase !== 'booting') return;
    if (r.error) {
      r.phase = 'failed';
      this.event('boot-failed', { device: r.device, image: r.image, slot: r.slot, error: r.error });
    } else {
      r.phase = 'up';
      this.event('boot-finished', { device: r.device, image: r.image, slot: r.slot });
      this.hooks?.booted(this, system);
    }
  }

  /**
   * The host turned itself off (a QEMU guest that powered down, or a QEMU that died): the
   * system is Off with nothing running, as a BMC sees a host that shut down.
   */
  hostOff(system: SystemState, detail: Record<string, unknown>): void {
    this.endBoot(system, false);
    if (system.timer) clearTimeout(system.timer);
    system.timer = undefined;
    system.power = 'Off';
    system.running = null;
    system.version++;
    this.event('vm', { what: 'off', ...detail });
  }

  stop(): void {
    for (const s of this.systems.values()) if (s.timer) clearTimeout(s.timer);
  }
}

/** A weak ETag derived from the version of a system or a slot. */
export function etagOf(resource: { version: number }): string {
  return `W/"${resource.version.toString(16).padStart(8, '0')}"`;
}

/** A Redfish error body, as real BMCs send with 4xx/5xx; `related` fills RelatedProperties. */
export function redfishError(messageId: string, message: string, related?: string[]): string {
  const info: Record<string, unknown> = { '@odata.type': '#Message.v1_1_1.Message', MessageId: `Base.1.8.${messageId}`, Message: message, Severity: 'Warning', Resolution: 'None.' };
  if (related) info.RelatedProperties = related;
  return JSON.stringify({ error: { code: `Base.1.8.${messageId}`, message, '@Message.ExtendedInfo': [info] } });
}
