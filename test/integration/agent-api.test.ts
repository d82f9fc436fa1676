/**
 * The agent-facing API (lookup, heartbeat) and the agent token, against a real database with
 * no conductor: what the API answers, what it records, and that malformed requests on lookup,
 * heartbeat, clean_steps and deploy_steps get Ironic's 4xx and change nothing.
 */
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { Knex } from 'knex';
import { pino } from 'pino';
import { nodePowerAction } from '../../conductor/node-power.js';
import { TaskManager } from '../../conductor/task-manager.js';
import type { PowerInterface } from '../../drivers/interfaces.js';
import { buildTestApp, faultOf, type TestApp } from '../helpers/app.js';

const LATEST = { 'x-openstack-ironic-api-version': 'latest' };
const v = (minor: number) => ({ 'x-openstack-ironic-api-version': `1.${minor}` });
const MAC_WAIT = '52:54:00:aa:00:01';
const MAC_AVAIL = '52:54:00:aa:00:02';
const MAC_KNOWN = '52:54:00:aa:00:03';
const MISSING_UUID = '1d2c3b4a-0000-4000-8000-00000000beef';

interface Case {
  name: string;
  method: 'GET' | 'POST' | 'PUT';
  url: string;
  body?: unknown;
  headers?: Record<string, string>;
  status: number;
  message?: string;
}

async function snapshot(knex: Knex): Promise<Record<string, unknown>> {
  const one = async (sql: string) => ((await knex.raw(sql)) as { rows: Array<Record<string, unknown>> }).rows[0];
  return {
    nodes: await one(`select count(*)::int as count, md5(coalesce(string_agg(n::text, '|' order by n.id), '')) as hash from nodes n`),
    intents: await one(`select count(*)::int as count, md5(coalesce(string_agg(i::text, '|' order by i.id), '')) as hash from intents i`),
    tokens: await one(`select count(*)::int as count, md5(coalesce(string_agg(t::text, '|' order by t.node_id), '')) as hash from agent_tokens t`),
  };
}

describe('agent API: lookup, heartbeat and the agent token', function () {
  let t: TestApp;
  let waitUuid: string;
  let token: string;

  const call = async (method: 'GET' | 'POST' | 'PUT', url: string, body?: unknown, headers: Record<string, string> = LATEST) => t.app.inject({
    method, url, headers, ...(body === undefined ? {} : { payload: body as object }),
  });

  before(async () => {
    t = await buildTestApp({}, { conductor: false });
    const create = async (url: string, payload: object): Promise<string> => {
      const res = await call('POST', url, payload);
      expect(res.statusCode, res.body).to.equal(201);
      return res.json<{ uuid: string }>().uuid;
    };
    const redfish = (name: string) => create('/v1/nodes', {
      name, driver: 'redfish', boot_interface: 'redfish-virtual-media', deploy_interface: 'direct',
      driver_info: { redfish_address: 'http://127.0.0.1:9', redfish_username: 'admin', redfish_password: 'pw', deploy_iso: 'http://127.0.0.1:9/ipa.iso' },
      instance_info: { image_source: 'http://127.0.0.1:9/img.raw', image_checksum: 'abc' },
    });
    waitUuid = await redfish('agent-wait');
    const availUuid = await redfish('agent-avail');
    const knownUuid = await redfish('agent-known');
    await redfish('agent-manageable');
    await create('/v1/ports', { address: MAC_WAIT, node_uuid: waitUuid });
    await create('/v1/ports', { address: MAC_AVAIL, node_uuid: availUuid });
    await create('/v1/ports', { address: MAC_KNOWN, node_uuid: knownUuid });
    const db = t.tdb.knex;
    await db('nodes').where({ name: 'agent-wait' }).update({ provision_state: 'wait call-back', target_provision_state: 'active', power_state: 'power on' });
    await db('nodes').where({ name: 'agent-known' }).update({
      provision_state: 'clean wait', target_provision_state: 'available', driver_internal_info: { agent_url: 'http://127.0.0.1:9/known' },
    });
    await db('nodes').where({ name: 'agent-avail' }).update({ provision_state: 'available', power_state: 'power off' });
    await db('nodes').where({ name: 'agent-manageable' }).update({ provision_state: 'manageable', power_state: 'power off' });
  });

  after(async () => {
    await t?.close();
  });

  it('finds a waiting node by MAC, mints its token once, and shows ****** afterwards', async () => {
    const old = await call('GET', `/v1/lookup?addresses=${MAC_WAIT}`, undefined, v(61));
    expect(old.statusCode, old.body).to.equal(200);
    expect(old.json<{ config: { agent_token: unknown } }>().config.agent_token).to.equal(null);
    const first = await call('GET', `/v1/lookup?addresses=${MAC_WAIT.toUpperCase()},not-a-mac`, undefined, v(62));
    expect(first.statusCode, first.body).to.equal(200);
    const body = first.json<{ node: Record<string, unknown>; config: Record<string, unknown> }>();
    expect(Object.keys(body.node).sort()).to.deep.equal(['driver_internal_info', 'instance_info', 'links', 'properties', 'uuid']);
    expect(body.node.uuid).to.equal(waitUuid);
    expect(body.config.agent_token_required).to.equal(true);
    expect(body.config.heartbeat_timeout).to.equal(300);
    token = body.config.agent_token as string;
    expect(token).to.be.a('string').with.length.at.least(32);
    const again = await call('GET', `/v1/lookup?node_uuid=${waitUuid}`);
    expect(again.json<{ config: { agent_token: unknown } }>().config.agent_token).to.equal('******');
    // Nowhere in the node's API views.
    for (const url of [`/v1/nodes/${waitUuid}`, '/v1/nodes/detail', `/v1/nodes/${waitUuid}/history`]) {
      const res = await call('GET', url);
      expect(res.statusCode, res.body).to.equal(200);
      expect(res.body).to.not.include(token);
    }
  });

  it('answers 404 alike for a node that does not wait and for no node at all', async () => {
    const avail = await call('GET', `/v1/lookup?addresses=${MAC_AVAIL}`);
    const none = await call('GET', '/v1/lookup?addresses=52:54:00:ff:ff:ff');
    expect(avail.statusCode).to.equal(404);
    expect(none.statusCode).to.equal(404);
    expect(faultOf(avail.body).faultstring).to.equal(faultOf(none.body).faultstring);
  });

  it('records a heartbeat with the token and queues one continue for the conductor', async () => {
    const hb = { callback_url: 'http://127.0.0.1:9/agent', agent_token: token, agent_version: '10.1.0' };
    const before = await t.tdb.knex('nodes').where({ uuid: waitUuid }).first('provision_updated_at');
    for (let i = 0; i < 3; i++) {
      const res = await call('POST', `/v1/heartbeat/${waitUuid}`, hb);
      expect(res.statusCode, res.body).to.equal(202);
    }
    const node = await t.tdb.knex('nodes').where({ uuid: waitUuid }).first();
    expect(node.driver_internal_info.agent_url).to.equal(hb.callback_url);
    expect(node.driver_internal_info.agent_version).to.equal('10.1.0');
    expect(node.driver_internal_info).to.have.property('agent_last_heartbeat');
    expect(new Date(node.provision_updated_at as string).getTime()).to.be.greaterThan(new Date((before?.provision_updated_at as string) ?? 0).getTime());
    const intents = await t.tdb.knex('intents').where({ node_id: node.id, kind: 'agent_continue' });
    expect(intents).to.have.length(1);
    expect(JSON.stringify(intents)).to.not.include(token);
  });

  it('records nothing from a heartbeat while a conductor holds the node, but wakes the step at work', async () => {
    const db = t.tdb.knex;
    const row = await db('nodes').where({ uuid: waitUuid }).first();
    const held = { ...row.driver_internal_info, agent_url: 'http://127.0.0.1:9/agent', agent_last_heartbeat: '2000-01-01T00:00:00.000Z' };
    await db('nodes').where({ id: row.id }).update({ provision_state: 'deploying', reservation: 'conductor-at-work', driver_internal_info: held });
    const [step] = await db('intents').insert({
      uuid: randomUUID(), node_id: row.id, seq: 1000, kind: 'provision_step', args: {}, state: 'running', attempts: 2, max_attempts: 1,
      not_before: new Date(Date.now() + 60_000),
    }).returning('id');
    try {
      const before = await db('nodes').where({ id: row.id }).first('version', 'driver_internal_info');
      const res = await call('POST', `/v1/heartbeat/${waitUuid}`, { callback_url: 'http://127.0.0.1:9/agent', agent_token: token, agent_version: '10.2.0' });
      expect(res.statusCode, res.body).to.equal(202);
      const after = await db('nodes').where({ id: row.id }).first('version', 'driver_internal_info');
      expect(after).to.deep.equal(before);
      const woken = await db('intents').where({ id: step.id }).first('not_before');
      expect(new Date(woken.not_before as string).getTime()).to.be.at.most(Date.now());
    } finally {
      await db('intents').where({ id: step.id }).delete();
      await db('nodes').where({ id: row.id }).update({
        provision_state: row.provision_state, reservation: null, driver_internal_info: row.driver_internal_info, version: row.version,
      });
    }
  });

  /** A redfish node with the direct deploy and a port of MAC `mac`, as an agent looks it up. */
  async function directNodeWithPort(name: string, mac: string): Promise<string> {
    const created = await call('POST', '/v1/nodes', {
      name, driver: 'redfish', boot_interface: 'redfish-virtual-media', deploy_interface: 'direct',
      driver_info: { redfish_address: 'http://127.0.0.1:9', redfish_username: 'admin', redfish_password: 'pw', deploy_iso: 'http://127.0.0.1:9/ipa.iso' },
    });
    expect(created.statusCode, created.body).to.equal(201);
    const uuid = created.json<{ uuid: string }>().uuid;
    expect((await call('POST', '/v1/ports', { address: mac, node_uuid: uuid })).statusCode).to.equal(201);
    return uuid;
  }

  it('forgets the agent before the conductor reboots its node: the old agent is refused, and the new one gets a token once the node is let go', async () => {
    const db = t.tdb.knex;
    const mac = '52:54:00:aa:00:0a';
    const uuid = await directNodeWithPort('agent-reboot', mac);
    const steps = [{ interface: 'deploy', step: 'flash', priority: 0, args: {}, reboot_requested: true }];
    await db('nodes').where({ uuid }).update({
      provision_state: 'clean wait', target_provision_state: 'manageable', power_state: 'power on',
      driver_internal_info: { clean_steps: steps, clean_step_index: 0, agent_cached_clean_steps: steps },
    });
    const lookup = async () => call('GET', `/v1/lookup?addresses=${mac}`);
    const heartbeat = (url: string, agentToken: string, ca: string) => call('POST', `/v1/heartbeat/${uuid}`, {
      callback_url: url, agent_token: agentToken, agent_version: '10.1.0', agent_verify_ca: ca,
    });
    const first = await lookup();
    expect(first.statusCode, first.body).to.equal(200);
    const oldToken = first.json<{ config: { agent_token: string } }>().config.agent_token;
    const OLD = 'https://192.0.2.10:9999';
    expect((await heartbeat(OLD, oldToken, 'old certificate')).statusCode).to.equal(202);

    const node = await db('nodes').where({ uuid }).first('id');
    const tasks = new TaskManager(db, 'conductor-rebooting', pino({ level: 'silent' }), 60);
    const task = await tasks.acquire(node.id as number, { mode: 'exclusive', purpose: 'reboot after a step' });
    const seen: Record<string, unknown> = {};
    const power: PowerInterface = {
      validate: () => undefined,
      getPowerState: async () => 'power on',
      getSupportedPowerStates: async () => ['rebooting'],
      setPowerState: async (_ctx, target) => {
        // What the BMC's reset meets: the agent forgotten, already written.
        seen.target = target;
        seen.info = (await db('nodes').where({ uuid }).first('driver_internal_info')).driver_internal_info;
        seen.token = await db('agent_tokens').where({ node_id: node.id }).first('node_id');
        seen.oldHeartbeat = (await heartbeat(OLD, oldToken, 'old certificate')).statusCode;
        seen.lookup = (await lookup()).statusCode;
      },
    };
    try {
      await nodePowerAction({ task, power, driver: { nodeUuid: uuid, driverInfo: {}, log: pino({ level: 'silent' }) } }, 'rebooting');
    } finally {
      await task.release();
    }
    expect(seen.target).to.equal('rebooting');
    expect(seen.info).to.deep.equal({ clean_steps: steps, clean_step_index: 0, agent_version: '10.1.0', agent_last_heartbeat: (seen.info as Record<string, unknown>).agent_last_heartbeat });
    expect(seen.token).to.equal(undefined);
    // The old agent's heartbeat is refused for its token; no token is minted while the node is held (Ironic's NodeLocked).
    expect(seen.oldHeartbeat).to.equal(400);
    expect(seen.lookup).to.equal(409);

    const late = await heartbeat(OLD, oldToken, 'old certificate');
    expect(late.statusCode).to.equal(400);
    expect(faultOf(late.body).faultstring).to.equal('Invalid or missing agent token received.');
    const fresh = await lookup();
    expect(fresh.statusCode, fresh.body).to.equal(200);
    const newToken = fresh.json<{ config: { agent_token: string } }>().config.agent_token;
    expect(newToken).to.have.length.at.least(32).and.not.equal(oldToken);
    expect((await heartbeat('https://192.0.2.11:9999', newToken, 'new certificate')).statusCode).to.equal(202);
    const info = (await db('nodes').where({ uuid }).first('driver_internal_info')).driver_internal_info as Record<string, unknown>;
    expect(info).to.include({ agent_url: 'https://192.0.2.11:9999', agent_verify_ca: 'new certificate' });
    await db('intents').where({ node_id: node.id }).delete();
    await db('nodes').where({ uuid }).update({ provision_state: 'manageable', target_provision_state: null });
  });

  it('waits for a node a conductor holds a moment, as Ironic takes its lock, before minting the token', async () => {
    const db = t.tdb.knex;
    const mac = '52:54:00:aa:00:0b';
    const uuid = await directNodeWithPort('agent-held', mac);
    await db('nodes').where({ uuid }).update({ provision_state: 'wait call-back', target_provision_state: 'active', power_state: 'power on' });
    const node = await db('nodes').where({ uuid }).first('id');
    const tasks = new TaskManager(db, 'conductor-booting', pino({ level: 'silent' }), 60);
    const task = await tasks.acquire(node.id as number, { mode: 'exclusive', purpose: 'the agent booted' });
    // The task that booted the agent lets the node go 300 ms after the agent asked.
    const looked = call('GET', `/v1/lookup?addresses=${mac}`);
    await new Promise((r) => setTimeout(r, 300));
    await task.release();
    const res = await looked;
    expect(res.statusCode, res.body).to.equal(200);
    expect(res.json<{ config: { agent_token: string } }>().config.agent_token).to.have.length.at.least(32);
    expect(await db('agent_tokens').where({ node_id: node.id }).first('node_id')).to.not.equal(undefined);
  });

  it('records a burst of heartbeats together, each as if alone: refusals change nothing, one continue per node', async () => {
    const db = t.tdb.knex;
    const nodes: Array<{ uuid: string; token: string }> = [];
    for (let i = 0; i < 12; i++) {
      const res = await call('POST', '/v1/nodes', { name: `burst-${i}`, driver: 'redfish', deploy_interface: 'direct', driver_info: { redfish_address: 'http://127.0.0.1:9' } });
      expect(res.statusCode, res.body).to.equal(201);
      const uuid = res.json<{ uuid: string }>().uuid;
      await db('nodes').where({ uuid }).update({ provision_state: 'wait call-back', target_provision_state: 'active' });
      const lookup = await call('GET', `/v1/lookup?node_uuid=${uuid}`);
      expect(lookup.statusCode, lookup.body).to.equal(200);
      nodes.push({ uuid, token: lookup.json<{ config: { agent_token: string } }>().config.agent_token });
    }
    const hb = (i: number, over: object = {}) => ({ callback_url: `http://127.0.0.1:9/agent-${i}`, agent_token: nodes[i].token, agent_version: '10.1.0', ...over });
    const [refusedNode] = nodes.splice(11, 1);
    const wrongToken = await db('nodes').where({ uuid: refusedNode.uuid }).first();
    const sent = [
      ...nodes.map((n, i) => call('POST', `/v1/heartbeat/${n.uuid}`, hb(i))),
      // The same node twice in one burst, and a node's second heartbeat from another URL.
      call('POST', `/v1/heartbeat/${nodes[0].uuid}`, hb(0)),
      call('POST', `/v1/heartbeat/${refusedNode.uuid}`, { callback_url: 'http://127.0.0.1:9/x', agent_token: nodes[0].token, agent_version: '10.1.0' }),
      call('POST', `/v1/heartbeat/${MISSING_UUID}`, hb(1)),
      call('POST', '/v1/heartbeat/burst-2', hb(2)),
    ];
    const answers = await Promise.all(sent);
    expect(answers.map((r) => r.statusCode), answers.map((r) => r.body).join(' ')).to.deep.equal([...nodes.map(() => 202), 202, 400, 404, 202]);
    expect(faultOf(answers[nodes.length + 1].body).faultstring).to.equal('Invalid or missing agent token received.');
    for (const [i, n] of nodes.entries()) {
      const row = await db('nodes').where({ uuid: n.uuid }).first();
      expect(row.driver_internal_info.agent_url, n.uuid).to.equal(`http://127.0.0.1:9/agent-${i}`);
      expect(await db('intents').where({ node_id: row.id, kind: 'agent_continue' }).count('* as n').first(), `continues of ${i}`).to.deep.equal({ n: 1 });
    }
    const after = await db('nodes').where({ uuid: refusedNode.uuid }).first();
    expect(after, 'the refused heartbeat\'s node').to.deep.equal(wrongToken);
    expect(await db('intents').where({ node_id: after.id }).count('* as n').first()).to.deep.equal({ n: 0 });
  });

  describe('bodies as ironic-python-agent sends them', () => {
    /** IPA's `requests` headers: its heartbeat and lookup name JSON; its 9.4 inspection post names nothing. */
    const IPA = { 'user-agent': 'python-requests/2.28.1', 'accept-encoding': 'gzip, deflate', accept: 'application/json', 'content-type': 'application/json' };
    const MAC_INSPECT = '52:54:00:aa:00:09';
    let inspectUuid: string;

    before(async () => {
      const res = await call('POST', '/v1/nodes', { name: 'agent-inspect-wait', driver: 'redfish', driver_info: { redfish_address: 'http://127.0.0.1:9' } });
      expect(res.statusCode, res.body).to.equal(201);
      inspectUuid = res.json<{ uuid: string }>().uuid;
      expect((await call('POST', '/v1/ports', { address: MAC_INSPECT, node_uuid: inspectUuid })).statusCode).to.equal(201);
      await t.tdb.knex('nodes').where({ uuid: inspectUuid }).update({ provision_state: 'inspect wait', target_provision_state: 'manageable' });
    });

    const inventory = (vendor = 'Galvanic') => ({
      inventory: { interfaces: [{ name: 'eth0', mac_address: MAC_INSPECT }], system_vendor: { manufacturer: vendor }, bmc_address: '' },
      configuration: { collectors: ['default', 'logs'] }, error: null,
    });

    it('takes the inspection post of IPA 9.4 (no Content-Type, no version header) and answers as to ironic-inspector', async () => {
      const res = await t.app.inject({
        method: 'POST', url: '/v1/continue_inspection', payload: Buffer.from(JSON.stringify(inventory())),
        headers: { 'user-agent': 'python-requests/2.28.1', 'accept-encoding': 'gzip, deflate', accept: '*/*' },
      });
      expect(res.statusCode, res.body).to.equal(202);
      expect(res.json()).to.deep.equal({ uuid: inspectUuid });
      const node = await t.tdb.knex('nodes').where({ uuid: inspectUuid }).first('provision_state');
      expect(node.provision_state).to.equal('inspecting');
    });

    it('decodes a body by the charset its Content-Type names', async () => {
      await t.tdb.knex('nodes').where({ uuid: inspectUuid }).update({ provision_state: 'inspect wait' });
      const res = await t.app.inject({
        method: 'POST', url: '/v1/continue_inspection', payload: Buffer.from(JSON.stringify(inventory('Café')), 'latin1'),
        headers: { 'content-type': 'application/json; charset=ISO-8859-1', 'x-openstack-ironic-api-version': '1.84' },
      });
      expect(res.statusCode, res.body).to.equal(202);
      const node = await t.tdb.knex('nodes').where({ uuid: inspectUuid }).first('id');
      const intent = await t.tdb.knex('intents').where({ node_id: node.id, kind: 'provision' }).orderBy('seq', 'desc').first('args');
      expect(JSON.stringify(intent.args)).to.include('"manufacturer":"Café"');
    });

    it('refuses an inspection post that is not JSON with Ironic\'s 400, whatever its Content-Type', async () => {
      await t.tdb.knex('nodes').where({ uuid: inspectUuid }).update({ provision_state: 'inspect wait' });
      const before = await snapshot(t.tdb.knex);
      for (const headers of [{}, { 'content-type': 'text/plain' }, { 'content-type': 'application/json; charset=no-such-charset' }]) {
        const res = await t.app.inject({ method: 'POST', url: '/v1/continue_inspection', payload: '{"inventory": ', headers });
        expect(res.statusCode, `${JSON.stringify(headers)}: ${res.body}`).to.equal(400);
        expect(faultOf(res.body).faultcode).to.equal('Client');
      }
      expect(await snapshot(t.tdb.knex)).to.deep.equal(before);
    });

    it('takes a lookup and a heartbeat with IPA\'s headers, with a charset, and without a Content-Type', async () => {
      const res = await call('POST', '/v1/nodes', { name: 'agent-ipa-headers', driver: 'redfish', deploy_interface: 'direct', driver_info: { redfish_address: 'http://127.0.0.1:9' } });
      const uuid = res.json<{ uuid: string }>().uuid;
      await t.tdb.knex('nodes').where({ uuid }).update({ provision_state: 'wait call-back', target_provision_state: 'active' });
      const lookup = await t.app.inject({ method: 'GET', url: `/v1/lookup?node_uuid=${uuid}`, headers: { ...IPA, 'x-openstack-ironic-api-version': '1.62' } });
      expect(lookup.statusCode, lookup.body).to.equal(200);
      const agentToken = lookup.json<{ config: { agent_token: string } }>().config.agent_token;
      const hb = JSON.stringify({ callback_url: 'https://127.0.0.1:9/agent', agent_token: agentToken, agent_version: '9.4.3' });
      const v68 = { 'x-openstack-ironic-api-version': '1.68' };
      for (const headers of [{ ...IPA, ...v68 }, { ...IPA, ...v68, 'content-type': 'application/json; charset=UTF-8' }, v68]) {
        const r = await t.app.inject({ method: 'POST', url: `/v1/heartbeat/${uuid}`, payload: hb, headers });
        expect(r.statusCode, `${JSON.stringify(headers)}: ${r.body}`).to.equal(202);
      }
    });

    it('other endpoints still take JSON only', async () => {
      const res = await t.app.inject({ method: 'POST', url: '/v1/nodes', payload: JSON.stringify({ driver: 'fake-hardware' }), headers: { ...LATEST, 'content-type': 'text/plain' } });
      expect(res.statusCode, res.body).to.equal(415);
      expect(faultOf(res.body).faultcode).to.equal('Client');
    });
  });

  describe('automatic TLS (1.68 agent_verify_ca)', () => {
    const PEM_A = '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n';
    const PEM_B = '-----BEGIN CERTIFICATE-----\nBBBB\n-----END CERTIFICATE-----\n';

    async function waitingNode(name: string, app: TestApp): Promise<{ uuid: string; token: string }> {
      const res = await app.app.inject({ method: 'POST', url: '/v1/nodes', headers: LATEST, payload: { name, driver: 'redfish', deploy_interface: 'direct', driver_info: { redfish_address: 'http://127.0.0.1:9' } } });
      const uuid = res.json<{ uuid: string }>().uuid;
      await app.tdb.knex('nodes').where({ uuid }).update({ provision_state: 'clean wait', target_provision_state: 'available' });
      const lookup = await app.app.inject({ method: 'GET', url: `/v1/lookup?node_uuid=${uuid}`, headers: LATEST });
      return { uuid, token: lookup.json<{ config: { agent_token: string } }>().config.agent_token };
    }

    it('records the certificate the agent sent, and refuses another one for that agent with Ironic\'s 400', async () => {
      const n = await waitingNode('agent-tls', t);
      const hb = (ca: string) => call('POST', `/v1/heartbeat/${n.uuid}`, { callback_url: 'https://127.0.0.1:9/agent-tls', agent_token: n.token, agent_version: '9.4.3', agent_verify_ca: ca });
      expect((await hb(PEM_A)).statusCode).to.equal(202);
      // The same certificate again, with other white space at its end, is the same.
      expect((await hb(PEM_A.trimEnd())).statusCode).to.equal(202);
      const row = await t.tdb.knex('nodes').where({ uuid: n.uuid }).first('driver_internal_info', 'version');
      expect(row.driver_internal_info.agent_verify_ca).to.equal(PEM_A.trimEnd());
      const other = await hb(PEM_B);
      expect(other.statusCode, other.body).to.equal(400);
      expect(faultOf(other.body).faultstring).to.equal('Detected change in ramdisk provided "agent_verify_ca"');
      expect(await t.tdb.knex('nodes').where({ uuid: n.uuid }).first('driver_internal_info', 'version')).to.deep.equal(row);
    });

    describe('[agent] require_tls', () => {
      let strict: TestApp;
      before(async () => {
        strict = await buildTestApp({ GALVANIC_AGENT__REQUIRE_TLS: 'true' }, { conductor: false });
      });
      after(async () => {
        await strict?.close();
      });

      it('refuses a heartbeat whose callback_url is not https', async () => {
        const n = await waitingNode('agent-require-tls', strict);
        const hb = (url: string) => strict.app.inject({ method: 'POST', url: `/v1/heartbeat/${n.uuid}`, headers: LATEST, payload: { callback_url: url, agent_token: n.token, agent_version: '9.4.3' } });
        const plain = await hb('http://127.0.0.1:9/agent');
        expect(plain.statusCode, plain.body).to.equal(400);
        expect(faultOf(plain.body).faultstring).to.equal('TLS is required by configuration');
        expect((await strict.tdb.knex('nodes').where({ uuid: n.uuid }).first('driver_internal_info')).driver_internal_info).to.not.have.property('agent_url');
        expect((await hb('https://127.0.0.1:9/agent')).statusCode).to.equal(202);
      });
    });
  });

  it(`refuses malformed lookups, heartbeats, clean_steps and deploy_steps with a 4xx and no change`, async () => {
    const hb = (extra: Record<string, unknown>) => ({ callback_url: 'http://127.0.0.1:9/agent', agent_token: token, agent_version: '10.1.0', ...extra });
    const without = (k: string) => {
      const b = hb({});
      delete (b as Record<string, unknown>)[k];
      return b;
    };
    const HB = `/v1/heartbeat/${waitUuid}`;
    const PROV = (node: string) => `/v1/nodes/${node}/states/provision`;
    const cases: Case[] = [
      { name: 'lookup with nothing', method: 'GET', url: '/v1/lookup', status: 400, message: 'addresses' },
      { name: 'lookup with only invalid MACs', method: 'GET', url: '/v1/lookup?addresses=not-a-mac', status: 400, message: 'addresses' },
      { name: 'lookup with an empty address list', method: 'GET', url: '/v1/lookup?addresses=', status: 400 },
      { name: 'lookup with a five-octet MAC', method: 'GET', url: '/v1/lookup?addresses=52:54:00:aa:00', status: 400 },
      { name: 'lookup with a bad node_uuid', method: 'GET', url: '/v1/lookup?node_uuid=not-a-uuid', status: 400, message: 'node_uuid' },
      { name: 'lookup with an unknown parameter', method: 'GET', url: `/v1/lookup?addresses=${MAC_WAIT}&colour=blue`, status: 400, message: 'colour' },
      { name: 'lookup of an unknown MAC', method: 'GET', url: '/v1/lookup?addresses=52:54:00:ff:ff:fe', status: 404 },
      { name: 'lookup of a missing node', method: 'GET', url: `/v1/lookup?node_uuid=${MISSING_UUID}`, status: 404 },
      { name: 'lookup of an available node', method: 'GET', url: `/v1/lookup?addresses=${MAC_AVAIL}`, status: 404 },
      { name: 'lookup below 1.22', method: 'GET', url: `/v1/lookup?addresses=${MAC_WAIT}`, headers: v(21), status: 404 },
      { name: 'heartbeat without a body', method: 'POST', url: HB, status: 400 },
      { name: 'heartbeat with a list', method: 'POST', url: HB, body: [hb({})], status: 400 },
      { name: 'heartbeat with invalid JSON', method: 'POST', url: HB, body: '{"callback_url": ', headers: { ...LATEST, 'content-type': 'application/json' }, status: 400 },
      { name: 'heartbeat without callback_url', method: 'POST', url: HB, body: without('callback_url'), status: 400, message: 'callback_url' },
      { name: 'heartbeat with a numeric callback_url', method: 'POST', url: HB, body: hb({ callback_url: 5 }), status: 400, message: 'callback_url' },
      { name: 'heartbeat with an ftp callback_url', method: 'POST', url: HB, body: hb({ callback_url: 'ftp://127.0.0.1/agent' }), status: 400, message: 'callback_url' },
      { name: 'heartbeat with a callback_url that is no URL', method: 'POST', url: HB, body: hb({ callback_url: 'not a url' }), status: 400, message: 'callback_url' },
      { name: 'heartbeat with a changed callback_url', method: 'POST', url: HB, body: hb({ callback_url: 'http://127.0.0.1:9/other' }), status: 400, message: 'callback_url' },
      { name: 'heartbeat without a token', method: 'POST', url: HB, body: without('agent_token'), status: 400, message: 'token' },
      { name: 'heartbeat with a wrong token', method: 'POST', url: HB, body: hb({ agent_token: 'x'.repeat(43) }), status: 400, message: 'Invalid or missing agent token' },
      { name: 'heartbeat with a numeric token', method: 'POST', url: HB, body: hb({ agent_token: 12345 }), status: 400, message: 'agent_token' },
      { name: 'heartbeat with the token of another node', method: 'POST', url: '/v1/heartbeat/agent-known', body: hb({ callback_url: 'http://127.0.0.1:9/known' }), status: 400, message: 'token' },
      { name: 'heartbeat without agent_version', method: 'POST', url: HB, body: without('agent_version'), status: 400, message: 'version' },
      { name: 'agent_version below 1.36', method: 'POST', url: HB, body: hb({}), headers: v(35), status: 400, message: 'agent_version' },
      { name: 'agent_verify_ca below 1.68', method: 'POST', url: HB, body: hb({ agent_verify_ca: 'PEM' }), headers: v(67), status: 400, message: 'agent_verify_ca' },
      { name: 'agent_status below 1.72', method: 'POST', url: HB, body: hb({ agent_status: 'start' }), headers: v(71), status: 400, message: 'agent_status' },
      { name: 'an unknown agent_status', method: 'POST', url: HB, body: hb({ agent_status: 'bogus' }), status: 400, message: 'status' },
      { name: 'heartbeat with an unknown field', method: 'POST', url: HB, body: hb({ colour: 'blue' }), status: 400, message: 'colour' },
      { name: 'heartbeat for a missing node', method: 'POST', url: `/v1/heartbeat/${MISSING_UUID}`, body: hb({}), status: 404 },
      { name: 'heartbeat below 1.22', method: 'POST', url: HB, body: hb({}), headers: v(21), status: 404 },
      { name: 'clean without clean_steps', method: 'PUT', url: PROV('agent-manageable'), body: { target: 'clean' }, status: 400, message: 'clean_steps' },
      { name: 'clean_steps that is not a list', method: 'PUT', url: PROV('agent-manageable'), body: { target: 'clean', clean_steps: { step: 'x' } }, status: 400, message: 'clean_steps' },
      { name: 'a clean step without an interface', method: 'PUT', url: PROV('agent-manageable'), body: { target: 'clean', clean_steps: [{ step: 'erase_devices' }] }, status: 400, message: 'interface' },
      { name: 'a clean step of an unknown interface', method: 'PUT', url: PROV('agent-manageable'), body: { target: 'clean', clean_steps: [{ interface: 'warp', step: 'erase_devices' }] }, status: 400, message: 'interface' },
      { name: 'a clean step with an empty name', method: 'PUT', url: PROV('agent-manageable'), body: { target: 'clean', clean_steps: [{ interface: 'deploy', step: '' }] }, status: 400, message: 'step' },
      { name: 'clean step args that are a list', method: 'PUT', url: PROV('agent-manageable'), body: { target: 'clean', clean_steps: [{ interface: 'deploy', step: 'erase_devices', args: [] }] }, status: 400, message: 'args' },
      { name: 'a clean step with a priority', method: 'PUT', url: PROV('agent-manageable'), body: { target: 'clean', clean_steps: [{ interface: 'deploy', step: 'erase_devices', priority: 5 }] }, status: 400, message: 'priority' },
      { name: 'clean_steps below 1.15', method: 'PUT', url: PROV('agent-manageable'), body: { target: 'clean', clean_steps: [] }, headers: v(14), status: 406 },
      { name: 'disable_ramdisk below 1.70', method: 'PUT', url: PROV('agent-manageable'), body: { target: 'clean', clean_steps: [], disable_ramdisk: true }, headers: v(69), status: 406 },
      { name: 'disable_ramdisk that is not a boolean', method: 'PUT', url: PROV('agent-manageable'), body: { target: 'clean', clean_steps: [], disable_ramdisk: 'yes' }, status: 400, message: 'disable_ramdisk' },
      { name: 'disable_ramdisk with provide', method: 'PUT', url: PROV('agent-manageable'), body: { target: 'provide', disable_ramdisk: true }, status: 400, message: 'disable_ramdisk' },
      { name: 'clean_steps with provide', method: 'PUT', url: PROV('agent-manageable'), body: { target: 'provide', clean_steps: [] }, status: 400, message: 'clean_steps' },
      { name: 'manual clean of an available node', method: 'PUT', url: PROV('agent-avail'), body: { target: 'clean', clean_steps: [{ interface: 'deploy', step: 'erase_devices' }] }, status: 400, message: 'available' },
      { name: 'a deploy step of another interface', method: 'PUT', url: PROV('agent-avail'), body: { target: 'active', deploy_steps: [{ interface: 'bios', step: 'apply_configuration', args: {}, priority: 90 }] }, status: 400, message: 'apply_configuration' },
      { name: 'a deploy step with a negative priority', method: 'PUT', url: PROV('agent-avail'), body: { target: 'active', deploy_steps: [{ interface: 'deploy', step: 'write_image', priority: -1 }] }, status: 400, message: 'priority' },
      { name: 'deploy_steps that is not a list', method: 'PUT', url: PROV('agent-avail'), body: { target: 'active', deploy_steps: 'write_image' }, status: 400, message: 'deploy_steps' },
      { name: 'a deploy step with an unknown key', method: 'PUT', url: PROV('agent-avail'), body: { target: 'active', deploy_steps: [{ interface: 'deploy', step: 'write_image', colour: 'blue' }] }, status: 400, message: 'colour' },
      { name: 'deploy_steps below 1.69', method: 'PUT', url: PROV('agent-avail'), body: { target: 'active', deploy_steps: [] }, headers: v(68), status: 406 },
      { name: 'deploy_steps with clean', method: 'PUT', url: PROV('agent-manageable'), body: { target: 'clean', clean_steps: [], deploy_steps: [] }, status: 400, message: 'deploy_steps' },
      { name: 'abort in wait call-back (1.110 in Ironic)', method: 'PUT', url: PROV('agent-wait'), body: { target: 'abort' }, status: 400, message: 'wait call-back' },
    ];
    expect(cases.length).to.be.at.least(30);
    const before = await snapshot(t.tdb.knex);
    const problems: string[] = [];
    for (const c of cases) {
      const res = await t.app.inject({
        method: c.method, url: c.url, headers: c.headers ?? LATEST,
        ...(c.body === undefined ? {} : { payload: c.body as object }),
      });
      const where = `${c.name} (${c.method} ${c.url})`;
      if (res.statusCode !== c.status) problems.push(`${where}: status ${res.statusCode}, expected ${c.status}: ${res.body.slice(0, 300)}`);
      try {
        const fault = faultOf(res.body);
        if (fault.faultcode !== 'Client') problems.push(`${where}: faultcode ${fault.faultcode}`);
        if (c.message !== undefined && !fault.faultstring.includes(c.message)) problems.push(`${where}: ${JSON.stringify(fault.faultstring)} lacks ${JSON.stringify(c.message)}`);
      } catch (err) {
        problems.push(`${where}: not Ironic's error body (${(err as Error).message}): ${res.body.slice(0, 200)}`);
      }
      const after = await snapshot(t.tdb.knex);
      if (JSON.stringify(after) !== JSON.stringify(before)) {
        problems.push(`${where}: the database changed`);
        break;
      }
    }
    expect(problems, problems.join('\n')).to.deep.equal([]);
  });
});
