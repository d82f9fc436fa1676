/**
 * One simulated host's ironic-python-agent: the persistent part (its disk, counters, faults)
 * and, while the ramdisk runs, a `Life`: discovery of the API version, in-band inspection,
 * lookup with retries, heartbeats, and the command API. Everything is timers and promises,
 * nothing polls, so a thousand agents cost little when idle.
 */
import { randomUUID, randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { request, type Dispatcher } from 'undici';
import type { SimBmc, SystemState } from '../redfish/state.js';
import { downloadImage, validateImageInfo } from './image.js';
import type { HostFacts } from './inventory.js';
import {
  AGENT_VERSION,
  CLEAN_STEPS,
  DEPLOY_STEPS,
  HARDWARE_MANAGER,
  HARDWARE_MANAGER_VERSION,
  IpaError,
  agentIsBusy,
  cleaningError,
  deploymentError,
  executionError,
  faultBody,
  invalidCommand,
  invalidParams,
  methodNotFound,
  notFound,
  pyRepr,
  systemLogs,
  versionMismatch,
} from './ipa.js';
import type { AgentFaults, AgentWitness, CommandResult, DiskState } from './types.js';

/** What every agent of a fleet shares. */
export interface AgentEnv {
  apiUrl: string;
  /** `http://host:port` of the agents' shared server. */
  baseUrl: string;
  dispatcher: Dispatcher;
  bootMs: [number, number];
  writeBytesPerMs: number;
  heartbeatMinGapMs: number;
  lookupRetryMs: number;
  /** Asks the host's BMC for a reset (ForceOff, ForceRestart), as the OS of the host would cause. */
  power(bmc: SimBmc, sysPath: string, type: 'ForceOff' | 'ForceRestart'): void;
}

type Version = [number, number];
const MIN_IRONIC_VERSION: Version = [1, 31];
const V_AGENT_VERSION: Version = [1, 36];
const V_TOKEN: Version = [1, 62];
const V_VERIFY_CA: Version = [1, 68];
const V_INSPECTION: Version = [1, 84];
const HEARTBEAT_JITTER: [number, number] = [0.3, 0.6];
const INSPECTION_ATTEMPTS = 5;
const REQUEST_TIMEOUT_MS = 60_000;
/** How long steps without real work take. */
const STEP_MS: Record<string, number> = { erase_devices: 1000, erase_devices_metadata: 100, erase_devices_express: 200 };
const DEFAULT_STEP_MS = 50;
const SHUTDOWN_MS = 200;
/** Calls kept per host in the witness (AgentWitness.calls). */
const CALL_LIMIT = 256;

const cmp = (a: Version, b: Version) => a[0] - b[0] || a[1] - b[1];
const minV = (a: Version, b: Version): Version => (cmp(a, b) <= 0 ? a : b);
const vstr = (v: Version) => `${v[0]}.${v[1]}`;
const uniform = (lo: number, hi: number) => lo + Math.random() * Math.max(0, hi - lo);

function timer(fn: () => void, ms: number): NodeJS.Timeout {
  const t = setTimeout(fn, Math.max(0, ms));
  t.unref();
  return t;
}

/** Resolves after `ms`, or never when the life ends first (its promise chain is simply dropped). */
function sleep(life: Life, ms: number): Promise<void> {
  return new Promise((resolve) => {
    const t = timer(() => {
      life.sleepers.delete(t);
      resolve();
    }, ms);
    life.sleepers.add(t);
  });
}

/**
 * The partitions an image leaves on the disk, as get_partition_uuids reports them: a whole-disk
 * image its disk identifier; a partition image a root partition, and an EFI system partition
 * when deployed for UEFI (IPA's partition_utils.work_on_disk).
 */
function partitionsOf(info: Record<string, unknown>): { imageType: 'whole-disk' | 'partition'; uuids: Record<string, string> } {
  const partition = info.image_type === 'partition' || (!info.image_type && (!!info.kernel || !!info.ramdisk));
  if (!partition) return { imageType: 'whole-disk', uuids: { 'root uuid': `0x${randomBytes(4).toString('hex')}` } };
  const uuids: Record<string, string> = { 'root uuid': randomUUID() };
  if (info.deploy_boot_mode === 'uefi') uuids['efi system partition uuid'] = randomUUID();
  return { imageType: 'partition', uuids };
}

function send(res: ServerResponse, status: number, body: string): void {
  if (res.headersSent || res.destroyed) return;
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body);
}

function bump(counts: Record<string, number>, key: string | number): void {
  counts[key] = (counts[key] ?? 0) + 1;
}

/** A command as the agent keeps it: the serialised result plus how to wait for it. */
interface Command {
  result: CommandResult;
  done: Promise<void>;
  /** Synchronous commands are answered only once done, whatever `wait` says. */
  sync: boolean;
}

/** One run of the ramdisk, from boot to death. */
class Life {
  readonly controller = new AbortController();
  readonly sleepers = new Set<NodeJS.Timeout>();
  readonly commands = new Map<string, Command>();
  readonly startedAt = Date.now();
  /** Resolves when the agent dies. */
  readonly died: Promise<void>;
  private onDeath!: () => void;
  dead = false;
  lockedDown = false;
  version: Version = MIN_IRONIC_VERSION;
  token: string | null = null;
  nodeUuid: string | null = null;
  heartbeatTimeoutS = 300;
  heartbeatTimer?: NodeJS.Timeout;
  heartbeatAt = 0;
  previousHeartbeat = 0;
  heartbeating = false;
  heartbeatInFlight = false;
  forcePending = false;
  partitionUuids: Record<string, unknown> | null = null;

  constructor() {
    this.died = new Promise((resolve) => {
      this.onDeath = resolve;
    });
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** Waits for `p`, or resolves false when the agent dies first. */
  async outlives(p: Promise<void>): Promise<boolean> {
    await Promise.race([p, this.died]);
    return !this.dead;
  }

  end(): void {
    this.dead = true;
    this.onDeath();
    this.controller.abort();
    for (const t of this.sleepers) clearTimeout(t);
    this.sleepers.clear();
    if (this.heartbeatTimer) clearTimeout(this.heartbeatTimer);
  }
}

interface CommandSpec {
  async: boolean;
  required: readonly string[];
  /** Runs before the command is recorded: its IpaError refuses the call (IPA's command validators). */
  validate?(params: Record<string, unknown>): void;
  run(params: Record<string, unknown>, life: Life): Promise<unknown> | unknown;
}

/** The agent of one system of one simulated BMC. */
export class AgentHost {
  private life: Life | null = null;
  private lastCommands: Command[] = [];
  private bootTimer?: NodeJS.Timeout;
  private bootedAt: number | null = null;
  private boots = 0;
  private lookups = 0;
  private readonly lookupStatuses: Record<string, number> = {};
  private inspections = 0;
  private readonly inspectionStatuses: Record<string, number> = {};
  private heartbeats = 0;
  private readonly heartbeatStatuses: Record<string, number> = {};
  private readonly received: Record<string, number> = {};
  /** What the agents did when (see AgentWitness.calls), oldest half dropped when full. */
  private calls: Array<[string, number, number]> = [];
  private lastToken: string | null = null;
  private lastNodeUuid: string | null = null;
  private lockedDown = false;
  private disk: DiskState | null = null;
  private instanceRunning = false;
  private hwVersion = HARDWARE_MANAGER_VERSION;
  faults: AgentFaults = {};
  private readonly commandSpecs: Record<string, Record<string, CommandSpec>>;

  constructor(
    private readonly env: AgentEnv,
    private readonly bmc: SimBmc,
    readonly sysPath: string,
    /** The path prefix of this agent on the shared server. */
    readonly id: string,
    private readonly facts: HostFacts,
    private readonly isAgentIso: (url: string) => boolean,
  ) {
    this.commandSpecs = this.buildCommands();
  }

  get callbackUrl(): string {
    return `${this.env.baseUrl}/${this.id}`;
  }

  get running(): boolean {
    return this.life !== null;
  }

  /** The host finished booting: the agent ISO starts an agent, the disk starts the instance. */
  booted(system: SystemState): void {
    this.stopped();
    const r = system.running;
    if (!r || r.phase !== 'up') return;
    if (r.image && r.device !== 'Hdd' && this.isAgentIso(r.image)) {
      if (this.faults.noBoot) return;
      const [lo, hi] = this.faults.bootSeconds ? [this.faults.bootSeconds[0] * 1000, this.faults.bootSeconds[1] * 1000] : this.env.bootMs;
      this.bootTimer = timer(() => {
        this.bootTimer = undefined;
        this.start();
      }, uniform(lo, hi));
    } else if (r.device === 'Hdd' && this.disk) {
      this.instanceRunning = true;
    }
  }

  /** The host powered off, restarted or lost power: whatever ran on it is gone. */
  stopped(): void {
    if (this.bootTimer) clearTimeout(this.bootTimer);
    this.bootTimer = undefined;
    this.instanceRunning = false;
    if (this.life) this.kill('host stopped');
  }

  private kill(why: string): void {
    const life = this.life;
    if (!life) return;
    life.end();
    this.life = null;
    this.bmc.event('agent-stopped', { agent: this.id, why });
  }

  shutdown(): void {
    this.stopped();
  }

  /** Records one of the agent's calls, served requests or command runs: what, from, to (epoch ms). */
  private record(what: string, from: number): void {
    if (this.calls.length >= CALL_LIMIT) this.calls = this.calls.slice(CALL_LIMIT / 2);
    this.calls.push([what, from, Date.now()]);
  }

  private start(): void {
    const life = new Life();
    this.life = life;
    this.lastCommands = [];
    this.lockedDown = false;
    this.bootedAt = life.startedAt;
    this.boots++;
    this.lastToken = null;
    this.lastNodeUuid = null;
    this.bmc.event('agent-started', { agent: this.id });
    void this.run(life).catch(() => undefined);
  }

  // ---- talking to Galvanic ----

  private async call(life: Life, method: 'GET' | 'POST', path: string, version: Version | null, body?: unknown): Promise<{ status: number; json: unknown }> {
    const from = Date.now();
    const headers: Record<string, string> = { accept: 'application/json' };
    if (version) headers['x-openstack-ironic-api-version'] = vstr(version);
    if (body !== undefined) headers['content-type'] = 'application/json';
    const res = await request(`${this.env.apiUrl}${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      dispatcher: this.env.dispatcher,
      signal: life.signal,
      headersTimeout: REQUEST_TIMEOUT_MS,
      bodyTimeout: REQUEST_TIMEOUT_MS,
    });
    const text = await res.body.text();
    this.record(`api ${method} ${path.replace(/\?.*$/, '').replace(/[0-9a-f]{8}-[0-9a-f-]{27}/, '{node}')} ${res.statusCode}`, from);
    let json: unknown = null;
    try {
      json = text ? JSON.parse(text) : null;
    } catch {
      json = null;
    }
    return { status: res.statusCode, json };
  }

  private async run(life: Life): Promise<void> {
    life.version = await this.discoverVersion(life);
    if (life.dead) return;
    await this.inspect(life);
    if (life.dead) return;
    await this.lookup(life);
    if (life.dead) return;
    life.heartbeating = true;
    // The first heartbeat goes out at once.
    this.scheduleHeartbeat(life, 0);
  }

  private async discoverVersion(life: Life): Promise<Version> {
    try {
      const { json } = await this.call(life, 'GET', '/', null);
      const v = String((json as { default_version?: { version?: string } })?.default_version?.version ?? '').split('.');
      const parsed: Version = [Number(v[0]), Number(v[1])];
      if (Number.isInteger(parsed[0]) && Number.isInteger(parsed[1])) return parsed;
    } catch {
      // IPA falls back to its minimum when discovery fails.
    }
    return MIN_IRONIC_VERSION;
  }

  /** Exponential backoff with full jitter, capped by lookupRetryMs. */
  private backoff(attempt: number): number {
    const cap = Math.min(this.env.lookupRetryMs, 100 * 2 ** Math.min(attempt, 20));
    return uniform(cap / 2, cap);
  }

  private async inspect(life: Life): Promise<void> {
    const data = {
      inventory: this.facts.inventory,
      ...(this.facts.rootDisk ? { root_disk: this.facts.rootDisk } : {}),
      boot_interface: null,
      configuration: { collectors: ['default', 'logs'], managers: [{ name: HARDWARE_MANAGER, version: this.hwVersion }] },
      logs: systemLogs([`ironic-python-agent ${AGENT_VERSION} collecting inventory`]),
      error: null,
    };
    for (let attempt = 0; attempt < INSPECTION_ATTEMPTS && !life.dead; attempt++) {
      let status: number | 'error';
      let json: unknown = null;
      try {
        ({ status, json } = await this.call(life, 'POST', '/v1/continue_inspection', minV(life.version, V_INSPECTION), data));
      } catch {
        status = 'error';
      }
      if (life.dead) return;
      this.inspections++;
      bump(this.inspectionStatuses, status);
      if (status === 'error' || status >= 500 || status === 409) {
        await sleep(life, this.backoff(attempt + 3));
        continue;
      }
      // A 4xx means "not inspecting": IPA logs it and goes on with the lookup.
      if (status < 400) {
        const body = json as { uuid?: unknown; node?: { uuid?: unknown }; config?: Record<string, unknown> } | null;
        if (body?.node && typeof body.node.uuid === 'string' && body.config) this.processLookup(life, body as { node: { uuid: string }; config: Record<string, unknown> });
        else if (typeof body?.uuid === 'string') life.nodeUuid = body.uuid;
      }
      return;
    }
  }

  private async lookup(life: Life): Promise<void> {
    const query = new URLSearchParams({ addresses: this.facts.macs.join(',') });
    if (life.nodeUuid) query.set('node_uuid', life.nodeUuid);
    for (let attempt = 0; !life.dead; attempt++) {
      let status: number | 'error';
      let json: unknown = null;
      try {
        ({ status, json } = await this.call(life, 'GET', `/v1/lookup?${query.toString()}`, minV(life.version, V_TOKEN)));
      } catch {
        status = 'error';
      }
      if (life.dead) return;
      this.lookups++;
      bump(this.lookupStatuses, status);
      const body = json as { node?: { uuid?: unknown }; config?: Record<string, unknown>; heartbeat_timeout?: unknown } | null;
      if (status === 200 && body?.node && typeof body.node.uuid === 'string') {
        if (!body.config && typeof body.heartbeat_timeout === 'number') body.config = { heartbeat_timeout: body.heartbeat_timeout };
        if (body.config) {
          this.processLookup(life, body as { node: { uuid: string }; config: Record<string, unknown> });
          return;
        }
      }
      await sleep(life, this.backoff(attempt));
    }
  }

  /** `process_lookup_data`: the node, the heartbeat interval and the token. */
  private processLookup(life: Life, body: { node: { uuid: string }; config: Record<string, unknown> }): void {
    life.nodeUuid = body.node.uuid;
    this.lastNodeUuid = body.node.uuid;
    const timeout = Number(body.config.heartbeat_timeout);
    if (Number.isFinite(timeout) && timeout > 0) life.heartbeatTimeoutS = timeout;
    const token = body.config.agent_token;
    // A token of 32 characters or more is the one; "******" means it was handed out before
    // (the agent keeps the one it has, if any); anything else is ignored.
    if (typeof token === 'string' && token.length >= 32) life.token = token;
    this.lastToken = life.token;
  }

  private scheduleHeartbeat(life: Life, delayMs: number): void {
    if (life.dead || !life.heartbeating) return;
    if (life.heartbeatTimer) clearTimeout(life.heartbeatTimer);
    life.heartbeatAt = Date.now() + delayMs;
    life.heartbeatTimer = timer(() => {
      life.heartbeatTimer = undefined;
      void this.heartbeat(life);
    }, delayMs);
  }

  /** After an async command: a heartbeat soon, but not sooner than the gap after the previous one. */
  private forceHeartbeat(life: Life): void {
    if (life.dead || !life.heartbeating) return;
    if (life.heartbeatInFlight) {
      life.forcePending = true;
      return;
    }
    const at = Math.max(Date.now(), life.previousHeartbeat + this.env.heartbeatMinGapMs);
    if (!life.heartbeatTimer || life.heartbeatAt > at) this.scheduleHeartbeat(life, at - Date.now());
  }

  private async heartbeat(life: Life): Promise<void> {
    if (life.dead || !life.nodeUuid) return;
    const body: Record<string, unknown> = { callback_url: this.callbackUrl };
    if (cmp(life.version, V_TOKEN) >= 0) body.agent_token = this.faults.wrongToken ? `wrong-${life.token ?? randomBytes(16).toString('hex')}` : life.token;
    if (cmp(life.version, V_AGENT_VERSION) >= 0) body.agent_version = this.faults.agentVersion ?? AGENT_VERSION;
    life.heartbeatInFlight = true;
    let status: number | 'error';
    try {
      ({ status } = await this.call(life, 'POST', `/v1/heartbeat/${life.nodeUuid}`, minV(life.version, V_VERIFY_CA), body));
    } catch {
      status = 'error';
    }
    life.heartbeatInFlight = false;
    if (life.dead) return;
    this.heartbeats++;
    bump(this.heartbeatStatuses, status);
    life.previousHeartbeat = Date.now();
    if (status === 404) {
      // The node is gone or no longer waits for an agent: stop heartbeating.
      life.heartbeating = false;
      return;
    }
    const forced = life.forcePending;
    life.forcePending = false;
    if (status === 202) {
      const [lo, hi] = HEARTBEAT_JITTER;
      this.scheduleHeartbeat(life, forced ? this.env.heartbeatMinGapMs : life.heartbeatTimeoutS * 1000 * uniform(lo, hi));
    } else {
      // IPA retries a failed heartbeat in 5-10 s (409 "node locked" included).
      this.scheduleHeartbeat(life, this.env.heartbeatMinGapMs * uniform(1, 2));
    }
  }

  // ---- the command API ----

  /** Serves `/<id>/...` while the agent runs; `sub` is the path after the prefix. */
  async handle(req: IncomingMessage, res: ServerResponse, sub: string, query: URLSearchParams, body: string): Promise<void> {
    const from = Date.now();
    res.once('finish', () => this.record(`serve ${req.method ?? 'GET'} ${sub.replace(/^\/v1/, '').replace(/\/commands\/.+$/, '/commands/{id}')} ${res.statusCode}`, from));
    const life = this.life;
    const method = req.method ?? 'GET';
    const path = sub.replace(/^\/v1(?=\/|$)/, '') || '/';
    const versioned = /^\/v1(\/|$)/.test(sub);
    if (!life || life.lockedDown) return send(res, 404, faultBody(404, '404 Not Found: The requested URL was not found on the server.'));
    if (sub === '' || sub === '/') {
      if (method !== 'GET') return send(res, 405, faultBody(405, '405 Method Not Allowed: The method is not allowed for the requested URL.'));
      return send(res, 200, JSON.stringify(this.rootDoc()));
    }
    if (versioned && path === '/') {
      if (method !== 'GET') return send(res, 405, faultBody(405, '405 Method Not Allowed: The method is not allowed for the requested URL.'));
      return send(res, 200, JSON.stringify(this.v1Doc()));
    }
    if (path === '/status' && method === 'GET') return send(res, 200, JSON.stringify({ started_at: life.startedAt / 1000, version: this.faults.agentVersion ?? AGENT_VERSION }));
    const m = /^\/commands(?:\/([^/]*))?$/.exec(path);
    if (!m) return send(res, 404, faultBody(404, '404 Not Found: The requested URL was not found on the server.'));
    const cmdId = m[1] ?? '';
    if (cmdId === '' ? method !== 'GET' && method !== 'POST' : method !== 'GET') {
      return send(res, 405, faultBody(405, '405 Method Not Allowed: The method is not allowed for the requested URL.'));
    }
    const token = query.get('agent_token');
    if (!token || !life.token || token !== life.token) return send(res, 401, faultBody(401, '401 Unauthorized: Token invalid.'));
    const wait = (query.get('wait') ?? '').toLowerCase() === 'true';
    if (cmdId !== '') {
      const cmd = life.commands.get(cmdId);
      if (!cmd) return this.sendError(res, notFound('Command Result', cmdId));
      // A request waiting on a host that dies gets its connection reset, as from a dead host.
      if (wait && !(await life.outlives(cmd.done))) return void req.socket.destroy();
      return send(res, 200, JSON.stringify(cmd.result));
    }
    if (method === 'GET') return send(res, 200, JSON.stringify({ commands: [...life.commands.values()].map((c) => c.result) }));
    let input: unknown;
    try {
      input = JSON.parse(body);
    } catch {
      return send(res, 400, faultBody(400, '400 Bad Request: The browser (or proxy) sent a request that this server could not understand.'));
    }
    const o = input as { name?: unknown; params?: unknown } | null;
    if (!o || typeof o !== 'object' || typeof o.name !== 'string' || typeof o.params !== 'object' || o.params === null || Array.isArray(o.params)) {
      return send(res, 400, faultBody(400, '400 Bad Request: Missing or invalid name or params'));
    }
    const params = o.params as Record<string, unknown>;
    const step = (params.step as { step?: unknown } | undefined)?.step;
    bump(this.received, /\.execute_(deploy|clean)_step$/.test(o.name) && typeof step === 'string' ? `${o.name}/${step}` : o.name);
    let cmd: Command;
    try {
      cmd = this.execute(life, o.name, params);
    } catch (err) {
      if (err instanceof IpaError) return this.sendError(res, err);
      throw err;
    }
    if ((this.faults.loseResponse ?? 0) > 0) {
      // Accepted and running, but the answer never arrives.
      this.faults = { ...this.faults, loseResponse: (this.faults.loseResponse ?? 1) - 1 };
      req.socket.destroy();
      return;
    }
    const hold = this.faults.holdAnswer;
    if (hold && hold.command === o.name) {
      const { holdAnswer: _spent, ...rest } = this.faults;
      this.faults = rest;
      await new Promise((r) => setTimeout(r, hold.ms));
    }
    if ((wait || cmd.sync) && !(await life.outlives(cmd.done))) return void req.socket.destroy();
    send(res, 200, JSON.stringify(cmd.result));
    if (o.name === 'system.lockdown' && cmd.result.command_status === 'SUCCEEDED') this.lockdown(life);
  }

  private sendError(res: ServerResponse, err: IpaError): void {
    send(res, err.code, faultBody(err.code, `${err.ipaMessage}: ${err.details}`, err));
  }

  private rootDoc(): object {
    const url = this.callbackUrl;
    return {
      name: 'OpenStack Ironic Python Agent API',
      description: 'Ironic Python Agent is a provisioning agent for OpenStack Ironic',
      versions: [this.versionDoc(url)],
      default_version: this.versionDoc(url),
    };
  }

  private versionDoc(url: string): object {
    return {
      id: 'v1',
      links: [
        { href: `${url}/v1/`, rel: 'self' },
        { href: 'https://docs.openstack.org/ironic-python-agent', rel: 'describedby', type: 'text/html' },
      ],
    };
  }

  private v1Doc(): object {
    const url = this.callbackUrl;
    return {
      commands: [
        { href: `${url}/v1/commands`, rel: 'self' },
        { href: `${url}/commands`, rel: 'bookmark' },
      ],
      status: [
        { href: `${url}/v1/status`, rel: 'self' },
        { href: `${url}/status`, rel: 'bookmark' },
      ],
      media_types: [{ base: 'application/json', type: 'application/vnd.openstack.ironic-python-agent.v1+json' }],
      ...this.versionDoc(url),
    };
  }

  /** `execute_command`: busy check, dispatch, and the record of the result. @throws IpaError */
  private execute(life: Life, name: string, params: Record<string, unknown>): Command {
    const last = [...life.commands.values()].pop();
    if (last && last.result.command_status === 'RUNNING') throw agentIsBusy(last.result.command_name);
    const dot = name.indexOf('.');
    if (dot < 0) throw invalidCommand('Command name must be of the form <extension>.<name>');
    const ext = name.slice(0, dot);
    const command = name.slice(dot + 1);
    const specs = this.commandSpecs[ext];
    if (!specs) throw notFound('Extension', ext);
    const spec = Object.prototype.hasOwnProperty.call(specs, command) ? specs[command] : undefined;
    if (!spec) throw invalidCommand(`Unknown command: ${command}`);
    const missing = spec.required.filter((k) => !(k in params));
    if (missing.length) throw invalidParams(`${name}() missing required argument(s): ${missing.join(', ')}`);
    spec.validate?.(params);
    const result: CommandResult = { id: randomUUID(), command_name: command, command_status: 'RUNNING', command_error: null, command_result: null };
    const finish = (value: unknown, err?: unknown) => {
      if (err === undefined) {
        result.command_status = 'SUCCEEDED';
        result.command_result = value ?? null;
        return;
      }
      const e = err instanceof IpaError ? err : executionError(String((err as Error)?.message ?? err));
      result.command_status = e.type === 'VersionMismatch' ? 'CLEAN_VERSION_MISMATCH' : 'FAILED';
      result.command_error = e.serialize();
      result.command_result = null;
    };
    // A synchronous command's errors are FAILED results too (IPA's SyncCommandResult).
    const from = Date.now();
    const done = (async () => {
      try {
        const value = await spec.run(params, life);
        if (!life.dead) finish(value);
      } catch (err) {
        if (!life.dead) finish(undefined, err);
      }
      if (spec.async) {
        this.record(`run ${name}`, from);
        this.forceHeartbeat(life);
      }
    })();
    const cmd: Command = { result, done, sync: !spec.async };
    life.commands.set(result.id, cmd);
    this.lastCommands = [...life.commands.values()];
    return cmd;
  }

  private lockdown(life: Life): void {
    life.lockedDown = true;
    life.heartbeating = false;
    if (life.heartbeatTimer) clearTimeout(life.heartbeatTimer);
    this.lockedDown = true;
  }

  private versions(): Record<string, string> {
    return { [HARDWARE_MANAGER]: this.hwVersion };
  }

  private buildCommands(): Record<string, Record<string, CommandSpec>> {
    const steps = (kind: 'clean' | 'deploy') => ({
      async: false,
      required: ['node', 'ports'],
      run: () => ({
        [`${kind}_steps`]: {
          [HARDWARE_MANAGER]: (kind === 'clean' ? CLEAN_STEPS : DEPLOY_STEPS).map((s) => (kind === 'clean' && s.step === this.faults.unabortableStep ? { ...s, abortable: false } : { ...s })),
        },
        hardware_manager_version: this.versions(),
      }),
    });
    const shutdown = (type: 'ForceOff' | 'ForceRestart'): CommandSpec => ({
      async: true,
      required: [],
      run: async (_p, life) => {
        await sleep(life, DEFAULT_STEP_MS);
        // The OS goes down shortly after the command reports success.
        timer(() => {
          if (this.life === life) this.env.power(this.bmc, this.sysPath, type);
        }, SHUTDOWN_MS);
        return null;
      },
    });
    return {
      clean: {
        get_clean_steps: steps('clean'),
        execute_clean_step: { async: true, required: ['step', 'node', 'ports'], run: (p, life) => this.runStep('clean', p, life) },
      },
      deploy: {
        get_deploy_steps: steps('deploy'),
        execute_deploy_step: { async: true, required: ['step', 'node', 'ports'], run: (p, life) => this.runStep('deploy', p, life) },
      },
      standby: {
        get_partition_uuids: { async: false, required: [], run: (_p, life) => life.partitionUuids ?? {} },
        prepare_image: { async: true, required: ['image_info'], validate: (p) => void validateImageInfo(p.image_info), run: async (p, life) => ({ result: `prepare_image: ${await this.writeImage(p, life)}` }) },
        power_off: shutdown('ForceOff'),
        run_image: shutdown('ForceRestart'),
        reboot: shutdown('ForceRestart'),
        sync: { async: false, required: [], run: () => null },
      },
      image: {
        install_bootloader: {
          async: true,
          required: ['root_uuid'],
          run: async (p, life) => {
            await sleep(life, 4 * DEFAULT_STEP_MS);
            // GRUB goes where the image's root partition is; IPA fails on a partition it cannot find.
            if (!this.disk || p.root_uuid !== life.partitionUuids?.['root uuid']) {
              throw executionError(`Installing GRUB2 boot loader to device /dev/sda failed: no partition with UUID ${pyRepr(p.root_uuid)}`);
            }
            this.disk = {
              ...this.disk,
              bootloader: { rootUuid: String(p.root_uuid), efiSystemPartUuid: (p.efi_system_part_uuid as string | null | undefined) ?? null, targetBootMode: (p.target_boot_mode as string | undefined) ?? 'bios' },
            };
            return null;
          },
        },
      },
      log: {
        collect_system_logs: { async: false, required: [], run: () => ({ system_logs: systemLogs([`ironic-python-agent ${AGENT_VERSION}`, `commands: ${this.lastCommands.length}`]) }) },
      },
      system: {
        lockdown: { async: false, required: [], run: () => null },
      },
      poll: {
        get_hardware_info: { async: false, required: [], run: () => this.facts.inventory },
      },
    };
  }

  /** `execute_clean_step` / `execute_deploy_step`, with the step faults. */
  private async runStep(kind: 'clean' | 'deploy', params: Record<string, unknown>, life: Life): Promise<unknown> {
    const given = params[`${kind}_version`];
    if (given !== undefined && given !== null) {
      if (this.faults.versionMismatch) {
        // A newer agent: its hardware managers report another version from now on.
        this.hwVersion = `${this.hwVersion}.1`;
        this.faults = { ...this.faults, versionMismatch: false };
      }
      if (JSON.stringify(given) !== JSON.stringify(this.versions())) throw versionMismatch(this.versions(), given);
    }
    const step = params.step as Record<string, unknown> | null;
    if (!step || typeof step !== 'object' || !('step' in step)) throw executionError(`Malformed ${kind}_step, no "step" key: ${pyRepr(step)}`);
    const name = String(step.step);
    if (!CLEAN_STEPS.some((s) => s.step === name) && !DEPLOY_STEPS.some((s) => s.step === name)) throw methodNotFound(name);
    const args: Record<string, unknown> = { ...params, ...((step.args as Record<string, unknown> | undefined) ?? {}) };
    const fail = kind === 'clean' ? cleaningError : deploymentError;
    const f = this.faults;
    if (f.hangStep === name) return new Promise<never>(() => undefined);
    let result: unknown = null;
    let work: () => void = () => undefined;
    const seconds = f.stepSeconds?.[name];
    let busyMs = typeof seconds === 'number' ? seconds * 1000 : (STEP_MS[name] ?? DEFAULT_STEP_MS);
    const started = Date.now();
    if (name === 'write_image') {
      const info = validateImageInfo(args.image_info);
      const written = await downloadImage(info, this.env.dispatcher, life.signal);
      if (life.dead) return null;
      // The write takes its time: at least the size over the write rate.
      busyMs = Math.max(0, written.bytes / this.env.writeBytesPerMs - (Date.now() - started));
      const parts = partitionsOf(info);
      work = () => {
        this.disk = { imageUrl: written.url, bytes: written.bytes, sha256: written.sha256, writtenAt: Date.now(), imageType: parts.imageType, bootloader: null };
        life.partitionUuids = parts.uuids;
      };
      result = { result: `prepare_image: image (${info.id}) written to device /dev/sda root_uuid=${parts.uuids['root uuid']}` };
    } else if (name.startsWith('erase_devices')) {
      work = () => {
        this.disk = null;
      };
      result = name === 'erase_devices' ? Object.fromEntries(((this.facts.inventory.disks as Array<{ name: string }>) ?? []).map((d) => [d.name, null])) : null;
    }
    if (f.crashDuringStep === name || f.rebootDuringStep === name) {
      await sleep(life, busyMs / 2);
      if (f.crashDuringStep === name) this.kill(`crashed during ${name}`);
      else this.env.power(this.bmc, this.sysPath, 'ForceRestart');
      return new Promise<never>(() => undefined);
    }
    await sleep(life, busyMs);
    if (f.failStep === name) throw fail(f.failMessage ?? `Simulated failure of step ${name}`);
    work();
    return kind === 'clean' ? { clean_result: result, clean_step: step } : { deploy_result: result, deploy_step: step };
  }

  /** standby.prepare_image, the legacy way in. */
  private async writeImage(params: Record<string, unknown>, life: Life): Promise<string> {
    const info = validateImageInfo(params.image_info);
    const written = await downloadImage(info, this.env.dispatcher, life.signal);
    await sleep(life, written.bytes / this.env.writeBytesPerMs);
    const parts = partitionsOf(info);
    this.disk = { imageUrl: written.url, bytes: written.bytes, sha256: written.sha256, writtenAt: Date.now(), imageType: parts.imageType, bootloader: null };
    life.partitionUuids = parts.uuids;
    return `image (${info.id}) written to device /dev/sda root_uuid=${parts.uuids['root uuid']}`;
  }

  witness(): AgentWitness {
    const life = this.life;
    return {
      running: life !== null && !life.lockedDown,
      bootedAt: this.bootedAt,
      boots: this.boots,
      callbackUrl: this.callbackUrl,
      nodeUuid: life?.nodeUuid ?? this.lastNodeUuid,
      lookups: this.lookups,
      lookupStatuses: { ...this.lookupStatuses },
      inspections: this.inspections,
      inspectionStatuses: { ...this.inspectionStatuses },
      heartbeats: this.heartbeats,
      heartbeatStatuses: { ...this.heartbeatStatuses },
      token: life ? life.token : this.lastToken,
      commands: (life ? [...life.commands.values()] : this.lastCommands).map((c) => c.result),
      received: { ...this.received },
      calls: [...this.calls],
      lockedDown: this.lockedDown,
      disk: this.disk ? { ...this.disk } : null,
      instance: this.disk ? { running: this.instanceRunning, imageUrl: this.disk.imageUrl } : null,
      faults: { ...this.faults },
    };
  }

  /** Zeroes the counters (`POST /_sim/reset`); the disk and a running agent stay. */
  resetCounters(): void {
    this.lookups = 0;
    this.inspections = 0;
    this.heartbeats = 0;
    this.calls = [];
    for (const o of [this.lookupStatuses, this.inspectionStatuses, this.heartbeatStatuses, this.received]) for (const k of Object.keys(o)) delete o[k];
  }
}
