/**
 * What crosses the thread boundary between the IPMI driver and its piscina workers: plain
 * data in, a tagged result out (STYLE.md 12). The main thread rebuilds typed errors from
 * `code`. Kept free of imports so that the worker loads nothing else.
 */

/** One ipmitool process to run. */
export interface IpmitoolTask {
  binary: string;
  /** Never contains the password. */
  args: string[];
  /** Handed to the child only, as IPMI_PASSWORD (ipmitool -E). */
  password: string;
  /** The worker kills the process once it has run this long. */
  timeoutMs: number;
  /** Non-zero exit codes that count as success when there is output (`sdr -v` exits 1 when one sensor is unreadable). */
  okExitCodes: number[];
  /** One Int32 over a SharedArrayBuffer holding a CallState: how the main thread cancels. */
  control: Int32Array;
}

/** Stable failure codes; the BMC_* ones name the DriverError class they become. */
export type IpmitoolFailureCode =
  | 'BMC_TIMEOUT'
  | 'BMC_UNREACHABLE'
  | 'BMC_AUTH_FAILED'
  | 'BMC_REJECTED'
  | 'ABORTED'
  | 'SPAWN_FAILED';

export type IpmitoolResult =
  | { ok: true; stdout: string; stderr: string; exitCode: number; durationMs: number }
  | {
      ok: false;
      code: IpmitoolFailureCode;
      message: string;
      stderr: string;
      exitCode: number | null;
      /** Worth another attempt within [ipmi] command_retry_timeout (the BMC said it is busy). */
      retryable: boolean;
      durationMs: number;
    };

/**
 * States of one call, in `control[0]`. Transitions: QUEUED→RUNNING (worker starts),
 * QUEUED→CANCELLED (aborted before start: the worker then never spawns), RUNNING→ABORT_REQUESTED
 * (the worker kills the process), RUNNING→DONE (the worker finished).
 */
export const CallState = { QUEUED: 0, RUNNING: 1, CANCELLED: 2, ABORT_REQUESTED: 3, DONE: 4 } as const;

/** A fresh control cell for one call. */
export function newControl(): Int32Array {
  return new Int32Array(new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT));
}

/**
 * Asks the worker to stop a call. Returns 'cancelled' when it had not started (it never will),
 * 'requested' when it is running (its process is being killed), 'late' when it already ended.
 */
export function requestAbort(control: Int32Array): 'cancelled' | 'requested' | 'late' {
  const prev = Atomics.compareExchange(control, 0, CallState.QUEUED, CallState.CANCELLED);
  if (prev === CallState.QUEUED) return 'cancelled';
  if (prev === CallState.RUNNING && Atomics.compareExchange(control, 0, CallState.RUNNING, CallState.ABORT_REQUESTED) === CallState.RUNNING) {
    Atomics.notify(control, 0);
    return 'requested';
  }
  return prev === CallState.ABORT_REQUESTED ? 'requested' : 'late';
}

// ipmitool's stderr, matched in this order. The lanplus session errors only tell auth
// failures from dead BMCs with -v (both end with "Unable to establish IPMI v2 / RMCP+ session").
const CONFIG_MISMATCH = [/invalid (authentication|integrity|confidentiality) algorithm/i, /no matching cipher suite/i];
const AUTH_FAILED = [
  /RAKP \d HMAC is invalid/i,
  /unauthorized name/i,
  /RAKP \d message indicates an error/i,
  /Activate Session command failed/i,
  /Insufficient privilege level/i,
  /Set Session Privilege Level to \S+ failed/i,
  /invalid (user ?name|password)/i,
];
const UNREACHABLE = [
  /Unable to establish (IPMI v2 \/ RMCP\+|IPMI v1\.5 \/ RMCP|LAN) session/i,
  /Get (Channel )?Auth(entication)? Capabilities/i,
  /Address lookup for \S+ failed/i,
  /Could not open socket/i,
  /No response from remote controller/i,
  /insufficient resources for session/i,
  /Connection refused/i,
];
/** Ironic's IPMITOOL_RETRYABLE_FAILURES: worth retrying within one call. */
const RETRYABLE = ['insufficient resources for session', 'Node busy', 'Timeout', 'Out of space', 'BMC initialization in progress'];
/** -v chatter that says nothing about a failure. */
const NOISE = [
  /^Loading IANA PEN Registry/,
  /^Running Get VSO Capabilities/,
  /^Invalid completion code received: Invalid command$/,
  /^Discovered IPMB address/,
  /^Get HPM\.x Capabilities request failed/,
  /^RAW (REQ|REQUEST|RSP)/,
  /^ ?[0-9a-f]{2}( [0-9a-f]{2})*$/i,
  /^tcgetattr:/,
];

/** The failure an ipmitool stderr describes. */
export function classifyFailure(stderr: string): { code: Exclude<IpmitoolFailureCode, 'BMC_TIMEOUT' | 'ABORTED' | 'SPAWN_FAILED'>; retryable: boolean } {
  const retryable = RETRYABLE.some((r) => stderr.includes(r));
  if (CONFIG_MISMATCH.some((r) => r.test(stderr))) return { code: 'BMC_REJECTED', retryable: false };
  if (AUTH_FAILED.some((r) => r.test(stderr))) return { code: 'BMC_AUTH_FAILED', retryable: false };
  if (UNREACHABLE.some((r) => r.test(stderr))) return { code: 'BMC_UNREACHABLE', retryable };
  return { code: 'BMC_REJECTED', retryable };
}

/** The informative lines of ipmitool's stderr, for error messages (at most `max` characters). */
export function summarizeStderr(stderr: string, max = 500): string {
  const lines = stderr
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !NOISE.some((r) => r.test(l)));
  const text = [...new Set(lines)].join('; ');
  return text.length > max ? `${text.slice(0, max)}…` : text;
}
