/**
 * Volume connectors and targets (API 1.32) through `app.inject()` against a real database and
 * an in-process fake-hardware conductor: create, show, list (per node, detail, fields, paging,
 * sort), PATCH and DELETE with Ironic's codes and messages, and the powered-off rule.
 */
import { expect } from 'chai';
import { expectFault, type TestApp, inject, type InjectOptions, suiteApp, eachTwoNodes } from '../helpers/app.js';

type Obj = { [key: string]: unknown };
type Method = 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE';

const MISSING = '7b7b7b7b-0000-4000-8000-000000000000';

const call = (t: TestApp, method: Method, url: string, opts: InjectOptions = {}) => inject(t, method, url, { version: '1.78', ...opts });


describe('volume API', function () {
  const t = suiteApp({ clear: ['nodes'] });
  const nodes = eachTwoNodes(t, '1.78');

  /** Asks for a power state and waits for the conductor to reach it. */
  async function power(node: string, target: 'power on' | 'power off'): Promise<void> {
    const res = await call(t, 'PUT', `/v1/nodes/${node}/states/power?wait=20`, { body: { target } });
    expect(res.statusCode, res.body).to.be.oneOf([200, 202]);
    const shown = (await call(t, 'GET', `/v1/nodes/${node}/states`)).json<Obj>();
    expect(shown.power_state).to.equal(target);
  }

  async function create(kind: 'connectors' | 'targets', body: Obj): Promise<Obj> {
    const res = await call(t, 'POST', `/v1/volume/${kind}`, { body });
    expect(res.statusCode, res.body).to.equal(201);
    const made = res.json<Obj>();
    expect(res.headers.location).to.match(new RegExp(`/v1/volume/${kind}/${made.uuid as string}$`));
    return made;
  }

  async function count(table: string): Promise<number> {
    return Number((await t.tdb.knex(table).count({ n: '*' }).first())?.n);
  }

  it('is not there below 1.32', async () => {
    for (const url of ['/v1/volume', '/v1/volume/connectors', '/v1/volume/targets', `/v1/nodes/${nodes.a}/volume/connectors`]) {
      expectFault(await call(t, 'GET', url, { version: '1.31' }), 404);
    }
    expectFault(await call(t, 'POST', '/v1/volume/connectors', { version: '1.31', body: { node_uuid: nodes.a, type: 'iqn', connector_id: 'x' } }), 404);
    expect(await count('volume_connectors')).to.equal(0);
    const v1 = (await call(t, 'GET', '/v1', { version: '1.31' })).json<Obj>();
    expect(v1).to.not.have.property('volume');
    const node = (await call(t, 'GET', `/v1/nodes/${nodes.a}`, { version: '1.31' })).json<Obj>();
    expect(node).to.not.have.property('volume');
  });

  it('links the volume resources from /v1, /v1/volume, the node and /v1/nodes/{n}/volume', async () => {
    const root = (await call(t, 'GET', '/v1/volume')).json<Record<string, Array<{ href: string; rel: string }>>>();
    expect(root.links[0].href).to.match(/\/v1\/volume\/$/);
    expect(root.connectors.map((l) => l.rel)).to.deep.equal(['self', 'bookmark']);
    expect(root.connectors[0].href).to.match(/\/v1\/volume\/connectors$/);
    expect(root.targets[1].href).to.match(/\/volume\/targets$/).and.not.match(/\/v1\//);
    expect((await call(t, 'GET', '/v1')).json<Obj>()).to.have.property('volume');
    const node = (await call(t, 'GET', `/v1/nodes/${nodes.a}`)).json<{ volume: Array<{ href: string }> }>();
    expect(node.volume[0].href).to.match(new RegExp(`/v1/nodes/${nodes.a}/volume$`));
    const perNode = (await call(t, 'GET', `/v1/nodes/node-a/volume`)).json<Record<string, Array<{ href: string }>>>();
    expect(perNode.targets[0].href).to.match(/\/v1\/nodes\/node-a\/volume\/targets$/);
    expectFault(await call(t, 'GET', '/v1/nodes/no-such-node/volume'), 404, 'no-such-node');
  });

  it('creates, shows and lists connectors with default fields, detail, fields and the node filter', async () => {
    const c1 = await create('connectors', { node_uuid: nodes.a, type: 'iqn', connector_id: 'iqn.2026-01.org.example:a', extra: { k: 'v' } });
    expect(c1).to.include({ node_uuid: nodes.a, type: 'iqn', connector_id: 'iqn.2026-01.org.example:a' });
    expect(c1.extra).to.deep.equal({ k: 'v' });
    expect(Object.keys(c1).sort()).to.deep.equal(['connector_id', 'created_at', 'extra', 'links', 'node_uuid', 'type', 'updated_at', 'uuid']);
    const c2 = await create('connectors', { node_uuid: nodes.b, type: 'wwpn', connector_id: '50:05:07:68:01:40:1a:2b' });
    expect((await call(t, 'GET', `/v1/volume/connectors/${c1.uuid as string}`)).json()).to.deep.equal(c1);

    const plain = (await call(t, 'GET', '/v1/volume/connectors')).json<{ connectors: Obj[] }>();
    expect(plain.connectors.map((c) => c.uuid)).to.deep.equal([c1.uuid, c2.uuid]);
    expect(Object.keys(plain.connectors[0]).sort()).to.deep.equal(['connector_id', 'links', 'node_uuid', 'type', 'uuid']);
    expect((await call(t, 'GET', '/v1/volume/connectors?detail=true')).json<{ connectors: Obj[] }>().connectors).to.deep.equal([c1, c2]);
    const fielded = (await call(t, 'GET', '/v1/volume/connectors?fields=type')).json<{ connectors: Obj[] }>();
    expect(fielded.connectors[1]).to.deep.equal({ type: 'wwpn', links: c2.links });
    expect((await call(t, 'GET', `/v1/volume/connectors/${c2.uuid as string}?fields=connector_id`)).json()).to.deep.equal({ connector_id: c2.connector_id, links: c2.links });
    for (const url of ['/v1/volume/connectors?node=node-b', `/v1/volume/connectors?node=${nodes.b}`, '/v1/nodes/node-b/volume/connectors']) {
      expect((await call(t, 'GET', url)).json<{ connectors: Obj[] }>().connectors.map((c) => c.uuid), url).to.deep.equal([c2.uuid]);
    }
    expectFault(await call(t, 'GET', '/v1/volume/connectors?detail=true&fields=type'), 400, "Can't fetch a subset of fields");
    expectFault(await call(t, 'GET', '/v1/volume/connectors?fields=type,colour'), 400, 'colour');
    expectFault(await call(t, 'GET', '/v1/volume/connectors?sort_key=extra'), 400, 'extra');
    expectFault(await call(t, 'GET', '/v1/nodes/no-such-node/volume/connectors'), 404);
    // Addressing one connector below a node is Ironic's MalformedRequestURI.
    expectFault(await call(t, 'GET', `/v1/nodes/node-a/volume/connectors/${c1.uuid as string}`), 400, 'Malformed request URI.');
    expectFault(await call(t, 'GET', '/v1/volume/connectors/not-a-uuid'), 400, 'not-a-uuid');
    expectFault(await call(t, 'GET', `/v1/volume/connectors/${MISSING}`), 404, `Volume connector ${MISSING} could not be found.`);
  });

  it('pages and sorts connectors: next only after a full page, marker, sort_key and sort_dir', async () => {
    const made: Obj[] = [];
    for (const id of ['c', 'a', 'b']) made.push(await create('connectors', { node_uuid: nodes.a, type: 'iqn', connector_id: `iqn.x:${id}` }));
    const first = (await call(t, 'GET', '/v1/volume/connectors?limit=2')).json<{ connectors: Obj[]; next?: string }>();
    expect(first.connectors.map((c) => c.uuid)).to.deep.equal([made[0].uuid, made[1].uuid]);
    expect(first.next).to.include(`marker=${made[1].uuid as string}`).and.include('limit=2').and.include('/v1/volume/connectors?');
    const second = (await call(t, 'GET', first.next!.replace(/^https?:\/\/[^/]+/, ''))).json<{ connectors: Obj[]; next?: string }>();
    expect(second.connectors.map((c) => c.uuid)).to.deep.equal([made[2].uuid]);
    expect(second).to.not.have.property('next');
    const sorted = (await call(t, 'GET', '/v1/volume/connectors?sort_key=connector_id&sort_dir=desc')).json<{ connectors: Obj[] }>();
    expect(sorted.connectors.map((c) => c.connector_id)).to.deep.equal(['iqn.x:c', 'iqn.x:b', 'iqn.x:a']);
  });

  it('refuses a second connector of the same type and id, on any node, with 409', async () => {
    await create('connectors', { node_uuid: nodes.a, type: 'iqn', connector_id: 'iqn.x:dup' });
    expectFault(await call(t, 'POST', '/v1/volume/connectors', { body: { node_uuid: nodes.b, type: 'iqn', connector_id: 'iqn.x:dup' } }), 409,
      'A volume connector with type iqn and connector ID iqn.x:dup already exists.');
    await create('connectors', { node_uuid: nodes.b, type: 'ip', connector_id: 'iqn.x:dup' });
    expect(await count('volume_connectors')).to.equal(2);
  });

  it('creates targets, masks secrets in their properties, and refuses a boot index twice on one node', async () => {
    const t1 = await create('targets', {
      node_uuid: nodes.a, volume_type: 'iscsi', volume_id: 'vol-1', boot_index: 0,
      properties: { target_iqn: 'iqn.x:t', auth_password: 'chap-secret' },
    });
    expect(t1).to.include({ node_uuid: nodes.a, volume_type: 'iscsi', volume_id: 'vol-1', boot_index: 0 });
    expect(t1.properties).to.deep.equal({ target_iqn: 'iqn.x:t', auth_password: '******' });
    const stored = await t.tdb.knex('volume_targets').first('properties');
    expect(stored.properties.auth_password).to.equal('chap-secret');
    expectFault(await call(t, 'POST', '/v1/volume/targets', { body: { node_uuid: nodes.a, volume_type: 'iscsi', volume_id: 'vol-2', boot_index: 0 } }), 409,
      "A volume target with boot index '0' for the same node already exists.");
    await create('targets', { node_uuid: nodes.b, volume_type: 'iscsi', volume_id: 'vol-2', boot_index: 0 });
    const list = (await call(t, 'GET', '/v1/nodes/node-a/volume/targets')).json<{ targets: Obj[] }>();
    expect(list.targets).to.have.length(1);
    expect(Object.keys(list.targets[0]).sort()).to.deep.equal(['boot_index', 'links', 'node_uuid', 'uuid', 'volume_id', 'volume_type']);
    expectFault(await call(t, 'POST', '/v1/volume/targets', { body: { node_uuid: MISSING, volume_type: 'iscsi', volume_id: 'v', boot_index: 1 } }), 400, MISSING);
    expectFault(await call(t, 'POST', '/v1/nodes/node-a/volume/targets', { body: { node_uuid: nodes.a, volume_type: 'iscsi', volume_id: 'v', boot_index: 1 } }), 400, 'Malformed');
    expect(await count('volume_targets')).to.equal(2);
  });

  it('changes and deletes a connector only while its node is powered off', async () => {
    const c = await create('connectors', { node_uuid: nodes.a, type: 'iqn', connector_id: 'iqn.x:p', extra: { a: 1, b: 2 } });
    const url = `/v1/volume/connectors/${c.uuid as string}`;
    await power(nodes.a, 'power on');
    expectFault(await call(t, 'PATCH', url, { body: [{ op: 'replace', path: '/connector_id', value: 'iqn.x:q' }] }), 400,
      `The requested action "volume connector update" can not be performed on node "${nodes.a}" while it is in state "power on".`);
    expectFault(await call(t, 'DELETE', url), 400, 'The requested action "volume connector deletion" can not be performed');
    expect((await call(t, 'GET', url)).json<Obj>().connector_id).to.equal('iqn.x:p');

    // Not waited for: the change runs after the power off the node has queued.
    const off = await call(t, 'PUT', `/v1/nodes/${nodes.a}/states/power`, { body: { target: 'power off' } });
    expect(off.statusCode, off.body).to.equal(202);
    const res = await call(t, 'PATCH', url, { body: [{ op: 'replace', path: '/connector_id', value: 'iqn.x:q' }, { op: 'remove', path: '/extra/b' }] });
    expect(res.statusCode, res.body).to.equal(200);
    expect(res.json<Obj>()).to.include({ connector_id: 'iqn.x:q' });
    expect(res.json<Obj>().extra).to.deep.equal({ a: 1 });
    expect(res.json<Obj>().updated_at).to.be.a('string');
    const cleared = await call(t, 'PATCH', url, { body: [{ op: 'remove', path: '/extra' }] });
    expect(cleared.json<Obj>().extra).to.deep.equal({});

    const del = await call(t, 'DELETE', url);
    expect(del.statusCode, del.body).to.equal(204);
    expectFault(await call(t, 'GET', url), 404);
  });

  it('moves a target to another node, checked against that node', async () => {
    const tg = await create('targets', { node_uuid: nodes.a, volume_type: 'iscsi', volume_id: 'vol-m', boot_index: 3 });
    const url = `/v1/volume/targets/${tg.uuid as string}`;
    await power(nodes.b, 'power on');
    expectFault(await call(t, 'PATCH', url, { body: [{ op: 'replace', path: '/node_uuid', value: nodes.b }] }), 400, `on node "${nodes.b}"`);
    await power(nodes.b, 'power off');
    const moved = await call(t, 'PATCH', url, { body: [{ op: 'replace', path: '/node_uuid', value: nodes.b }, { op: 'replace', path: '/boot_index', value: 4 }] });
    expect(moved.statusCode, moved.body).to.equal(200);
    expect(moved.json<Obj>()).to.include({ node_uuid: nodes.b, boot_index: 4 });
    expect((await call(t, 'GET', '/v1/nodes/node-b/volume/targets')).json<{ targets: Obj[] }>().targets.map((x) => x.uuid)).to.deep.equal([tg.uuid]);
    expectFault(await call(t, 'PATCH', url, { body: [{ op: 'replace', path: '/node_uuid', value: MISSING }] }), 400, MISSING);
  });

  it('refuses patches Ironic refuses, changing nothing', async () => {
    const c = await create('connectors', { node_uuid: nodes.a, type: 'iqn', connector_id: 'iqn.x:r' });
    const url = `/v1/volume/connectors/${c.uuid as string}`;
    await power(nodes.a, 'power off');
    expectFault(await call(t, 'PATCH', url, { body: [{ op: 'replace', path: '/uuid', value: MISSING }] }), 400,
      'Cannot patch /uuid. Only the following can be updated: connector_id, extra, node_uuid, type');
    expectFault(await call(t, 'PATCH', url, { body: [{ op: 'remove', path: '/type' }] }), 400, '/type');
    expectFault(await call(t, 'PATCH', url, { body: [{ op: 'replace', path: '/type', value: 'floppy' }] }), 400, 'floppy');
    expectFault(await call(t, 'PATCH', url, { body: [{ op: 'replace', path: '/node_uuid', value: 'node-b' }] }), 400, 'Expected a UUID for node_uuid');
    expectFault(await call(t, 'PATCH', url, { body: [{ op: 'move', from: '/type', path: '/connector_id' }] }), 400);
    expect((await call(t, 'GET', url)).json()).to.deep.equal(c);
  });

  it('goes with its node: deleting the node deletes its connectors and targets', async () => {
    await create('connectors', { node_uuid: nodes.a, type: 'mac', connector_id: '52:54:00:00:00:01' });
    await create('targets', { node_uuid: nodes.a, volume_type: 'iscsi', volume_id: 'vol-d', boot_index: 0 });
    const del = await call(t, 'DELETE', `/v1/nodes/${nodes.a}`);
    expect(del.statusCode, del.body).to.equal(204);
    expect(await count('volume_connectors')).to.equal(0);
    expect(await count('volume_targets')).to.equal(0);
  });
});
