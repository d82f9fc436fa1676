/**
 * The node resource through `app.inject()` against a real database: create, show, list
 * (fields, detail, pagination, filters), PATCH, DELETE, states, validate, maintenance and
 * provision verbs, with Ironic's status codes and messages.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import { HashRing } from '../../common/hash-ring.js';
import { buildTestApp, createNode as postNode, expectFault, type TestApp, inject, suiteApp } from '../helpers/app.js';

type Obj = { [key: string]: unknown };

interface NodeBody extends Obj {
  uuid: string;
  name: string | null;
  provision_state: string;
  target_provision_state: string | null;
  maintenance: boolean;
  maintenance_reason: string | null;
  driver_info: Obj;
  extra: Obj;
  properties: Obj;
  links: Array<{ href: string; rel: string }>;
}

interface NodeList {
  nodes: NodeBody[];
  next?: string;
}

const call = inject;

/** Asserts Ironic's error body and status; returns the faultstring. */

/** Rows in a table (bigint counts come back as numbers or strings depending on the pool). */
async function countRows(t: TestApp, table: string): Promise<number> {
  const row = await t.tdb.knex(table).count({ n: '*' }).first();
  return Number(row?.n);
}

/** The path and query of an absolute `next` link, for inject. */
function pathOf(link: string): string {
  const u = new URL(link);
  return u.pathname + u.search;
}

describe('nodes API', function () {
  // No conductor: nodes stay exactly as the API leaves them (intents stay queued). Ports,
  // intents and history go with their node (ON DELETE CASCADE).
  const t = suiteApp({ conductor: false, clear: ['nodes'] });

  const createNode = (body: Obj = {}, version?: string) => postNode<NodeBody>(t, body, version);

  async function getNode(ident: string, version?: string): Promise<NodeBody> {
    const res = await call(t, 'GET', `/v1/nodes/${ident}`, { version });
    expect(res.statusCode, res.body).to.equal(200);
    return res.json<NodeBody>();
  }

  async function listNames(query: string): Promise<string[]> {
    const res = await call(t, 'GET', `/v1/nodes?${query}`);
    expect(res.statusCode, res.body).to.equal(200);
    return res.json<NodeList>().nodes.map((n) => String(n.name)).sort();
  }

  async function rowOf(uuid: string): Promise<Obj> {
    return t.tdb.knex('nodes').where({ uuid }).first() as Promise<Obj>;
  }

  describe('create', () => {
    it('answers 201 with the full node, a Location and an ETag, in enroll at the latest version', async () => {
      const res = await call(t, 'POST', '/v1/nodes', {
        body: { name: 'node-1', driver: 'fake-hardware', driver_info: { fake_delay_ms: 0 }, resource_class: 'gold', properties: { cpus: 4 } },
      });
      expect(res.statusCode, res.body).to.equal(201);
      const node = res.json<NodeBody>();
      expect(node.uuid).to.match(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
      expect(res.headers.location).to.match(new RegExp(`/v1/nodes/${node.uuid}$`));
      expect(res.headers.etag).to.match(/^"\d+"$/);
      expect(node).to.include({
        name: 'node-1', driver: 'fake-hardware', provision_state: 'enroll', target_provision_state: null,
        maintenance: false, resource_class: 'gold', power_interface: 'fake', management_interface: 'fake',
        conductor_group: '', protected: false, retired: false, owner: null, lessee: null, description: null,
      });
      expect(node.properties).to.deep.equal({ cpus: 4 });
      expect(node.driver_info).to.deep.equal({ fake_delay_ms: 0 });
      for (const key of ['driver_internal_info', 'instance_info', 'instance_uuid', 'extra', 'power_state', 'target_power_state',
        'last_error', 'reservation', 'console_enabled', 'console_interface', 'boot_interface', 'fault', 'conductor',
        'allocation_uuid', 'network_data', 'boot_mode', 'secure_boot', 'created_at', 'updated_at', 'ports', 'states']) {
        expect(node, key).to.have.property(key);
      }
      expect(node.links.map((l) => l.rel)).to.deep.equal(['self', 'bookmark']);
      expect(node.links[0].href).to.match(new RegExp(`/v1/nodes/${node.uuid}$`));
      expect(await getNode(node.uuid)).to.deep.equal(node);
    });

    it('puts new nodes in available below 1.11 and in enroll from 1.11', async () => {
      const old = await createNode({}, '1.10');
      expect(old.provision_state).to.equal('available');
      const current = await createNode({}, '1.11');
      expect(current.provision_state).to.equal('enroll');
    });

    it('accepts a client-chosen UUID and refuses the same UUID twice with 409', async () => {
      const uuid = '0b4f8a4e-1111-4c4c-9c9c-0123456789ab';
      expect((await createNode({ uuid })).uuid).to.equal(uuid);
      expectFault(await call(t, 'POST', '/v1/nodes', { body: { driver: 'fake-hardware', uuid } }), 409, uuid);
    });

    it('refuses a second node with the same name with 409', async () => {
      await createNode({ name: 'twin' });
      expectFault(await call(t, 'POST', '/v1/nodes', { body: { driver: 'fake-hardware', name: 'twin' } }), 409, 'twin');
      expect(await countRows(t, 'nodes')).to.equal(1);
    });
  });

  describe('show', () => {
    it('finds a node by UUID (any case) and by name', async () => {
      const node = await createNode({ name: 'by-name' });
      expect((await getNode(node.uuid)).uuid).to.equal(node.uuid);
      expect((await getNode(node.uuid.toUpperCase())).uuid).to.equal(node.uuid);
      expect((await getNode('by-name')).uuid).to.equal(node.uuid);
    });

    it('answers 404 with Ironic\'s message for an unknown UUID or name', async () => {
      const uuid = '6a3e2b1c-0000-4000-8000-000000000000';
      expectFault(await call(t, 'GET', `/v1/nodes/${uuid}`), 404, `Node ${uuid} could not be found.`);
      expectFault(await call(t, 'GET', '/v1/nodes/no-such-node'), 404, 'Node no-such-node could not be found.');
    });

    it('returns an ETag that tracks the node\'s version', async () => {
      const node = await createNode({ name: 'etag' });
      const first = await call(t, 'GET', `/v1/nodes/${node.uuid}`);
      expect(first.headers.etag).to.match(/^"\d+"$/);
      await call(t, 'PATCH', `/v1/nodes/${node.uuid}`, { body: [{ op: 'replace', path: '/description', value: 'x' }] });
      const second = await call(t, 'GET', `/v1/nodes/${node.uuid}`);
      expect(second.headers.etag).to.match(/^"\d+"$/).and.not.equal(first.headers.etag);
    });

    it('restricts a node to ?fields, always with uuid', async () => {
      const node = await createNode({ name: 'fielded', owner: 'alice' });
      const res = await call(t, 'GET', `/v1/nodes/${node.uuid}?fields=name,owner`);
      expect(res.statusCode).to.equal(200);
      expect(res.json()).to.deep.equal({ uuid: node.uuid, name: 'fielded', owner: 'alice' });
    });
  });

  describe('list', () => {
    it('shows the default fields only, and every field with /detail or ?detail=true', async () => {
      const node = await createNode({ name: 'listed', owner: 'o' });
      const plain = (await call(t, 'GET', '/v1/nodes')).json<NodeList>();
      expect(plain.nodes).to.have.length(1);
      expect(Object.keys(plain.nodes[0]).sort()).to.deep.equal(
        ['instance_uuid', 'links', 'maintenance', 'name', 'power_state', 'provision_state', 'uuid'],
      );
      expect(plain).to.not.have.property('next');
      const full = await getNode(node.uuid);
      for (const url of ['/v1/nodes/detail', '/v1/nodes?detail=true']) {
        const res = await call(t, 'GET', url);
        expect(res.statusCode, url).to.equal(200);
        expect(res.json<NodeList>().nodes, url).to.deep.equal([full]);
      }
    });

    it('restricts every listed node to ?fields', async () => {
      await createNode({ name: 'f1', owner: 'a' });
      await createNode({ name: 'f2', owner: 'b' });
      const res = await call(t, 'GET', '/v1/nodes?fields=name,owner&sort_key=name');
      expect(res.statusCode).to.equal(200);
      const nodes = res.json<NodeList>().nodes;
      expect(nodes.map((n) => Object.keys(n).sort())).to.deep.equal([['name', 'owner', 'uuid'], ['name', 'owner', 'uuid']]);
      expect(nodes.map((n) => n.owner)).to.deep.equal(['a', 'b']);
    });

    it('shows every change of a node, its lock included, on the next list (rendered nodes are reused only while unchanged)', async () => {
      const node = await createNode({ name: 'cached', extra: { n: 1 } });
      const detail = async (version = 'latest') => {
        const res = await call(t, 'GET', '/v1/nodes/detail', { version });
        expect(res.statusCode, res.body).to.equal(200);
        expect(res.headers['content-type']).to.match(/^application\/json/);
        return res.json<NodeList>().nodes[0];
      };
      expect((await detail()).extra).to.deep.equal({ n: 1 });
      const patched = await call(t, 'PATCH', `/v1/nodes/${node.uuid}`, { body: [{ op: 'replace', path: '/extra/n', value: 2 }] });
      expect(patched.statusCode, patched.body).to.equal(200);
      expect((await detail()).extra).to.deep.equal({ n: 2 });
      // A lock taken and dropped does not bump the version: the reservation is part of the stamp.
      await t.tdb.knex('nodes').where({ uuid: node.uuid }).update({ reservation: 'conductor-x' });
      expect((await detail()).reservation).to.equal('conductor-x');
      await t.tdb.knex('nodes').where({ uuid: node.uuid }).update({ reservation: null });
      expect((await detail()).reservation).to.equal(null);
      // Each microversion gets its own rendering.
      expect(await detail('1.1')).to.not.have.property('lessee');
      expect(await detail()).to.have.property('lessee');
      expect(await getNode(node.uuid)).to.deep.equal(await detail());
    });

    describe('pagination', () => {
      // Creation order; two nodes have no name, so name sorts cross the NULL block.
      const NAMES = ['n-c', 'n-a', null, 'n-e', 'n-b', null, 'n-d', 'n-g', 'n-f'];
      let created: NodeBody[];

      beforeEach(async () => {
        created = [];
        for (const name of NAMES) created.push(await createNode(name === null ? {} : { name }));
      });

      /** Follows `next` from the first page; checks `next` is there exactly on full pages. */
      async function walk(first: string, limit: number): Promise<string[]> {
        const seen: string[] = [];
        let url: string | undefined = first;
        for (let page = 0; url !== undefined; page++) {
          expect(page, 'too many pages').to.be.below(20);
          const res = await call(t, 'GET', url);
          expect(res.statusCode, res.body).to.equal(200);
          const body = res.json<NodeList>();
          expect(body.nodes.length).to.be.at.most(limit);
          if (body.nodes.length === limit) {
            expect(body.next, `page ${page} is full`).to.be.a('string');
            const next = new URL(body.next!);
            expect(next.searchParams.get('limit')).to.equal(String(limit));
            expect(next.searchParams.get('marker')).to.equal(body.nodes.at(-1)!.uuid);
          } else {
            expect(body, `page ${page} is not full`).to.not.have.property('next');
          }
          seen.push(...body.nodes.map((n) => n.uuid));
          url = body.next === undefined ? undefined : pathOf(body.next);
        }
        return seen;
      }

      const byIndex = (indexes: number[]): string[] => indexes.map((i) => created[i].uuid);
      const nameAsc = (): string[] => {
        const named = created.map((n, i) => ({ n, i })).filter(({ n }) => n.name !== null).sort((a, b) => a.n.name!.localeCompare(b.n.name!));
        const unnamed = created.map((n, i) => ({ n, i })).filter(({ n }) => n.name === null);
        return [...named, ...unnamed].map(({ n }) => n.uuid);
      };

      it('walks every node exactly once in id order, with next only on full pages', async () => {
        const all = byIndex(NAMES.map((_, i) => i));
        for (const limit of [1, 2, 3, 4, 9, 10]) {
          expect(await walk(`/v1/nodes?limit=${limit}`, limit), `limit=${limit}`).to.deep.equal(all);
        }
      });

      it('walks by name ascending (NULLs last) and descending (NULLs first)', async () => {
        // Postgres puts NULLs last ascending and first descending; id breaks ties.
        const asc = nameAsc();
        const unnamedDesc = [created[5].uuid, created[2].uuid];
        const desc = [...unnamedDesc, ...asc.slice(0, 7).reverse()];
        for (const limit of [2, 3]) {
          expect(await walk(`/v1/nodes?limit=${limit}&sort_key=name`, limit), `asc limit=${limit}`).to.deep.equal(asc);
          expect(await walk(`/v1/nodes?limit=${limit}&sort_key=name&sort_dir=desc`, limit), `desc limit=${limit}`).to.deep.equal(desc);
        }
        const unpaged = (await call(t, 'GET', '/v1/nodes?sort_key=name&sort_dir=desc')).json<NodeList>().nodes.map((n) => n.uuid);
        expect(unpaged).to.deep.equal(desc);
      });

      it('walks by creation time both ways without repeating the marker (microsecond timestamps)', async () => {
        const asc = byIndex(NAMES.map((_, i) => i));
        for (const limit of [2, 4]) {
          expect(await walk(`/v1/nodes?limit=${limit}&sort_key=created_at`, limit), `asc limit=${limit}`).to.deep.equal(asc);
          expect(await walk(`/v1/nodes?limit=${limit}&sort_key=created_at&sort_dir=desc`, limit), `desc limit=${limit}`)
            .to.deep.equal([...asc].reverse());
        }
      });

      it('keeps detail, sort and fields in the next link', async () => {
        const res = await call(t, 'GET', '/v1/nodes/detail?limit=2&sort_key=name&sort_dir=desc');
        const body = res.json<NodeList>();
        expect(new URL(body.next!).pathname).to.equal('/v1/nodes/detail');
        expect(Object.keys(body.nodes[0])).to.include('driver_info');
        const withFields = (await call(t, 'GET', '/v1/nodes?limit=2&fields=name')).json<NodeList>();
        const next = (await call(t, 'GET', pathOf(withFields.next!))).json<NodeList>();
        expect(next.nodes.map((n) => Object.keys(n).sort())).to.deep.equal([['name', 'uuid'], ['name', 'uuid']]);
      });

      it('caps limit at [api] max_limit', async () => {
        const capped = await buildTestApp({ GALVANIC_API__MAX_LIMIT: '5' }, { conductor: false });
        try {
          for (let i = 0; i < 7; i++) {
            const res = await call(capped, 'POST', '/v1/nodes', { body: { driver: 'fake-hardware', name: `cap-${i}` } });
            expect(res.statusCode).to.equal(201);
          }
          for (const url of ['/v1/nodes?limit=100', '/v1/nodes']) {
            const first = (await call(capped, 'GET', url)).json<NodeList>();
            expect(first.nodes, url).to.have.length(5);
            expect(new URL(first.next!).searchParams.get('limit')).to.equal('5');
            const second = (await call(capped, 'GET', pathOf(first.next!))).json<NodeList>();
            expect(second.nodes.map((n) => n.name)).to.deep.equal(['cap-5', 'cap-6']);
            expect(second).to.not.have.property('next');
          }
        } finally {
          await capped.close();
        }
      });
    });

    it('filters by driver, provision_state, maintenance, associated, owner, lessee, conductor_group, resource_class and fault', async () => {
      await createNode({ name: 'a', owner: 'alice', lessee: 'bob', conductor_group: 'Rack1', resource_class: 'gold' });
      const b = await createNode({ name: 'b', owner: 'carol', resource_class: 'silver' });
      const c = await createNode({ name: 'c' });
      const patched = await call(t, 'PATCH', `/v1/nodes/${b.uuid}`, {
        body: [{ op: 'add', path: '/instance_uuid', value: '9d1a6d8e-2f1b-4c3a-8e5f-6a7b8c9d0e1f' }],
      });
      expect(patched.statusCode, patched.body).to.equal(200);
      await t.tdb.knex('nodes').where({ uuid: c.uuid }).update({ maintenance: true, fault: 'power failure', provision_state: 'manageable' });
      // A hardware type this deployment does not enable, as another conductor may have left.
      await t.tdb.knex('nodes').insert({ uuid: '3c0d1b2a-9f8e-4d7c-b6a5-0f1e2d3c4b5a', name: 'd', driver: 'other-hw', provision_state: 'enroll' });

      expect(await listNames('driver=fake-hardware')).to.deep.equal(['a', 'b', 'c']);
      expect(await listNames('driver=other-hw')).to.deep.equal(['d']);
      expect(await listNames('provision_state=manageable')).to.deep.equal(['c']);
      expect(await listNames('provision_state=enroll')).to.deep.equal(['a', 'b', 'd']);
      expect(await listNames('maintenance=true')).to.deep.equal(['c']);
      expect(await listNames('maintenance=false')).to.deep.equal(['a', 'b', 'd']);
      expect(await listNames('associated=true')).to.deep.equal(['b']);
      expect(await listNames('associated=false')).to.deep.equal(['a', 'c', 'd']);
      expect(await listNames('owner=alice')).to.deep.equal(['a']);
      expect(await listNames('lessee=bob')).to.deep.equal(['a']);
      expect(await listNames('conductor_group=RACK1')).to.deep.equal(['a']);
      expect(await listNames('resource_class=silver')).to.deep.equal(['b']);
      expect(await listNames('fault=power%20failure')).to.deep.equal(['c']);
      expect(await listNames('owner=alice&resource_class=silver')).to.deep.equal([]);
      expect(await listNames('owner=nobody')).to.deep.equal([]);
    });

    it('finds a node by instance_uuid whatever its place in the list', async () => {
      const instance = '5e5e5e5e-1234-4abc-8def-0123456789ab';
      for (let i = 0; i < 3; i++) await createNode({ name: `i${i}` });
      const last = await createNode({ name: 'i3', instance_uuid: instance.toUpperCase() });
      expect(last.instance_uuid).to.equal(instance);
      for (const query of [`instance_uuid=${instance}`, `instance_uuid=${instance}&limit=1`, `instance_uuid=${instance.toUpperCase()}`]) {
        const nodes = (await call(t, 'GET', `/v1/nodes?${query}`)).json<NodeList>().nodes;
        expect(nodes.map((n) => n.uuid), query).to.deep.equal([last.uuid]);
      }
    });
  });

  describe('update (PATCH)', () => {
    it('applies add, replace and remove on writable fields and nested keys', async () => {
      const node = await createNode({ name: 'before', extra: { keep: 1 }, properties: { cpus: 2 } });
      const res = await call(t, 'PATCH', `/v1/nodes/${node.uuid}`, {
        body: [
          { op: 'replace', path: '/name', value: 'after' },
          { op: 'add', path: '/extra/foo', value: 'bar' },
          { op: 'add', path: '/driver_info/x', value: 'y' },
          { op: 'add', path: '/properties/memory_mb', value: 1024 },
          { op: 'replace', path: '/properties/cpus', value: 8 },
          { op: 'add', path: '/owner', value: 'alice' },
          { op: 'add', path: '/description', value: 'rack 4, slot 2' },
          { op: 'replace', path: '/resource_class', value: 'gold' },
        ],
      });
      expect(res.statusCode, res.body).to.equal(200);
      const patched = res.json<NodeBody>();
      expect(patched).to.include({ name: 'after', owner: 'alice', description: 'rack 4, slot 2', resource_class: 'gold' });
      expect(patched.extra).to.deep.equal({ keep: 1, foo: 'bar' });
      expect(patched.driver_info).to.deep.equal({ x: 'y' });
      expect(patched.properties).to.deep.equal({ cpus: 8, memory_mb: 1024 });
      expect(await getNode(node.uuid)).to.deep.equal(patched);

      const removed = await call(t, 'PATCH', `/v1/nodes/after`, {
        body: [
          { op: 'remove', path: '/extra/foo' },
          { op: 'remove', path: '/description' },
          { op: 'remove', path: '/properties' },
          { op: 'remove', path: '/name' },
        ],
      });
      expect(removed.statusCode, removed.body).to.equal(200);
      const after = removed.json<NodeBody>();
      expect(after).to.include({ name: null, description: null, owner: 'alice' });
      expect(after.extra).to.deep.equal({ keep: 1 });
      expect(after.properties).to.deep.equal({});
    });

    it('refuses read-only paths with 400 and leaves the node alone', async () => {
      const node = await createNode({ name: 'ro' });
      const before = await rowOf(node.uuid);
      const cases: Array<[string, unknown]> = [
        ['/uuid', '0b4f8a4e-2222-4c4c-9c9c-0123456789ab'], ['/provision_state', 'active'], ['/power_state', 'power on'],
        ['/reservation', 'somehost'], ['/maintenance_reason', 'x'], ['/target_provision_state', 'active'],
        ['/last_error', 'x'], ['/driver_internal_info', {}], ['/created_at', '2020-01-01T00:00:00+00:00'], ['/conductor', 'h'],
      ];
      for (const [path, value] of cases) {
        const res = await call(t, 'PATCH', `/v1/nodes/${node.uuid}`, { body: [{ op: 'replace', path, value }] });
        expectFault(res, 400, `'${path}' is an internal attribute and can not be updated`);
      }
      expect(await rowOf(node.uuid)).to.deep.equal(before);
    });

    it('masks driver_info secrets in the PATCH response but stores the real value', async () => {
      const node = await createNode({ name: 'secret', driver_info: { ipmi_username: 'admin' } });
      const res = await call(t, 'PATCH', `/v1/nodes/${node.uuid}`, {
        body: [{ op: 'add', path: '/driver_info/ipmi_password', value: 'hunter2' }],
      });
      expect(res.statusCode, res.body).to.equal(200);
      expect(res.json<NodeBody>().driver_info).to.deep.equal({ ipmi_username: 'admin', ipmi_password: '******' });
      expect((await getNode(node.uuid)).driver_info.ipmi_password).to.equal('******');
      expect((await rowOf(node.uuid)).driver_info).to.deep.equal({ ipmi_username: 'admin', ipmi_password: 'hunter2' });
      // An unrelated change must not write the mask back over the secret.
      await call(t, 'PATCH', `/v1/nodes/${node.uuid}`, { body: [{ op: 'replace', path: '/driver_info/ipmi_username', value: 'root' }] });
      expect((await rowOf(node.uuid)).driver_info).to.deep.equal({ ipmi_username: 'root', ipmi_password: 'hunter2' });
    });

    it('honours If-Match: the current ETag (or *) applies, a stale one gets 412 with the current ETag', async () => {
      const node = await createNode({ name: 'v1' });
      const etag = (await call(t, 'GET', `/v1/nodes/${node.uuid}`)).headers.etag as string;
      const ok = await call(t, 'PATCH', `/v1/nodes/${node.uuid}`, {
        body: [{ op: 'replace', path: '/name', value: 'v2' }], headers: { 'if-match': etag },
      });
      expect(ok.statusCode, ok.body).to.equal(200);
      const newEtag = ok.headers.etag as string;
      expect(newEtag).to.match(/^"\d+"$/).and.not.equal(etag);

      const stale = await call(t, 'PATCH', `/v1/nodes/${node.uuid}`, {
        body: [{ op: 'replace', path: '/name', value: 'v3' }], headers: { 'if-match': etag },
      });
      expectFault(stale, 412);
      expect(stale.headers.etag).to.equal(newEtag);
      expect((await getNode(node.uuid)).name).to.equal('v2');

      const weak = await call(t, 'PATCH', `/v1/nodes/${node.uuid}`, {
        body: [{ op: 'replace', path: '/name', value: 'v3' }], headers: { 'if-match': `W/${newEtag}` },
      });
      expect(weak.statusCode, weak.body).to.equal(200);
      const any = await call(t, 'PATCH', `/v1/nodes/${node.uuid}`, {
        body: [{ op: 'replace', path: '/name', value: 'v4' }], headers: { 'if-match': '*' },
      });
      expect(any.statusCode, any.body).to.equal(200);
      expect((await getNode(node.uuid)).name).to.equal('v4');
    });
  });

  describe('delete', () => {
    it('answers 204 and the node is gone', async () => {
      const node = await createNode({ name: 'doomed' });
      const res = await call(t, 'DELETE', `/v1/nodes/${node.uuid}`);
      expect(res.statusCode).to.equal(204);
      expect(res.body).to.equal('');
      expectFault(await call(t, 'GET', `/v1/nodes/${node.uuid}`), 404);
      expectFault(await call(t, 'DELETE', '/v1/nodes/doomed'), 404);
    });

    it('refuses a locked node with 409 and a protected node with 403, as Ironic', async () => {
      const locked = await createNode({ name: 'locked' });
      await t.tdb.knex('nodes').where({ uuid: locked.uuid }).update({ reservation: 'conductor-7' });
      expectFault(await call(t, 'DELETE', `/v1/nodes/${locked.uuid}`), 409, `Node ${locked.uuid} is locked by host conductor-7`);
      const guarded = await createNode({ name: 'guarded' });
      await t.tdb.knex('nodes').where({ uuid: guarded.uuid }).update({ protected: true, provision_state: 'available' });
      expectFault(await call(t, 'DELETE', `/v1/nodes/${guarded.uuid}`), 403, 'protected');
      expect(await countRows(t, 'nodes')).to.equal(2);
    });
  });

  describe('sub-resources', () => {
    it('GET …/states shows the state fields the version allows', async () => {
      const node = await createNode({ name: 'st' });
      const latest = (await call(t, 'GET', `/v1/nodes/${node.uuid}/states`)).json<Obj>();
      expect(latest).to.deep.equal({
        console_enabled: false, last_error: null, power_state: null, provision_state: 'enroll', provision_updated_at: null,
        target_power_state: null, target_provision_state: null, raid_config: {}, target_raid_config: {}, boot_mode: null, secure_boot: null,
      });
      const old = (await call(t, 'GET', '/v1/nodes/st/states', { version: '1.11' })).json<Obj>();
      expect(Object.keys(old)).to.not.include.members(['raid_config', 'boot_mode']);
    });

    it('GET …/validate reports per-interface results from the driver\'s validate()', async () => {
      const good = await createNode({ name: 'good' });
      const res = await call(t, 'GET', `/v1/nodes/${good.uuid}/validate`);
      expect(res.statusCode).to.equal(200);
      const body = res.json<Record<string, { result: boolean | null; reason: string | null }>>();
      expect(body.power).to.deep.equal({ result: true });
      expect(body.management).to.deep.equal({ result: true });
      expect(body).to.include.keys('boot', 'deploy', 'console');
      const bad = await createNode({ name: 'bad', driver_info: { fake_fail: 'sometimes' } });
      const badBody = (await call(t, 'GET', `/v1/nodes/${bad.uuid}/validate`)).json<Record<string, { result: boolean; reason: string }>>();
      expect(badBody.power.result).to.equal(false);
      expect(badBody.power.reason).to.include('fake_fail');
    });
  });

  describe('provision verbs', () => {
    it('manage from enroll answers 202 with a Location, and the node is verifying towards manageable', async () => {
      const node = await createNode({ name: 'to-manage' });
      const res = await call(t, 'PUT', `/v1/nodes/${node.uuid}/states/provision`, { body: { target: 'manage' } });
      expect(res.statusCode, res.body).to.equal(202);
      expect(res.body).to.equal('');
      expect(res.headers.location).to.match(new RegExp(`/v1/nodes/${node.uuid}/states$`));
      const after = await getNode(node.uuid);
      expect(after).to.include({ provision_state: 'verifying', target_provision_state: 'manageable', last_error: null });
      expect(after.provision_updated_at).to.be.a('string');
      const intents = await t.tdb.knex('intents').join('nodes', 'nodes.id', 'intents.node_id').where('nodes.uuid', node.uuid).select('intents.kind', 'intents.state');
      expect(intents).to.deep.equal([{ kind: 'provision', state: 'queued' }]);
    });

    it('refuses a verb the current state does not allow with Ironic\'s 400 message', async () => {
      const node = await createNode({ name: 'enrolled' });
      const before = await rowOf(node.uuid);
      const res = await call(t, 'PUT', '/v1/nodes/enrolled/states/provision', { body: { target: 'provide' } });
      const message = expectFault(res, 400);
      expect(message).to.equal(`The requested action "provide" can not be performed on node "${node.uuid}" while it is in state "enroll".`);
      expect(await rowOf(node.uuid)).to.deep.equal(before);
      expect(await countRows(t, 'intents')).to.equal(0);
    });

    it('refuses a verb newer than the requested microversion with 406', async () => {
      const node = await createNode({ name: 'old-client' });
      expectFault(await call(t, 'PUT', `/v1/nodes/${node.uuid}/states/provision`, { body: { target: 'manage' }, version: '1.3' }), 406, '1.4');
      expect((await getNode(node.uuid)).provision_state).to.equal('enroll');
    });
  });
});

describe('nodes API with a conductor', function () {
  // Maintenance is applied by the conductor before the API answers; power sync is off so
  // nothing else touches the nodes.
  const t = suiteApp({ env: { GALVANIC_CONDUCTOR__SYNC_POWER_STATE_INTERVAL: '0' } });

  const createNode = (name: string) => postNode<NodeBody>(t, { name });

  async function getNode(ident: string): Promise<NodeBody> {
    const res = await call(t, 'GET', `/v1/nodes/${ident}`);
    expect(res.statusCode, res.body).to.equal(200);
    return res.json<NodeBody>();
  }

  it('names the conductor that manages a node (1.49+): the owner on the ring of its group\'s live conductors', async () => {
    const node = await createNode('ringed');
    expect((await getNode(node.uuid)).conductor).to.equal('test-host');
    const listed = (await call(t, 'GET', '/v1/nodes/detail')).json<NodeList>().nodes.find((n) => n.uuid === node.uuid);
    expect(listed?.conductor).to.equal('test-host');
    expect((await call(t, 'GET', `/v1/nodes/${node.uuid}`, { version: '1.48' })).json()).to.not.have.property('conductor');
    // No conductor serves group "lonely": nobody manages the node.
    const lonely = await call(t, 'POST', '/v1/nodes', { body: { name: 'lonely', driver: 'fake-hardware', conductor_group: 'lonely' } });
    expect(lonely.statusCode, lonely.body).to.equal(201);
    expect(lonely.json<NodeBody>().conductor).to.equal(null);
    // A second live conductor in the group takes its share of the ring, as the claims do.
    await t.tdb.knex('conductors').insert({ hostname: 'other-host', conductor_group: '', drivers: JSON.stringify(['fake-hardware']), online: true, heartbeat_at: t.tdb.knex.fn.now() });
    try {
      await sleep(2100);
      const ring = new HashRing(['other-host', 'test-host']);
      const nodes = (await call(t, 'GET', '/v1/nodes/detail')).json<NodeList>().nodes.filter((n) => n.conductor_group === '');
      expect(nodes.length).to.be.at.least(1);
      for (const n of nodes) expect(n.conductor, n.uuid).to.equal(ring.owner(n.uuid));
    } finally {
      await t.tdb.knex('conductors').where({ hostname: 'other-host' }).delete();
    }
  });

  it('PUT/DELETE …/maintenance answer 202 and set, then clear, maintenance, its reason and fault', async () => {
    const node = await createNode('maint');
    const put = await call(t, 'PUT', `/v1/nodes/${node.uuid}/maintenance`, { body: { reason: 'fan noise' } });
    expect(put.statusCode, put.body).to.equal(202);
    expect(put.body).to.equal('');
    expect(await getNode(node.uuid)).to.include({ maintenance: true, maintenance_reason: 'fan noise' });
    await t.tdb.knex('nodes').where({ uuid: node.uuid }).update({ fault: 'power failure' });
    const del = await call(t, 'DELETE', '/v1/nodes/maint/maintenance');
    expect(del.statusCode, del.body).to.equal(202);
    expect(del.body).to.equal('');
    expect(await getNode(node.uuid)).to.include({ maintenance: false, maintenance_reason: null, fault: null });
    // No body at all is fine too.
    expect((await call(t, 'PUT', `/v1/nodes/${node.uuid}/maintenance`)).statusCode).to.equal(202);
    expect(await getNode(node.uuid)).to.include({ maintenance: true, maintenance_reason: null });
  });

  it('deletes a node only in enroll, manageable, adopt failed or available, or in maintenance, as Ironic', async () => {
    const valid = '"(\'manageable\', \'enroll\', \'adopt failed\', \'available\')"';
    for (const state of ['deploy failed', 'clean failed', 'inspect failed', 'clean wait', 'error', 'wait call-back']) {
      const node = await createNode(`in-${state.replace(/ /g, '-')}`);
      await t.tdb.knex('nodes').where({ uuid: node.uuid }).update({ provision_state: state });
      expectFault(await call(t, 'DELETE', `/v1/nodes/${node.uuid}`), 409,
        `Can not delete node "${node.uuid}" while it is in provision state "${state}". Valid provision states to perform deletion are: ${valid}, or set the node into maintenance mode`);
      expect((await call(t, 'PUT', `/v1/nodes/${node.uuid}/maintenance`)).statusCode).to.equal(202);
      expect((await call(t, 'DELETE', `/v1/nodes/${node.uuid}`)).statusCode, state).to.equal(204);
    }
    for (const state of ['enroll', 'manageable', 'adopt failed', 'available']) {
      const node = await createNode(`ok-${state.replace(/ /g, '-')}`);
      await t.tdb.knex('nodes').where({ uuid: node.uuid }).update({ provision_state: state });
      expect((await call(t, 'DELETE', `/v1/nodes/${node.uuid}`)).statusCode, state).to.equal(204);
    }
    // An instance keeps its node (NodeAssociated), before any look at the state.
    const held = await createNode('held');
    const instance = '0b5f2a66-4c5a-4f2e-9d55-0d0c63b1a0a1';
    await t.tdb.knex('nodes').where({ uuid: held.uuid }).update({ provision_state: 'available', instance_uuid: instance });
    expectFault(await call(t, 'DELETE', `/v1/nodes/${held.uuid}`), 409, `Node ${held.uuid} is associated with instance ${instance}.`);
  });

  it('refuses to delete a deployed (active) node with 409 unless it is in maintenance', async () => {
    const node = await createNode('deployed');
    await t.tdb.knex('nodes').where({ uuid: node.uuid }).update({ provision_state: 'active' });
    expectFault(await call(t, 'DELETE', `/v1/nodes/${node.uuid}`), 409, 'active');
    expect((await getNode(node.uuid)).provision_state).to.equal('active');
    expect((await call(t, 'PUT', `/v1/nodes/${node.uuid}/maintenance`)).statusCode).to.equal(202);
    expect((await call(t, 'DELETE', `/v1/nodes/${node.uuid}`)).statusCode).to.equal(204);
    expectFault(await call(t, 'GET', `/v1/nodes/${node.uuid}`), 404);
  });

  it('takes a node from enroll through verifying to manageable', async () => {
    const node = await createNode('managed');
    expect((await call(t, 'PUT', '/v1/nodes/managed/states/provision', { body: { target: 'manage' } })).statusCode).to.equal(202);
    // Clients poll the node until the target is reached (`baremetal node manage --wait`).
    const deadline = Date.now() + 20_000;
    let current = await getNode(node.uuid);
    while (current.provision_state !== 'manageable' && Date.now() < deadline) {
      expect(current.provision_state).to.be.oneOf(['verifying', 'manageable']);
      await sleep(100);
      current = await getNode(node.uuid);
    }
    expect(current).to.include({ provision_state: 'manageable', target_provision_state: null, last_error: null, power_state: 'power off' });
  });
});
