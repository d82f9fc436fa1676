/**
 * Everything around the node and port resources: microversion negotiation, the root and /v1
 * documents, drivers, conductors, node history and HTTP basic authentication.
 */
import { expect } from 'chai';
import bcrypt from 'bcryptjs';
import type { LightMyRequestResponse } from 'fastify';
import type { Knex } from 'knex';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { recordHistory } from '../../db/node-history.js';
import { buildTestApp, expectFault, type TestApp } from '../helpers/app.js';
import { captureLog } from '../helpers/log-capture.js';
import { MAX_VERSION, MAX_VERSION_STRING } from '../../api/versioning.js';

type Obj = { [key: string]: unknown };

const MIN = 'x-openstack-ironic-api-minimum-version';
const MAX = 'x-openstack-ironic-api-maximum-version';
const CUR = 'x-openstack-ironic-api-version';
const RANGE = `The supported version range is: [1.1, ${MAX_VERSION_STRING}]`;
const TOO_NEW = `1.${MAX_VERSION.minor + 1}`;

type Method = 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE';

function call(t: TestApp, method: Method, url: string, opts: { body?: unknown; headers?: Record<string, string> } = {}): Promise<LightMyRequestResponse> {
  return t.app.inject({ method, url, headers: opts.headers ?? {}, ...(opts.body === undefined ? {} : { payload: opts.body as object }) });
}

const at = (version: string): Record<string, string> => ({ [CUR]: version });


/** The three version headers Ironic puts on every response, errors included. */
function expectVersionHeaders(res: LightMyRequestResponse, version: string): void {
  expect(res.headers[MIN], `${MIN} on ${res.statusCode}`).to.equal('1.1');
  expect(res.headers[MAX], `${MAX} on ${res.statusCode}`).to.equal(MAX_VERSION_STRING);
  expect(res.headers[CUR], `${CUR} on ${res.statusCode}`).to.equal(version);
}

describe('API discovery, drivers, conductors and history', function () {
  let t: TestApp;
  let nodeUuid: string;

  /** Conductor rows (built with the suite's knex) for the enclosing describe: inserted before it, all deleted after. */
  function conductorRows(rows: (knex: Knex) => Array<Record<string, unknown>>): void {
    before(async () => {
      await t.tdb.knex('conductors').insert(rows(t.tdb.knex));
    });
    after(async () => {
      await t.tdb.knex('conductors').delete();
    });
  }

  before(async () => {
    t = await buildTestApp({}, { conductor: false });
    const res = await call(t, 'POST', '/v1/nodes', { body: { name: 'misc', driver: 'fake-hardware', owner: 'o', description: 'd', lessee: 'l' }, headers: at('latest') });
    expect(res.statusCode, res.body).to.equal(201);
    nodeUuid = res.json<{ uuid: string }>().uuid;
  });

  after(async () => {
    await t?.close();
  });

  describe('microversions', () => {
    it('serves 1.1 without a version header and hides fields newer than 1.1', async () => {
      const res = await call(t, 'GET', `/v1/nodes/${nodeUuid}`);
      expect(res.statusCode).to.equal(200);
      expectVersionHeaders(res, '1.1');
      const node = res.json<Obj>();
      expect(node).to.include.keys('uuid', 'driver', 'driver_info', 'properties', 'provision_state', 'maintenance', 'links');
      for (const newer of ['name', 'driver_internal_info', 'resource_class', 'owner', 'lessee', 'description', 'conductor_group', 'power_interface']) {
        expect(node, newer).to.not.have.property(newer);
      }
    });

    it('serves the newest version for "latest"', async () => {
      const res = await call(t, 'GET', `/v1/nodes/${nodeUuid}`, { headers: at('latest') });
      expectVersionHeaders(res, MAX_VERSION_STRING);
      expect(res.json()).to.include({ name: 'misc', owner: 'o', description: 'd', lessee: 'l' });
    });

    it('accepts OpenStack-API-Version: baremetal 1.N, alone or among other services', async () => {
      const res = await call(t, 'GET', `/v1/nodes/${nodeUuid}`, { headers: { 'openstack-api-version': 'baremetal 1.50' } });
      expect(res.statusCode).to.equal(200);
      expectVersionHeaders(res, '1.50');
      const node = res.json<Obj>();
      expect(node).to.include({ owner: 'o' });
      expect(node).to.not.have.property('description');
      const mixed = await call(t, 'GET', '/v1', { headers: { 'openstack-api-version': 'compute 2.1, baremetal 1.31' } });
      expectVersionHeaders(mixed, '1.31');
    });

    it('answers 406 with the supported range for versions outside it, with the version headers', async () => {
      const cases: Array<Record<string, string>> = [
        at(TOO_NEW), at('2.0'), at('1.0'), { 'openstack-api-version': `baremetal ${TOO_NEW}` }, { 'openstack-api-version': 'baremetal 2.0' },
      ];
      for (const headers of cases) {
        const res = await call(t, 'GET', '/v1/nodes', { headers });
        expectFault(res, 406, RANGE);
        expect(res.headers[MIN]).to.equal('1.1');
        expect(res.headers[MAX]).to.equal(MAX_VERSION_STRING);
        expect(res.headers[CUR]).to.be.a('string');
      }
    });

    it('puts the version headers on errors too: 404, 400 and 405', async () => {
      const missing = await call(t, 'GET', '/v1/nodes/no-such-node', { headers: at('1.40') });
      expectFault(missing, 404);
      expectVersionHeaders(missing, '1.40');
      const noRoute = await call(t, 'GET', '/v1/no-such-collection', { headers: at('1.40') });
      expectFault(noRoute, 404);
      expectVersionHeaders(noRoute, '1.40');
      const bad = await call(t, 'GET', '/v1/nodes?limit=0', { headers: at('1.40') });
      expectFault(bad, 400);
      expectVersionHeaders(bad, '1.40');
      const badBody = await call(t, 'POST', '/v1/nodes', { body: '{"driver":', headers: { ...at('1.40'), 'content-type': 'application/json' } });
      expectFault(badBody, 400);
      expectVersionHeaders(badBody, '1.40');
      const notAllowed = await call(t, 'POST', '/v1', { body: {}, headers: at('1.40') });
      expectFault(notAllowed, 405);
      expectVersionHeaders(notAllowed, '1.40');
    });
  });

  describe('root documents', () => {
    it('GET / lists v1 with min_version and version', async () => {
      const res = await call(t, 'GET', '/');
      expect(res.statusCode).to.equal(200);
      expectVersionHeaders(res, '1.1');
      const body = res.json<{ name: string; description: string; default_version: Obj; versions: Obj[] }>();
      expect(body.name).to.equal('OpenStack Ironic API');
      expect(body.description).to.be.a('string');
      expect(body.default_version).to.deep.include({ id: 'v1', status: 'CURRENT', min_version: '1.1', version: MAX_VERSION_STRING });
      expect(body.default_version.links).to.deep.equal([{ href: 'http://localhost:80/v1/', rel: 'self' }]);
      expect(body.versions).to.deep.equal([body.default_version]);
    });

    it('GET /v1 has the version object, media types and the collections the version allows', async () => {
      const latest = await call(t, 'GET', '/v1', { headers: at('latest') });
      expect(latest.statusCode).to.equal(200);
      const body = latest.json<Obj & { version: Obj; links: Array<{ rel: string }> }>();
      expect(body.id).to.equal('v1');
      expect(body.version).to.deep.include({ id: 'v1', min_version: '1.1', version: MAX_VERSION_STRING, status: 'CURRENT' });
      expect(body.media_types).to.deep.equal({ base: 'application/json', type: 'application/vnd.openstack.ironic.v1+json' });
      expect(body.links.map((l) => l.rel)).to.deep.equal(['self', 'describedby']);
      expect(body).to.include.keys('chassis', 'nodes', 'ports', 'drivers', 'conductors');
      const old = (await call(t, 'GET', '/v1', { headers: at('1.48') })).json<Obj>();
      expect(old).to.include.keys('nodes', 'version');
      expect(old).to.not.have.property('conductors');
      expectFault(await call(t, 'DELETE', '/v1'), 405);
    });
  });

  describe('/metrics', () => {
    it('counts requests by route template (not URL), method and status, and shows the intent queue', async () => {
      const scrape = async () => {
        const res = await call(t, 'GET', '/metrics');
        expect(res.statusCode).to.equal(200);
        expect(res.headers['content-type']).to.match(/^text\/plain/);
        return res.body;
      };
      // The app is shared with the other tests of this file: compare counts before and after.
      const value = (body: string, series: string) => {
        const line = body.split('\n').find((l) => l.startsWith(`${series} `));
        return line === undefined ? 0 : Number(line.slice(series.length + 1));
      };
      const get200 = 'galvanic_api_requests_total{route="/v1/nodes/:node",method="GET",status="200"}';
      const get404 = 'galvanic_api_requests_total{route="/v1/nodes/:node",method="GET",status="404"}';
      const post201 = 'galvanic_api_requests_total{route="/v1/nodes",method="POST",status="201"}';
      const timed = 'galvanic_api_request_duration_seconds_count{route="/v1/nodes/:node",method="GET"}';
      const before = await scrape();
      const node = (await call(t, 'POST', '/v1/nodes', { body: { driver: 'fake-hardware' }, headers: at('latest') })).json<{ uuid: string }>();
      await call(t, 'GET', `/v1/nodes/${node.uuid}`, { headers: at('latest') });
      await call(t, 'GET', '/v1/nodes/00000000-0000-4000-8000-000000000000', { headers: at('latest') });
      const after = await scrape();
      expect(value(after, get200) - value(before, get200)).to.equal(1);
      expect(value(after, get404) - value(before, get404)).to.equal(1);
      expect(value(after, post201) - value(before, post201)).to.equal(1);
      expect(value(after, timed) - value(before, timed)).to.equal(2);
      expect(after).to.not.include(node.uuid);
      expect(after).to.match(/galvanic_intents_open\{state="queued"\} \d+/);
      expect(after).to.include('nodejs_eventloop_lag_seconds');
    });
  });

  describe('drivers', () => {
    conductorRows((knex) => [
      { hostname: 'live-1', conductor_group: '', drivers: JSON.stringify(['fake-hardware']), online: true, heartbeat_at: knex.fn.now() },
      { hostname: 'stale-1', conductor_group: '', drivers: JSON.stringify(['fake-hardware']), online: true, heartbeat_at: knex.raw("now() - interval '1 hour'") },
    ]);

    it('lists the enabled hardware types with the hosts of live conductors', async () => {
      const res = await call(t, 'GET', '/v1/drivers', { headers: at('latest') });
      expect(res.statusCode).to.equal(200);
      const drivers = res.json<{ drivers: Array<Obj & { links: unknown[]; properties: unknown[] }> }>().drivers;
      // Other hardware types may be enabled by default; only fake-hardware has a live host here.
      const fake = drivers.find((d) => d.name === 'fake-hardware');
      expect(fake, JSON.stringify(drivers)).to.not.equal(undefined);
      expect(fake).to.include({ type: 'dynamic' });
      expect(fake!.hosts).to.deep.equal(['live-1']);
      expect(fake!.links).to.have.length(2);
      expect(fake!.properties).to.have.length(2);
      const old = (await call(t, 'GET', '/v1/drivers', { headers: at('1.29') })).json<{ drivers: Obj[] }>();
      expect(old.drivers.length).to.equal(drivers.length);
      for (const d of old.drivers) expect(d).to.not.have.property('type');
      expect((await call(t, 'GET', '/v1/drivers?type=classic', { headers: at('latest') })).json()).to.deep.equal({ drivers: [] });
    });

    it('shows one driver with its default and enabled interfaces, and its properties', async () => {
      const res = await call(t, 'GET', '/v1/drivers/fake-hardware', { headers: at('latest') });
      expect(res.statusCode).to.equal(200);
      expect(res.json()).to.deep.include({
        name: 'fake-hardware', hosts: ['live-1'], type: 'dynamic',
        default_power_interface: 'fake', enabled_power_interfaces: ['fake'],
        default_management_interface: 'fake', enabled_management_interfaces: ['fake'],
      });
      const props = await call(t, 'GET', '/v1/drivers/fake-hardware/properties', { headers: at('latest') });
      expect(props.statusCode).to.equal(200);
      expect(props.json()).to.include.keys('fake_delay_ms', 'fake_fail', 'fake_power_state');
    });

    it('answers 404 for an unknown driver', async () => {
      expectFault(await call(t, 'GET', '/v1/drivers/ipmi-nope'), 404, 'ipmi-nope');
      expectFault(await call(t, 'GET', '/v1/drivers/ipmi-nope/properties'), 404, 'ipmi-nope');
    });
  });

  describe('conductors', () => {
    conductorRows((knex) => [
      { hostname: 'c-live', conductor_group: 'rack1', drivers: JSON.stringify(['fake-hardware']), online: true, heartbeat_at: knex.fn.now() },
      { hostname: 'c-stale', conductor_group: '', drivers: JSON.stringify(['fake-hardware']), online: true, heartbeat_at: knex.raw("now() - interval '10 minutes'") },
      { hostname: 'c-offline', conductor_group: '', drivers: JSON.stringify([]), online: false, heartbeat_at: knex.fn.now() },
    ]);

    it('is hidden below 1.49', async () => {
      expectFault(await call(t, 'GET', '/v1/conductors', { headers: at('1.48') }), 404);
      expectFault(await call(t, 'GET', '/v1/conductors/c-live', { headers: at('1.48') }), 404);
    });

    it('lists conductors with alive computed from the heartbeat and the online flag', async () => {
      const res = await call(t, 'GET', '/v1/conductors', { headers: at('1.49') });
      expect(res.statusCode).to.equal(200);
      const list = res.json<{ conductors: Array<Obj & { links: unknown[] }> }>().conductors;
      expect(list.map((c) => [c.hostname, c.conductor_group, c.alive])).to.deep.equal([
        ['c-live', 'rack1', true], ['c-stale', '', false], ['c-offline', '', false],
      ]);
      expect(Object.keys(list[0]).sort()).to.deep.equal(['alive', 'conductor_group', 'hostname', 'links']);
      const detail = (await call(t, 'GET', '/v1/conductors?detail=true', { headers: at('latest') })).json<{ conductors: Obj[] }>();
      expect(detail.conductors[0]).to.include.keys('drivers', 'created_at', 'updated_at');
      const limited = (await call(t, 'GET', '/v1/conductors?limit=1', { headers: at('latest') })).json<{ conductors: Obj[] }>();
      expect(limited.conductors).to.have.length(1);
    });

    it('shows one conductor with its drivers and timestamps, and 404 for an unknown one', async () => {
      const res = await call(t, 'GET', '/v1/conductors/c-live', { headers: at('latest') });
      expect(res.statusCode).to.equal(200);
      const c = res.json<Obj>();
      expect(c).to.include({ hostname: 'c-live', conductor_group: 'rack1', alive: true });
      expect(c.drivers).to.deep.equal(['fake-hardware']);
      expect(c.created_at).to.be.a('string');
      expect(c.updated_at).to.be.a('string');
      expect((await call(t, 'GET', '/v1/conductors/c-stale', { headers: at('latest') })).json()).to.include({ alive: false });
      expectFault(await call(t, 'GET', '/v1/conductors/nobody', { headers: at('latest') }), 404, 'nobody');
    });

    it('restricts conductors to ?fields, refuses unknown fields and fields with detail with 400', async () => {
      const res = await call(t, 'GET', '/v1/conductors?fields=hostname,drivers', { headers: at('latest') });
      expect(res.statusCode, res.body).to.equal(200);
      expect(res.json<{ conductors: Obj[] }>().conductors[0]).to.deep.equal({ hostname: 'c-live', drivers: ['fake-hardware'] });
      expectFault(await call(t, 'GET', '/v1/conductors?fields=hostname,bogus', { headers: at('latest') }), 400, 'bogus');
      expectFault(await call(t, 'GET', '/v1/conductors?detail=true&fields=hostname', { headers: at('latest') }), 400);
    });
  });

  describe('node history', () => {
    let nodeId: number;
    before(async () => {
      nodeId = (await t.tdb.knex('nodes').where({ uuid: nodeUuid }).first()).id as number;
      for (let i = 1; i <= 5; i++) {
        await recordHistory(t.tdb.knex, {
          nodeId, severity: i === 3 ? 'ERROR' : 'INFO', eventType: 'provisioning', event: `event ${i}`, conductor: 'c-live', user: 'alice',
        });
      }
    });

    it('is hidden below 1.78', async () => {
      expectFault(await call(t, 'GET', `/v1/nodes/${nodeUuid}/history`, { headers: at('1.77') }), 404);
    });

    it('lists events oldest first with the short view, and detail adds the rest', async () => {
      const res = await call(t, 'GET', '/v1/nodes/misc/history', { headers: at('latest') });
      expect(res.statusCode).to.equal(200);
      const history = res.json<{ history: Array<Obj & { links: Array<{ href: string }> }> }>().history;
      expect(history.map((e) => [e.event, e.severity])).to.deep.equal([
        ['event 1', 'INFO'], ['event 2', 'INFO'], ['event 3', 'ERROR'], ['event 4', 'INFO'], ['event 5', 'INFO'],
      ]);
      expect(Object.keys(history[0]).sort()).to.deep.equal(['created_at', 'event', 'links', 'severity', 'uuid']);
      expect(history[0].links[0].href).to.match(new RegExp(`/v1/nodes/${nodeUuid}/history/${String(history[0].uuid)}$`));
      const detail = (await call(t, 'GET', `/v1/nodes/${nodeUuid}/history?detail=true`, { headers: at('latest') })).json<{ history: Obj[] }>();
      expect(detail.history[0]).to.include({ event_type: 'provisioning', conductor: 'c-live', user: 'alice' });
    });

    it('pages with limit and marker', async () => {
      const first = (await call(t, 'GET', `/v1/nodes/${nodeUuid}/history?limit=2`, { headers: at('latest') })).json<{ history: Obj[]; next?: string }>();
      expect(first.history.map((e) => e.event)).to.deep.equal(['event 1', 'event 2']);
      const seen = [...first.history.map((e) => e.event)];
      let next = first.next;
      while (next !== undefined) {
        const u = new URL(next);
        const page = (await call(t, 'GET', u.pathname + u.search, { headers: at('latest') })).json<{ history: Obj[]; next?: string }>();
        seen.push(...page.history.map((e) => e.event));
        next = page.next;
      }
      expect(seen).to.deep.equal(['event 1', 'event 2', 'event 3', 'event 4', 'event 5']);
    });

    it('shows one event with user, event_type and conductor; 404 for an unknown one', async () => {
      const list = (await call(t, 'GET', `/v1/nodes/${nodeUuid}/history`, { headers: at('latest') })).json<{ history: Array<{ uuid: string }> }>();
      const res = await call(t, 'GET', `/v1/nodes/${nodeUuid}/history/${list.history[2].uuid}`, { headers: at('latest') });
      expect(res.statusCode).to.equal(200);
      expect(res.json()).to.include({ uuid: list.history[2].uuid, event: 'event 3', severity: 'ERROR', event_type: 'provisioning', conductor: 'c-live', user: 'alice' });
      expectFault(await call(t, 'GET', `/v1/nodes/${nodeUuid}/history/0f0f0f0f-0000-4000-8000-000000000000`, { headers: at('latest') }), 404);
      expectFault(await call(t, 'GET', '/v1/nodes/no-such-node/history', { headers: at('latest') }), 404);
    });
  });
});

describe('HTTP basic authentication', function () {
  let t: TestApp;
  let dir: string;
  const basic = (user: string, password: string): Record<string, string> => ({
    authorization: `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`,
  });

  before(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'galvanic-htpasswd-'));
    const file = path.join(dir, 'htpasswd');
    // Cost 4 keeps the test fast; the format is the same as htpasswd -B writes.
    await fs.writeFile(file, `# operators\nadmin:${bcrypt.hashSync('s3cret', 4)}\n`);
    t = await buildTestApp({ GALVANIC_API__AUTH_STRATEGY: 'http_basic', GALVANIC_API__HTTP_BASIC_AUTH_USER_FILE: file }, { conductor: false });
  });

  after(async () => {
    await t?.close();
    await fs.rm(dir, { recursive: true, force: true });
  });

  for (const url of ['/v1/nodes', '/v1/chassis']) {
    it(`answers 401 with WWW-Authenticate on ${url} without or with wrong credentials`, async () => {
      for (const headers of [{}, basic('admin', 'wrong'), basic('mallory', 's3cret'), { authorization: 'Bearer abc' }, { authorization: 'Basic !!!' }]) {
        const res = await call(t, 'GET', url, { headers });
        expectFault(res, 401);
        expect(res.headers['www-authenticate']).to.match(/^Basic realm="/);
        expectVersionHeaders(res, '1.1');
      }
    });

    it(`answers 200 on ${url} with the right credentials`, async () => {
      const res = await call(t, 'GET', url, { headers: basic('admin', 's3cret') });
      expect(res.statusCode, res.body).to.equal(200);
    });
  }

  it('leaves GET / and GET /v1 open, as Ironic\'s public routes (the agent reads them)', async () => {
    expect((await call(t, 'GET', '/')).statusCode).to.equal(200);
    expect((await call(t, 'GET', '/?format=json')).statusCode).to.equal(200);
    expect((await call(t, 'GET', '/v1')).statusCode).to.equal(200);
  });

  it('refuses writes without credentials and does not create anything', async () => {
    expectFault(await call(t, 'POST', '/v1/nodes', { body: { driver: 'fake-hardware' } }), 401);
    expect(Number((await t.tdb.knex('nodes').count({ n: '*' }).first())?.n)).to.equal(0);
    const ok = await call(t, 'POST', '/v1/nodes', { body: { driver: 'fake-hardware' }, headers: basic('admin', 's3cret') });
    expect(ok.statusCode, ok.body).to.equal(201);
  });
});

describe('API request log', () => {
  it('writes one line per request with its request id, and never a BMC password', async () => {
    const { log, lines } = captureLog();
    const t = await buildTestApp({}, { conductor: false, log });
    try {
      const created = await call(t, 'POST', '/v1/nodes', { body: { driver: 'fake-hardware', driver_info: { redfish_password: 'pa55-in-body' } }, headers: at('latest') });
      expect(created.statusCode, created.body).to.equal(201);
      const uuid = created.json<{ uuid: string }>().uuid;
      const missing = await call(t, 'GET', '/v1/nodes/no-such-node', { headers: at('latest') });
      expect(missing.statusCode).to.equal(404);
      const patched = await call(t, 'PATCH', `/v1/nodes/${uuid}`, {
        body: [{ op: 'add', path: '/driver_info/ipmi_password', value: 'pa55-in-patch' }], headers: at('latest'),
      });
      expect(patched.statusCode, patched.body).to.equal(200);
      await new Promise((r) => setImmediate(r));

      const requests = lines.filter((l) => l.msg === 'request');
      expect(requests.map((l) => [l.method, l.status, l.reqId])).to.deep.equal([
        ['POST', 201, created.headers['x-openstack-request-id']],
        ['GET', 404, missing.headers['x-openstack-request-id']],
        ['PATCH', 200, patched.headers['x-openstack-request-id']],
      ]);
      expect(JSON.stringify(lines)).to.not.include('pa55');
    } finally {
      await t.close();
    }
  });
});
