/**
 * The Redfish client shared by every node of a conductor: keep-alive connections and one
 * concurrency limit per BMC, the session cache, and per-call scopes (`RedfishCall`) that carry the call's
 * deadline, authentication, retries with backoff and the 401 re-login. Built once by the
 * composition root and passed to the interfaces; nothing starts before the first call.
 */
import type { FirmwareOptions } from './firmware.js';
import { readFileSync } from 'node:fs';
import { LRUCache } from 'lru-cache';
import type { Logger } from 'pino';
import { backoffCeilingMs } from '../../common/backoff.js';
import { BmcAuthFailed, BmcBadResponse, BmcRejected, BmcTimeout, BmcUnreachable, InvalidDriverInfo } from '../../common/errors.js';
import { BmcBudget, type BmcPriority } from '../bmc-budget.js';
import type { DriverContext } from '../interfaces.js';
import { parseRedfishInfo, type RedfishAuthType, type RedfishInfo } from './driver-info.js';
import { Connections } from './connections.js';
import { ConnectionFailure, exchange, pause, type BudgetSlot, type CallScope, type RawResponse } from './http.js';
import { errorMessage, isErrorBody, isObject, linkPath, messageIds, type Json } from './odata.js';
import { Semaphore } from './semaphore.js';
import { raceSignal, SessionCache } from './session-cache.js';
import type { AgentBootDefaults } from '../agent-boot.js';

/** The [redfish] options, in milliseconds where they are durations. */
export interface RedfishOptions {
  connectionAttempts: number;
  retryIntervalMs: number;
  cacheSize: number;
  maxConcurrentPerBmc: number;
  authType: RedfishAuthType;
  timeoutMs: number;
  powerStateChangeTimeoutMs: number;
  /** Virtual media: the waits for an eject and the retries of an insert refused with 5xx (default 3 × 3 s, as Ironic). */
  /** Where the agent's image is found when driver_info names none (`[conductor]` deploy_kernel/ramdisk). */
  agentBoot?: AgentBootDefaults;
  vmediaRetry?: { attempts: number; intervalMs: number };
  /** How long a BMC's idle connection stays open, ms (default 30 s). */
  connectionKeepAliveMs?: number;
  /** How the firmware interface follows an update's task (default DEFAULT_FIRMWARE_OPTIONS). */
  firmware?: FirmwareOptions;
}

const MAX_RETRY_INTERVAL_MS = 30_000;
const LOGOUT_TIMEOUT_MS = 5_000;
const SESSIONS_PATH = '/redfish/v1/SessionService/Sessions';
/** Names the request a call serves, for BMC-side logs (a BMC ignores a header it does not know). */
const TRACE_HEADER = 'x-galvanic-trace';
const RETRYABLE_STATUS = new Set([429, 500, 502, 503, 504]);
/** A BMC that answers these to a login has no session service: "auto" falls back to Basic. */
const NO_SESSIONS_STATUS = new Set([404, 405, 501]);

/** A response whose JSON body is parsed on demand. */
export interface Reply extends RawResponse {
  json(): Json | null;
}

/** A resource read with GET. */
export interface Resource {
  path: string;
  body: Json;
  etag: string | null;
}

/** An open Redfish session and where to end it. */
interface Session {
  token: string;
  /** The session resource, for the DELETE that logs out; null when the BMC gave none. */
  location: string | null;
  endpoint: Endpoint;
}

interface Memo {
  value?: unknown;
  pending?: Promise<unknown>;
  /** When the value stops being trusted (ms since the epoch). */
  expiresAt: number;
}

/** What the driver keeps per BMC: its connections, its concurrency limit, and what it learnt about it. */
export class Endpoint {
  /** Learnt in "auto" mode: the BMC has no session service. */
  basicOnly = false;
  /** Learnt on the first Sensors read: the BMC does not expand collections. */
  noExpand = false;
  /** Learnt on the first chassis read: the BMC advertises $expand but does not expand a chassis' Thermal and Power. */
  noChassisExpand = false;
  private readonly memos = new Map<string, Memo>();

  constructor(
    readonly origin: string,
    readonly conns: Connections,
    readonly sem: Semaphore,
    /** The conductor's budget at this BMC, shared with every other path to it. */
    readonly bmc: BudgetSlot,
  ) {}

  /** Requests this BMC may have in flight from this conductor at once. */
  get limit(): number {
    return Math.min(this.sem.limit, this.bmc.budget.limit);
  }

  /**
   * A value fetched once per BMC and kept for `ttlMs` from when it was fetched (system and
   * chassis paths, allowed values); concurrent callers share one fetch. The fetch runs
   * detached (`RedfishCall.detached`), so that one caller giving up neither fails the others
   * nor loses what the fetch learns.
   */
  async memo<T>(key: string, ttlMs: number, fetch: (call: RedfishCall) => Promise<T>, call: RedfishCall): Promise<T> {
    const abortError = () => call.abortError(`Redfish discovery on ${this.origin}`);
    const m = this.memos.get(key);
    if (m?.pending) return raceSignal(m.pending as Promise<T>, call.signal, abortError);
    if (m && 'value' in m && Date.now() < m.expiresAt) return m.value as T;
    const entry: Memo = { expiresAt: 0 };
    const detached = call.detached();
    entry.pending = fetch(detached).finally(() => detached.dispose()).then(
      (v) => {
        entry.pending = undefined;
        entry.value = v;
        entry.expiresAt = Date.now() + ttlMs;
        return v;
      },
      (err: unknown) => {
        if (this.memos.get(key) === entry) this.memos.delete(key);
        throw err;
      },
    );
    this.memos.set(key, entry);
    return raceSignal(entry.pending as Promise<T>, call.signal, abortError);
  }

  forget(prefix: string): void {
    for (const k of [...this.memos.keys()]) if (k.startsWith(prefix)) this.memos.delete(k);
  }
}

/** A BMC's key in the budget: host and port, whatever the scheme or TLS options (one BMC either way). */
export function budgetKey(origin: string): string {
  try {
    return new URL(origin).host;
  } catch {
    return origin;
  }
}

function retryAfterMs(h: string | string[] | undefined): number | null {
  const v = Array.isArray(h) ? h[0] : h;
  if (!v) return null;
  if (/^\d+$/.test(v.trim())) return Number(v.trim()) * 1000;
  const at = Date.parse(v);
  return Number.isNaN(at) ? null : Math.max(0, at - Date.now());
}

function header(h: RawResponse['headers'], name: string): string | null {
  const v = h[name];
  return Array.isArray(v) ? (v[0] ?? null) : (v ?? null);
}

function parseJson(text: string): Json | null {
  if (!text.trim()) return null;
  try {
    const v: unknown = JSON.parse(text);
    return isObject(v) ? v : null;
  } catch {
    return null;
  }
}

/** The error for a non-2xx answer. */
export function statusError(r: Reply, what: string): Error {
  const detail = errorMessage(r.json());
  const message = `${what}: HTTP ${r.status}${detail ? `: ${detail}` : ''}`;
  if (r.status === 401 || r.status === 403) return new BmcAuthFailed(message);
  return new BmcRejected(message, r.status);
}

export interface SendOptions {
  body?: Json;
  headers?: Record<string, string>;
  /** Skip authentication (service root, login). */
  noAuth?: boolean;
  /** Also retry answers this predicate accepts (e.g. a login refused for a full session table). */
  retryIf?: (r: Reply) => boolean;
  /** Tries at most this many times ([redfish] connection_attempts otherwise): 1 probes whether the BMC answers at all. */
  attempts?: number;
}

/** One driver call's view of a BMC: deadline, cancellation, authentication, retries. */
export class RedfishCall implements CallScope {
  readonly deadline: number;
  readonly signal: AbortSignal;
  private readonly controller = new AbortController();
  private readonly timer: NodeJS.Timeout;
  private why: 'timeout' | 'caller' | 'close' | null = null;
  private readonly onCallerAbort = () => this.abort('caller');

  /**
   * Wired by hand rather than with AbortSignal.any: any() over a long-lived signal (a shutdown
   * signal, the client's close) leaks on Node 20. `dispose()` unhooks everything.
   */
  constructor(
    readonly client: RedfishClient,
    readonly info: RedfishInfo,
    readonly endpoint: Endpoint,
    readonly log: Logger,
    readonly budgetMs: number,
    private readonly callerSignal?: AbortSignal,
    readonly priority?: BmcPriority,
    /** What the call serves (DriverContext.trace), sent with each of its requests. */
    readonly trace?: string,
  ) {
    this.deadline = Date.now() + budgetMs;
    this.signal = this.controller.signal;
    this.timer = setTimeout(() => this.abort('timeout'), budgetMs);
    this.timer.unref();
    if (callerSignal?.aborted) this.abort('caller');
    else callerSignal?.addEventListener('abort', this.onCallerAbort, { once: true });
    client.track(this);
  }

  /** Cancels the call's requests and waits. */
  abort(why: 'timeout' | 'caller' | 'close'): void {
    if (this.why) return;
    this.why = why;
    this.controller.abort(new Error(`Redfish call aborted: ${why}`));
  }

  /** Ends the call: its timer and listeners go. */
  dispose(): void {
    clearTimeout(this.timer);
    this.callerSignal?.removeEventListener('abort', this.onCallerAbort);
    this.client.untrack(this);
  }

  /**
   * A scope for work whose result outlives this call (a login, a discovery step): a budget of
   * its own, as long as this call's whole budget, and not the caller's signal. A caller that
   * gives up thus does not waste a request already sent: its answer is kept for the next call.
   * On a BMC slower than a node's timeout allows, discovery then advances from one call to
   * the next instead of starting over each time. Dispose it too.
   */
  detached(): RedfishCall {
    return new RedfishCall(this.client, this.info, this.endpoint, this.log, this.budgetMs, undefined, this.priority, this.trace);
  }

  abortError(what: string): Error {
    if (this.why === 'caller') {
      const reason: unknown = this.callerSignal?.reason;
      return reason instanceof BmcTimeout ? reason : new BmcTimeout(`${what}: cancelled by the caller`);
    }
    if (this.why === 'close') return new BmcUnreachable(`${what}: the Redfish driver is shutting down`);
    return new BmcTimeout(`${what}: no answer within ${this.budgetMs / 1000} s`);
  }

  /** Which request each copy served and which process sent it, when a BMC saw one twice. */
  private get traceValue(): string {
    return `${this.trace ?? '-'} pid=${process.pid}`;
  }

  private describe(method: string, path: string): string {
    return `Redfish ${method} ${this.info.origin}${path}`;
  }

  /** Reads a resource. @throws BmcRejected | BmcAuthFailed | BmcBadResponse | BmcTimeout | BmcUnreachable */
  async get(path: string): Promise<Resource> {
    const what = this.describe('GET', path);
    const r = await this.send('GET', path);
    if (r.status < 200 || r.status >= 300) throw statusError(r, what);
    const body = r.json();
    if (!body) throw new BmcBadResponse(`${what}: the answer is not a JSON object (${JSON.stringify(r.text.slice(0, 60))})`);
    if (isErrorBody(body)) throw new BmcBadResponse(`${what}: HTTP ${r.status} with an error object: ${errorMessage(body) ?? 'no message'}`);
    const etag = header(r.headers, 'etag') ?? (typeof body['@odata.etag'] === 'string' ? body['@odata.etag'] : null);
    return { path, body, etag };
  }

  /**
   * Sends a request with authentication, retrying connection failures and retryable statuses
   * with backoff (a Reset is retried only when it certainly was not processed) and logging in
   * again once on 401. Returns any answer; callers decide what a status means.
   */
  async send(method: 'GET' | 'POST' | 'PATCH' | 'DELETE', path: string, opts: SendOptions = {}): Promise<Reply> {
    const what = this.describe(method, path);
    const idempotent = method !== 'POST' || opts.noAuth === true;
    const attempts = opts.attempts ?? this.client.options.connectionAttempts;
    let relogged = false;
    for (let attempt = 1; ; attempt++) {
      const headers: Record<string, string> = { accept: 'application/json', 'odata-version': '4.0', [TRACE_HEADER]: this.traceValue, ...opts.headers };
      if (opts.body !== undefined) headers['content-type'] = 'application/json';
      const auth = opts.noAuth ? null : await this.client.authenticate(this);
      if (auth?.kind === 'session') headers['x-auth-token'] = auth.token;
      else if (auth?.kind === 'basic') headers.authorization = auth.header;
      let reply: Reply;
      try {
        const raw = await exchange(this.endpoint.conns, this.endpoint.sem, this.endpoint.bmc, this, { method, path, headers, body: opts.body === undefined ? undefined : JSON.stringify(opts.body) }, what);
        let parsed: Json | null | undefined;
        reply = { ...raw, json: () => (parsed === undefined ? (parsed = parseJson(raw.text)) : parsed) };
      } catch (err) {
        if (!(err instanceof ConnectionFailure)) throw err;
        if (attempt < attempts && (idempotent || err.unsent) && (await this.backoff(attempt, null, what))) {
          this.log.debug({ bmc: this.info.origin, path, attempt, err: err.message }, 'Redfish connection failed, retrying');
          continue;
        }
        throw new BmcUnreachable(`${err.message} (after ${attempt} attempt${attempt > 1 ? 's' : ''})`);
      }
      if (reply.status === 401 && auth?.kind === 'session' && !relogged) {
        // The session expired or was deleted on the BMC: log in again, once.
        relogged = true;
        attempt--;
        this.client.sessions.invalidate(this.info.sessionKey, auth.token);
        this.log.info({ bmc: this.info.origin }, 'Redfish session rejected with 401, logging in again');
        continue;
      }
      const retryable = RETRYABLE_STATUS.has(reply.status) && (idempotent || reply.status === 503 || reply.status === 429);
      if ((retryable || opts.retryIf?.(reply)) && attempt < attempts) {
        if (await this.backoff(attempt, retryAfterMs(reply.headers['retry-after']), what)) {
          this.log.debug({ bmc: this.info.origin, path, attempt, status: reply.status }, 'Redfish request refused, retrying');
          continue;
        }
      }
      return reply;
    }
  }

  /** Sleeps before the next attempt; false when the wait would outlive the call's deadline. */
  private async backoff(attempt: number, retryAfter: number | null, what: string): Promise<boolean> {
    const base = backoffCeilingMs(attempt, this.client.options.retryIntervalMs, MAX_RETRY_INTERVAL_MS);
    const wait = retryAfter ?? base * (0.75 + Math.random() * 0.5);
    if (Date.now() + wait >= this.deadline) return false;
    await pause(wait, this, what);
    return true;
  }
}

type Auth = { kind: 'session'; token: string } | { kind: 'basic'; header: string };

export class RedfishClient {
  readonly sessions: SessionCache<Session>;
  private readonly endpoints: LRUCache<string, Endpoint>;
  private readonly calls = new Set<RedfishCall>();
  private closed = false;

  /** The conductor's per-BMC budget; a client of its own (tools, tests) gets one of max_concurrent_requests_per_bmc. */
  readonly budget: BmcBudget;

  constructor(
    readonly options: RedfishOptions,
    private readonly log: Logger,
    budget?: BmcBudget,
  ) {
    this.budget = budget ?? new BmcBudget(options.maxConcurrentPerBmc);
    this.sessions = new SessionCache(options.cacheSize, (s) => this.logout(s), log);
    this.endpoints = new LRUCache<string, Endpoint>({
      max: options.cacheSize,
      // An evicted BMC's connections finish their requests in flight, then close.
      dispose: (ep, _key, reason) => {
        if (reason === 'evict') void ep.conns.close();
      },
    });
  }

  /** Parses driver_info with this deployment's defaults. @throws InvalidDriverInfo */
  parse(driverInfo: Readonly<Record<string, unknown>>): RedfishInfo {
    return parseRedfishInfo(driverInfo, { authType: this.options.authType, timeoutMs: this.options.timeoutMs });
  }

  /**
   * Runs one driver call in its own scope: the node's redfish_timeout (plus `extraMs`, for
   * power state waits) bounds everything `fn` does.
   */
  async run<T>(ctx: DriverContext, fn: (call: RedfishCall) => Promise<T>, extraMs = 0): Promise<T> {
    const info = this.parse(ctx.driverInfo);
    const call = new RedfishCall(this, info, this.endpoint(info), ctx.log, info.timeoutMs + extraMs, ctx.signal, ctx.priority, ctx.trace);
    try {
      return await fn(call);
    } finally {
      call.dispose();
    }
  }

  /** @internal RedfishCall registers here so that close() can abort it. */
  track(call: RedfishCall): void {
    if (this.closed) call.abort('close');
    else this.calls.add(call);
  }

  /** @internal */
  untrack(call: RedfishCall): void {
    this.calls.delete(call);
  }

  private endpoint(info: RedfishInfo): Endpoint {
    const key = `${info.origin}\u0000${String(info.verifyCa)}`;
    let ep = this.endpoints.get(key);
    if (ep) return ep;
    let ca: Buffer | undefined;
    if (typeof info.verifyCa === 'string') {
      try {
        ca = readFileSync(info.verifyCa);
      } catch (err) {
        throw new InvalidDriverInfo(`driver_info/redfish_verify_ca: cannot read the CA bundle ${info.verifyCa}: ${(err as Error).message}`);
      }
    }
    const limit = this.options.maxConcurrentPerBmc;
    const conns = new Connections(info.origin, {
      rejectUnauthorized: info.verifyCa !== false, ca, timeout: Math.min(10_000, info.timeoutMs), keepAliveMs: this.options.connectionKeepAliveMs,
    });
    ep = new Endpoint(info.origin, conns, new Semaphore(limit), { budget: this.budget, key: budgetKey(info.origin) });
    this.endpoints.set(key, ep);
    return ep;
  }

  /** The credentials to send with a request of `call`; logs in when needed (one login per key). */
  async authenticate(call: RedfishCall): Promise<Auth | null> {
    const info = call.info;
    if (info.username === null) return null;
    const basic: Auth = { kind: 'basic', header: `Basic ${Buffer.from(`${info.username}:${info.password ?? ''}`).toString('base64')}` };
    if (info.authType === 'basic' || (info.authType === 'auto' && call.endpoint.basicOnly)) return basic;
    try {
      const session = await this.sessions.get(info.sessionKey, () => this.login(call), call.signal, () => call.abortError(`Redfish login to ${info.origin}`));
      return { kind: 'session', token: session.token };
    } catch (err) {
      if (call.signal.aborted) throw call.abortError(`Redfish login to ${info.origin}`);
      // "auto" falls back to Basic like sushy's SessionOrBasicAuth, except for refused credentials.
      if (info.authType === 'auto' && (err instanceof BmcRejected || err instanceof BmcBadResponse)) {
        call.log.warn({ bmc: info.origin, err: (err as Error).message }, 'Redfish session login failed, using Basic authentication');
        return basic;
      }
      throw err;
    }
  }

  /** Opens a session. Runs under its own scope so that one caller giving up does not fail the others. */
  private async login(caller: RedfishCall): Promise<Session> {
    const call = caller.detached();
    try {
      return await this.openSession(call);
    } finally {
      call.dispose();
    }
  }

  private async openSession(call: RedfishCall): Promise<Session> {
    const info = call.info;
    const what = `Redfish login to ${info.origin} as ${info.username}`;
    const reply = await call.send('POST', SESSIONS_PATH, {
      noAuth: true,
      body: { UserName: info.username, Password: info.password ?? '' },
      // A full session table is answered 503 (bmcweb) or 400 SessionLimitExceeded (iDRAC): wait for a free slot.
      retryIf: (r) => r.status === 400 && messageIds(r.json()).some((id) => /SessionLimitExceeded/i.test(id)),
    });
    if (reply.status === 401 || reply.status === 403) throw statusError(reply, what);
    if (NO_SESSIONS_STATUS.has(reply.status) && info.authType === 'auto') {
      call.endpoint.basicOnly = true;
      throw new BmcRejected(`${what}: the BMC has no session service (HTTP ${reply.status})`, reply.status);
    }
    if (reply.status < 200 || reply.status >= 300) throw statusError(reply, what);
    const token = header(reply.headers, 'x-auth-token');
    if (!token) throw new BmcBadResponse(`${what}: HTTP ${reply.status} without an X-Auth-Token header`);
    const location = linkPath(header(reply.headers, 'location') ?? '') ?? linkPath(reply.json());
    call.log.debug({ bmc: info.origin, user: info.username }, 'Redfish session opened');
    return { token, location, endpoint: call.endpoint };
  }

  private async logout(session: Session): Promise<void> {
    if (!session.location) return;
    const ep = session.endpoint;
    const scope: CallScope = {
      deadline: Date.now() + LOGOUT_TIMEOUT_MS,
      signal: AbortSignal.timeout(LOGOUT_TIMEOUT_MS),
      abortError: (what) => new BmcTimeout(`${what}: no answer within ${LOGOUT_TIMEOUT_MS / 1000} s`),
      priority: 'periodic',
    };
    // The BMC's endpoint may have been evicted and its connections closed: the session still
    // deserves a logout, over a connection of its own (Connections.acquire).
    await exchange(ep.conns, ep.sem, ep.bmc, scope, { method: 'DELETE', path: session.location, headers: { 'x-auth-token': session.token } }, `Redfish logout from ${ep.origin}`);
  }

  /** Aborts calls in flight, logs out every session, closes every connection. */
  async close(): Promise<void> {
    this.closed = true;
    for (const call of [...this.calls]) call.abort('close');
    await this.sessions.close();
    const eps = [...this.endpoints.values()];
    this.endpoints.clear();
    await Promise.all(eps.map((ep) => ep.conns.destroy()));
    this.log.debug({ bmcs: eps.length }, 'Redfish client closed');
  }
}
