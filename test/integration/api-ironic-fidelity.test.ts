/**
 * Requests whose answer from Ironic 21.4 is known (its routing, microversion gates, HTTP-layer
 * errors and validation), one case per test so that a regression names itself. A refused
 * request must change nothing: the nodes, ports, intents and history are compared with a
 * snapshot taken before it.
 */
import { expect } from 'chai';
import type { Knex } from 'knex';
import { buildTestApp, faultOf, type TestApp } from '../helpers/app.js';

interface Case {
  name: string;
  method: string;
  /** `{node}` (the seeded node's name), `{uuid}`, `{long}` (a 255-character name) and `{avail}` are filled in. */
  url: string;
  /** An object or array is sent as JSON; a string is sent as is, as JSON. */
  body?: unknown;
  /** The microversion; `latest` when absent. */
  version?: string;
  status: number;
  /** A part of the faultstring. */
  fault?: string;
  /** Parts the response body must, or must not, contain. */
  has?: string;
  lacks?: string;
  /** A method the Allow header must list. */
  allow?: string;
}

const deep = (levels: number, leaf = '1'): string => '{"a":'.repeat(levels) + leaf + '}'.repeat(levels);
const deepList = (levels: number): string => '['.repeat(levels) + ']'.repeat(levels);
const step = (action: string, args: Record<string, unknown> = {}) => ({ steps: [{ action, args }] });

const CASES: Case[] = [
  // Routing: Ironic's root controller serves paths without /v1 (bookmark links have none).
  { name: 'a node list without the /v1 prefix', method: 'GET', url: '/nodes', status: 200, has: '"nodes":' },
  { name: 'a node by its bookmark link', method: 'GET', url: '/nodes/{uuid}', status: 200, has: '"uuid":"{uuid}"' },
  { name: 'a node\'s states without /v1', method: 'GET', url: '/nodes/{node}/states', status: 200, has: '"power_state"' },
  { name: 'driver properties without /v1 (tempest)', method: 'GET', url: '/drivers/fake-hardware/properties', status: 200, has: 'fake_delay_ms' },
  { name: 'a driver without /v1', method: 'GET', url: '/drivers/fake-hardware', status: 200, has: '"name":"fake-hardware"' },
  { name: 'ports without /v1', method: 'GET', url: '/ports', status: 200, has: '"ports":' },
  { name: 'conductors without /v1', method: 'GET', url: '/conductors', status: 200, has: '"conductors":' },
  { name: 'a doubled slash after /v1', method: 'GET', url: '/v1//nodes', status: 200, has: '"nodes":' },
  { name: 'a doubled slash before the node', method: 'GET', url: '/v1/nodes//{node}', status: 200, has: '"name":"{node}"' },
  { name: 'doubled slashes everywhere', method: 'GET', url: '//v1//nodes//{node}//states', status: 200, has: '"provision_state"' },
  // pecan's object dispatch: NodesController.states/management/maintenance take the node last.
  { name: 'the legacy console path (tempest get_console)', method: 'GET', url: '/v1/nodes/states/console/{node}', status: 200, has: '"console_enabled":false' },
  { name: 'the legacy states path', method: 'GET', url: '/v1/nodes/states/{node}', status: 200, has: '"provision_state":"enroll"' },
  { name: 'the legacy supported boot devices path', method: 'GET', url: '/v1/nodes/management/boot_device/supported/{node}', status: 200, has: 'supported_boot_devices' },
  { name: 'the legacy boot device path refuses a bad device', method: 'PUT', url: '/v1/nodes/management/boot_device/{node}', body: { boot_device: 'nonsense' }, status: 400, fault: 'Invalid boot device nonsense specified.' },
  // A legal 255-character name is longer than fastify's default maxParamLength (100).
  { name: 'a node by a 255-character name', method: 'GET', url: '/v1/nodes/{long}', status: 200, has: '"name":"{long}"' },
  { name: 'a 255-character name\'s states', method: 'GET', url: '/v1/nodes/{long}/states', status: 200, has: '"power_state"' },
  { name: 'a 255-character name\'s ports', method: 'GET', url: '/v1/nodes/{long}/ports', status: 200, has: '"ports":[]' },
  { name: 'a 255-character name\'s validate', method: 'GET', url: '/v1/nodes/{long}/validate', status: 200, has: '"power"' },

  // NodesController.get_all's gates, in its order.
  { name: 'driver filter below 1.16', method: 'GET', url: '/v1/nodes?driver=fake-hardware', version: '1.15', status: 406, fault: 'should be 1.16' },
  { name: 'driver filter on /detail below 1.16', method: 'GET', url: '/v1/nodes/detail?driver=fake-hardware', version: '1.15', status: 406, fault: 'should be 1.16' },
  { name: 'provision_state filter below 1.9', method: 'GET', url: '/v1/nodes?provision_state=enroll', version: '1.8', status: 406, fault: 'Request not acceptable.' },
  { name: 'an unknown provision_state', method: 'GET', url: '/v1/nodes?provision_state=sideways', status: 400, fault: 'Provision state "sideways" is not valid' },
  { name: 'resource_class filter below 1.21', method: 'GET', url: '/v1/nodes?resource_class=gold', version: '1.20', status: 406, fault: 'should be 1.21' },
  { name: 'fault filter below 1.42', method: 'GET', url: '/v1/nodes?fault=power%20failure', version: '1.41', status: 406, fault: 'should be 1.42' },
  { name: 'an unknown fault', method: 'GET', url: '/v1/nodes?fault=meltdown', status: 400, fault: 'Unrecognized fault "meltdown" is specified, allowed faults are (\'power failure\', \'clean failure\', \'rescue abort failure\')' },
  { name: 'conductor_group filter below 1.46', method: 'GET', url: '/v1/nodes?conductor_group=g1', version: '1.45', status: 406, fault: 'should be 1.46' },
  { name: 'conductor filter below 1.49', method: 'GET', url: '/v1/nodes?conductor=test-host', version: '1.48', status: 406, fault: 'should be 1.49' },
  { name: 'conductor filter: the managing conductor\'s nodes', method: 'GET', url: '/v1/nodes?conductor=test-host&fields=uuid', status: 200, has: '"uuid":"{uuid}"' },
  { name: 'conductor filter: another hostname has none', method: 'GET', url: '/v1/nodes?conductor=elsewhere', status: 200, has: '"nodes":[]' },
  { name: 'owner filter below 1.50', method: 'GET', url: '/v1/nodes?owner=o', version: '1.49', status: 406, fault: 'should be 1.50' },
  { name: 'lessee filter below 1.65', method: 'GET', url: '/v1/nodes?lessee=l', version: '1.64', status: 406, fault: 'should be 1.65' },
  { name: 'shard filter below 1.82', method: 'GET', url: '/v1/nodes?shard=a', version: '1.81', status: 406, fault: 'should be 1.82' },
  { name: 'sharded filter below 1.82', method: 'GET', url: '/v1/nodes?sharded=true', version: '1.81', status: 406, fault: 'should be 1.82' },
  { name: 'a sort key newer than the version', method: 'GET', url: '/v1/nodes?sort_key=owner', version: '1.49', status: 406 },
  { name: 'conductor_group as sort key below 1.46', method: 'GET', url: '/v1/nodes?sort_key=conductor_group', version: '1.45', status: 406 },
  { name: 'detail below 1.43 is a 400', method: 'GET', url: '/v1/nodes?detail=true', version: '1.42', status: 400, fault: 'Invalid query parameter ?detail=True received.' },
  { name: 'detail=false below 1.43 is a 400 too', method: 'GET', url: '/v1/nodes?detail=false', version: '1.42', status: 400, fault: '?detail=False' },
  // update_state_in_older_versions: `available` was "no state" before 1.2.
  { name: 'available shown as null at 1.1', method: 'GET', url: '/v1/nodes/{avail}', version: '1.1', status: 200, has: '"provision_state":null' },
  { name: 'available shown as null in /states at 1.1', method: 'GET', url: '/v1/nodes/{avail}/states', version: '1.1', status: 200, has: '"provision_state":null' },
  { name: 'available shown as null in the list at 1.1', method: 'GET', url: '/v1/nodes', version: '1.1', status: 200, has: '"provision_state":null' },
  { name: 'node states link hidden below 1.14', method: 'GET', url: '/v1/nodes/{uuid}', version: '1.13', status: 200, lacks: '"states":' },
  // Ports: node names in ?node= (and the parent node) need 1.5.
  { name: 'ports ?node=<name> below 1.5', method: 'GET', url: '/v1/ports?node={node}', version: '1.4', status: 406 },
  { name: 'ports/detail ?node=<name> below 1.5', method: 'GET', url: '/v1/ports/detail?node={node}', version: '1.4', status: 406 },
  { name: 'a node\'s ports by name below 1.5', method: 'GET', url: '/v1/nodes/{node}/ports', version: '1.4', status: 406 },
  // Drivers.
  { name: 'driver properties links hidden below 1.14', method: 'GET', url: '/v1/drivers', version: '1.13', status: 200, lacks: '"properties"' },
  { name: 'a driver\'s properties link hidden below 1.14', method: 'GET', url: '/v1/drivers/fake-hardware', version: '1.13', status: 200, lacks: '"properties"' },
  { name: 'driver type filter below 1.30', method: 'GET', url: '/v1/drivers?type=dynamic', version: '1.29', status: 406, fault: 'should be 1.30' },
  { name: 'driver detail=false below 1.30', method: 'GET', url: '/v1/drivers?detail=false', version: '1.29', status: 406, fault: 'should be 1.30' },
  { name: 'an unknown driver type', method: 'GET', url: '/v1/drivers?type=hybrid', status: 400, fault: '"type" filter must be one of "classic" or "dynamic", if specified.' },

  // Errors of the HTTP layer itself, in Ironic's body with the version headers.
  { name: 'a malformed percent-encoding', method: 'GET', url: '/v1/nodes/%zz', status: 400, fault: 'percent-encoding' },
  { name: 'a malformed percent-encoding mid-path', method: 'GET', url: '/v1/nodes/a%G1b/states', status: 400, fault: 'percent-encoding' },
  { name: 'an unknown method on a collection', method: 'PROPFIND', url: '/v1/nodes', status: 405, allow: 'GET' },
  { name: 'OPTIONS on the node collection', method: 'OPTIONS', url: '/v1/nodes', status: 405, allow: 'POST' },
  { name: 'OPTIONS on a node', method: 'OPTIONS', url: '/v1/nodes/{node}', status: 405, allow: 'PATCH' },
  { name: 'PUT on the node collection', method: 'PUT', url: '/v1/nodes', body: {}, status: 405, allow: 'GET' },
  { name: 'POST on a node', method: 'POST', url: '/v1/nodes/{node}', body: {}, status: 405, allow: 'DELETE' },
  { name: 'DELETE on a driver', method: 'DELETE', url: '/v1/drivers/fake-hardware', status: 405, allow: 'GET' },
  { name: 'PATCH on the port collection', method: 'PATCH', url: '/v1/ports', body: [], status: 405, allow: 'POST' },
  { name: 'POST on a node\'s states', method: 'POST', url: '/v1/nodes/{node}/states/power', body: {}, status: 405, allow: 'PUT' },
  { name: 'a PATCH value 5,000 levels deep', method: 'PATCH', url: '/v1/nodes/{node}', body: `[{"op":"add","path":"/extra/x","value":${deep(5000)}}]`, status: 400, fault: 'nested more than' },
  { name: 'a power target 5,000 levels deep', method: 'PUT', url: '/v1/nodes/{node}/states/power', body: `{"target":${deep(5000, '"power on"')}}`, status: 400, fault: 'nested more than' },
  { name: 'a node create with extra 5,000 levels deep', method: 'POST', url: '/v1/nodes', body: `{"driver":"fake-hardware","extra":${deep(5000)}}`, status: 400, fault: 'nested more than' },
  { name: 'a node create with extra 101 levels deep', method: 'POST', url: '/v1/nodes', body: `{"driver":"fake-hardware","extra":${deep(101)}}`, status: 400, fault: 'nested more than' },
  { name: 'a port create 5,000 lists deep', method: 'POST', url: '/v1/ports', body: `{"address":"52:54:00:00:00:42","node_uuid":"{uuid}","extra":{"x":${deepList(5000)}}}`, status: 400, fault: 'nested more than' },
  { name: 'a maintenance reason 5,000 levels deep', method: 'PUT', url: '/v1/nodes/{node}/maintenance', body: `{"reason":${deep(5000, '"r"')}}`, status: 400, fault: 'nested more than' },
  { name: 'intent args 5,000 levels deep', method: 'POST', url: '/v1/nodes/{node}/intents', body: `{"steps":[{"action":"power","args":${deep(5000)}}]}`, status: 400, fault: 'nested more than' },

  // Validated before anything is written: no intent, no last_error, no history.
  { name: 'an unknown boot device', method: 'PUT', url: '/v1/nodes/{node}/management/boot_device', body: { boot_device: 'nonsense' }, status: 400, fault: 'Invalid boot device nonsense specified.' },
  { name: 'a boot device the fake interface lacks', method: 'PUT', url: '/v1/nodes/{node}/management/boot_device', body: { boot_device: 'wanboot' }, status: 400, fault: 'Invalid boot device wanboot specified' },
  { name: 'an unknown boot device in an intent step', method: 'POST', url: '/v1/nodes/{node}/intents', body: step('set_boot_device', { boot_device: 'nonsense' }), status: 400, fault: 'Invalid boot device nonsense specified.' },
  { name: 'an unsupported boot device in an intent step', method: 'POST', url: '/v1/nodes/{node}/intents', body: step('set_boot_device', { boot_device: 'iscsiboot' }), status: 400, fault: 'iscsiboot' },
  { name: 'intent action "hasOwnProperty"', method: 'POST', url: '/v1/nodes/{node}/intents', body: step('hasOwnProperty'), status: 400, fault: 'unknown action' },
  { name: 'intent action "constructor"', method: 'POST', url: '/v1/nodes/{node}/intents', body: step('constructor'), status: 400, fault: 'unknown action' },
  { name: 'intent action "__proto__"', method: 'POST', url: '/v1/nodes/{node}/intents', body: '{"steps":[{"action":"__proto__","args":{}}]}', status: 400, fault: 'unknown action' },
  { name: 'intent action "toString"', method: 'POST', url: '/v1/nodes/{node}/intents', body: step('toString'), status: 400, fault: 'unknown action' },
  { name: 'intent action "valueOf"', method: 'POST', url: '/v1/nodes/{node}/intents', body: step('valueOf'), status: 400, fault: 'unknown action' },
  { name: 'provision target "__proto__"', method: 'PUT', url: '/v1/nodes/{node}/states/provision', body: '{"target":"__proto__"}', status: 400 },
  { name: 'provision target "toString"', method: 'PUT', url: '/v1/nodes/{node}/states/provision', body: { target: 'toString' }, status: 400 },
];

interface Snapshot {
  [table: string]: unknown;
}

/** What a request could have changed: a hash of every row of the tables the API writes. */
async function snapshot(knex: Knex): Promise<Snapshot> {
  const out: Snapshot = {};
  for (const table of ['nodes', 'ports', 'intents', 'node_history']) {
    const { rows } = (await knex.raw(`select count(*)::int as count, md5(coalesce(string_agg(t::text, '|' order by t.id), '')) as hash from ${table} t`)) as { rows: unknown[] };
    out[table] = rows[0];
  }
  return out;
}

describe('Ironic fidelity: routing, gates, HTTP-layer errors and validation', function () {
  this.timeout(30_000);
  let t: TestApp;
  const seeded: Record<string, string> = { '{node}': 'seed', '{long}': 'n'.repeat(255) };

  before(async () => {
    // The power sync is off so that nothing but the requests under test writes.
    t = await buildTestApp({ GALVANIC_CONDUCTOR__SYNC_POWER_STATE_INTERVAL: '0' });
    const create = async (body: Record<string, unknown>, version: string): Promise<string> => {
      const res = await t.app.inject({ method: 'POST', url: '/v1/nodes', headers: { 'x-openstack-ironic-api-version': version }, payload: body });
      expect(res.statusCode, res.body).to.equal(201);
      return res.json<{ uuid: string }>().uuid;
    };
    seeded['{uuid}'] = await create({ name: 'seed', driver: 'fake-hardware' }, 'latest');
    await create({ name: seeded['{long}'], driver: 'fake-hardware' }, 'latest');
    // Before 1.11 a node is born available.
    seeded['{avail}'] = await create({ driver: 'fake-hardware' }, '1.1');
  });

  after(async () => {
    await t?.close();
  });

  const fill = (s: string): string => Object.entries(seeded).reduce((acc, [k, v]) => acc.replaceAll(k, v), s);

  it(`has at least 60 cases (${CASES.length})`, () => {
    expect(CASES.length).to.be.at.least(60);
  });

  for (const c of CASES) {
    it(`${c.name}: ${c.method} ${c.url.length > 60 ? `${c.url.slice(0, 60)}…` : c.url} → ${c.status}`, async () => {
      const before = await snapshot(t.tdb.knex);
      const payload = c.body === undefined ? undefined : fill(typeof c.body === 'string' ? c.body : JSON.stringify(c.body));
      const res = await t.app.inject({
        method: c.method as 'GET', url: fill(c.url),
        headers: { 'x-openstack-ironic-api-version': c.version ?? 'latest', ...(payload === undefined ? {} : { 'content-type': 'application/json' }) },
        ...(payload === undefined ? {} : { payload }),
      });
      expect(res.statusCode, res.body.slice(0, 400)).to.equal(c.status);
      for (const h of ['x-openstack-ironic-api-minimum-version', 'x-openstack-ironic-api-maximum-version', 'x-openstack-ironic-api-version']) {
        expect(res.headers[h], h).to.be.a('string');
      }
      if (c.has !== undefined) expect(res.body).to.include(fill(c.has));
      if (c.lacks !== undefined) expect(res.body).not.to.include(c.lacks);
      if (c.allow !== undefined) expect(String(res.headers.allow ?? '').split(/,\s*/)).to.include(c.allow);
      if (c.status >= 400) {
        const fault = faultOf(res.body);
        expect(fault.faultcode).to.equal('Client');
        if (c.fault !== undefined) expect(fault.faultstring).to.include(fill(c.fault));
        expect(await snapshot(t.tdb.knex), 'a refused request changed the database').to.deep.equal(before);
      }
    });
  }

  it('takes an empty config drive ({} as Metal3 sends with a live ISO, or "") as none: not checked, not stored', async () => {
    for (const [configdrive, version] of [[{}, 'latest'], [{}, '1.55'], ['', 'latest']] as const) {
      const created = await t.app.inject({ method: 'POST', url: '/v1/nodes', headers: { 'x-openstack-ironic-api-version': '1.1' }, payload: { driver: 'fake-hardware' } });
      const uuid = created.json<{ uuid: string }>().uuid;
      const res = await t.app.inject({ method: 'PUT', url: `/v1/nodes/${uuid}/states/provision`, headers: { 'x-openstack-ironic-api-version': version }, payload: { target: 'active', configdrive } });
      expect(res.statusCode, `${JSON.stringify(configdrive)} at ${version}: ${res.body}`).to.equal(202);
      const node = (await t.app.inject({ method: 'GET', url: `/v1/nodes/${uuid}`, headers: { 'x-openstack-ironic-api-version': 'latest' } })).json<{ instance_info: Record<string, unknown> }>();
      expect(node.instance_info, JSON.stringify(configdrive)).to.not.have.property('configdrive');
    }
  });

  it('deletes a node that a periodic task holds for a moment instead of answering 409', async () => {
    const uuid = await (async () => {
      const res = await t.app.inject({ method: 'POST', url: '/v1/nodes', headers: { 'x-openstack-ironic-api-version': 'latest' }, payload: { driver: 'fake-hardware' } });
      return res.json<{ uuid: string }>().uuid;
    })();
    // As the power sync holds it: a reservation, released 1.2 s later.
    await t.tdb.knex('nodes').where({ uuid }).update({ reservation: 'periodic-host' });
    // A knex builder runs only when awaited or then()ed.
    const release = setTimeout(() => void t.tdb.knex('nodes').where({ uuid }).update({ reservation: null }).then(() => undefined, () => undefined), 1200);
    try {
      const res = await t.app.inject({ method: 'DELETE', url: `/v1/nodes/${uuid}`, headers: { 'x-openstack-ironic-api-version': 'latest' } });
      expect(res.statusCode, res.body).to.equal(204);
      expect(await t.tdb.knex('nodes').where({ uuid }).first()).to.equal(undefined);
    } finally {
      clearTimeout(release);
    }
  });

  it('answers 409 NodeLocked once node_locked_retry_attempts are spent, and deletes nothing', async () => {
    const res0 = await t.app.inject({ method: 'POST', url: '/v1/nodes', headers: { 'x-openstack-ironic-api-version': 'latest' }, payload: { driver: 'fake-hardware' } });
    const uuid = res0.json<{ uuid: string }>().uuid;
    await t.tdb.knex('nodes').where({ uuid }).update({ reservation: 'periodic-host' });
    const started = Date.now();
    const res = await t.app.inject({ method: 'DELETE', url: `/v1/nodes/${uuid}`, headers: { 'x-openstack-ironic-api-version': 'latest' } });
    expect(res.statusCode, res.body).to.equal(409);
    expect(faultOf(res.body).faultstring).to.equal(`Node ${uuid} is locked by host periodic-host, please retry after the current operation is completed.`);
    // 3 attempts, 1 s apart (Ironic's defaults).
    expect(Date.now() - started).to.be.at.least(1900);
    expect(await t.tdb.knex('nodes').where({ uuid }).first()).to.not.equal(undefined);
    await t.tdb.knex('nodes').where({ uuid }).update({ reservation: null });
  });
});
