/**
 * The ironic-python-agent simulator against a small stand-in for Galvanic's agent-facing API
 * (root, lookup, heartbeat, continue_inspection) and an image server: boot and death, lookup,
 * tokens, heartbeats, every command's shape, the API's errors, write_image (and its config
 * drive, taken as IPA takes it) and the faults.
 */
import { spawnSync } from 'node:child_process';
import { createHash, X509Certificate } from 'node:crypto';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import { parseSimArgs, SIM_REDFISH_USAGE } from '../../sim/redfish/cli.js';
import type { RedfishSim } from '../../sim/redfish/index.js';
import {
  agentCommand,
  agentFetch,
  agentCommands,
  agentWitness,
  bootIso,
  resetHost,
  setAgentFaults,
  spawnSim,
  startAgentFleet,
  waitForAgent,
  waitForCommand,
  type CommandResult,
} from '../helpers/agent-sim.js';
import { until } from '../helpers/until.js';

interface Seen {
  method: string;
  path: string;
  query: URLSearchParams;
  version: string | undefined;
  headers: IncomingMessage['headers'];
  body: Record<string, unknown> | null;
  at: number;
}

const NODE_UUID = '1be26c0b-03f2-4d2e-ae87-c02d7f33c123';

/** The peer: what Galvanic's ramdisk endpoints answer, configurable per test. */
class StandIn {
  server = http.createServer((req, res) => void this.serve(req, res));
  url = '';
  seen: Seen[] = [];
  maxVersion = '1.78';
  /** Lookups answer 404 this many times first. */
  lookupMisses = 0;
  token: string | null = 'T'.repeat(43);
  heartbeatTimeout = 300;
  heartbeatStatus = 202;
  inspectionStatus = 400;
  inspectionBody: unknown = { error_message: '{"faultstring": "not inspecting"}' };
  images = new Map<string, Buffer>();
  private tokenGiven = false;

  async start(): Promise<this> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', () => r()));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  stop(): Promise<void> {
    return new Promise((r) => {
      this.server.close(() => r());
      this.server.closeAllConnections();
    });
  }

  reset(): void {
    this.seen = [];
    this.lookupMisses = 0;
    this.token = 'T'.repeat(43);
    this.tokenGiven = false;
    this.heartbeatTimeout = 300;
    this.heartbeatStatus = 202;
    this.inspectionStatus = 400;
    this.inspectionBody = { error_message: '{"faultstring": "not inspecting"}' };
  }

  of(path: string): Seen[] {
    return this.seen.filter((s) => s.path.startsWith(path));
  }

  lookupBody(uuid = NODE_UUID): object {
    const token = this.tokenGiven ? '******' : this.token;
    this.tokenGiven = true;
    return { node: { uuid, properties: {}, instance_info: {}, driver_internal_info: {}, links: [] }, config: { heartbeat_timeout: this.heartbeatTimeout, agent_token: token, agent_token_required: true } };
  }

  private async serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    const url = new URL(req.url ?? '/', 'http://x');
    const v = req.headers['x-openstack-ironic-api-version'];
    this.seen.push({ method: req.method ?? '', path: url.pathname, query: url.searchParams, version: typeof v === 'string' ? v : undefined, headers: req.headers, body: text ? (JSON.parse(text) as Record<string, unknown>) : null, at: Date.now() });
    const json = (status: number, body: unknown) => {
      const b = JSON.stringify(body);
      res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(b) }).end(b);
    };
    if (url.pathname === '/') return json(200, { default_version: { id: 'v1', version: this.maxVersion, min_version: '1.1' } });
    if (url.pathname === '/v1/lookup') {
      if (this.lookupMisses > 0) {
        this.lookupMisses--;
        return json(404, { error_message: '{"faultstring": "Node could not be found."}' });
      }
      return json(200, this.lookupBody());
    }
    if (url.pathname.startsWith('/v1/heartbeat/')) return json(this.heartbeatStatus, this.heartbeatStatus === 202 ? null : { error_message: 'no' });
    // Without a version header (IPA never sends one here) Ironic answers as ironic-inspector did.
    if (url.pathname === '/v1/continue_inspection') return json(this.inspectionStatus, this.inspectionStatus === 202 ? { uuid: NODE_UUID } : this.inspectionBody);
    const image = this.images.get(url.pathname);
    if (image) {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': image.length }).end(image);
      return;
    }
    json(404, { error: 'not here' });
  }
}

const ISO = 'http://127.0.0.1:1/images/ipa.iso';
const heartbeatsOf = (peer: StandIn) => peer.of('/v1/heartbeat/');

describe('agent simulator', function () {
  this.timeout(60_000);
  let peer: StandIn;
  let sim: RedfishSim;
  let bmc: string;
  let other: string;

  before(async () => {
    peer = await new StandIn().start();
    sim = await startAgentFleet(3, { apiUrl: peer.url, heartbeatMinGapMs: 300, lookupRetryMs: 100, writeMBps: 4 });
    bmc = sim.bmcs[0].url;
    other = sim.bmcs[1].url;
  });

  after(async () => {
    await sim?.stop();
    await peer?.stop();
  });

  beforeEach(async () => {
    // Every agent dead first, so that nothing of the last test reaches the stand-in after its reset.
    for (const b of sim.bmcs) {
      await setAgentFaults(b.url, {});
      await resetHost(b.url, 'ForceOff');
      await fetch(`${b.url}/_sim/reset`, { method: 'POST' });
    }
    peer.reset();
  });

  /** After a restart into the ISO: a new agent has booted, looked itself up, and has no commands. */
  async function expectFreshAgent(bootsBefore: number): Promise<void> {
    await until('the new agent', async () => (await agentWitness(bmc)).boots === bootsBefore + 1, 5000);
    const x = await until('its lookup', async () => {
      const y = await agentWitness(bmc);
      return y.nodeUuid && y.running ? y : null;
    });
    expect(x.commands).to.deep.equal([]);
  }

  async function booted(url = bmc) {
    await bootIso(url, ISO);
    return waitForAgent(url);
  }

  describe('boot and death', () => {
    it('starts an agent when the host boots an agent ISO from Cd, and not otherwise', async () => {
      await bootIso(bmc, ISO);
      await bootIso(other, 'http://127.0.0.1:1/images/live-os.iso');
      const w = await waitForAgent(bmc);
      expect(w.running).to.equal(true);
      expect(w.callbackUrl).to.equal(`${sim.agentUrl}/5a1f0000-0000-4000-8000-000000000000`);
      expect(w.boots).to.be.greaterThan(0);
      await sleep(200);
      expect((await agentWitness(other)).running).to.equal(false);
      const ev = (await (await fetch(`${bmc}/_sim/events`)).json()) as { events: Array<{ type: string }> };
      expect(ev.events.map((e) => e.type)).to.include('agent-started');
    });

    it('each BMC\'s agent listens on a port of its own, as real agents do', async () => {
      const first = await booted(bmc);
      // The stand-in knows no node of the other BMC: its agent runs, looking itself up in vain.
      await bootIso(other, ISO);
      const second = await until('the other agent', async () => {
        const w = await agentWitness(other);
        return w.running ? w : null;
      });
      const port = (u: string) => new URL(u).port;
      expect(port(first.callbackUrl)).to.equal(port(sim.agentUrl!));
      expect(port(second.callbackUrl)).to.not.equal(port(first.callbackUrl));
      // Each answers on its own port: the other, without a token yet, as IPA does.
      expect((await agentCommands(second.callbackUrl, null)).status).to.equal(401);
      expect((await agentCommands(first.callbackUrl, first.token)).status).to.equal(200);
    });

    it('a boot from Hdd (the Once override consumed) starts no agent', async () => {
      await booted();
      await resetHost(bmc, 'ForceRestart');
      await sleep(200);
      const w = await agentWitness(bmc);
      expect(w.running).to.equal(false);
      expect(w.instance).to.equal(null);
    });

    it('dies on power off: its API answers 404 and its heartbeats stop', async () => {
      peer.heartbeatTimeout = 1;
      const w = await booted();
      await until('a heartbeat', async () => heartbeatsOf(peer).length > 0);
      await resetHost(bmc, 'ForceOff');
      expect((await agentWitness(bmc)).running).to.equal(false);
      const r = await agentCommands(w.callbackUrl, w.token);
      expect(r.status).to.equal(404);
      const n = heartbeatsOf(peer).length;
      await sleep(900);
      expect(heartbeatsOf(peer).length).to.equal(n);
    });

    it('an unknown agent path answers 404', async () => {
      const res = await agentFetch(`${sim.agentUrl}/no-such-agent/v1/commands/`);
      expect(res.status).to.equal(404);
      expect(((await res.json()) as { faultcode: string }).faultcode).to.equal('Client');
    });

    it('/_sim/agent without agents is a 404', async () => {
      const { startRedfishSim } = await import('../../sim/redfish/index.js');
      const plain = await startRedfishSim({ count: 1 });
      try {
        expect((await fetch(`${plain.bmcs[0].url}/_sim/agent`)).status).to.equal(404);
        expect(plain.agentUrl).to.equal(undefined);
      } finally {
        await plain.stop();
      }
    });
  });

  describe('lookup, token and heartbeats', () => {
    it('reads the API version, retries a 404 lookup with every MAC, and keeps the token', async () => {
      peer.lookupMisses = 3;
      const w = await booted();
      expect(peer.seen[0].path).to.equal('/');
      const lookups = peer.of('/v1/lookup');
      expect(lookups).to.have.length(4);
      expect(lookups.every((l) => l.version === '1.62')).to.equal(true);
      expect(lookups[0].query.get('addresses')).to.equal('02:00:00:00:00:01,02:00:00:00:00:02');
      expect(w.lookups).to.equal(4);
      expect(w.lookupStatuses).to.deep.equal({ 200: 1, 404: 3 });
      expect(w.token).to.equal(peer.token);
      expect(w.nodeUuid).to.equal('1be26c0b-03f2-4d2e-ae87-c02d7f33c123');
    });

    it('heartbeats at once, then every heartbeat_timeout × U(0.3, 0.6), at min(server, 1.68)', async () => {
      peer.heartbeatTimeout = 2;
      peer.maxVersion = '1.90';
      try {
        const w = await booted();
        await until('four heartbeats', async () => heartbeatsOf(peer).length >= 4, 15_000);
        const hb = heartbeatsOf(peer);
        expect(hb[0].path).to.equal('/v1/heartbeat/1be26c0b-03f2-4d2e-ae87-c02d7f33c123');
        expect(hb[0].version).to.equal('1.68');
        expect(w.callbackUrl).to.match(/^https:\/\//);
        expect(hb[0].body).to.deep.equal({ callback_url: w.callbackUrl, agent_token: peer.token, agent_version: '10.1.0', agent_verify_ca: sim.agentCertificate });
        expect(hb[0].headers).to.include({ 'content-type': 'application/json', accept: 'application/json', 'user-agent': 'python-requests/2.28.1' });
        for (let i = 1; i < 4; i++) {
          const gap = hb[i].at - hb[i - 1].at;
          // 0.6-1.2 s, plus the request's own time on a busy machine.
          expect(gap).to.be.within(550, 1600);
        }
        expect((await agentWitness(bmc)).heartbeatStatuses['202']).to.be.at.least(4);
      } finally {
        peer.maxVersion = '1.78';
      }
    });

    it('forces a heartbeat after an async command, no sooner than the minimum gap', async () => {
      const w = await booted();
      await until('the first heartbeat', async () => heartbeatsOf(peer).length === 1);
      const first = heartbeatsOf(peer)[0].at;
      const r = await agentCommand(w.callbackUrl, w.token, 'image.install_bootloader', { root_uuid: '0x1234' });
      expect(r.status).to.equal(200);
      await until('a forced heartbeat', async () => heartbeatsOf(peer).length === 2, 5000);
      expect(heartbeatsOf(peer)[1].at - first).to.be.at.least(290);
    });

    it('retries soon on 409 and on 404 alike: IPA never stops heartbeating', async () => {
      peer.heartbeatStatus = 409;
      await booted();
      await until('three heartbeats', async () => heartbeatsOf(peer).length >= 3, 5000);
      peer.heartbeatStatus = 404;
      await until('three 404s', async () => (await agentWitness(bmc)).heartbeatStatuses['404'] >= 3, 5000);
      expect((await agentWitness(bmc)).running).to.equal(true);
    });

    it('a second boot gets "******" and holds no token: every command is 401', async () => {
      await booted();
      await resetHost(bmc, 'ForceOff');
      await bootIso(bmc, ISO);
      await until('a second lookup', async () => (await agentWitness(bmc)).lookups > 0 && peer.of('/v1/lookup').length === 2);
      const w = await until('the agent', async () => {
        const x = await agentWitness(bmc);
        return x.running && x.nodeUuid ? x : null;
      });
      expect(w.token).to.equal(null);
      expect((await agentCommands(w.callbackUrl, peer.token)).status).to.equal(401);
      expect((await agentCommands(w.callbackUrl, '******')).status).to.equal(401);
    });

    it('posts an IPA inventory to continue_inspection as IPA 9.4 does; a 202 gives the lookup its node', async () => {
      peer.inspectionStatus = 202;
      const w = await booted();
      const post = peer.of('/v1/continue_inspection')[0];
      // requests.post(url, data=<str>): no Content-Type, no version header.
      expect(post.version).to.equal(undefined);
      expect(post.headers).to.not.have.property('content-type');
      expect(post.headers).to.include({ accept: '*/*', 'user-agent': 'python-requests/2.28.1', 'accept-encoding': 'gzip, deflate' });
      const inv = post.body!.inventory as Record<string, unknown>;
      expect((inv.interfaces as Array<{ mac_address: string }>).map((i) => i.mac_address)).to.deep.equal(['02:00:00:00:00:01', '02:00:00:00:00:02']);
      expect(inv.cpu).to.include({ count: 96, architecture: 'x86_64', frequency: '3400' });
      expect(inv.memory).to.deep.include({ physical_mb: 384 * 1024 });
      expect((inv.disks as Array<{ name: string; size: number }>).map((d) => [d.name, d.size])).to.deep.equal([
        ['/dev/sda', 960197124096],
        ['/dev/sdb', 960197124096],
      ]);
      expect(inv.system_vendor).to.include({ manufacturer: 'Galvanic', serial_number: 'SIM000000' });
      expect(inv.boot).to.deep.equal({ current_boot_mode: 'uefi', pxe_interface: null });
      expect(post.body).to.include.keys('root_disk', 'configuration', 'logs', 'error');
      expect(w.inspectionStatuses).to.deep.equal({ 202: 1 });
      // The node's UUID goes to the lookup, which gives the token.
      const lookups = peer.of('/v1/lookup');
      expect(lookups).to.have.length(1);
      expect(lookups[0].query.get('node_uuid')).to.equal(NODE_UUID);
      expect(w.token).to.equal(peer.token);
    });

    it('an answer of 400 or more to continue_inspection ends inspection at once (IPA 9.4 retries only a connection error)', async () => {
      for (const status of [400, 500, 409]) {
        peer.reset();
        peer.inspectionStatus = status;
        await resetHost(bmc, 'ForceOff');
        await fetch(`${bmc}/_sim/reset`, { method: 'POST' });
        const w = await booted();
        expect(w.inspectionStatuses, String(status)).to.deep.equal({ [status]: 1 });
        expect(peer.of('/v1/lookup')[0].query.has('node_uuid')).to.equal(false);
        expect(w.token).to.equal(peer.token);
      }
    });
  });

  describe('automatic TLS', () => {
    it('serves its API over TLS with the certificate it sends as agent_verify_ca, IPA\'s kind; refuses plain HTTP', async () => {
      const w = await booted();
      expect(w.callbackUrl).to.match(/^https:\/\/127\.0\.0\.1:\d+\//);
      expect(w.verifyCa).to.equal(sim.agentCertificate);
      const cert = new X509Certificate(w.verifyCa!);
      expect(cert.subjectAltName).to.equal('IP Address:127.0.0.1');
      expect(cert.issuer).to.equal(cert.subject);
      expect(cert.publicKey.asymmetricKeyDetails).to.deep.equal({ namedCurve: 'prime256v1' });
      expect(Date.parse(cert.validTo) - Date.now()).to.be.within(29 * 86_400_000, 31 * 86_400_000);
      expect((await agentCommands(w.callbackUrl, w.token)).status).to.equal(200);
      // The system's CAs do not know it; the same port in plain HTTP gets no answer.
      const untrusted = await fetch(`${w.callbackUrl}/v1/commands/?agent_token=${w.token}`).then(() => 'answered', (err: Error) => String((err.cause as { code?: string } | undefined)?.code));
      expect(untrusted).to.equal('DEPTH_ZERO_SELF_SIGNED_CERT');
      const plain = await fetch(`${w.callbackUrl.replace(/^https:/, 'http:')}/v1/commands/?agent_token=${w.token}`).then(() => 'answered', () => 'refused');
      expect(plain).to.equal('refused');
    });

    it('against an API older than 1.68 it serves plain HTTP and sends no certificate', async () => {
      peer.maxVersion = '1.67';
      try {
        const w = await booted();
        expect(w.callbackUrl).to.match(/^http:\/\//);
        expect(w.verifyCa).to.equal(null);
        await until('a heartbeat', async () => heartbeatsOf(peer).length > 0);
        expect(heartbeatsOf(peer)[0].body).to.not.have.property('agent_verify_ca');
        expect((await agentCommands(w.callbackUrl, w.token)).status).to.equal(200);
        const tls = await agentFetch(`${w.callbackUrl.replace(/^http:/, 'https:')}/v1/commands/?agent_token=${w.token}`).then(() => 'answered', () => 'refused');
        expect(tls).to.equal('refused');
      } finally {
        peer.maxVersion = '1.78';
      }
    });

    it('autoTls false: plain HTTP whatever the API (IPA\'s enable_auto_tls = False)', async () => {
      const plain = await startAgentFleet(1, { apiUrl: peer.url, autoTls: false, heartbeatMinGapMs: 300, lookupRetryMs: 100 }, { fleetId: 9 });
      try {
        expect(plain.agentUrl).to.match(/^http:\/\//);
        expect(plain.agentCertificate).to.equal(undefined);
        const url = plain.bmcs[0].url;
        await bootIso(url, ISO);
        const w = await waitForAgent(url);
        expect(w.callbackUrl.startsWith(plain.agentUrl!)).to.equal(true);
        expect(w.verifyCa).to.equal(null);
      } finally {
        await plain.stop();
      }
    });
  });

  describe('command API', () => {
    it('serves IPA root and v1 documents', async () => {
      const w = await booted();
      const root = (await (await agentFetch(`${w.callbackUrl}/`)).json()) as { name: string; default_version: { id: string } };
      expect(root.name).to.equal('OpenStack Ironic Python Agent API');
      expect(root.default_version.id).to.equal('v1');
      const v1 = (await (await agentFetch(`${w.callbackUrl}/v1/`)).json()) as { commands: Array<{ href: string }> };
      expect(v1.commands[0].href).to.equal(`${w.callbackUrl}/v1/commands`);
    });

    it('401 without or with a wrong token', async () => {
      const w = await booted();
      expect((await agentCommands(w.callbackUrl, null)).status).to.equal(401);
      const r = await agentCommand(w.callbackUrl, 'nope', 'standby.sync');
      expect(r.status).to.equal(401);
      expect(r.body).to.deep.equal({ faultcode: 'Client', faultstring: '401 Unauthorized: Token invalid.' });
    });

    it('400 for a bad body, a bad name or missing params; 404 for an unknown extension or command id', async () => {
      const w = await booted();
      const t = w.token;
      const bad = await agentFetch(`${w.callbackUrl}/v1/commands/?agent_token=${t}`, { method: 'POST', body: '{"name": "standby.sync"}' });
      expect(bad.status).to.equal(400);
      expect(((await bad.json()) as { faultstring: string }).faultstring).to.equal('400 Bad Request: Missing or invalid name or params');
      expect((await agentFetch(`${w.callbackUrl}/v1/commands/?agent_token=${t}`, { method: 'POST', body: 'not json' })).status).to.equal(400);
      const noDot = await agentCommand(w.callbackUrl, t, 'sync');
      expect(noDot.status).to.equal(400);
      expect(noDot.body).to.include({ type: 'InvalidCommandError' });
      const unknown = await agentCommand(w.callbackUrl, t, 'clean.shred_everything');
      expect(unknown.status).to.equal(400);
      expect((unknown.body as { faultstring: string }).faultstring).to.equal('Invalid command: Unknown command: shred_everything');
      const missing = await agentCommand(w.callbackUrl, t, 'clean.get_clean_steps', { node: {} });
      expect(missing.status).to.equal(400);
      expect(missing.body).to.include({ type: 'InvalidCommandParamsError' });
      const ext = await agentCommand(w.callbackUrl, t, 'nosuch.thing');
      expect(ext.status).to.equal(404);
      expect((ext.body as { faultstring: string }).faultstring).to.equal('Not found: Extension with id nosuch not found.');
      expect((await agentFetch(`${w.callbackUrl}/v1/commands/nope?agent_token=${t}`)).status).to.equal(404);
      // Nothing refused was recorded.
      expect(((await agentCommands(w.callbackUrl, t)).body as { commands: unknown[] }).commands).to.have.length(0);
    });

    it('get_clean_steps and get_deploy_steps: the GenericHardwareManager steps and version', async () => {
      const w = await booted();
      const c = await agentCommand(w.callbackUrl, w.token, 'clean.get_clean_steps', { node: {}, ports: [] });
      const r = c.body as CommandResult;
      expect(r).to.have.all.keys('id', 'command_name', 'command_status', 'command_error', 'command_result');
      expect(r).to.include({ command_name: 'get_clean_steps', command_status: 'SUCCEEDED', command_error: null });
      const res = r.command_result as { clean_steps: Record<string, Array<Record<string, unknown>>>; hardware_manager_version: Record<string, string> };
      expect(res.hardware_manager_version).to.deep.equal({ GenericHardwareManager: '1.2' });
      const steps = res.clean_steps.GenericHardwareManager;
      expect(steps.find((s) => s.step === 'erase_devices')).to.deep.equal({ step: 'erase_devices', priority: 10, interface: 'deploy', reboot_requested: false, abortable: true });
      expect(steps.find((s) => s.step === 'erase_devices_metadata')).to.include({ priority: 99, abortable: true });
      const d = (await agentCommand(w.callbackUrl, w.token, 'deploy.get_deploy_steps', { node: {}, ports: [] })).body as CommandResult;
      const ds = (d.command_result as { deploy_steps: Record<string, Array<Record<string, unknown>>> }).deploy_steps.GenericHardwareManager;
      expect(ds.find((s) => s.step === 'write_image')).to.deep.equal({ step: 'write_image', priority: 0, interface: 'deploy', reboot_requested: false });
    });

    it('execute_clean_step runs async (RUNNING, then SUCCEEDED), 409 while it runs, and lists in order', async () => {
      const w = await booted();
      const step = { step: 'erase_devices', priority: 10, interface: 'deploy' };
      const r = await agentCommand(w.callbackUrl, w.token, 'clean.execute_clean_step', { step, node: {}, ports: [], clean_version: { GenericHardwareManager: '1.2' } });
      expect((r.body as CommandResult).command_status).to.equal('RUNNING');
      const busy = await agentCommand(w.callbackUrl, w.token, 'standby.sync');
      expect(busy.status).to.equal(409);
      expect(busy.body).to.include({ faultcode: 'Client', faultstring: 'Agent is busy: executing command execute_clean_step', type: 'AgentIsBusy', code: 409 });
      const done = await waitForCommand(w.callbackUrl, w.token!);
      expect(done.command_status).to.equal('SUCCEEDED');
      expect(done.command_result).to.deep.equal({ clean_result: { '/dev/sda': null, '/dev/sdb': null }, clean_step: step });
      const one = (await (await agentFetch(`${w.callbackUrl}/v1/commands/${done.id}?agent_token=${w.token}`)).json()) as CommandResult;
      expect(one).to.deep.equal(done);
      const sync = await agentCommand(w.callbackUrl, w.token, 'standby.sync');
      expect((sync.body as CommandResult).command_status).to.equal('SUCCEEDED');
      const list = ((await agentCommands(w.callbackUrl, w.token)).body as { commands: CommandResult[] }).commands;
      expect(list.map((c) => c.command_name)).to.deep.equal(['execute_clean_step', 'sync']);
    });

    it('wait=true answers when the command is done', async () => {
      const w = await booted();
      const r = await agentCommand(w.callbackUrl, w.token, 'clean.execute_clean_step', { step: { step: 'erase_devices_metadata', interface: 'deploy', priority: 99 }, node: {}, ports: [] }, true);
      expect((r.body as CommandResult).command_status).to.equal('SUCCEEDED');
      expect((r.body as CommandResult).command_result).to.deep.include({ clean_result: null });
    });

    it('an unknown step or a step without "step" fails as IPA does', async () => {
      const w = await booted();
      const a = (await agentCommand(w.callbackUrl, w.token, 'deploy.execute_deploy_step', { step: { step: 'frobnicate' }, node: {}, ports: [] }, true)).body as CommandResult;
      expect(a.command_status).to.equal('FAILED');
      expect(a.command_error).to.deep.equal({ type: 'HardwareManagerMethodNotFound', code: 500, message: 'No HardwareManager found to handle method', details: 'Could not find method: frobnicate' });
      const b = (await agentCommand(w.callbackUrl, w.token, 'clean.execute_clean_step', { step: {}, node: {}, ports: [] }, true)).body as CommandResult;
      expect(b.command_error).to.include({ type: 'CommandExecutionError', details: 'Malformed clean_step, no "step" key: {}' });
    });

    it('get_partition_uuids, install_bootloader, collect_system_logs', async () => {
      const w = await booted();
      const p = (await agentCommand(w.callbackUrl, w.token, 'standby.get_partition_uuids')).body as CommandResult;
      expect(p).to.include({ command_status: 'SUCCEEDED' });
      expect(p.command_result).to.deep.equal({});
      // Nothing written yet: there is no root partition to install GRUB to.
      const ib = (await agentCommand(w.callbackUrl, w.token, 'image.install_bootloader', { root_uuid: '0xabc', target_boot_mode: 'uefi' }, true)).body as CommandResult;
      expect(ib).to.include({ command_name: 'install_bootloader', command_status: 'FAILED', command_result: null });
      expect(ib.command_error).to.include({ type: 'CommandExecutionError', details: "Installing GRUB2 boot loader to device /dev/sda failed: no partition with UUID '0xabc'" });
      const logs = (await agentCommand(w.callbackUrl, w.token, 'log.collect_system_logs')).body as CommandResult;
      const tar = gunzipSync(Buffer.from((logs.command_result as { system_logs: string }).system_logs, 'base64'));
      expect(tar.subarray(0, 7).toString()).to.equal('journal');
      expect(tar.subarray(257, 262).toString()).to.equal('ustar');
    });

    it('standby.power_off turns the host off at its BMC; standby.reboot restarts it into the agent', async () => {
      let w = await booted();
      const r = (await agentCommand(w.callbackUrl, w.token, 'standby.power_off')).body as CommandResult;
      expect(r.command_name).to.equal('power_off');
      await until('power off', async () => {
        const s = (await (await fetch(`${bmc}/_sim/state`)).json()) as { systems: Record<string, { power: string }> };
        return Object.values(s.systems)[0].power === 'Off';
      });
      expect((await agentWitness(bmc)).running).to.equal(false);
      // Continuous Cd: a restart boots the agent again, with a fresh command list.
      await fetch(`${bmc}/_sim/state`, { method: 'POST', body: JSON.stringify({ boot: { BootSourceOverrideTarget: 'Cd', BootSourceOverrideEnabled: 'Continuous' } }) });
      try {
        peer.reset();
        await resetHost(bmc, 'On');
        w = await waitForAgent(bmc);
        await agentCommand(w.callbackUrl, w.token, 'standby.reboot');
        await expectFreshAgent(w.boots);
      } finally {
        await fetch(`${bmc}/_sim/state`, { method: 'POST', body: JSON.stringify({ boot: { BootSourceOverrideTarget: 'None', BootSourceOverrideEnabled: 'Disabled' } }) });
      }
    });

    it('system.lockdown: the API and the heartbeats stop, the host stays on', async () => {
      const w = await booted();
      const r = await agentCommand(w.callbackUrl, w.token, 'system.lockdown');
      expect((r.body as CommandResult).command_status).to.equal('SUCCEEDED');
      expect((await agentCommands(w.callbackUrl, w.token)).status).to.equal(404);
      const x = await agentWitness(bmc);
      expect(x).to.include({ running: false, lockedDown: true });
    });
  });

  describe('write_image', () => {
    const small = Buffer.alloc(2_000_000, 7);
    const big = Buffer.alloc(4_000_000, 9);
    before(() => {
      peer.images.set('/images/small.img', small);
      peer.images.set('/images/big.img', big);
    });
    const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');
    const md5 = (b: Buffer) => createHash('md5').update(b).digest('hex');
    const writeStep = (imageInfo: object) => ({ step: { step: 'write_image', interface: 'deploy', priority: 80, args: { image_info: { id: 'img-1', disk_format: 'qcow2', ...imageInfo } } }, node: {}, ports: [] });

    it('fetches the image, verifies os_hash_value, takes size / rate, and fills the disk', async () => {
      const w = await booted();
      const times: number[] = [];
      for (const [name, data] of [['small', small], ['big', big]] as const) {
        const t0 = Date.now();
        const r = (await agentCommand(w.callbackUrl, w.token, 'deploy.execute_deploy_step', writeStep({ urls: [`${peer.url}/images/${name}.img`], os_hash_algo: 'sha256', os_hash_value: sha256(data) }), true)).body as CommandResult;
        times.push(Date.now() - t0);
        expect(r.command_status).to.equal('SUCCEEDED');
        expect((r.command_result as { deploy_result: { result: string } }).deploy_result.result).to.match(/^prepare_image: image \(img-1\) written to device \/dev\/sda root_uuid=0x[0-9a-f]{8}$/);
        const disk = (await agentWitness(bmc)).disk!;
        expect(disk).to.include({ imageUrl: `${peer.url}/images/${name}.img`, bytes: data.length, sha256: sha256(data) });
      }
      // 4 MB/s: 0.5 s and 1 s (plus the calls' own time on a busy machine).
      expect(times[0]).to.be.within(450, 1200);
      expect(times[1]).to.be.within(950, 2000);
      expect(times[1] - times[0]).to.be.at.least(300);
      const parts = (await agentCommand(w.callbackUrl, w.token, 'standby.get_partition_uuids')).body as CommandResult;
      expect(parts.command_result).to.have.key('root uuid');
    });

    it('a legacy md5 checksum works; the instance runs when the host boots the disk', async () => {
      const w = await booted();
      const r = (await agentCommand(w.callbackUrl, w.token, 'deploy.execute_deploy_step', writeStep({ urls: [`${peer.url}/images/small.img`], checksum: md5(small) }), true)).body as CommandResult;
      expect(r.command_status).to.equal('SUCCEEDED');
      await resetHost(bmc, 'ForceRestart');
      const x = await agentWitness(bmc);
      expect(x.running).to.equal(false);
      expect(x.instance).to.deep.equal({ running: true, imageUrl: `${peer.url}/images/small.img` });
      await resetHost(bmc, 'ForceOff');
      expect((await agentWitness(bmc)).instance!.running).to.equal(false);
    });

    it('a 404 fails with ImageDownloadFatalError, a mismatch with ImageChecksumError, a missing checksum with InvalidCommandParamsError', async () => {
      const w = await booted();
      const nf = (await agentCommand(w.callbackUrl, w.token, 'deploy.execute_deploy_step', writeStep({ urls: [`${peer.url}/images/gone.img`], os_hash_algo: 'sha256', os_hash_value: sha256(small) }), true)).body as CommandResult;
      expect(nf.command_status).to.equal('FAILED');
      expect(nf.command_error).to.include({ type: 'ImageDownloadFatalError', code: 500, message: 'Error downloading image' });
      expect(nf.command_error!.details).to.match(/^Download of image img-1 failed: Received status code 404 from http:\/\/127\.0\.0\.1:\d+\/images\/gone\.img, expected 200\./);
      const bad = (await agentCommand(w.callbackUrl, w.token, 'deploy.execute_deploy_step', writeStep({ urls: [`${peer.url}/images/small.img`], os_hash_algo: 'sha256', os_hash_value: 'a'.repeat(64) }), true)).body as CommandResult;
      expect(bad.command_error).to.deep.equal({
        type: 'ImageChecksumError',
        code: 500,
        message: 'Error verifying image checksum',
        details: `Image failed to verify against checksum. location: /tmp/img-1; image ID: img-1; image checksum: ${'a'.repeat(64)}; verification checksum: ${sha256(small)}`,
      });
      const none = (await agentCommand(w.callbackUrl, w.token, 'deploy.execute_deploy_step', writeStep({ urls: [`${peer.url}/images/small.img`] }), true)).body as CommandResult;
      expect(none.command_error).to.include({ type: 'InvalidCommandParamsError', code: 400 });
      expect((await agentWitness(bmc)).disk?.imageUrl ?? null).to.not.equal(`${peer.url}/images/gone.img`);
    });

    it('standby.prepare_image: a bad image_info is a 400, a good one writes the disk', async () => {
      const w = await booted();
      const bad = await agentCommand(w.callbackUrl, w.token, 'standby.prepare_image', { image_info: { id: 'x', urls: [] } });
      expect(bad.status).to.equal(400);
      expect(bad.body).to.include({ type: 'InvalidCommandParamsError', details: "Image 'urls' must be a list with at least one element." });
      const ok = (await agentCommand(w.callbackUrl, w.token, 'standby.prepare_image', { image_info: { id: 'img-2', urls: [`${peer.url}/images/small.img`], checksum: sha256(small) } }, true)).body as CommandResult;
      expect(ok.command_status).to.equal('SUCCEEDED');
      expect((ok.command_result as { result: string }).result).to.match(/^prepare_image: image \(img-2\) written to device \/dev\/sda root_uuid=0x/);
      expect((await agentWitness(bmc)).disk).to.include({ bytes: small.length, sha256: sha256(small) });
    });

    it('takes the config drive as IPA does: gzip + base64 inline or from a URL, kept on the disk; a dict, bad base64 or gzip fail with IPA\'s errors', async () => {
      const image = Buffer.concat([Buffer.from('CD001 config-2 '), Buffer.alloc(64 * 1024, 3)]);
      const encoded = gzipSync(image).toString('base64');
      peer.images.set('/configdrive/cd.b64', Buffer.from(encoded));
      const w = await booted();
      const withDrive = (configdrive: unknown, imageInfo: object = {}) => {
        const s = writeStep({ urls: [`${peer.url}/images/small.img`], os_hash_algo: 'sha256', os_hash_value: sha256(small), node_uuid: 'n-1', ...imageInfo });
        return { ...s, step: { ...s.step, args: { ...s.step.args, configdrive } } };
      };
      const write = async (configdrive: unknown, imageInfo: object = {}) =>
        (await agentCommand(w.callbackUrl, w.token, 'deploy.execute_deploy_step', withDrive(configdrive, imageInfo), true)).body as CommandResult;
      const served = async () => {
        const res = await fetch(`${bmc}/_sim/agent/configdrive`);
        return res.status === 200 ? Buffer.from(await res.arrayBuffer()) : res.status;
      };

      expect((await write(encoded)).command_status).to.equal('SUCCEEDED');
      expect((await agentWitness(bmc)).disk!.configdrive).to.deep.equal({ source: 'inline', bytes: image.length, sha256: sha256(image) });
      expect(await served()).to.deep.equal(image);

      const url = `${peer.url}/configdrive/cd.b64`;
      expect((await write(url, { image_type: 'partition' })).command_status).to.equal('SUCCEEDED');
      expect((await agentWitness(bmc)).disk!.configdrive).to.deep.equal({ source: 'url', url, bytes: image.length, sha256: sha256(image) });

      // The JSON form, as a conductor that does not build it hands it on.
      const dict = await write({ meta_data: { hostname: 'h' }, user_data: '#cloud-config' });
      expect(dict.command_error).to.deep.equal({ type: 'CommandExecutionError', code: 500, message: 'Command execution failed', details: "'dict' object has no attribute 'lower'" });
      expect((await write('this is not base64!')).command_error).to.deep.equal({
        type: 'DeploymentError', code: 500, message: 'Deploy step failed',
        details: 'Config drive for node n-1 is not base64 encoded or the content is malformed. Error: Incorrect padding.',
      });
      expect((await write(Buffer.from('plain text').toString('base64'))).command_error!.details)
        .to.equal("Encountered error while decompressing and writing config drive for node n-1. Error: Not a gzipped file (b'pl')");
      const gone = await write(`${peer.url}/configdrive/gone`);
      expect(gone.command_error!.details).to.match(/^Can't download the configdrive content for node n-1 from 'http:\/\/127\.0\.0\.1:\d+\/configdrive\/gone'\. Got status code 404/);
      // Without one, the disk holds none.
      expect((await write(null)).command_status).to.equal('SUCCEEDED');
      expect((await agentWitness(bmc)).disk!.configdrive).to.equal(null);
      expect(await served()).to.equal(404);
    });

    it('erase_devices_metadata empties the disk', async () => {
      const w = await booted();
      await agentCommand(w.callbackUrl, w.token, 'deploy.execute_deploy_step', writeStep({ urls: [`${peer.url}/images/small.img`], os_hash_algo: 'sha256', os_hash_value: sha256(small) }), true);
      expect((await agentWitness(bmc)).disk).to.not.equal(null);
      await agentCommand(w.callbackUrl, w.token, 'clean.execute_clean_step', { step: { step: 'erase_devices_metadata', interface: 'deploy', priority: 99 }, node: {}, ports: [] }, true);
      const x = await agentWitness(bmc);
      expect(x.disk).to.equal(null);
      expect(x.instance).to.equal(null);
    });
  });

  describe('faults', () => {
    const cleanStep = (step: string, extra: object = {}) => ({ step: { step, interface: 'deploy', priority: 10 }, node: {}, ports: [], ...extra });

    it('refuses unknown fault keys; {} clears', async () => {
      const bad = await fetch(`${bmc}/_sim/agent/faults`, { method: 'POST', body: JSON.stringify({ explode: true }) });
      expect(bad.status).to.equal(400);
      expect(await setAgentFaults(bmc, { failStep: 'x', noBoot: true })).to.deep.equal({ failStep: 'x', noBoot: true });
      expect(await setAgentFaults(bmc, {})).to.deep.equal({});
    });

    it('extraCleanSteps: a vendor manager\'s steps, listed and versioned beside the generic ones, and run; a malformed list is a 400', async () => {
      for (const bad of [{ extraCleanSteps: 'flash' }, { extraCleanSteps: [{ priority: 1 }] }, { extraCleanSteps: [{ step: 'flash', reboot_requested: 'yes' }] }]) {
        const res = await fetch(`${bmc}/_sim/agent/faults`, { method: 'POST', body: JSON.stringify(bad) });
        expect(res.status, JSON.stringify(bad)).to.equal(400);
      }
      const w = await booted();
      await setAgentFaults(bmc, { extraCleanSteps: [{ step: 'flash_firmware', reboot_requested: true, priority: 5 }] });
      const listed = (await agentCommand(w.callbackUrl, w.token, 'clean.get_clean_steps', { node: {}, ports: [] })).body as CommandResult;
      const res = listed.command_result as { clean_steps: Record<string, unknown[]>; hardware_manager_version: Record<string, string> };
      expect(res.clean_steps.SimulatedHardwareManager).to.deep.equal([{ step: 'flash_firmware', priority: 5, interface: 'deploy', reboot_requested: true, abortable: true }]);
      expect(res.clean_steps.GenericHardwareManager).to.have.length.above(1);
      expect(res.hardware_manager_version).to.deep.equal({ GenericHardwareManager: '1.2', SimulatedHardwareManager: '1.0' });
      const step = { step: 'flash_firmware', interface: 'deploy', priority: 5, reboot_requested: true };
      const ran = (await agentCommand(w.callbackUrl, w.token, 'clean.execute_clean_step', { step, node: {}, ports: [], clean_version: res.hardware_manager_version }, true)).body as CommandResult;
      expect(ran).to.include({ command_status: 'SUCCEEDED' });
      expect(ran.command_result).to.deep.equal({ clean_result: null, clean_step: step });
      // IPA itself does not reboot: the conductor does, after the step.
      expect((await agentWitness(bmc)).running).to.equal(true);
    });

    it('failStep / failMessage: FAILED with a CleaningError or DeploymentError', async () => {
      const w = await booted();
      await setAgentFaults(bmc, { failStep: 'erase_devices_metadata', failMessage: 'disk on fire' });
      const c = (await agentCommand(w.callbackUrl, w.token, 'clean.execute_clean_step', cleanStep('erase_devices_metadata'), true)).body as CommandResult;
      expect(c.command_status).to.equal('FAILED');
      expect(c.command_error).to.deep.equal({ type: 'CleaningError', code: 500, message: 'Clean step failed', details: 'disk on fire' });
      await setAgentFaults(bmc, {});
      await setAgentFaults(bmc, { failStep: 'erase_devices_metadata' });
      const d = await agentCommand(w.callbackUrl, w.token, 'deploy.execute_deploy_step', cleanStep('erase_devices_metadata'), true);
      expect((d.body as CommandResult).command_error, JSON.stringify(d)).to.deep.equal({ type: 'DeploymentError', code: 500, message: 'Deploy step failed', details: 'Simulated failure of step erase_devices_metadata' });
    });

    it('hangStep: RUNNING for good, every other command 409', async () => {
      const w = await booted();
      await setAgentFaults(bmc, { hangStep: 'erase_devices_metadata' });
      await agentCommand(w.callbackUrl, w.token, 'clean.execute_clean_step', cleanStep('erase_devices_metadata'));
      await sleep(500);
      const list = ((await agentCommands(w.callbackUrl, w.token)).body as { commands: CommandResult[] }).commands;
      expect(list[0].command_status).to.equal('RUNNING');
      expect((await agentCommand(w.callbackUrl, w.token, 'standby.sync')).status).to.equal(409);
    });

    it('a command waited on (wait=true) when the agent dies has its connection reset', async () => {
      const w = await booted();
      await setAgentFaults(bmc, { hangStep: 'erase_devices' });
      const pending = agentCommand(w.callbackUrl, w.token, 'clean.execute_clean_step', cleanStep('erase_devices'), true).then(
        () => 'answered',
        () => 'reset',
      );
      await sleep(200);
      await resetHost(bmc, 'ForceOff');
      expect(await pending).to.equal('reset');
    });

    it('crashDuringStep: the agent dies mid-step, heartbeats stop, the host stays on', async () => {
      peer.heartbeatTimeout = 1;
      const w = await booted();
      await setAgentFaults(bmc, { crashDuringStep: 'erase_devices' });
      await agentCommand(w.callbackUrl, w.token, 'clean.execute_clean_step', cleanStep('erase_devices'));
      await until('the crash', async () => !(await agentWitness(bmc)).running, 3000);
      const n = heartbeatsOf(peer).length;
      expect((await agentCommands(w.callbackUrl, w.token)).status).to.equal(404);
      const s = (await (await fetch(`${bmc}/_sim/state`)).json()) as { systems: Record<string, { power: string }> };
      expect(Object.values(s.systems)[0].power).to.equal('On');
      await sleep(800);
      expect(heartbeatsOf(peer).length).to.equal(n);
    });

    it('rebootDuringStep: the host restarts and a fresh agent has no commands', async () => {
      await fetch(`${bmc}/_sim/state`, { method: 'POST', body: JSON.stringify({ media: { Cd: { Image: ISO, Inserted: true } }, boot: { BootSourceOverrideTarget: 'Cd', BootSourceOverrideEnabled: 'Continuous' } }) });
      try {
        await resetHost(bmc, 'On');
        const w = await waitForAgent(bmc);
        await setAgentFaults(bmc, { rebootDuringStep: 'erase_devices' });
        await agentCommand(w.callbackUrl, w.token, 'clean.execute_clean_step', cleanStep('erase_devices'));
        await expectFreshAgent(w.boots);
      } finally {
        await fetch(`${bmc}/_sim/state`, { method: 'POST', body: JSON.stringify({ boot: { BootSourceOverrideTarget: 'None', BootSourceOverrideEnabled: 'Disabled' } }) });
      }
    });

    it('loseResponse: the command runs but its answer is lost; the list shows it', async () => {
      const w = await booted();
      await setAgentFaults(bmc, { loseResponse: 1 });
      let failed = false;
      try {
        await agentCommand(w.callbackUrl, w.token, 'clean.execute_clean_step', cleanStep('erase_devices_metadata'));
      } catch {
        failed = true;
      }
      expect(failed).to.equal(true);
      const done = await waitForCommand(w.callbackUrl, w.token!);
      expect(done).to.include({ command_name: 'execute_clean_step', command_status: 'SUCCEEDED' });
      expect((await agentWitness(bmc)).faults.loseResponse).to.equal(0);
      expect((await agentCommand(w.callbackUrl, w.token, 'standby.sync')).status).to.equal(200);
    });

    it('versionMismatch: CLEAN_VERSION_MISMATCH once, then the new version is reported', async () => {
      const w = await booted();
      await setAgentFaults(bmc, { versionMismatch: true });
      const old = { GenericHardwareManager: '1.2' };
      const r = (await agentCommand(w.callbackUrl, w.token, 'clean.execute_clean_step', cleanStep('erase_devices_metadata', { clean_version: old }), true)).body as CommandResult;
      expect(r.command_status).to.equal('CLEAN_VERSION_MISMATCH');
      expect(r.command_error).to.include({ type: 'VersionMismatch', code: 409 });
      expect(r.command_error!.details).to.equal("Current versions: {'GenericHardwareManager': '1.2.1'}, versions used by ironic: {'GenericHardwareManager': '1.2'}");
      const steps = (await agentCommand(w.callbackUrl, w.token, 'clean.get_clean_steps', { node: {}, ports: [] })).body as CommandResult;
      const v = (steps.command_result as { hardware_manager_version: Record<string, string> }).hardware_manager_version;
      const ok = (await agentCommand(w.callbackUrl, w.token, 'clean.execute_clean_step', cleanStep('erase_devices_metadata', { clean_version: v }), true)).body as CommandResult;
      expect(ok.command_status).to.equal('SUCCEEDED');
    });

    it('agentVersion and wrongToken change the heartbeats', async () => {
      await setAgentFaults(bmc, { agentVersion: '6.0.0', wrongToken: true });
      peer.heartbeatStatus = 401;
      const w = await booted();
      await until('a heartbeat', async () => heartbeatsOf(peer).length > 0);
      const hb = heartbeatsOf(peer)[0].body!;
      expect(hb.agent_version).to.equal('6.0.0');
      expect(hb.agent_token).to.not.equal(w.token);
      await until('the 401 counted', async () => (await agentWitness(bmc)).heartbeatStatuses['401'] >= 1);
    });

    it('noBoot: no agent comes up; bootSeconds delays it', async () => {
      await setAgentFaults(bmc, { noBoot: true });
      await bootIso(bmc, ISO);
      await sleep(400);
      expect((await agentWitness(bmc)).running).to.equal(false);
      expect(peer.of('/v1/lookup')).to.have.length(0);
      await setAgentFaults(bmc, { noBoot: false, bootSeconds: [0.6, 0.6] });
      const t0 = Date.now();
      await bootIso(bmc, ISO);
      await waitForAgent(bmc);
      expect(Date.now() - t0).to.be.at.least(550);
    });
  });

  describe('install_coreos (coreosInstaller: OpenShift\'s CoreOSInstallHardwareManager)', () => {
    let coreos: RedfishSim;
    before(async () => {
      coreos = await startAgentFleet(1, { apiUrl: peer.url, heartbeatMinGapMs: 300, lookupRetryMs: 100, coreosInstaller: true });
    });
    after(async () => coreos?.stop());

    it('lists the second manager\'s step; needs the config drive as JSON, its user_data the Ignition', async () => {
      const url = coreos.bmcs[0].url;
      await bootIso(url, ISO);
      const w = await waitForAgent(url);
      const d = ((await agentCommand(w.callbackUrl, w.token, 'deploy.get_deploy_steps', { node: {}, ports: [] })).body as CommandResult).command_result as {
        deploy_steps: Record<string, Array<Record<string, unknown>>>; hardware_manager_version: Record<string, string>;
      };
      expect(d.deploy_steps.CoreOSInstallHardwareManager).to.deep.equal([{ step: 'install_coreos', priority: 0, interface: 'deploy', reboot_requested: false, argsinfo: {} }]);
      expect(d.hardware_manager_version).to.deep.equal({ GenericHardwareManager: '1.2', CoreOSInstallHardwareManager: '1' });
      // The versions as the conductor sends them back, in another key order (a JSON column's).
      const version = { CoreOSInstallHardwareManager: '1', GenericHardwareManager: '1.2' };
      const run = async (instanceInfo: Record<string, unknown>) => ((await agentCommand(w.callbackUrl, w.token, 'deploy.execute_deploy_step', {
        step: { interface: 'deploy', step: 'install_coreos', args: {}, priority: 80 }, node: { instance_info: instanceInfo }, ports: [], deploy_version: version,
      }, true)).body as CommandResult);

      const rendered = await run({ configdrive: 'H4sIAAAAAAAA' });
      expect(rendered.command_status).to.equal('FAILED');
      expect(rendered.command_error).to.include({ type: 'DeploymentError', details: 'Cannot use a pre-rendered configdrive, please pass it as JSON data' });
      expect((await agentWitness(url)).disk).to.equal(null);

      const ignition = '{"ignition":{"version":"3.2.0"}}';
      const installed = await run({ image_source: 'http://images.example/rhcos.raw.gz', configdrive: { meta_data: { name: 'w0' }, user_data: ignition } });
      expect(installed.command_status, JSON.stringify(installed.command_error)).to.equal('SUCCEEDED');
      expect((await agentWitness(url)).disk).to.include({ imageUrl: 'http://images.example/rhcos.raw.gz', ignition });
    });
  });

  describe('CLI', () => {
    it('parses the agent options and lists them in --help', () => {
      const o = parseSimArgs(['--count', '2', '--agent-api-url', 'http://127.0.0.1:6385', '--agent-iso', 'deploy\\.iso$', '--agent-boot-seconds', '3-5', '--agent-write-mbps', '50', '--agent-heartbeat-min-gap-ms', '1000', '--agent-lookup-retry-ms', '500', '--agent-port', '7000']);
      expect(o.agent).to.deep.include({ apiUrl: 'http://127.0.0.1:6385', bootSeconds: [3, 5], writeMBps: 50, heartbeatMinGapMs: 1000, lookupRetryMs: 500, port: 7000, autoTls: true });
      expect(parseSimArgs(['--agent-api-url', 'http://x', '--agent-no-auto-tls']).agent).to.deep.include({ autoTls: false });
      expect(() => parseSimArgs(['--agent-no-auto-tls'])).to.throw('--agent-no-auto-tls needs --agent-api-url');
      expect(o.agent!.isoPattern!.test('http://x/DEPLOY.iso')).to.equal(true);
      expect(parseSimArgs(['--count', '1']).agent).to.equal(undefined);
      for (const flag of ['--agent-api-url', '--agent-iso', '--agent-boot-seconds', '--agent-write-mbps', '--agent-heartbeat-min-gap-ms', '--agent-lookup-retry-ms', '--agent-port', '--agent-no-auto-tls', '--agent-coreos-installer']) expect(SIM_REDFISH_USAGE).to.include(flag);
      expect(o.agent!.coreosInstaller).to.equal(false);
      expect(parseSimArgs(['--agent-api-url', 'http://x', '--agent-coreos-installer']).agent!.coreosInstaller).to.equal(true);
    });

    it('galvanic sim redfish --agent-api-url runs agents and prints their server', async () => {
      const sim2 = await spawnSim(['--count', '1', '--agent-api-url', peer.url, '--agent-boot-seconds', '0']);
      try {
        const info = sim2.info as { firstPort: number; agentUrl: string; agentCertificate: string };
        expect(info.agentUrl).to.match(/^https:\/\/127\.0\.0\.1:\d+$/);
        expect(info.agentCertificate).to.match(/^-----BEGIN CERTIFICATE-----/);
        const url = `http://127.0.0.1:${info.firstPort}`;
        await bootIso(url, ISO);
        const w = await waitForAgent(url);
        expect(w.callbackUrl.startsWith(info.agentUrl)).to.equal(true);
      } finally {
        await sim2.stop();
      }
      const help = spawnSync(process.execPath, [path.resolve('dist/cli/main.js'), 'sim', 'redfish', '--help'], { encoding: 'utf8' });
      expect(help.stdout).to.include('--agent-api-url').and.include('--agent-write-mbps');
    });

    it('refuses bad agent options', () => {
      expect(() => parseSimArgs(['--agent-boot-seconds', '1-2'])).to.throw('--agent-boot-seconds needs --agent-api-url');
      expect(() => parseSimArgs(['--agent-coreos-installer'])).to.throw('--agent-coreos-installer needs --agent-api-url');
      expect(() => parseSimArgs(['--agent-api-url', 'ftp://x'])).to.throw('--agent-api-url must be an http(s) URL');
      expect(() => parseSimArgs(['--agent-api-url', 'http://x', '--agent-write-mbps', '0'])).to.throw('--agent-write-mbps');
      expect(() => parseSimArgs(['--agent-api-url', 'http://x', '--agent-iso', '('])).to.throw('--agent-iso');
      expect(() => parseSimArgs(['--agent-api-url', 'http://x', '--agent-boot-seconds', '5-1'])).to.throw('below');
    });
  });
});
