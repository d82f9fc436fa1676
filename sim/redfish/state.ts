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
});

export type PowerState = 'On' | 'Off' | 'PoweringOn' | 'PoweringOff';

export interface BootOverride {
  BootSourceOverrideTarget: string;
  BootSourceOverrideEnabled: string;
  BootSourceOverrideMode: string;
}

/** The mutable part of one ComputerSystem. */
export interface SystemState {
  power: PowerState;
  boot: BootOverride;
  /** Bumped on every change; the ETag is derived from it. */
  version: number;
  timer?: NodeJS.Timeout;
}

export interface Session {
  id: string;
  token: string;
  user: string;
}

/** One request as the log records it: [method, path, status, start ms, end ms]; status 0 = no answer. */
export type LogEntry = [string, string, number, number, number];

export interface BmcCounters {
  requests: number;
  concurrent: number;
  maxConcurrent: number;
  sessionsOpen: number;
  sessionsCreated: number;
  logins: number;
  unauthorized: number;
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
  log: LogEntry[] = [];

  constructor(
    readonly index: number,
    faults: Readonly<SimFaults>,
    private readonly logLimit: number,
  ) {
    // Shared until a test changes this BMC's faults (copy on write).
    this.faults = faults as SimFaults;
  }

  /** Counts a request in; the returned function records its end (status 0 when unanswered). */
  begin(method: string, path: string): (status: number) => void {
    this.requests++;
    this.concurrent++;
    if (this.concurrent > this.maxConcurrent) this.maxConcurrent = this.concurrent;
    const entry: LogEntry = [method, path, 0, now(), 0];
    if (this.logLimit > 0) {
      // Drop the oldest half at once: amortised O(1) instead of a shift per request.
      if (this.log.length >= this.logLimit) this.log = this.log.slice(this.log.length - Math.floor(this.logLimit / 2));
      this.log.push(entry);
    }
    let done = false;
    return (status) => {
      if (done) return;
      done = true;
      this.concurrent--;
      entry[2] = status;
      entry[4] = now();
    };
  }

  /** Records the delay a request of this BMC is about to wait. */
  delayed(ms: number): void {
    this.chainMs += ms;
    this.chainRequests++;
  }

  setFaults(patch: Partial<SimFaults>): void {
    this.faults = { ...this.faults, ...patch, unavailable: { ...this.faults.unavailable, ...(patch.unavailable ?? {}) } };
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
    this.log = [];
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

  /** Applies a reset to a system; with `powerDelayMs` it passes through a transitional state. */
  reset(system: SystemState, type: string): void {
    const current = system.power === 'On' || system.power === 'PoweringOn';
    let target: 'On' | 'Off' | null;
    switch (type) {
      case 'On':
      case 'ForceOn':
      case 'ForceRestart':
      case 'GracefulRestart':
      case 'PowerCycle':
        target = 'On';
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
    if (target === null) return;
    system.version++;
    if (system.timer) clearTimeout(system.timer);
    system.timer = undefined;
    const delay = this.faults.powerDelayMs;
    if (delay <= 0) {
      system.power = target;
      return;
    }
    system.power = target === 'On' ? 'PoweringOn' : 'PoweringOff';
    const final = target;
    system.timer = setTimeout(() => {
      system.power = final;
      system.version++;
      system.timer = undefined;
    }, delay);
    system.timer.unref();
  }

  stop(): void {
    for (const s of this.systems.values()) if (s.timer) clearTimeout(s.timer);
  }
}

/** A weak ETag derived from the system's version. */
export function etagOf(system: SystemState): string {
  return `W/"${system.version.toString(16).padStart(8, '0')}"`;
}

/** A Redfish error body, as real BMCs send with 4xx/5xx. */
export function redfishError(messageId: string, message: string): string {
  return JSON.stringify({
    error: {
      code: `Base.1.8.${messageId}`,
      message,
      '@Message.ExtendedInfo': [
        { '@odata.type': '#Message.v1_1_1.Message', MessageId: `Base.1.8.${messageId}`, Message: message, Severity: 'Warning', Resolution: 'None.' },
      ],
    },
  });
}
