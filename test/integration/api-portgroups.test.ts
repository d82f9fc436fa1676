/**
 * Port groups through `app.inject()` against a real database, and the rules for ports in
 * them: same node, standalone ports, one physical network per group, deletion only when
 * empty, with Ironic's codes and messages.
 */
import { expect } from 'chai';
import type { LightMyRequestResponse } from 'fastify';
import { faultOf, inject, suiteApp, eachTwoNodes } from '../helpers/app.js';

type Obj = { [key: string]: unknown };
const call = inject;

function expectFault(res: LightMyRequestResponse, status: number, message: string): void {
  expect(res.statusCode, res.body).to.equal(status);
  expect(faultOf(res.body).faultstring).to.equal(message);
}

describe('port groups API', function () {
  const t = suiteApp({ conductor: false, clear: ['nodes'] });
  const nodes = eachTwoNodes(t);

  async function post(url: string, body: Obj, version?: string): Promise<Obj> {
    const res = await call(t, 'POST', url, { body, version });
    expect(res.statusCode, res.body).to.equal(201);
    return res.json<Obj>();
  }

  it('creates a port group with Ironic defaults, shows it by UUID or name, and hides the resource below 1.23', async () => {
    const res = await call(t, 'POST', '/v1/portgroups', { body: { node_uuid: nodes.a, name: 'bond0', address: 'AA-BB-CC-DD-EE-01' }, version: '1.23' });
    expect(res.statusCode, res.body).to.equal(201);
    const pg = res.json<Obj>();
    expect(res.headers.location).to.equal(`http://localhost:80/v1/portgroups/${String(pg.uuid)}`);
    expect(pg).to.include({ name: 'bond0', address: 'aa:bb:cc:dd:ee:01', node_uuid: nodes.a, standalone_ports_supported: true, mode: 'active-backup' });
    expect(pg.extra).to.deep.equal({});
    expect(pg.properties).to.deep.equal({});
    expect(pg.internal_info).to.deep.equal({});
    expect(pg.ports).to.deep.equal([
      { href: `http://localhost:80/v1/portgroups/${String(pg.uuid)}/ports`, rel: 'self' },
      { href: `http://localhost:80/portgroups/${String(pg.uuid)}/ports`, rel: 'bookmark' },
    ]);
    for (const ident of [pg.uuid, 'bond0']) {
      expect((await call(t, 'GET', `/v1/portgroups/${String(ident)}`, { version: '1.23' })).json(), String(ident)).to.deep.equal(pg);
    }
    expect((await call(t, 'GET', '/v1/portgroups/bond0', { version: '1.22' })).statusCode).to.equal(404);
    const withMode = await post('/v1/portgroups', { node_uuid: nodes.a, mode: '802.3ad', properties: { miimon: '100' } }, '1.26');
    expect(withMode).to.include({ mode: '802.3ad', name: null, address: null });
    expect(withMode.properties).to.deep.equal({ miimon: '100' });
  });

  it('lists defaults, detail and fields, by node (UUID or name, 1.24+) and by address, and pages', async () => {
    const a1 = await post('/v1/portgroups', { node_uuid: nodes.a, name: 'a1', address: '52:54:00:00:0a:01' });
    const a2 = await post('/v1/portgroups', { node_uuid: nodes.a, name: 'a2' });
    const b1 = await post('/v1/portgroups', { node_uuid: nodes.b, name: 'b1' });
    const list = (await call(t, 'GET', '/v1/portgroups')).json<{ portgroups: Obj[] }>();
    expect(list.portgroups[0]).to.deep.equal({ uuid: a1.uuid, address: '52:54:00:00:0a:01', name: 'a1', links: a1.links });
    expect((await call(t, 'GET', '/v1/portgroups/detail')).json<{ portgroups: Obj[] }>().portgroups).to.deep.equal([a1, a2, b1]);
    expect((await call(t, 'GET', '/v1/portgroups?fields=node_uuid')).json<{ portgroups: Obj[] }>().portgroups[2]).to.deep.equal({ node_uuid: nodes.b, links: b1.links });
    const names = async (url: string, version?: string) => (await call(t, 'GET', url, { version })).json<{ portgroups: Obj[] }>().portgroups.map((p) => p.name);
    expect(await names('/v1/portgroups?node=node-a')).to.deep.equal(['a1', 'a2']);
    expect(await names(`/v1/nodes/${nodes.b}/portgroups`)).to.deep.equal(['b1']);
    expect(await names('/v1/nodes/node-a/portgroups/detail', '1.24')).to.deep.equal(['a1', 'a2']);
    expect(await names('/v1/portgroups?address=52-54-00-00-0A-01')).to.deep.equal(['a1']);
    const page = (await call(t, 'GET', '/v1/portgroups?limit=2')).json<{ portgroups: Obj[]; next: string }>();
    expect(page.portgroups.map((p) => p.name)).to.deep.equal(['a1', 'a2']);
    const next = new URL(page.next);
    expect(next.searchParams.get('marker')).to.equal(a2.uuid);
    expect(await names(`${next.pathname}${next.search}`)).to.deep.equal(['b1']);
  });

  it('patches a port group: address, name, extra, properties; mode cannot be removed', async () => {
    const pg = await post('/v1/portgroups', { node_uuid: nodes.a, name: 'bond0', extra: { foo: 'bar', open: 'stack' } });
    const res = await call(t, 'PATCH', '/v1/portgroups/bond0', {
      body: [
        { op: 'replace', path: '/address', value: '52:54:00:00:0b:01' }, { op: 'remove', path: '/extra/foo' },
        { op: 'add', path: '/properties/miimon', value: '100' }, { op: 'replace', path: '/name', value: 'bond1' },
      ],
    });
    expect(res.statusCode, res.body).to.equal(200);
    expect(res.json<Obj>()).to.include({ uuid: pg.uuid, address: '52:54:00:00:0b:01', name: 'bond1' });
    expect(res.json<Obj>().extra).to.deep.equal({ open: 'stack' });
    expect(res.json<Obj>().properties).to.deep.equal({ miimon: '100' });
    const removed = await call(t, 'PATCH', '/v1/portgroups/bond1', { body: [{ op: 'remove', path: '/extra' }] });
    expect(removed.json<Obj>().extra).to.deep.equal({});
    expectFault(await call(t, 'PATCH', '/v1/portgroups/bond1', { body: [{ op: 'remove', path: '/mode' }] }), 400, "'mode' is a mandatory attribute and can not be removed");
    // Moving an empty group to another node is allowed (both nodes are in enroll).
    const moved = await call(t, 'PATCH', '/v1/portgroups/bond1', { body: [{ op: 'replace', path: '/node_uuid', value: nodes.b }] });
    expect(moved.json<Obj>().node_uuid).to.equal(nodes.b);
  });

  it('takes ports of its node, lists them, shows portgroup_uuid from 1.24, and is deleted only when empty', async () => {
    const pg = await post('/v1/portgroups', { node_uuid: nodes.a, name: 'bond0' });
    const p1 = await post('/v1/ports', { node_uuid: nodes.a, address: '52:54:00:00:00:01', portgroup_uuid: pg.uuid });
    expect(p1.portgroup_uuid).to.equal(pg.uuid);
    expectFault(await call(t, 'POST', '/v1/ports', { body: { node_uuid: nodes.b, address: '52:54:00:00:00:02', portgroup_uuid: pg.uuid } }),
      400, 'Port can not be added to a portgroup belonging to a different node.');
    const old = (await call(t, 'GET', `/v1/ports/${String(p1.uuid)}`, { version: '1.23' })).json<Obj>();
    expect(old).to.not.have.property('portgroup_uuid');
    const members = (await call(t, 'GET', `/v1/portgroups/bond0/ports`)).json<{ ports: Obj[] }>().ports;
    expect(members.map((p) => p.uuid)).to.deep.equal([p1.uuid]);
    expect((await call(t, 'GET', `/v1/ports?portgroup=${String(pg.uuid)}`)).json<{ ports: Obj[] }>().ports.map((p) => p.uuid)).to.deep.equal([p1.uuid]);
    expect((await call(t, 'GET', '/v1/portgroups/bond0/ports', { version: '1.23' })).statusCode).to.equal(404);

    expectFault(await call(t, 'DELETE', '/v1/portgroups/bond0'), 400, `Cannot complete the requested action because portgroup ${String(pg.uuid)} contains ports.`);
    const out = await call(t, 'PATCH', `/v1/ports/${String(p1.uuid)}`, { body: [{ op: 'remove', path: '/portgroup_uuid' }] });
    expect(out.json<Obj>().portgroup_uuid).to.equal(null);
    expect((await call(t, 'DELETE', '/v1/portgroups/bond0')).statusCode).to.equal(204);
    expectFault(await call(t, 'GET', '/v1/portgroups/bond0'), 404, 'Portgroup bond0 could not be found.');
  });

  it('keeps every member of a group on one physical network', async () => {
    const pg = await post('/v1/portgroups', { node_uuid: nodes.a, name: 'bond0' });
    await post('/v1/ports', { node_uuid: nodes.a, address: '52:54:00:00:00:01', portgroup_uuid: pg.uuid, physical_network: 'physnet1' });
    expectFault(await call(t, 'POST', '/v1/ports', { body: { node_uuid: nodes.a, address: '52:54:00:00:00:02', portgroup_uuid: pg.uuid } }),
      409, `Port with physical network None cannot become a member of port group ${String(pg.uuid)} which has ports in physical network physnet1.`);
    const p2 = await post('/v1/ports', { node_uuid: nodes.a, address: '52:54:00:00:00:02', portgroup_uuid: pg.uuid, physical_network: 'physnet1' });
    expectFault(await call(t, 'PATCH', `/v1/ports/${String(p2.uuid)}`, { body: [{ op: 'replace', path: '/physical_network', value: 'physnet2' }] }),
      409, `Port with physical network physnet2 cannot become a member of port group ${String(pg.uuid)} which has ports in physical network physnet1.`);
    // A port outside the group joins it only on the group's network.
    const p3 = await post('/v1/ports', { node_uuid: nodes.a, address: '52:54:00:00:00:03', physical_network: 'physnet2' });
    const join = await call(t, 'PATCH', `/v1/ports/${String(p3.uuid)}`, { body: [{ op: 'add', path: '/portgroup_uuid', value: pg.uuid }] });
    expect(join.statusCode).to.equal(409);
    const both = await call(t, 'PATCH', `/v1/ports/${String(p3.uuid)}`, {
      body: [{ op: 'add', path: '/portgroup_uuid', value: pg.uuid }, { op: 'replace', path: '/physical_network', value: 'physnet1' }],
    });
    expect(both.statusCode, both.body).to.equal(200);
    const physnets = await t.tdb.knex('ports').distinct('physical_network').whereNotNull('portgroup_id');
    expect(physnets).to.deep.equal([{ physical_network: 'physnet1' }]);
  });

  it('lets concurrent joins with different physical networks leave the group consistent', async () => {
    const pg = await post('/v1/portgroups', { node_uuid: nodes.a, name: 'bond0' });
    const results = await Promise.all(['physnet1', 'physnet2', 'physnet1', 'physnet2'].map((net, i) => call(t, 'POST', '/v1/ports', {
      body: { node_uuid: nodes.a, address: `52:54:00:00:01:0${i}`, portgroup_uuid: pg.uuid, physical_network: net },
    })));
    expect(results.map((r) => r.statusCode).sort()).to.deep.equal([201, 201, 409, 409]);
    const physnets = await t.tdb.knex('ports').distinct('physical_network').whereNotNull('portgroup_id');
    expect(physnets).to.have.length(1);
  });

  it('refuses PXE-enabled members of a group without standalone ports, and the switch while one PXE-boots', async () => {
    const pg = await post('/v1/portgroups', { node_uuid: nodes.a, name: 'bond0', standalone_ports_supported: 'false' });
    expect(pg.standalone_ports_supported).to.equal(false);
    expectFault(await call(t, 'POST', '/v1/ports', { body: { node_uuid: nodes.a, address: '52:54:00:00:00:01', portgroup_uuid: pg.uuid, pxe_enabled: true } }),
      409, `Port group ${String(pg.uuid)} doesn't support standalone ports. This port cannot be created as a member of that portgroup as the port's 'pxe_enabled' field was set to True.`);
    await post('/v1/ports', { node_uuid: nodes.a, address: '52:54:00:00:00:01', portgroup_uuid: pg.uuid, pxe_enabled: false });
    const open = await call(t, 'PATCH', '/v1/portgroups/bond0', { body: [{ op: 'replace', path: '/standalone_ports_supported', value: true }] });
    expect(open.json<Obj>().standalone_ports_supported).to.equal(true);
    await post('/v1/ports', { node_uuid: nodes.a, address: '52:54:00:00:00:02', portgroup_uuid: pg.uuid, pxe_enabled: true });
    const close = await call(t, 'PATCH', '/v1/portgroups/bond0', { body: [{ op: 'replace', path: '/standalone_ports_supported', value: false }] });
    expect(close.statusCode).to.equal(409);
    expect(faultOf(close.body).faultstring).to.include("contains port with 'pxe_enabled' is set to True");
  });

  it('goes with its node: deleting the node deletes its port groups and their ports', async () => {
    const pg = await post('/v1/portgroups', { node_uuid: nodes.a, name: 'bond0' });
    await post('/v1/ports', { node_uuid: nodes.a, address: '52:54:00:00:00:01', portgroup_uuid: pg.uuid });
    expect((await call(t, 'DELETE', `/v1/nodes/${nodes.a}`)).statusCode).to.equal(204);
    expect(Number((await t.tdb.knex('portgroups').count({ n: '*' }).first())?.n)).to.equal(0);
    expect(Number((await t.tdb.knex('ports').count({ n: '*' }).first())?.n)).to.equal(0);
  });
});
