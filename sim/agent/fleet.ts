/**
 * The agents of one Redfish simulator fleet: one HTTP server for all of them (each under the
 * path prefix of its system's UUID, as Metal3's fake IPA does), one undici dispatcher for their
 * calls to Galvanic, and the hooks by which the simulated BMCs start and kill them.
 */
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Agent } from 'undici';
import { readBody } from '../redfish/handler.js';
import type { SimModel } from '../redfish/model.js';
import type { SimBmc, SystemHooks, SystemState } from '../redfish/state.js';
import { AgentHost, type HostLink } from './agent.js';
import { faultBody } from './ipa.js';
import { hostFacts, type HostFacts } from './inventory.js';
import { DEFAULT_ISO_PATTERN, type AgentEnv, type AgentSimOptions } from './types.js';
import { IsoCmdlineReader } from './iso-cmdline.js';

const BODY_LIMIT = 16 << 20;

export class AgentFleet implements SystemHooks {
  private readonly hosts = new Map<string, AgentHost>();
  private readonly byBmc = new Map<SimBmc, Map<string, AgentHost>>();
  private readonly isAgentIso: (url: string) => boolean;

  private constructor(
    private readonly server: http.Server,
    private readonly env: AgentEnv,
    private readonly model: SimModel | null,
    private readonly bmcAddress: string,
    pattern: RegExp,
  ) {
    this.isAgentIso = (url) => {
      pattern.lastIndex = 0;
      return pattern.test(url);
    };
  }

  /** Starts the agents' shared server; `power` resets a system at its BMC (for power_off, reboot and faults). */
  static async start(opts: AgentSimOptions, model: SimModel | null, bmcAddress: string, power: AgentEnv['power']): Promise<AgentFleet> {
    const host = opts.host ?? '127.0.0.1';
    const server = http.createServer();
    server.keepAliveTimeout = 65_000;
    const port = await new Promise<number>((resolve, reject) => {
      server.once('error', reject);
      // A conductor may call a thousand agents at once: a deep accept queue instead of resets.
      server.listen({ port: opts.port ?? 0, host, backlog: 4096 }, () => resolve((server.address() as AddressInfo).port));
    });
    const boot = opts.bootSeconds ?? [1, 2];
    const env: AgentEnv = {
      apiUrl: opts.apiUrl.replace(/\/+$/, ''),
      baseUrl: `http://${host}:${port}`,
      // No cap on connections: each real agent has its own, and an agent makes one call at a
      // time, so a shared cap would only queue agents behind each other's calls.
      dispatcher: new Agent({ connections: null, keepAliveTimeout: 30_000, connect: { timeout: 10_000 } }),
      bootMs: [boot[0] * 1000, boot[1] * 1000],
      writeBytesPerMs: ((opts.writeMBps ?? 200) * 1e6) / 1000,
      heartbeatMinGapMs: opts.heartbeatMinGapMs ?? 5000,
      lookupRetryMs: opts.lookupRetryMs ?? 2000,
      isoReader: new IsoCmdlineReader(),
      power,
    };
    const fleet = new AgentFleet(server, env, model, bmcAddress, opts.isoPattern ?? DEFAULT_ISO_PATTERN);
    server.on('request', (req: IncomingMessage, res: ServerResponse) => {
      fleet.serve(req, res).catch((err: unknown) => {
        if (!res.headersSent && !res.destroyed) res.writeHead(500, { 'content-type': 'application/json' }).end(faultBody(500, String(err)));
      });
    });
    return fleet;
  }

  /** `http://host:port` of the agents' server; an agent's callback_url is `<url>/<system uuid>`. */
  get url(): string {
    return this.env.baseUrl;
  }

  /**
   * A host that is not one of a Redfish simulator's (a network-booting machine behind another
   * BMC): its agent serves under `id`, tells `link` of its life, and reports `facts`.
   */
  attach(id: string, link: HostLink, facts: HostFacts): AgentHost {
    if (this.hosts.has(id)) throw new Error(`an agent host ${id} is attached already`);
    const h = new AgentHost(this.env, link, id, facts, this.isAgentIso);
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
      h = new AgentHost(this.env, link, id, facts, this.isAgentIso);
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
    await new Promise<void>((resolve) => {
      if (!this.server.listening) return resolve();
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
    await this.env.dispatcher.destroy().catch(() => undefined);
  }
}
