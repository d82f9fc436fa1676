/**
 * The agents of one Redfish simulator fleet: one server for all of them (each under the path
 * prefix of its system's UUID, as Metal3's fake IPA does), one undici dispatcher for their
 * calls to Galvanic, and the hooks by which the simulated BMCs start and kill them.
 *
 * IPA >= 7 serves its API over TLS with a self-signed certificate for its own IP address once
 * Ironic speaks API 1.68 (automatic TLS), and over plain HTTP before. The agents here share an
 * address, so they share one such certificate, made once when the fleet starts (a fleet of a
 * thousand agents makes one, not a thousand); the server takes both protocols on each of its
 * ports and each agent answers only on the one it advertised.
 *
 * The server listens on one port per BMC, the agent of BMC i on the i-th, as each real agent
 * listens on its own: a Node server accepts one connection per turn of its event loop (libuv
 * >= 1.45), and with a thousand agents behind one port, the connections a conductor opened to
 * agents that came up together waited in that port's accept queue (744 deep, 2.6 s on average;
 * 30 deep with a port per 64 agents).
 */
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import https from 'node:https';
import net, { type AddressInfo } from 'node:net';
import os from 'node:os';
import { randomBytes } from 'node:crypto';
import { Agent } from 'undici';
import { readBody } from '../redfish/handler.js';
import type { SimModel } from '../redfish/model.js';
import type { SimBmc, SystemHooks, SystemState } from '../redfish/state.js';
import { AgentHost, type HostLink } from './agent.js';
import { faultBody } from './ipa.js';
import { hostFacts, type HostFacts } from './inventory.js';
import { generateAgentCertificate } from './tls.js';
import { DEFAULT_ISO_PATTERN, type AgentEnv, type AgentSimOptions } from './types.js';
import { IsoCmdlineReader } from './iso-cmdline.js';

const BODY_LIMIT = 16 << 20;
/** The first byte of a TLS handshake record. */
const TLS_HANDSHAKE = 0x16;

/** `host:port`, an IPv6 address in brackets. */
function authority(host: string, port: number): string {
  return `${host.includes(':') ? `[${host}]` : host}:${port}`;
}

/** The fleet's listeners: each connection goes to the HTTPS or the HTTP server by its first byte. */
class DualServer {
  readonly plain = http.createServer();
  readonly secure?: https.Server;
  private readonly listeners: net.Server[] = [];
  /**
   * Every accepted connection, for close: one that has not sent a byte yet, or was handed to
   * TLS mid-handshake, is known to neither server's list.
   */
  private readonly accepted = new Set<net.Socket>();

  constructor(tls: { key: string; cert: string } | undefined, onRequest: (req: IncomingMessage, res: ServerResponse) => void) {
    if (tls) this.secure = https.createServer({ key: tls.key, cert: tls.cert });
    for (const server of [this.plain, this.secure]) {
      if (!server) continue;
      server.keepAliveTimeout = 65_000;
      server.on('request', onRequest);
    }
  }

  private accept(socket: net.Socket): void {
    this.accepted.add(socket);
    socket.once('close', () => this.accepted.delete(socket));
    socket.once('data', (first: Buffer) => {
      socket.pause();
      socket.unshift(first);
      if (first[0] === TLS_HANDSHAKE && this.secure) {
        // The TLS socket reads what was put back; a resumed socket would take it first.
        this.secure.emit('connection', socket);
      } else {
        this.plain.emit('connection', socket);
        socket.resume();
      }
    });
  }

  /** Listens on one more port (0: a free one) and resolves to it. */
  listen(port: number, host: string): Promise<number> {
    const listener = net.createServer((socket) => this.accept(socket));
    this.listeners.push(listener);
    return new Promise<number>((resolve, reject) => {
      listener.once('error', reject);
      // A conductor may call a thousand agents at once: a deep accept queue instead of resets.
      listener.listen({ port, host, backlog: 4096 }, () => resolve((listener.address() as AddressInfo).port));
    });
  }

  close(): Promise<void> {
    const closed = Promise.all(this.listeners.map((l) => new Promise<void>((resolve) => {
      if (!l.listening) return resolve();
      l.close(() => resolve());
    })));
    this.plain.closeAllConnections();
    this.secure?.closeAllConnections();
    for (const socket of this.accepted) socket.destroy();
    return closed.then(() => undefined);
  }
}

export class AgentFleet implements SystemHooks {
  private readonly hosts = new Map<string, AgentHost>();
  private readonly byBmc = new Map<SimBmc, Map<string, AgentHost>>();
  private readonly isAgentIso: (url: string) => boolean;

  private constructor(
    private readonly server: DualServer,
    private readonly env: AgentEnv,
    private readonly model: SimModel | null,
    private readonly bmcAddress: string,
    pattern: RegExp,
    /** The address the shared server listens on. */
    private readonly address: string,
  ) {
    this.isAgentIso = (url) => {
      pattern.lastIndex = 0;
      return pattern.test(url);
    };
  }

  /**
   * Starts the agents' shared server on `opts.port` (listenFor adds its other ports); `power`
   * resets a system at its BMC (for power_off, reboot and faults).
   */
  static async start(opts: AgentSimOptions, model: SimModel | null, bmcAddress: string, power: AgentEnv['power']): Promise<AgentFleet> {
    const host = opts.host ?? '127.0.0.1';
    const tls = opts.autoTls === false ? undefined : await generateAgentCertificate(host, fleetHostName());
    // The server exists before the fleet it serves: requests find the fleet once it is made.
    const made: { fleet?: AgentFleet } = {};
    const server = new DualServer(tls, (req, res) => {
      made.fleet?.serve(req, res).catch((err: unknown) => {
        if (!res.headersSent && !res.destroyed) res.writeHead(500, { 'content-type': 'application/json' }).end(faultBody(500, String(err)));
      });
    });
    const ports = [await server.listen(opts.port ?? 0, host)];
    const boot = opts.bootSeconds ?? [1, 2];
    const env: AgentEnv = {
      apiUrl: opts.apiUrl.replace(/\/+$/, ''),
      authorities: ports.map((port) => authority(host, port)),
      certificate: tls?.cert ?? null,
      // No cap on connections: each real agent has its own, and an agent makes one call at a
      // time, so a shared cap would only queue agents behind each other's calls.
      dispatcher: new Agent({ connections: null, keepAliveTimeout: 30_000, connect: { timeout: 10_000 } }),
      bootMs: [boot[0] * 1000, boot[1] * 1000],
      writeBytesPerMs: ((opts.writeMBps ?? 200) * 1e6) / 1000,
      heartbeatMinGapMs: opts.heartbeatMinGapMs ?? 5000,
      lookupRetryMs: opts.lookupRetryMs ?? 2000,
      isoReader: new IsoCmdlineReader(),
      coreosInstaller: opts.coreosInstaller ?? false,
      power,
    };
    made.fleet = new AgentFleet(server, env, model, bmcAddress, opts.isoPattern ?? DEFAULT_ISO_PATTERN, host);
    return made.fleet;
  }

  /**
   * Listens on free ports until there is one for each of `agents`; called once the BMCs have
   * bound theirs (a free port taken first could be one of theirs), before any agent starts.
   */
  async listenFor(agents: number): Promise<void> {
    const { authorities } = this.env;
    while (authorities.length < agents) {
      // In batches, as the BMCs bind theirs: one after another is slow on a busy machine.
      const batch = Array.from({ length: Math.min(100, agents - authorities.length) }, () => this.server.listen(0, this.address));
      for (const port of await Promise.all(batch)) authorities.push(authority(this.address, port));
    }
  }

  /**
   * `https://host:port` of the agents' shared server's first port (`http://` without automatic
   * TLS); the callback_url of an agent on that port is `<url>/<system uuid>`, with http:// when
   * it found an API older than 1.68.
   */
  get url(): string {
    return `${this.env.certificate ? 'https' : 'http'}://${this.env.authorities[0]}`;
  }

  /** The certificate (PEM) the agents serve and send as agent_verify_ca; null without automatic TLS. */
  get certificate(): string | null {
    return this.env.certificate;
  }

  /**
   * A host that is not one of a Redfish simulator's (a network-booting machine behind another
   * BMC): its agent serves under `id`, tells `link` of its life, and reports `facts`.
   */
  attach(id: string, link: HostLink, facts: HostFacts): AgentHost {
    if (this.hosts.has(id)) throw new Error(`an agent host ${id} is attached already`);
    const h = new AgentHost(this.env, link, id, facts, this.isAgentIso, 0);
    this.hosts.set(id, h);
    return h;
  }

  /** The agent of `bmc`'s system `sysPath`, made on first use. */
  host(bmc: SimBmc, sysPath: string, state: SystemState): AgentHost {
    if (!this.model) throw new Error('this agent fleet serves attached hosts only');
    let perBmc = this.byBmc.get(bmc);
    if (!perBmc) {
      perBmc = new Map();
      this.byBmc.set(bmc, perBmc);
    }
    let h = perBmc.get(sysPath);
    if (!h) {
      const facts = hostFacts(this.model, bmc.index, sysPath, state, this.bmcAddress);
      // Mockup fleets serve one UUID on every BMC: keep the prefixes apart.
      const id = this.hosts.has(facts.systemUuid) ? `${facts.systemUuid}-${bmc.index}` : facts.systemUuid;
      const link: HostLink = { event: (type, detail) => bmc.event(type, detail), power: (type) => this.env.power(bmc, sysPath, type) };
      h = new AgentHost(this.env, link, id, facts, this.isAgentIso, bmc.index % this.env.authorities.length);
      perBmc.set(sysPath, h);
      this.hosts.set(id, h);
    }
    return h;
  }

  private pathOf(bmc: SimBmc, system: SystemState): string | null {
    for (const [p, s] of bmc.systems) if (s === system) return p;
    return null;
  }

  booted(bmc: SimBmc, system: SystemState): void {
    const p = this.pathOf(bmc, system);
    if (p !== null) this.host(bmc, p, system).booted(system);
  }

  stopped(bmc: SimBmc, system: SystemState): void {
    const p = this.pathOf(bmc, system);
    if (p !== null) this.byBmc.get(bmc)?.get(p)?.stopped();
  }

  private async serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://agent');
    const m = /^\/([^/]+)(\/.*)?$/.exec(url.pathname);
    const host = m ? this.hosts.get(decodeURIComponent(m[1]).toLowerCase()) ?? this.hosts.get(decodeURIComponent(m[1])) : undefined;
    const body = req.method === 'POST' || req.method === 'PUT' ? await readBody(req, BODY_LIMIT) : '';
    if (!m || !host) {
      const text = faultBody(404, '404 Not Found: The requested URL was not found on the server.');
      res.writeHead(404, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) }).end(text);
      return;
    }
    await host.handle(req, res, m[2] ?? '', url.searchParams, body);
  }

  async stop(): Promise<void> {
    for (const h of this.hosts.values()) h.shutdown();
    await this.server.close();
    await this.env.dispatcher.destroy().catch(() => undefined);
  }
}

/**
 * The CN of a fleet's certificate: each real ramdisk has its own host name, and two fleets'
 * certificates with one subject would be mistaken for each other by a client trusting both.
 */
function fleetHostName(): string {
  return `${os.hostname()}-${randomBytes(3).toString('hex')}`;
}
