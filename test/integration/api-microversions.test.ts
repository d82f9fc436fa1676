/**
 * The API changes of microversions 1.79 and later, each asked at its version and just below it,
 * with Ironic's status codes and messages.
 */
import { expect } from 'chai';
import type { LightMyRequestResponse } from 'fastify';
import { buildTestApp, faultOf, type TestApp } from '../helpers/app.js';

type Obj = { [key: string]: unknown };
type Method = 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE';

function call(t: TestApp, method: Method, url: string, version: string, body?: unknown): Promise<LightMyRequestResponse> {
  return t.app.inject({
    method, url,
    headers: { 'x-openstack-ironic-api-version': version },
    ...(body === undefined ? {} : { payload: body as object }),
  });
}

function expectFault(res: LightMyRequestResponse, status: number, message: string): void {
  expect(res.statusCode, res.body).to.equal(status);
  expect(faultOf(res.body).faultstring).to.equal(message);
}

async function createNode(t: TestApp, body: Obj, version = 'latest'): Promise<Obj> {
  const res = await call(t, 'POST', '/v1/nodes', version, { driver: 'fake-hardware', ...body });
  expect(res.statusCode, res.body).to.equal(201);
  return res.json<Obj>();
}

describe('microversions 1.79 and later', function () {
  let t: TestApp;

  before(async () => {
    t = await buildTestApp({}, { conductor: false });
  });

  after(async () => {
    await t?.close();
  });

  describe('1.81 node inventory', () => {
    it('is not found below 1.81 and says which node has none from 1.81', async () => {
      const node = await createNode(t, { name: 'inv-node' });
      expectFault(await call(t, 'GET', '/v1/nodes/inv-node/inventory', '1.80'), 404, 'The resource could not be found.');
      expectFault(await call(t, 'GET', '/v1/nodes/inv-node/inventory', '1.81'), 404, `Node inventory record for node ${String(node.uuid)} could not be found.`);
    });
  });

  describe('1.82 shards', () => {
    it('sets, shows and filters by shard, and counts the shards', async () => {
      expect((await call(t, 'POST', '/v1/nodes', '1.81', { driver: 'fake-hardware', shard: 'a' })).statusCode).to.equal(406);
      const a1 = await createNode(t, { name: 'shard-a1', shard: 'a' }, '1.82');
      expect(a1.shard).to.equal('a');
      await createNode(t, { name: 'shard-a2', shard: 'a' });
      const b = await createNode(t, { name: 'shard-b' });
      expect(b.shard).to.equal(null);
      const patched = await call(t, 'PATCH', '/v1/nodes/shard-b', '1.82', [{ op: 'add', path: '/shard', value: 'b' }]);
      expect(patched.statusCode, patched.body).to.equal(200);
      expect(patched.json<Obj>().shard).to.equal('b');
      expect((await call(t, 'GET', '/v1/nodes/shard-b', '1.81')).json<Obj>()).to.not.have.property('shard');

      const names = async (query: string) =>
        (await call(t, 'GET', `/v1/nodes?${query}`, '1.82')).json<{ nodes: Array<{ name: string }> }>().nodes.map((n) => n.name).sort();
      expect(await names('shard=a')).to.deep.equal(['shard-a1', 'shard-a2']);
      // A list, lower-cased and without repeats, as Ironic's string_list.
      expect(await names('shard=A,%20b,a')).to.deep.equal(['shard-a1', 'shard-a2', 'shard-b']);
      expect(await names('sharded=true')).to.deep.equal(['shard-a1', 'shard-a2', 'shard-b']);
      expect(await names('sharded=false')).to.not.include('shard-a1');
      expectFault(await call(t, 'GET', '/v1/nodes?shard=a', '1.81'), 406, 'Request not acceptable. The minimal required API version should be 1.82');
      expectFault(await call(t, 'GET', '/v1/nodes?sharded=true', '1.81'), 406, 'Request not acceptable. The minimal required API version should be 1.82');

      const shards = await call(t, 'GET', '/v1/shards', '1.82');
      expect(shards.statusCode, shards.body).to.equal(200);
      const list = shards.json<{ shards: Array<{ name: string; count: number }> }>().shards;
      expect(list.find((s) => s.name === 'a')?.count).to.equal(2);
      expect(list.find((s) => s.name === 'b')?.count).to.equal(1);
      // Most nodes first; nodes without a shard are counted under "None", as Ironic shows them.
      expect(list.map((s) => s.count)).to.deep.equal([...list.map((s) => s.count)].sort((x, y) => y - x));
      expect(list.some((s) => s.name === 'None')).to.equal(true);
      expectFault(await call(t, 'GET', '/v1/shards', '1.81'), 404, 'The API version does not allow shards');
      expectFault(await call(t, 'GET', '/v1/shards/a', '1.82'), 404, 'The resource could not be found.');
      expect((await call(t, 'GET', '/v1', '1.82')).json<Obj>()).to.have.property('shards');
      expect((await call(t, 'GET', '/v1', '1.81')).json<Obj>()).to.not.have.property('shards');
    });
  });

  describe('1.83 parent and child nodes', () => {
    it('links a child to its parent, hides children from lists unless asked, and lists them', async () => {
      const parent = await createNode(t, { name: 'parent-1' });
      expect((await call(t, 'POST', '/v1/nodes', '1.82', { driver: 'fake-hardware', parent_node: 'parent-1' })).statusCode).to.equal(406);
      // By name or UUID; stored as the UUID.
      const child = await createNode(t, { name: 'child-1', parent_node: 'parent-1' }, '1.83');
      expect(child.parent_node).to.equal(parent.uuid);
      const other = await createNode(t, { name: 'child-2' });
      const patched = await call(t, 'PATCH', '/v1/nodes/child-2', '1.83', [{ op: 'add', path: '/parent_node', value: parent.uuid }]);
      expect(patched.statusCode, patched.body).to.equal(200);
      expect(patched.json<Obj>().parent_node).to.equal(parent.uuid);

      // A parent that does not exist, and one of another owner, are refused alike.
      expectFault(await call(t, 'POST', '/v1/nodes', '1.83', { driver: 'fake-hardware', parent_node: 'nope' }), 400,
        "Unable to apply the requested parent_node 'nope'. Requested value was invalid.");
      expectFault(await call(t, 'POST', '/v1/nodes', '1.83', { driver: 'fake-hardware', owner: 'p', parent_node: 'parent-1' }), 400,
        "Unable to apply the requested parent_node 'parent-1'. Requested value was invalid.");

      const names = async (query: string, version = '1.83') =>
        (await call(t, 'GET', `/v1/nodes${query}`, version)).json<{ nodes: Array<{ name: string }> }>().nodes.map((n) => n.name);
      expect(await names('')).to.include('parent-1').and.not.include('child-1');
      expect(await names('', '1.1')).to.not.include('child-1');
      expect(await names('?include_children=true')).to.include.members(['parent-1', 'child-1', 'child-2']);
      expect((await names(`?parent_node=${String(parent.uuid)}`)).sort()).to.deep.equal(['child-1', 'child-2']);
      expectFault(await call(t, 'GET', '/v1/nodes?include_children=true', '1.82'), 406, 'Request not acceptable. The minimal required API version should be 1.83');
      expectFault(await call(t, 'GET', `/v1/nodes?parent_node=${String(parent.uuid)}`, '1.82'), 406, 'Request not acceptable. The minimal required API version should be 1.83');

      const children = await call(t, 'GET', '/v1/nodes/parent-1/children', '1.83');
      expect(children.statusCode, children.body).to.equal(200);
      const body = children.json<{ children: string[]; links: { href: string; rel: string } }>();
      expect(body.children).to.deep.equal([child.uuid, other.uuid]);
      expect(body.links.rel).to.equal('children');
      expect(body.links.href).to.match(new RegExp(`/v1/nodes\\?parent_node=${String(parent.uuid)}$`));
      expectFault(await call(t, 'GET', '/v1/nodes/parent-1/children', '1.82'), 404, 'The resource could not be found.');

      const removed = await call(t, 'PATCH', '/v1/nodes/child-2', '1.83', [{ op: 'remove', path: '/parent_node' }]);
      expect(removed.json<Obj>().parent_node).to.equal(null);
    });
  });
});
