/**
 * The chassis resource through `app.inject()` against a real database: create, show, list
 * (defaults, detail, fields, paging), PATCH, DELETE, the nodes of a chassis, and a node's
 * chassis_uuid, with Ironic's codes and messages.
 */
import { expect } from 'chai';
import { faultOf, inject, suiteApp } from '../helpers/app.js';

type Obj = { [key: string]: unknown };
const call = inject;

describe('chassis API', function () {
  const t = suiteApp({ conductor: false, clear: ['nodes', 'chassis'] });

  async function createChassis(body: Obj = {}): Promise<Obj> {
    const res = await call(t, 'POST', '/v1/chassis', { body });
    expect(res.statusCode, res.body).to.equal(201);
    return res.json<Obj>();
  }

  it('creates a chassis: 201, Location, every field, self and bookmark links for it and its nodes', async () => {
    const res = await call(t, 'POST', '/v1/chassis', { body: { description: 'rack 1 ☃', extra: { row: 3 } } });
    expect(res.statusCode, res.body).to.equal(201);
    const c = res.json<Obj>();
    expect(res.headers.location).to.equal(`http://localhost:80/v1/chassis/${String(c.uuid)}`);
    expect(Object.keys(c)).to.deep.equal(['uuid', 'description', 'extra', 'created_at', 'updated_at', 'links', 'nodes']);
    expect(c).to.include({ description: 'rack 1 ☃', updated_at: null });
    expect(c.extra).to.deep.equal({ row: 3 });
    expect(c.created_at).to.match(/\+00:00$/);
    expect(c.links).to.deep.equal([
      { href: `http://localhost:80/v1/chassis/${String(c.uuid)}`, rel: 'self' },
      { href: `http://localhost:80/chassis/${String(c.uuid)}`, rel: 'bookmark' },
    ]);
    expect(c.nodes).to.deep.equal([
      { href: `http://localhost:80/v1/chassis/${String(c.uuid)}/nodes`, rel: 'self' },
      { href: `http://localhost:80/chassis/${String(c.uuid)}/nodes`, rel: 'bookmark' },
    ]);
    const shown = await call(t, 'GET', `/v1/chassis/${String(c.uuid)}`, { version: '1.1' });
    expect(shown.json()).to.deep.equal(c);
    // The bookmark link works: Ironic serves its collections without /v1 too.
    expect((await call(t, 'GET', `/chassis/${String(c.uuid)}`)).json()).to.deep.equal(c);
  });

  it('keeps a UUID the client chose, and refuses it the second time with 409', async () => {
    const uuid = '0e4e1f6a-5d3c-4b8a-9e0f-0123456789ab';
    expect((await createChassis({ uuid: uuid.toUpperCase() })).uuid).to.equal(uuid);
    const again = await call(t, 'POST', '/v1/chassis', { body: { uuid } });
    expect(again.statusCode).to.equal(409);
    expect(faultOf(again.body).faultstring).to.equal(`A chassis with UUID ${uuid} already exists.`);
  });

  it('lists uuid and description by default, everything with detail, and what fields asks for plus links', async () => {
    const a = await createChassis({ description: 'a' });
    const b = await createChassis({ description: 'b', extra: { k: 1 } });
    const list = (await call(t, 'GET', '/v1/chassis')).json<{ chassis: Obj[] }>();
    expect(list.chassis).to.deep.equal([
      { uuid: a.uuid, description: 'a', links: a.links },
      { uuid: b.uuid, description: 'b', links: b.links },
    ]);
    for (const url of ['/v1/chassis/detail', '/v1/chassis?detail=true']) {
      expect((await call(t, 'GET', url)).json<{ chassis: Obj[] }>().chassis, url).to.deep.equal([a, b]);
    }
    const fielded = (await call(t, 'GET', '/v1/chassis?fields=extra')).json<{ chassis: Obj[] }>();
    expect(fielded.chassis[1]).to.deep.equal({ extra: { k: 1 }, links: b.links });
    const one = (await call(t, 'GET', `/v1/chassis/${String(b.uuid)}?fields=description`)).json<Obj>();
    expect(one).to.deep.equal({ description: 'b', links: b.links });
  });

  it('pages with limit, marker and a next link that keeps the other parameters', async () => {
    const made = [];
    for (const d of ['c', 'a', 'b']) made.push(await createChassis({ description: d }));
    const first = (await call(t, 'GET', '/v1/chassis?limit=2&sort_key=description&sort_dir=desc')).json<{ chassis: Obj[]; next?: string }>();
    expect(first.chassis.map((c) => c.description)).to.deep.equal(['c', 'b']);
    const next = new URL(first.next!);
    expect(next.pathname).to.equal('/v1/chassis');
    expect(Object.fromEntries(next.searchParams)).to.deep.equal({ sort_key: 'description', sort_dir: 'desc', limit: '2', marker: String(made[2].uuid) });
    const second = (await call(t, 'GET', `${next.pathname}${next.search}`)).json<{ chassis: Obj[]; next?: string }>();
    expect(second.chassis.map((c) => c.description)).to.deep.equal(['a']);
    expect(second.next).to.equal(undefined);
  });

  it('patches description and extra; a removed extra is {} and a removed description null', async () => {
    const c = await createChassis({ description: 'old', extra: { a: 1, b: 2 } });
    const res = await call(t, 'PATCH', `/v1/chassis/${String(c.uuid)}`, {
      body: [{ op: 'replace', path: '/description', value: 'new' }, { op: 'remove', path: '/extra/a' }, { op: 'add', path: '/extra/c', value: { d: 1 } }],
    });
    expect(res.statusCode, res.body).to.equal(200);
    expect(res.json<Obj>()).to.include({ description: 'new' });
    expect(res.json<Obj>().extra).to.deep.equal({ b: 2, c: { d: 1 } });
    expect(res.json<Obj>().updated_at).to.be.a('string');
    const cleared = await call(t, 'PATCH', `/v1/chassis/${String(c.uuid)}`, { body: [{ op: 'remove', path: '/extra' }, { op: 'remove', path: '/description' }] });
    expect(cleared.json<Obj>()).to.include({ description: null });
    expect(cleared.json<Obj>().extra).to.deep.equal({});
    expect((await call(t, 'GET', `/v1/chassis/${String(c.uuid)}`)).json<Obj>().extra).to.deep.equal({});
  });

  it('holds nodes: chassis_uuid on create and PATCH, the nodes of a chassis, the chassis_uuid filter, and removal from 1.25', async () => {
    const c1 = await createChassis();
    const c2 = await createChassis();
    const node = await call(t, 'POST', '/v1/nodes', { body: { name: 'n1', driver: 'fake-hardware', chassis_uuid: String(c1.uuid).toUpperCase() } });
    expect(node.statusCode, node.body).to.equal(201);
    expect(node.json<Obj>().chassis_uuid).to.equal(c1.uuid);
    await call(t, 'POST', '/v1/nodes', { body: { name: 'n2', driver: 'fake-hardware' } });
    const names = async (url: string) => (await call(t, 'GET', url)).json<{ nodes: Obj[] }>().nodes.map((n) => n.name);
    expect(await names(`/v1/chassis/${String(c1.uuid)}/nodes`)).to.deep.equal(['n1']);
    expect(await names(`/v1/chassis/${String(c1.uuid)}/nodes/detail`)).to.deep.equal(['n1']);
    expect(await names(`/v1/nodes?chassis_uuid=${String(c1.uuid)}`)).to.deep.equal(['n1']);
    expect(await names(`/v1/chassis/${String(c2.uuid)}/nodes`)).to.deep.equal([]);

    const moved = await call(t, 'PATCH', '/v1/nodes/n1', { body: [{ op: 'replace', path: '/chassis_uuid', value: c2.uuid }] });
    expect(moved.json<Obj>().chassis_uuid).to.equal(c2.uuid);
    expect(await names(`/v1/chassis/${String(c2.uuid)}/nodes`)).to.deep.equal(['n1']);

    const old = await call(t, 'PATCH', '/v1/nodes/n1', { body: [{ op: 'remove', path: '/chassis_uuid' }], version: '1.24' });
    expect(old.statusCode).to.equal(406);
    const removed = await call(t, 'PATCH', '/v1/nodes/n1', { body: [{ op: 'remove', path: '/chassis_uuid' }], version: '1.25' });
    expect(removed.statusCode, removed.body).to.equal(200);
    expect(removed.json<Obj>().chassis_uuid).to.equal(null);
  });

  it('deletes an empty chassis (204, then 404) and refuses one with nodes until they leave', async () => {
    const c = await createChassis();
    await call(t, 'POST', '/v1/nodes', { body: { name: 'n1', driver: 'fake-hardware', chassis_uuid: c.uuid } });
    const refused = await call(t, 'DELETE', `/v1/chassis/${String(c.uuid)}`);
    expect(refused.statusCode).to.equal(400);
    expect(faultOf(refused.body).faultstring).to.equal(`Cannot complete the requested action because chassis ${String(c.uuid)} contains nodes.`);
    expect((await call(t, 'GET', `/v1/chassis/${String(c.uuid)}`)).statusCode).to.equal(200);
    expect((await call(t, 'DELETE', '/v1/nodes/n1')).statusCode).to.equal(204);
    expect((await call(t, 'DELETE', `/v1/chassis/${String(c.uuid)}`)).statusCode).to.equal(204);
    const gone = await call(t, 'GET', `/v1/chassis/${String(c.uuid)}`);
    expect(gone.statusCode).to.equal(404);
    expect(faultOf(gone.body).faultstring).to.equal(`Chassis ${String(c.uuid)} could not be found.`);
  });

  it('keeps a node out of a chassis deleted at the same time: one of the two requests wins', async () => {
    for (let i = 0; i < 5; i++) {
      const c = await createChassis();
      const [del, node] = await Promise.all([
        call(t, 'DELETE', `/v1/chassis/${String(c.uuid)}`),
        call(t, 'POST', '/v1/nodes', { body: { driver: 'fake-hardware', chassis_uuid: c.uuid } }),
      ]);
      // Either the chassis went first (the node is refused) or the node did (the chassis is kept).
      expect(`${del.statusCode}/${node.statusCode}`, `${del.body} ${node.body}`).to.be.oneOf(['204/400', '400/201']);
      const dangling = await t.tdb.knex('nodes').leftJoin('chassis', 'chassis.uuid', 'nodes.chassis_uuid')
        .whereNotNull('nodes.chassis_uuid').whereNull('chassis.id').count({ n: '*' }).first();
      expect(Number(dangling?.n)).to.equal(0);
    }
  });

  it('advertises chassis and, from 1.23, portgroups in /v1', async () => {
    const old = (await call(t, 'GET', '/v1', { version: '1.22' })).json<Obj>();
    expect(old).to.have.property('chassis');
    expect(old).to.not.have.property('portgroups');
    expect((await call(t, 'GET', '/v1', { version: '1.23' })).json<Obj>()).to.have.property('portgroups');
  });
});
