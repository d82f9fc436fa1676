/**
 * One HTTP exchange with a BMC over one of its connections, bounded by the call's deadline and
 * the per-BMC concurrency limit, with undici's failures translated into our errors. Retries,
 * authentication and status handling are the client's (client.ts).
 */
import type { Client } from 'undici';
import { BmcBadResponse, BmcTimeout, GalvanicError } from '../../common/errors.js';
import type { BmcBudget, BmcPriority } from '../bmc-budget.js';
import type { Connections } from './connections.js';
import type { Semaphore } from './semaphore.js';

export interface RawResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

/** A connection-level failure; `unsent` when the request certainly never reached the BMC. */
export class ConnectionFailure extends Error {
  constructor(
    message: string,
    readonly unsent: boolean,
  ) {
    super(message);
  }
}

const UNSENT_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT', 'EADDRNOTAVAIL']);
const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);
/** Bodies larger than this are not Redfish resources a driver reads. */
const MAX_BODY_BYTES = 32 << 20;

/** The budget and cancellation of one driver call. */
export interface CallScope {
  /** ms since the epoch after which the call has failed. */
  readonly deadline: number;
  /** Aborts on the deadline, the caller's signal, and driver shutdown. */
  readonly signal: AbortSignal;
  /** Why `signal` aborted, as an error to throw. */
  abortError(what: string): Error;
  /** Its place in the queue of the BMC's budget. */
  readonly priority?: BmcPriority;
}

/** The conductor's budget at one BMC, and that BMC's key in it. */
export interface BudgetSlot {
  budget: BmcBudget;
  key: string;
}

function errorCode(err: unknown): string {
  let e: unknown = err;
  for (let i = 0; i < 3 && e; i++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    e = (e as { cause?: unknown }).cause;
  }
  return '';
}

async function readText(body: AsyncIterable<Buffer> & { text(): Promise<string> }, headers: RawResponse['headers']): Promise<string> {
  const length = Number(headers['content-length'] ?? 0);
  if (length > MAX_BODY_BYTES) throw new BmcBadResponse(`response of ${length} bytes is larger than ${MAX_BODY_BYTES}`);
  return body.text();
}

/**
 * Sends one request and reads the whole answer.
 * @throws BmcTimeout when the deadline passes or the caller aborts; ConnectionFailure otherwise
 */
export async function exchange(
  conns: Connections,
  sem: Semaphore,
  bmc: BudgetSlot,
  scope: CallScope,
  req: { method: 'GET' | 'POST' | 'PATCH' | 'DELETE'; path: string; headers: Record<string, string>; body?: string },
  what: string,
): Promise<RawResponse> {
  let release: (() => void) | undefined;
  let releaseBudget: (() => void) | undefined;
  let client: Client | undefined;
  let healthy = false;
  try {
    // The conductor's budget first (it orders waiters by priority), then this endpoint's own limit.
    releaseBudget = await bmc.budget.acquire(bmc.key, scope.priority, scope.signal);
    release = await sem.acquire(scope.signal);
    client = conns.acquire();
    // undici's own timers are coarse (they can fire ~0.5 s early); the call's AbortSignal enforces
    // the deadline precisely, these only back it up.
    const remaining = Math.max(1, Math.ceil(scope.deadline - Date.now())) + 1000;
    const res = await client.request({
      method: req.method,
      path: req.path,
      headers: req.headers,
      body: req.body,
      signal: scope.signal,
      headersTimeout: remaining,
      bodyTimeout: remaining,
    });
    const text = await readText(res.body, res.headers);
    healthy = true;
    return { status: res.statusCode, headers: res.headers, text };
  } catch (err) {
    if (scope.signal.aborted) throw scope.abortError(what);
    if (err instanceof ConnectionFailure || err instanceof GalvanicError) throw err;
    const code = errorCode(err);
    if (TIMEOUT_CODES.has(code)) throw new BmcTimeout(`${what}: no answer in time (${code})`);
    throw new ConnectionFailure(`${what}: ${code || (err as Error).message}`, UNSENT_CODES.has(code));
  } finally {
    if (client) conns.release(client, healthy);
    release?.();
    releaseBudget?.();
  }
}

/** Waits `ms`, or rejects with the scope's abort error when the call is cancelled first. */
export function pause(ms: number, scope: CallScope, what: string): Promise<void> {
  if (scope.signal.aborted) return Promise.reject(scope.abortError(what));
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(scope.abortError(what));
    };
    const timer = setTimeout(() => {
      scope.signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    scope.signal.addEventListener('abort', onAbort, { once: true });
  });
}
