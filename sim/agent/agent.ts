/**
 * One simulated host's ironic-python-agent, as IPA's `agent.py`: the persistent part (its disk,
 * counters, faults) and, while the ramdisk runs, a `Life`: discovery of the API version, in-band
 * inspection, lookup with retries, heartbeats, and the command API (`api.ts`) over the command
 * extensions (`extensions/`). Everything is timers and promises, nothing polls, so a thousand
 * agents cost little when idle.
 */
import type { SoftRaidDevice } from './raid.js';
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TLSSocket } from 'node:tls';
import { gunzipSync } from 'node:zlib';
import { request } from 'undici';
import type { SystemState } from '../redfish/state.js';
import { serveApi, type ApiAgent } from './api.js';
import { executeCommand, type Command, type Extension } from './extensions/base.js';
import { cleanExtension } from './extensions/clean.js';
import { serviceExtension } from './extensions/service.js';
import { deployExtension } from './extensions/deploy.js';
import { imageExtension } from './extensions/image.js';
import { logExtension } from './extensions/log.js';
import { pollExtension } from './extensions/poll.js';
import { standbyExtension } from './extensions/standby.js';
import { systemExtension } from './extensions/system.js';
import type { HostFacts } from './inventory.js';
import { hardwareVersions } from './hardware.js';
import { AGENT_VERSION, HARDWARE_MANAGER_VERSION, systemLogs } from './ipa.js';
import { Life, MIN_IRONIC_VERSION, bump, sleep, timer, uniform, type Version } from './life.js';
import type { AgentEnv, AgentFaults, AgentWitness, DiskState } from './types.js';
import { agentUrls, kernelParams } from './kernel-params.js';

const V_AGENT_VERSION: Version = [1, 36];
const V_TOKEN: Version = [1, 62];
const V_VERIFY_CA: Version = [1, 68];
const HEARTBEAT_JITTER: [number, number] = [0.3, 0.6];
/** inspector.py's tenacity: five attempts, 5 s apart, on connection errors only. */
const INSPECTION_ATTEMPTS = 5;
const INSPECTION_RETRY_MS = 5000;
const REQUEST_TIMEOUT_MS = 60_000;
/** What python-requests sends with every request of IPA's. */
const REQUESTS_HEADERS: Readonly<Record<string, string>> = { 'user-agent': 'python-requests/2.28.1', 'accept-encoding': 'gzip, deflate' };
/** ironic_api_client's `_request` headers: its GETs name a JSON body too. */
const API_CLIENT_HEADERS: Readonly<Record<string, string>> = { ...REQUESTS_HEADERS, 'content-type': 'application/json', accept: 'application/json' };
/**
 * IPA 9.4's inspection post (`requests.post(url, data=<str>)`): no Content-Type, no version
 * header (Ironic then answers as ironic-inspector did, with the node's UUID). Later IPAs add
 * Content-Type and Accept.
 */
const INSPECTION_HEADERS: Readonly<Record<string, string>> = { ...REQUESTS_HEADERS, accept: '*/*' };
/** Calls kept per host in the witness (AgentWitness.calls). */
const CALL_LIMIT = 256;

const cmp = (a: Version, b: Version) => a[0] - b[0] || a[1] - b[1];
const minV = (a: Version, b: Version): Version => (cmp(a, b) <= 0 ? a : b);
const vstr = (v: Version) => `${v[0]}.${v[1]}`;

/** What an agent reaches of its host's machine: the BMC's event log and power (a reset the host's OS causes). */
export interface HostLink {
  event(type: 'agent-started' | 'agent-stopped', detail: Record<string, unknown>): void;
  power(type: 'ForceOff' | 'ForceRestart'): void;
}

/**
 * Where a booted agent calls (IPA's kernel parameters): `ipa-api-url` for its lookup and
 * heartbeats, `ipa-inspection-callback-url` for its inventory. Without the first it only
 * inspects; without the second it does not inspect.
 */
export interface AgentUrls {
  apiUrl: string | null;
  inspectionUrl: string | null;
}

/** The agent of one simulated host. */
export class AgentHost implements ApiAgent {
  life: Life | null = null;
  lastCommands: Command[] = [];
  private bootTimer?: NodeJS.Timeout;
  private bootedAt: number | null = null;
  private boots = 0;
  private lookups = 0;
  private readonly lookupStatuses: Record<string, number> = {};
  private inspections = 0;
  private readonly inspectionStatuses: Record<string, number> = {};
  private heartbeats = 0;
  private readonly heartbeatStatuses: Record<string, number> = {};
  readonly received: Record<string, number> = {};
  readonly nodeReceived: Record<string, unknown> = {};
  /** What the agents did when (see AgentWitness.calls), oldest half dropped when full. */
  private calls: Array<[string, number, number]> = [];
  private lastToken: string | null = null;
  private lastNodeUuid: string | null = null;
  /** Whether the current (or last) agent serves TLS: it met API 1.68 and made its certificate. */
  private tls: boolean;
  lockedDown = false;
  disk: DiskState | null = null;
  softwareRaid: SoftRaidDevice[] | null = null;
  configdriveImage: Buffer | null = null;
  private instanceRunning = false;
  hwVersion = HARDWARE_MANAGER_VERSION;
  faults: AgentFaults = {};
  private readonly extensions: Record<string, Extension>;

  constructor(
    readonly env: AgentEnv,
    private readonly link: HostLink,
    /** The path prefix of this agent on the shared server. */
    readonly id: string,
    readonly facts: HostFacts,
    private readonly isAgentIso: (url: string) => boolean,
    /** Which port of the shared server this agent listens on (env.authorities). */
    private readonly listener: number,
  ) {
    this.extensions = {
      clean: cleanExtension(this),
      service: serviceExtension(this),
      deploy: deployExtension(this),
      standby: standbyExtension(this),
      image: imageExtension(this),
      log: logExtension(this),
      system: systemExtension(),
      poll: pollExtension(this),
    };
    this.tls = env.certificate !== null;
  }

  /** IPA's `_get_agent_url`: https once it runs automatic TLS. */
  get callbackUrl(): string {
    return `${this.tls ? 'https' : 'http'}://${this.env.authorities[this.listener]}/${this.id}`;
  }

  get running(): boolean {
    return this.life !== null;
  }

  /**
   * The host finished booting from virtual media or its disk: an agent ISO starts an agent, the
   * disk starts the instance. An ISO the pattern names calls the fleet's API URL and inspects
   * (one built with both URLs); any other is read, and its kernel command line says whether it boots
   * an agent and where that agent calls.
   */
  booted(system: SystemState): void {
    this.stopped();
    const r = system.running;
    if (!r || r.phase !== 'up') return;
    if (r.image && r.device !== 'Hdd') {
      if (this.isAgentIso(r.image)) {
        // An ISO the pattern names stands for an agent ISO whose command line names both URLs.
        this.bootRamdisk(agentUrls(new Map([['ipa-api-url', this.env.apiUrl], ['ipa-inspection-callback-url', `${this.env.apiUrl.replace(/\/+$/, '')}/v1/continue_inspection`]])));
        return;
      }
      void this.env.isoReader.read(r.image).then((params) => {
        // Still the same boot: the host was not stopped or booted again meanwhile.
        if (params && system.running === r && r.phase === 'up' && !this.life && !this.bootTimer) this.bootRamdisk(agentUrls(kernelParams(params.cmdline)));
      });
    } else if (r.device === 'Hdd') {
      this.bootDisk();
    }
  }

  /** The host booted the agent's kernel and ramdisk with these parameters: an agent comes up after the boot delay. */
  bootRamdisk(urls: AgentUrls): void {
    this.stopped();
    if (this.faults.noBoot) return;
    const [lo, hi] = this.faults.bootSeconds ? [this.faults.bootSeconds[0] * 1000, this.faults.bootSeconds[1] * 1000] : this.env.bootMs;
    this.bootTimer = timer(() => {
      this.bootTimer = undefined;
      this.start(urls);
    }, uniform(lo, hi));
  }

  /** The host booted its disk: the instance runs when an image was written to it. */
  bootDisk(): void {
    this.stopped();
    if (this.disk) this.instanceRunning = true;
  }

  /** The host powered off, restarted or lost power: whatever ran on it is gone. */
  stopped(): void {
    if (this.bootTimer) clearTimeout(this.bootTimer);
    this.bootTimer = undefined;
    this.instanceRunning = false;
    if (this.life) this.kill('host stopped');
  }

  kill(why: string): void {
    const life = this.life;
    if (!life) return;
    life.end();
    this.life = null;
    this.link.event('agent-stopped', { agent: this.id, why });
  }

  shutdown(): void {
    this.stopped();
  }

  /** The host's OS asks its BMC for a reset. */
  power(type: 'ForceOff' | 'ForceRestart'): void {
    this.link.power(type);
  }

  /** Records one of the agent's calls, served requests or command runs: what, from, to (epoch ms). */
  record(what: string, from: number): void {
    if (this.calls.length >= CALL_LIMIT) this.calls = this.calls.slice(CALL_LIMIT / 2);
    this.calls.push([what, from, Date.now()]);
  }

  private start(urls: AgentUrls): void {
    const life = new Life(urls.apiUrl?.replace(/\/+$/, '') ?? null, urls.inspectionUrl);
    this.life = life;
    this.lastCommands = [];
    this.lockedDown = false;
    this.bootedAt = life.startedAt;
    this.boots++;
    this.lastToken = null;
    this.lastNodeUuid = null;
    this.link.event('agent-started', { agent: this.id });
    void this.run(life).catch(() => undefined);
  }

  // ---- talking to Galvanic ----

  /**
   * One request to Galvanic (`path` under the agent's API URL, or a whole URL), with `headers`
   * as IPA sends them; a gzipped answer is read as requests reads it.
   */
  private async call(life: Life, method: 'GET' | 'POST', path: string, version: Version | null, body?: unknown, headers: Readonly<Record<string, string>> = API_CLIENT_HEADERS): Promise<{ status: number; json: unknown }> {
    const from = Date.now();
    const sent: Record<string, string> = { ...headers };
    if (version) sent['x-openstack-ironic-api-version'] = vstr(version);
    const url = /^https?:/.test(path) ? path : `${life.apiUrl ?? ''}${path}`;
    const res = await request(url, {
      method,
      headers: sent,
      body: body === undefined ? undefined : JSON.stringify(body),
      dispatcher: this.env.dispatcher,
      signal: life.signal,
      headersTimeout: REQUEST_TIMEOUT_MS,
      bodyTimeout: REQUEST_TIMEOUT_MS,
    });
    const raw = Buffer.from(await res.body.arrayBuffer());
    const text = (res.headers['content-encoding'] === 'gzip' ? gunzipSync(raw) : raw).toString('utf8');
    this.record(`api ${method} ${new URL(url).pathname.replace(/[0-9a-f]{8}-[0-9a-f-]{27}/, '{node}')} ${res.statusCode}`, from);
    let json: unknown = null;
    try {
      json = text ? JSON.parse(text) : null;
    } catch {
      json = null;
    }
    return { status: res.statusCode, json };
  }

  /** IPA's run: the API version, the inventory (with an inspection callback), then lookup and heartbeats (with an API URL). */
  private async run(life: Life): Promise<void> {
    life.version = await this.discoverVersion(life);
    if (life.dead) return;
    // `_start_auto_tls`: a certificate only for an API that takes agent_verify_ca.
    this.tls = life.tls = this.env.certificate !== null && cmp(life.version, V_VERIFY_CA) >= 0;
    if (life.inspectionUrl) await this.inspect(life, life.inspectionUrl);
    if (life.dead || !life.apiUrl) return;
    await this.lookup(life);
    if (life.dead) return;
    life.heartbeating = true;
    // The first heartbeat goes out at once.
    this.scheduleHeartbeat(life, 0);
  }

  private async discoverVersion(life: Life): Promise<Version> {
    // An agent told only where to post its inventory asks the API that URL is under.
    const root = life.apiUrl ? '/' : `${(life.inspectionUrl ?? '').replace(/\/v1\/continue_inspection$/, '')}/`;
    try {
      const { json } = await this.call(life, 'GET', root, null);
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

  /**
   * `inspector.inspect` of IPA 9.4: one post, retried only when it reaches no server; any
   * answer of 400 or more ends inspection (IPA logs it and goes on to the lookup), and a
   * success hands the node's UUID to the lookup.
   */
  private async inspect(life: Life, url: string): Promise<void> {
    const data = {
      inventory: this.facts.inventory,
      ...(this.facts.rootDisk ? { root_disk: this.facts.rootDisk } : {}),
      boot_interface: null,
      configuration: { collectors: ['default', 'logs'], managers: Object.entries(hardwareVersions(this)).map(([name, version]) => ({ name, version })) },
      logs: systemLogs([`ironic-python-agent ${AGENT_VERSION} collecting inventory`]),
      error: null,
    };
    for (let attempt = 1; !life.dead; attempt++) {
      let status: number | 'error';
      let json: unknown = null;
      try {
        ({ status, json } = await this.call(life, 'POST', url, null, data, INSPECTION_HEADERS));
      } catch {
        status = 'error';
      }
      if (life.dead) return;
      this.inspections++;
      bump(this.inspectionStatuses, status);
      if (status === 'error') {
        if (attempt >= INSPECTION_ATTEMPTS) return;
        await sleep(life, INSPECTION_RETRY_MS);
        continue;
      }
      const uuid = (json as { uuid?: unknown } | null)?.uuid;
      if (status < 400 && typeof uuid === 'string') life.nodeUuid = uuid;
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
  forceHeartbeat(life: Life): void {
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
    if (life.tls) body.agent_verify_ca = this.env.certificate;
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
    // IPA never stops: a 404 (node gone) is retried like any other error, until the host stops.
    const forced = life.forcePending;
    life.forcePending = false;
    if (status === 202) {
      const [lo, hi] = HEARTBEAT_JITTER;
      this.scheduleHeartbeat(life, forced ? this.env.heartbeatMinGapMs : life.heartbeatTimeoutS * 1000 * uniform(lo, hi));
    } else {
      // IPA retries a failed heartbeat in 5-10 s (409 "node locked" and 404 included).
      this.scheduleHeartbeat(life, this.env.heartbeatMinGapMs * uniform(1, 2));
    }
  }

  // ---- the command API ----

  /**
   * Serves `/<id>/...` while the agent runs; `sub` is the path after the prefix. An agent on TLS
   * takes no plain HTTP, and one on plain HTTP no TLS: the connection fails as it would at IPA.
   */
  handle(req: IncomingMessage, res: ServerResponse, sub: string, query: URLSearchParams, body: string): Promise<void> {
    if (this.life && Boolean((req.socket as TLSSocket).encrypted) !== this.life.tls) {
      req.socket.destroy();
      return Promise.resolve();
    }
    return serveApi(this, req, res, sub, query, body);
  }

  /** `execute_command`. @throws IpaError */
  execute(life: Life, name: string, params: Record<string, unknown>): Command {
    return executeCommand(this, this.extensions, life, name, params);
  }

  witness(): AgentWitness {
    const life = this.life;
    return {
      running: life !== null && !life.lockedDown,
      bootedAt: this.bootedAt,
      boots: this.boots,
      callbackUrl: this.callbackUrl,
      verifyCa: this.tls ? this.env.certificate : null,
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
      nodeReceived: { ...this.nodeReceived },
      calls: [...this.calls],
      lockedDown: this.lockedDown,
      disk: this.disk ? { ...this.disk } : null,
      softwareRaid: this.softwareRaid ? this.softwareRaid.map((d) => ({ ...d, holders: [...d.holders] })) : null,
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
    for (const o of [this.lookupStatuses, this.inspectionStatuses, this.heartbeatStatuses, this.received, this.nodeReceived]) for (const k of Object.keys(o)) delete o[k];
  }
}
