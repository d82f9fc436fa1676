/**
 * The conductor's client for ironic-python-agent's REST API (Ironic's agent_client.py): one
 * small undici pool per agent, the agent token on every call, IPA's command result shapes.
 * It knows nothing of the database: the caller hands it the agent's URL, token and how to
 * check its certificate.
 */
import { createHash } from 'node:crypto';
import { Pool, errors as undiciErrors } from 'undici';
import { AgentAPIError, AgentCommandTimeout, AgentConnectionFailed, AgentInProgress } from '../../common/errors.js';
import { backoffCeilingMs } from '../../common/backoff.js';
import { pyRepr } from '../../common/py-repr.js';

/** IPA's command result (extensions/base.py). */
export interface AgentCommand {
  id: string;
  command_name: string;
  command_status: 'RUNNING' | 'SUCCEEDED' | 'FAILED' | 'CLEAN_VERSION_MISMATCH' | 'DEPLOY_VERSION_MISMATCH' | 'VERSION_MISMATCH' | string;
  command_error: null | { type?: string; code?: number; message?: string; details?: string };
  command_result: unknown;
}

export interface AgentClientOptions {
  /** `[agent] command_timeout`, in ms. */
  timeoutMs: number;
  /** `[agent] max_command_attempts`. */
  maxAttempts: number;
  /** Connections kept to each agent. */
  connectionsPerAgent: number;
  /** Pause between connection attempts, in ms. */
  retryDelayMs?: number;
  /** Most agents whose pools stay open. */
  maxPools?: number;
}

/**
 * How an agent's TLS certificate is checked (Ironic's AgentClient._get_verify): against the
 * system's CAs (true), not at all (false), or against these PEM certificates only (the one the
 * agent sent as agent_verify_ca, pinned; or a CA bundle). The host name is checked in every
 * case but false, as requests does: IPA's certificate names its IP address.
 */
export type AgentVerify = boolean | { ca: string };

/** Where an agent is and its credential, for one call. */
export interface AgentTarget {
  /** driver_internal_info.agent_url (the heartbeat's callback_url). */
  url: string;
  token: string;
  /** For an https URL; true when absent. */
  verify?: AgentVerify;
}

function isCommand(v: unknown): v is AgentCommand {
  return typeof v === 'object' && v !== null && typeof (v as AgentCommand).command_name === 'string'
    && typeof (v as AgentCommand).command_status === 'string';
}

/**
 * Ironic's get_command_error: a failed command's `details`, else its `message`, else the error
 * as Python prints it; never the command's whole result. IPA's errors carry the cause in
 * `details` ("Error writing image to device: ...") and their class's summary in `message`.
 */
export function commandError(cmd: AgentCommand): string {
  const e: unknown = cmd.command_error;
  if (e === null || e === undefined) return 'Invalid agent response';
  if (typeof e === 'string') return e;
  if (typeof e === 'object' && !Array.isArray(e)) {
    const { details, message } = e as { details?: unknown; message?: unknown };
    if (details) return typeof details === 'string' ? details : pyRepr(details);
    if (message) return typeof message === 'string' ? message : pyRepr(message);
  }
  return pyRepr(e);
}

const CONNECTION_ERRORS = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'UND_ERR_SOCKET', 'UND_ERR_CLOSED']);

/** OpenSSL's verification results and Node's TLS errors: a handshake that failed. */
const TLS_ERROR = /^(ERR_TLS_|ERR_SSL_|EPROTO$)|CERT|SELF_SIGNED|^UNABLE_TO_|HOSTNAME_MISMATCH|INVALID_CA|PATH_LENGTH_EXCEEDED|INVALID_PURPOSE/;

/**
 * A call that reached no agent. A refused certificate is one, as in Ironic, where requests
 * raises SSLError, a ConnectionError: retried, then AgentConnectionFailed.
 */
function isConnectionError(err: unknown): boolean {
  const code = (err as { code?: unknown }).code;
  return (typeof code === 'string' && (CONNECTION_ERRORS.has(code) || TLS_ERROR.test(code))) || err instanceof undiciErrors.SocketError;
}

/** The agent's answer was never read; the command may or may not have been accepted. */
function isLostAnswer(err: unknown): boolean {
  const code = (err as { code?: string }).code;
  return code === 'ECONNRESET' || code === 'UND_ERR_SOCKET' || err instanceof undiciErrors.SocketError
    || err instanceof undiciErrors.HeadersTimeoutError || err instanceof undiciErrors.BodyTimeoutError;
}

/** The agent's URL as the base of its API's paths (with a trailing slash). */
function baseOf(url: string): URL {
  return new URL(url.endsWith('/') ? url : `${url}/`);
}

/** How a pool checks certificates, as part of its key: a pool never serves another check. */
function verifyKey(verify: AgentVerify): string {
  return typeof verify === 'boolean' ? String(verify) : createHash('sha256').update(verify.ca).digest('hex');
}

export class AgentClient {
  private readonly pools = new Map<string, Pool>();
  private readonly timeoutMs: number;

  constructor(private readonly opts: AgentClientOptions) {
    this.timeoutMs = opts.timeoutMs;
  }

  /**
   * The pool of one agent, keyed by its URL rather than its origin: agents that share an origin
   * (path-prefixed behind one server or proxy) each keep their own few connections, so that
   * one busy agent's calls never queue behind a thousand others'.
   */
  private pool(base: URL, verify: AgentVerify): Pool {
    const key = `${base.href}\u0000${verifyKey(verify)}`;
    let pool = this.pools.get(key);
    if (pool) {
      // Most recently used last: the first entry is the one to close when there are too many.
      this.pools.delete(key);
      this.pools.set(key, pool);
      return pool;
    }
    pool = new Pool(base.origin, {
      connections: this.opts.connectionsPerAgent, pipelining: 1, keepAliveTimeout: 10_000,
      connect: typeof verify === 'boolean' ? { rejectUnauthorized: verify } : { rejectUnauthorized: true, ca: verify.ca },
    });
    this.pools.set(key, pool);
    const max = this.opts.maxPools ?? 2000;
    while (this.pools.size > max) {
      const [oldest, p] = this.pools.entries().next().value as [string, Pool];
      this.pools.delete(oldest);
      void p.close().catch(() => {});
    }
    return pool;
  }

  private async call(target: AgentTarget, method: 'GET' | 'POST', suffix: string, query: Record<string, string>, body?: unknown): Promise<{ status: number; json: unknown }> {
    const base = baseOf(target.url);
    const url = new URL(`v1/commands/${suffix}`, base);
    for (const [k, v] of Object.entries(query)) url.searchParams.set(k, v);
    url.searchParams.set('agent_token', target.token);
    const res = await this.pool(base, target.verify ?? true).request({
      method, path: url.pathname + url.search,
      headers: body === undefined ? { accept: 'application/json' } : { accept: 'application/json', 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
      headersTimeout: this.timeoutMs, bodyTimeout: this.timeoutMs,
    });
    const text = await res.body.text();
    let json: unknown;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    return { status: res.statusCode, json };
  }

  /** `GET /v1/commands/`: every command the agent ran since it booted, in order. */
  async getCommands(target: AgentTarget): Promise<AgentCommand[]> {
    let lastErr: unknown;
    for (let attempt = 1; attempt <= this.opts.maxAttempts; attempt++) {
      try {
        const { status, json } = await this.call(target, 'GET', '', {});
        if (status !== 200) throw new AgentAPIError(`Agent at ${this.where(target)} answered HTTP ${status} to a command list request${this.detail(json)}`, status);
        const commands = (json as { commands?: unknown })?.commands;
        if (!Array.isArray(commands) || !commands.every(isCommand)) throw new AgentAPIError(`Agent at ${this.where(target)} returned an invalid command list.`);
        return commands;
      } catch (err) {
        if (!isConnectionError(err) && !(err instanceof undiciErrors.HeadersTimeoutError)) throw err;
        lastErr = err;
        await this.pause(attempt);
      }
    }
    throw this.connectionFailed(target, lastErr);
  }

  /**
   * `POST /v1/commands/?wait=…`: runs `<extension>.<command>`. A connection refused is retried;
   * an answer lost after sending (reset, timeout) is looked for in the command list first, as
   * Ironic does, so that a command the agent accepted is not sent twice.
   * @throws AgentInProgress (409) | AgentAPIError | AgentConnectionFailed
   */
  async execute(target: AgentTarget, name: string, params: Record<string, unknown>, wait: boolean): Promise<AgentCommand> {
    let lastErr: unknown;
    const before = Date.now();
    for (let attempt = 1; attempt <= this.opts.maxAttempts; attempt++) {
      try {
        const { status, json } = await this.call(target, 'POST', '', { wait: wait ? 'true' : 'false' }, { name, params });
        if (status === 409) throw new AgentInProgress(`Agent at ${this.where(target)} is busy running another command; ${name} not started${this.detail(json)}`);
        if (status !== 200) throw new AgentAPIError(`Agent at ${this.where(target)} refused ${name} with HTTP ${status}${this.detail(json)}`, status);
        if (!isCommand(json)) throw new AgentAPIError(`Agent at ${this.where(target)} returned an invalid result for ${name}.`);
        return json;
      } catch (err) {
        if (isLostAnswer(err)) {
          const found = await this.findSent(target, name, before);
          if (found) return found;
        }
        if (!isConnectionError(err) && !(err instanceof undiciErrors.HeadersTimeoutError)) throw err;
        lastErr = err;
        await this.pause(attempt);
      }
    }
    throw this.connectionFailed(target, lastErr);
  }

  /**
   * Ironic's `_command(poll=True)`: runs `<extension>.<command>` without waiting, then reads the
   * command list until the last command of that name has ended (pollUntilEnded).
   * @throws AgentCommandTimeout after `attempts` reads | AgentInProgress | AgentAPIError | AgentConnectionFailed
   */
  async executeAndPoll(target: AgentTarget, name: string, params: Record<string, unknown>, poll: { attempts: number; intervalMs: number }): Promise<AgentCommand> {
    return this.pollUntilEnded(target, name, await this.execute(target, name, params, false), poll);
  }

  /**
   * Waits for a command the agent has (`sent`, as it was last seen) to end, reading the command
   * list `attempts` times; see executeAndPoll. The first reads come soon (200 ms, then twice as
   * long each time) and later ones every `intervalMs`: a command that takes a fraction of a
   * second (install_bootloader of a whole-disk image) is not waited on for Ironic's whole
   * interval, 6 s by default, a wait every node of a deploy paid.
   * @throws AgentCommandTimeout after `attempts` reads | AgentAPIError | AgentConnectionFailed
   */
  async pollUntilEnded(target: AgentTarget, name: string, sent: AgentCommand, poll: { attempts: number; intervalMs: number }): Promise<AgentCommand> {
    if (sent.command_status !== 'RUNNING') return sent;
    const bare = name.includes('.') ? name.slice(name.indexOf('.') + 1) : name;
    for (let i = 0; i < poll.attempts; i++) {
      await new Promise((r) => setTimeout(r, backoffCeilingMs(i + 1, Math.min(200, poll.intervalMs), poll.intervalMs)));
      const last = (await this.getCommands(target)).filter((c) => c.command_name === bare).pop();
      if (last && last.command_status !== 'RUNNING') return last;
    }
    throw new AgentCommandTimeout(`Timeout executing command ${name} on the agent at ${this.where(target)}`);
  }

  /** The last command listed, when it is the one just sent (Ironic's _get_command_status check). */
  private async findSent(target: AgentTarget, name: string, _since: number): Promise<AgentCommand | undefined> {
    try {
      const commands = await this.getCommands(target);
      const last = commands[commands.length - 1];
      const bare = name.includes('.') ? name.slice(name.indexOf('.') + 1) : name;
      return last && last.command_name === bare ? last : undefined;
    } catch {
      return undefined;
    }
  }

  private where(target: AgentTarget): string {
    // The URL only: the token is a query parameter of the calls, never part of a message.
    return target.url;
  }

  private detail(json: unknown): string {
    const msg = (json as { message?: unknown; faultstring?: unknown } | undefined);
    const text = typeof msg?.message === 'string' ? msg.message : typeof msg?.faultstring === 'string' ? msg.faultstring : undefined;
    return text ? `: ${text}` : '.';
  }

  private connectionFailed(target: AgentTarget, err: unknown): AgentConnectionFailed {
    const reason = (err as Error | undefined)?.message ?? 'unknown error';
    return new AgentConnectionFailed(`Failed to connect to the agent at ${this.where(target)} after ${this.opts.maxAttempts} attempt(s): ${reason}`);
  }

  private pause(attempt: number): Promise<void> {
    if (attempt >= this.opts.maxAttempts) return Promise.resolve();
    return new Promise((r) => setTimeout(r, this.opts.retryDelayMs ?? 1000));
  }

  /** Closes the pools of an agent whose work ended (its calls in flight finish first). */
  forget(url: string): void {
    let prefix: string;
    try {
      prefix = `${baseOf(url).href}\u0000`;
    } catch {
      return; // Not a URL: nothing was opened for it.
    }
    for (const [key, p] of this.pools) {
      if (!key.startsWith(prefix)) continue;
      this.pools.delete(key);
      void p.close().catch(() => {});
    }
  }

  async close(): Promise<void> {
    const pools = [...this.pools.values()];
    this.pools.clear();
    await Promise.all(pools.map((p) => p.close().catch(() => {})));
  }
}
