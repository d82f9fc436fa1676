/**
 * `startRedfishSim`: N simulated BMCs in one process, one HTTP listener each on 127.0.0.1.
 * Besides Redfish, every listener answers a control API under `/_sim/` (a prefix no Redfish
 * URI has), which is neither authenticated, delayed, faulted nor logged:
 *
 *   GET  /_sim/stats[?log=0]   counters and the ordered request log of this BMC
 *   POST /_sim/reset           zero the counters and the log
 *   POST /_sim/expire-sessions forget every session (the next request with a token gets 401)
 *   GET|POST /_sim/faults      read or change this BMC's fault knobs (JSON, merged)
 *   GET|POST /_sim/state       read or set power ("On"/"Off"), boot override and what runs on its
 *                              systems, and its virtual media slots (see docs/operations.md)
 *   GET|POST /_sim/events[?since=SEQ]  the ordered log of inserts, ejects, refusals, boot
 *                              overrides, resets and boots (bounded); POST empties it
 *   GET  /_sim/totals          counters summed over every BMC of the process
 *   GET|POST /_sim/chains[?all=1]  over every BMC of the process: the longest request chain
 *                              (the sum of the latencies imposed on one BMC's requests) since
 *                              the last POST, which starts a new count; with all=1 also every
 *                              BMC's chain, by port
 *   GET  /_sim/agent           with `agent`: what the host's agent did and holds (docs/agent-simulator.md)
 *   GET|POST /_sim/agent/faults  read or set the agent's faults ({} clears them)
 *   GET  /_sim/agent/configdrive  the image of the config drive the agent wrote to the disk (404: none)
 *   GET  /_sim/vm              with `qemu`: the host's virtual machine (docs/vm-lab.md)
 *   GET  /_sim/vm/console[?from=N]  with `qemu`: its serial console log, from byte N
 */
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { RedfishHandler, readBody, send, type Credentials } from './handler.js';
import { MockupModel } from './model-mockup.js';
import { SyntheticModel, type ChassisModel } from './model-synthetic.js';
import { emptyMedia, normalisePath, type SimModel } from './model.js';
import { NO_QUIRKS, parseQuirks, type VmediaQuirks } from './quirks.js';
import { AgentFleet } from '../agent/fleet.js';
import { FAULT_KEYS as AGENT_FAULT_KEYS, extraStepsProblem, type AgentFaults, type AgentSimOptions } from '../agent/types.js';
import { addCounters, DEFAULT_FAULTS, SimBmc, etagOf, type BmcCounters, type MediaState, type SimFaults } from './state.js';
import type { ImageCheck, VirtualMedia } from './vmedia.js';
import { DEFAULT_STORAGE, type Storage, type StorageOptions } from './storage.js';
import { QemuHosts, type QemuOptions } from '../qemu/hosts.js';
import { QemuModel } from '../qemu/model.js';

export interface RedfishSimOptions extends Partial<Omit<SimFaults, 'unavailable'>> {
  /** Number of BMCs. */
  count: number;
  /** Port of the first BMC; BMC i listens on basePort + i. 0 (default) picks free ports. */
  basePort?: number;
  host?: string;
  username?: string;
  password?: string;
  /** Serve this mockup tree instead of the synthetic BMC. */
  mockup?: string;
  /** Synthetic BMC only: Thermal/Power, Sensors, or both (default). */
  chassis?: ChassisModel;
  /** Synthetic BMC only: advertise and honour `$expand=.` (default true). */
  expand?: boolean;
  /**
   * Synthetic BMC only: 0-255, part of every NIC's MAC and of the system UUID (default 0).
   * Give fleets that register in the same conductor different ids, so that their MACs differ.
   */
  fleetId?: number;
  /**
   * Vendor behaviours of virtual media and boot for the whole fleet: quirk names (quirks.ts,
   * `sticky-inserted=SECONDS`) or a parsed set.
   */
  vmediaQuirks?: readonly string[] | Readonly<VmediaQuirks>;
  /** When the BMC fetches an inserted image, so that a 404 fails: never (default), at insert, at boot. */
  vmediaCheckImage?: ImageCheck;
  /** RAID controllers: when volume changes apply, and the RAID types they take (default: storage.ts). */
  storage?: Partial<StorageOptions>;
  /** Entries kept in each BMC's request log (default 10,000; 0 keeps none). */
  logLimit?: number;
  /**
   * This fraction of the BMCs, spread evenly over the indexes, answers every request after
   * `slowMs`: slow BMCs, where `slowFraction` makes slow requests on any BMC.
   */
  slowBmcFraction?: number;
  /**
   * Simulate ironic-python-agent: a system that boots an agent ISO from virtual media runs an
   * agent that looks itself up at `apiUrl`, heartbeats and serves IPA's command API.
   */
  agent?: AgentSimOptions;
  /**
   * Each BMC's host is a QEMU virtual machine (sim/qemu, docs/vm-lab.md): power, boot override
   * and virtual media act on it. Synthetic BMC only, and not with `agent`.
   */
  qemu?: QemuOptions;
}

export interface SimBmcHandle {
  index: number;
  port: number;
  /** `http://127.0.0.1:<port>` */
  url: string;
}

export interface RedfishSim {
  bmcs: SimBmcHandle[];
  /** Counters summed over every BMC. */
  totals(): BmcCounters & { bmcs: number };
  /** With `agent`: `https://127.0.0.1:<port>` of the agents' shared server (http:// without automatic TLS), else undefined. */
  agentUrl?: string;
  /** With `agent` and automatic TLS: the agents' self-signed certificate (PEM), which they send as agent_verify_ca. */
  agentCertificate?: string;
  stop(): Promise<void>;
}

function sumCounters(bmcs: SimBmc[]): BmcCounters & { bmcs: number } {
  const t = { bmcs: bmcs.length, requests: 0, concurrent: 0, maxConcurrent: 0, sessionsOpen: 0, sessionsCreated: 0, logins: 0, unauthorized: 0 };
  for (const b of bmcs) addCounters(t, b.counters());
  return t;
}

/** The BMCs with the longest request chains since the last mark (POST /_sim/chains restarts the count). */
export interface ChainSummary {
  bmcs: number;
  /** BMCs that served at least one request since the mark. */
  active: number;
  /** Chain of every active BMC, as quantiles (ms). */
  p50Ms: number;
  p99Ms: number;
  /** The longest chains: [BMC index, ms of imposed latency, requests]. */
  longest: Array<[number, number, number]>;
  /** With `?all=1`: every BMC's chain, [port, ms, requests], in BMC order. */
  all?: Array<[number, number, number]>;
}

function chainSummary(bmcs: SimBmc[], mark: boolean, handles?: readonly SimBmcHandle[]): ChainSummary {
  const chains: Array<[number, number, number]> = [];
  const all = handles ? bmcs.map((b, i): [number, number, number] => [handles[i].port, Math.round(b.chainMs), b.chainRequests]) : undefined;
  for (const b of bmcs) {
    if (b.chainRequests > 0) chains.push([b.index, Math.round(b.chainMs), b.chainRequests]);
    if (mark) {
      b.chainMs = 0;
      b.chainRequests = 0;
    }
  }
  chains.sort((a, b) => b[1] - a[1]);
  const q = (f: number) => (chains.length ? chains[Math.min(chains.length - 1, Math.floor((1 - f) * chains.length))][1] : 0);
  return { bmcs: bmcs.length, active: chains.length, p50Ms: q(0.5), p99Ms: q(0.99), longest: chains.slice(0, 5), ...(all ? { all } : {}) };
}

const FAULT_KEYS = new Set<string>(Object.keys(DEFAULT_FAULTS));
const LISTEN_BATCH = 256;

function mediaOut(m: MediaState, view: MediaState): Record<string, unknown> {
  return { image: m.image, inserted: m.inserted, writeProtected: m.writeProtected, transferProtocolType: m.transferProtocolType, etag: etagOf(m), ...(view !== m ? { shownInserted: view.inserted } : {}) };
}

function systemOf(bmc: SimBmc, model: SimModel, p: string) {
  let s = bmc.systems.get(p);
  if (!s) {
    s = model.initialSystem(p);
    bmc.systems.set(p, s);
  }
  return s;
}

function agentControl(bmc: SimBmc, model: SimModel, agents: AgentFleet | null, res: ServerResponse, pathname: string, write: boolean, input: Record<string, unknown>): void {
  if (!agents) return send(res, 404, JSON.stringify({ error: 'this simulator runs no agents (start it with an agent API URL)' }));
  // The first system's agent: the synthetic BMC has one system.
  const sysPath = [...model.systemPaths][0];
  const host = agents.host(bmc, sysPath, systemOf(bmc, model, sysPath));
  if (pathname === '/_sim/agent') return send(res, 200, JSON.stringify(host.witness()));
  if (pathname === '/_sim/agent/configdrive') {
    const image = host.configdriveImage;
    if (!image) return send(res, 404, JSON.stringify({ error: 'the disk holds no config drive' }));
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': image.length }).end(image);
    return;
  }
  if (write) {
    const unknown = Object.keys(input).filter((k) => !AGENT_FAULT_KEYS.has(k));
    if (unknown.length) return send(res, 400, JSON.stringify({ error: `unknown agent fault keys: ${unknown.join(', ')}` }));
    const problem = input.extraCleanSteps === undefined ? null : extraStepsProblem(input.extraCleanSteps);
    if (problem) return send(res, 400, JSON.stringify({ error: problem }));
    host.faults = Object.keys(input).length ? { ...host.faults, ...(input as AgentFaults) } : {};
  }
  send(res, 200, JSON.stringify(host.faults));
}

async function vmControl(bmc: SimBmc, vms: QemuHosts | null, res: ServerResponse, url: URL): Promise<void> {
  if (!vms) return send(res, 404, JSON.stringify({ error: 'this simulator runs no virtual machines (start it with qemu)' }));
  if (url.pathname === '/_sim/vm') return send(res, 200, JSON.stringify(await vms.describe(bmc)));
  const text = await vms.console(bmc, Number(url.searchParams.get('from') ?? 0) || 0);
  send(res, 200, text, { 'content-type': 'text/plain; charset=utf-8' });
}

async function control(bmc: SimBmc, all: SimBmc[], model: SimModel, vmedia: VirtualMedia, storage: Storage, req: IncomingMessage, res: ServerResponse, port: number, handles: readonly SimBmcHandle[], agents: AgentFleet | null, vms: QemuHosts | null): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://sim');
  const write = req.method === 'POST' || req.method === 'PUT';
  const body = write ? await readBody(req) : '';
  let input: Record<string, unknown> = {};
  if (body.trim()) {
    try {
      input = JSON.parse(body) as Record<string, unknown>;
    } catch {
      return send(res, 400, JSON.stringify({ error: 'body is not JSON' }));
    }
  }
  switch (url.pathname) {
    case '/_sim/stats': {
      const withLog = url.searchParams.get('log') !== '0';
      return send(res, 200, JSON.stringify({ index: bmc.index, port, ...bmc.counters(), ...(withLog ? { log: bmc.log } : {}) }));
    }
    case '/_sim/totals':
      return send(res, 200, JSON.stringify(sumCounters(all)));
    case '/_sim/chains':
      return send(res, 200, JSON.stringify(chainSummary(all, write, url.searchParams.get('all') === '1' ? handles : undefined)));
    case '/_sim/agent':
    case '/_sim/agent/faults':
    case '/_sim/agent/configdrive':
      return agentControl(bmc, model, agents, res, url.pathname, write, input);
    case '/_sim/vm':
    case '/_sim/vm/console':
      return vmControl(bmc, vms, res, url);
    case '/_sim/reset':
      bmc.resetCounters();
      if (agents) for (const p of model.systemPaths) agents.host(bmc, p, systemOf(bmc, model, p)).resetCounters();
      return send(res, 200, JSON.stringify(bmc.counters()));
    case '/_sim/storage': {
      // {applyTime?, raidTypes?, initial?: true} changes this BMC's controllers; GET shows them and their volumes.
      try {
        return send(res, 200, JSON.stringify(storage.configure(bmc, write ? input : {})));
      } catch (err) {
        return send(res, 400, JSON.stringify({ error: (err as Error).message }));
      }
    }
    case '/_sim/expire-sessions':
      return send(res, 200, JSON.stringify({ expired: bmc.expireSessions() }));
    case '/_sim/faults': {
      if (write) {
        const unknown = Object.keys(input).filter((k) => !FAULT_KEYS.has(k));
        if (unknown.length) return send(res, 400, JSON.stringify({ error: `unknown fault keys: ${unknown.join(', ')}` }));
        bmc.setFaults(input as Partial<SimFaults>);
      }
      return send(res, 200, JSON.stringify(bmc.faults));
    }
    case '/_sim/events': {
      if (write) bmc.events = [];
      const since = Number(url.searchParams.get('since') ?? 0);
      return send(res, 200, JSON.stringify({ events: since > 0 ? bmc.events.filter((e) => e.seq > since) : bmc.events }));
    }
    case '/_sim/state': {
      const systems = [...model.systemPaths];
      if (write) {
        if (input.media !== undefined && (typeof input.media !== 'object' || input.media === null)) return send(res, 400, JSON.stringify({ error: 'media must be an object' }));
        for (const p of systems) {
          let s = bmc.systems.get(p);
          if (!s || input.initial === true) {
            if (s?.timer) clearTimeout(s.timer);
            s = model.initialSystem(p);
            bmc.systems.set(p, s);
          }
          if (input.power === 'On' || input.power === 'Off') {
            // A state set from outside wins over a transition still pending from an earlier reset.
            if (s.timer) clearTimeout(s.timer);
            s.timer = undefined;
            s.bootStartedAt = undefined;
            s.power = input.power;
            const wasRunning = s.running;
            s.running = input.power === 'Off' ? null : (s.running ?? { device: 'Hdd', image: null, slot: null, phase: 'up', since: Date.now() });
            if (input.power === 'Off') bmc.hooks?.stopped(bmc, s, 'control');
            else if (!wasRunning) bmc.hooks?.booted(bmc, s);
          }
          if (typeof input.boot === 'object' && input.boot !== null) s.boot = { ...s.boot, ...(input.boot as object) };
          s.version++;
        }
        if (input.initial === true) bmc.media.clear();
        // media: {"<slot @odata.id or Id>": {"Image": url, "Inserted": bool} | null (empty)}
        for (const [key, v] of Object.entries((input.media ?? {}) as Record<string, unknown>)) {
          const k = normalisePath(key);
          const slot = model.mediaSlots.get(k) ?? [...model.mediaSlots.values()].find((sl) => sl.path.endsWith(`/${k}`));
          if (!slot) return send(res, 400, JSON.stringify({ error: `no virtual media slot ${key}` }));
          const m = vmedia.state(bmc, slot);
          const next = emptyMedia();
          if (v !== null && typeof v === 'object') {
            const o = v as Record<string, unknown>;
            if (typeof o.Image === 'string') next.image = o.Image;
            next.inserted = typeof o.Inserted === 'boolean' ? o.Inserted : Boolean(next.image);
            if (next.inserted) next.connectedVia = 'URI';
          }
          Object.assign(m, { ...next, version: m.version + 1, ejectedAt: 0, before: undefined });
        }
      }
      const out: Record<string, unknown> = {};
      for (const p of systems) {
        const s = bmc.systems.get(p) ?? model.initialSystem(p);
        out[p] = { power: s.power, boot: s.boot, running: s.running, etag: etagOf(s) };
      }
      const media: Record<string, unknown> = {};
      for (const slot of model.mediaSlots.values()) media[slot.id] = mediaOut(vmedia.state(bmc, slot), vmedia.view(bmc, slot));
      return send(res, 200, JSON.stringify({ systems: out, media }));
    }
    default:
      return send(res, 404, JSON.stringify({ error: `no control endpoint ${url.pathname}` }));
  }
}

function quirksOf(opts: RedfishSimOptions): Readonly<VmediaQuirks> {
  if (opts.vmediaQuirks === undefined) return NO_QUIRKS;
  return Array.isArray(opts.vmediaQuirks) ? parseQuirks(opts.vmediaQuirks as readonly string[]) : (opts.vmediaQuirks as VmediaQuirks);
}

function listen(server: http.Server, port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const onError = (err: Error) => reject(err);
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

/** Starts the BMCs; resolves when every listener is bound. */
export async function startRedfishSim(opts: RedfishSimOptions): Promise<RedfishSim> {
  const host = opts.host ?? '127.0.0.1';
  const base = opts.basePort ?? 0;
  const creds: Credentials = { username: opts.username ?? 'admin', password: opts.password ?? 'password' };
  const quirks = quirksOf(opts);
  if (opts.qemu && (opts.mockup || opts.agent)) throw new Error('QEMU-backed hosts need the synthetic BMC and no simulated agent');
  const Synthetic = opts.qemu ? QemuModel : SyntheticModel;
  const model: SimModel = opts.mockup ? new MockupModel(path.resolve(opts.mockup)) : new Synthetic(opts.chassis ?? 'both', opts.expand ?? true, opts.fleetId ?? 0, quirks);
  const handler = new RedfishHandler(model, creds, quirks, opts.vmediaCheckImage ?? 'none', { ...DEFAULT_STORAGE, ...opts.storage });
  const faults: SimFaults = { ...DEFAULT_FAULTS };
  for (const key of Object.keys(DEFAULT_FAULTS) as Array<keyof SimFaults>) {
    const v = (opts as Partial<SimFaults>)[key];
    if (v !== undefined) (faults as unknown as Record<string, unknown>)[key] = v;
  }
  Object.freeze(faults);
  const slowBmcs = opts.slowBmcFraction ?? 0;
  const slowFaults: SimFaults = Object.freeze({ ...faults, latencyMs: [faults.slowMs, faults.slowMs] as [number, number], slowFraction: 0 });
  const isSlow = (i: number) => slowBmcs > 0 && Math.floor((i + 1) * slowBmcs) > Math.floor(i * slowBmcs);
  const logLimit = opts.logLimit ?? 10_000;
  const agents = opts.agent
    ? await AgentFleet.start(opts.agent, model, host, (bmc, sysPath, type) => {
        const s = systemOf(bmc, model, sysPath);
        bmc.reset(s, type, () => handler.booting(bmc, sysPath, s));
        handler.vmedia.checkBoot(bmc, s);
      })
    : null;
  const vms = opts.qemu ? await QemuHosts.start(opts.qemu, model, handler.vmedia, opts.fleetId ?? 0) : null;
  if (vms) handler.vmedia.hooks = vms;
  const bmcs: SimBmc[] = [];
  const servers: http.Server[] = [];
  const handles: SimBmcHandle[] = [];
  const startOne = async (i: number): Promise<void> => {
    const bmc = new SimBmc(i, isSlow(i) ? slowFaults : faults, logLimit);
    if (agents) bmc.hooks = agents;
    if (vms) bmc.hooks = vms;
    bmcs[i] = bmc;
    const server = http.createServer();
    servers[i] = server;
    let port = 0;
    server.on('request', (req: IncomingMessage, res: ServerResponse) => {
      const p = req.url ?? '';
      const work = p.startsWith('/_sim/') ? control(bmc, bmcs, model, handler.vmedia, handler.storage, req, res, port, handles, agents, vms) : handler.handle(bmc, req, res);
      work.catch((err: unknown) => send(res, 500, JSON.stringify({ error: String(err) })));
    });
    // Keep idle keep-alive sockets longer than clients' pools do, so clients close first.
    server.keepAliveTimeout = 65_000;
    port = await listen(server, base === 0 ? 0 : base + i, host);
    handles[i] = { index: i, port, url: `http://${host}:${port}` };
  };
  try {
    // Bind in batches: 10,000 sequential listens take half a minute on a busy machine.
    for (let i = 0; i < opts.count; i += LISTEN_BATCH) {
      const batch: Array<Promise<void>> = [];
      for (let j = i; j < Math.min(opts.count, i + LISTEN_BATCH); j++) batch.push(startOne(j));
      const results = await Promise.allSettled(batch);
      const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
      if (failed) throw failed.reason;
    }
    await agents?.listenFor(opts.count);
  } catch (err) {
    await closeAll(servers);
    await agents?.stop();
    await vms?.stop();
    throw err;
  }
  return {
    bmcs: handles,
    totals: () => sumCounters(bmcs),
    ...(agents ? { agentUrl: agents.url } : {}),
    ...(agents?.certificate ? { agentCertificate: agents.certificate } : {}),
    async stop() {
      for (const b of bmcs) b?.stop();
      await agents?.stop();
      await vms?.stop();
      await closeAll(servers);
    },
  };
}

async function closeAll(servers: http.Server[]): Promise<void> {
  await Promise.all(
    servers.filter(Boolean).map(
      (s) =>
        new Promise<void>((resolve) => {
          if (!s.listening) return resolve();
          s.close(() => resolve());
          s.closeAllConnections();
        }),
    ),
  );
}
