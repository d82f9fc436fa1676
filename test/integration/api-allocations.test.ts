/**
 * Allocations on a real database: the API (create, show, list, PATCH, delete, backfill,
 * version gates), the conductor choosing nodes (resource class, traits, candidates, owner),
 * node fields and rules tied to allocations, and two allocation passes racing for nodes.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import { pino } from 'pino';
import { expectFault, inject, type InjectOptions, suiteApp } from '../helpers/app.js';
import { Allocator } from '../../conductor/allocations.js';
import { createKnex } from '../../db/connection.js';
import { createAllocation } from '../../db/allocations.js';
import { freshDatabase } from '../helpers/database.js';

type Method = 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE';
type Obj = Record<string, unknown>;


describe('allocations API', function () {
  const t = suiteApp({ clear: ['allocations', 'nodes'] });

  const call = (method: Method, url: string, opts: InjectOptions = {}) => inject(t, method, url, { ...opts, version: opts.version ?? '1.60' });
  const json = async (method: Method, url: string, opts: { body?: unknown; version?: string } = {}): Promise<Obj> => {
    const res = await call(method, url, opts);
    expect(res.statusCode, res.body).to.be.within(200, 299);
    return JSON.parse(res.body) as Obj;
  };

  /** A node ready for allocation: available, powered off, of the resource class. */
  async function availableNode(name: string, resourceClass = 'gold', extra: Obj = {}): Promise<string> {
    const node = await json('POST', '/v1/nodes', { body: { driver: 'fake-hardware', name, resource_class: resourceClass } });
    await t.tdb.knex('nodes').where('uuid', node.uuid as string).update({ provision_state: 'available', power_state: 'power off', ...extra });
    return node.uuid as string;
  }

  async function waitSettled(uuid: string): Promise<Obj> {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const a = await json('GET', `/v1/allocations/${uuid}`);
      if (a.state !== 'allocating') return a;
      if (Date.now() > deadline) expect.fail(`allocation ${uuid} still allocating`);
      await sleep(25);
    }
  }

  it('creates an allocation in allocating; a conductor makes it active on a matching node', async () => {
    const node = await availableNode('n1');
    await availableNode('other', 'silver');
    const res = await call('POST', '/v1/allocations', { body: { resource_class: 'gold', name: 'a1', extra: { k: 'v' } } });
    expect(res.statusCode, res.body).to.equal(201);
    const created = JSON.parse(res.body) as Obj;
    expect(res.headers.location).to.match(new RegExp(`/v1/allocations/${created.uuid as string}$`));
    expect(created).to.include({ state: 'allocating', resource_class: 'gold', name: 'a1', node_uuid: null, last_error: null, owner: null });
    expect(Object.keys(created)).to.deep.equal(['uuid', 'name', 'node_uuid', 'state', 'last_error', 'resource_class', 'traits', 'candidate_nodes', 'extra', 'owner', 'created_at', 'updated_at', 'links']);
    const done = await waitSettled(created.uuid as string);
    expect(done).to.include({ state: 'active', node_uuid: node, last_error: null });
    expect(await json('GET', `/v1/nodes/${node}/allocation`)).to.deep.equal(done);
    expect(await json('GET', '/v1/allocations/a1')).to.deep.equal(done);
    const shown = await json('GET', `/v1/nodes/${node}`);
    expect(shown).to.include({ allocation_uuid: created.uuid, instance_uuid: created.uuid });
    expect(await json('GET', `/v1/nodes/${node}`, { version: '1.51' })).to.not.have.property('allocation_uuid');
  });

  it('fails with Ironic\'s messages when nothing matches the resource class, the traits or the candidates', async () => {
    const node = await availableNode('n1');
    await availableNode('n2', 'silver');
    const noClass = await json('POST', '/v1/allocations', { body: { resource_class: 'bronze' } });
    expect(await waitSettled(noClass.uuid as string)).to.include({
      state: 'error', node_uuid: null,
      last_error: `Failed to process allocation ${noClass.uuid as string}: no available nodes match the resource class bronze.`,
    });
    const noTraits = await json('POST', '/v1/allocations', { body: { resource_class: 'gold', traits: ['CUSTOM_MISSING'] } });
    expect((await waitSettled(noTraits.uuid as string)).last_error).to.equal(`Failed to process allocation ${noTraits.uuid as string}: no suitable nodes have the requested traits CUSTOM_MISSING.`);
    const noCandidate = await json('POST', '/v1/allocations', { body: { resource_class: 'gold', candidate_nodes: ['n2'] } });
    expect((await waitSettled(noCandidate.uuid as string)).last_error).to.include('none of the requested nodes are available and match the resource class gold');
    // Nothing was taken.
    expect((await json('GET', `/v1/nodes/${node}`)).instance_uuid).to.equal(null);
  });

  it('takes only a node that has every requested trait, and copies the traits into instance_info', async () => {
    await availableNode('plain');
    const vmx = await availableNode('vmx');
    await call('PUT', `/v1/nodes/${vmx}/traits`, { body: { traits: ['CUSTOM_MEOW', 'HW_CPU_X86_VMX'] } });
    const a = await json('POST', '/v1/allocations', { body: { resource_class: 'gold', traits: ['CUSTOM_MEOW'] } });
    expect(a.traits).to.deep.equal(['CUSTOM_MEOW']);
    expect(await waitSettled(a.uuid as string)).to.include({ state: 'active', node_uuid: vmx });
    expect((await json('GET', `/v1/nodes/${vmx}`)).instance_info).to.deep.equal({ traits: ['CUSTOM_MEOW'] });
  });

  it('keeps to candidate nodes named by UUID or name, shown as UUIDs, and refuses unknown ones', async () => {
    await availableNode('n1');
    const n2 = await availableNode('n2');
    const a = await json('POST', '/v1/allocations', { body: { resource_class: 'gold', candidate_nodes: ['n2'] } });
    expect(a.candidate_nodes).to.deep.equal([n2]);
    expect(await waitSettled(a.uuid as string)).to.include({ state: 'active', node_uuid: n2 });
    expectFault(await call('POST', '/v1/allocations', { body: { resource_class: 'gold', candidate_nodes: ['nope'] } }), 400, 'Node nope could not be found.');
  });

  it('skips nodes in maintenance, reserved, without power state or with an instance, and honours owner', async () => {
    await availableNode('maint', 'gold', { maintenance: true });
    await availableNode('reserved', 'gold', { reservation: 'someone' });
    await availableNode('unpowered', 'gold', { power_state: null });
    await availableNode('taken', 'gold', { instance_uuid: '1d2c3b4a-0000-4000-8000-00000000aaaa' });
    const mine = await availableNode('mine', 'gold', { owner: 'proj-a' });
    const a = await json('POST', '/v1/allocations', { body: { resource_class: 'gold', owner: 'proj-a' } });
    expect(await waitSettled(a.uuid as string)).to.include({ state: 'active', node_uuid: mine, owner: 'proj-a' });
    const b = await json('POST', '/v1/allocations', { body: { resource_class: 'gold', owner: 'proj-b' } });
    expect((await waitSettled(b.uuid as string)).state).to.equal('error');
  });

  it('lists with filters, fields and paging, and gates owner at 1.60', async () => {
    await availableNode('n1');
    const a = await json('POST', '/v1/allocations', { body: { resource_class: 'gold', name: 'first' } });
    const b = await json('POST', '/v1/allocations', { body: { resource_class: 'bronze', name: 'second', owner: 'p' } });
    await waitSettled(a.uuid as string);
    await waitSettled(b.uuid as string);
    const uuids = (body: Obj) => (body.allocations as Obj[]).map((x) => x.uuid);
    expect(uuids(await json('GET', '/v1/allocations'))).to.deep.equal([a.uuid, b.uuid]);
    expect(uuids(await json('GET', '/v1/allocations?state=active'))).to.deep.equal([a.uuid]);
    expect(uuids(await json('GET', '/v1/allocations?state=error'))).to.deep.equal([b.uuid]);
    expect(uuids(await json('GET', '/v1/allocations?resource_class=bronze'))).to.deep.equal([b.uuid]);
    expect(uuids(await json('GET', '/v1/allocations?node=n1'))).to.deep.equal([a.uuid]);
    expect(uuids(await json('GET', '/v1/allocations?owner=p'))).to.deep.equal([b.uuid]);
    expectFault(await call('GET', '/v1/allocations?owner=p', { version: '1.59' }), 406);
    expectFault(await call('GET', '/v1/allocations?fields=owner', { version: '1.59' }), 406);
    expect(await json('GET', `/v1/allocations/${a.uuid as string}`, { version: '1.59' })).to.not.have.property('owner');
    expectFault(await call('GET', '/v1/allocations?node=missing'), 400, 'Node missing could not be found.');
    const page = await json('GET', '/v1/allocations?limit=1&fields=name');
    expect(page.allocations).to.have.length(1);
    expect(Object.keys((page.allocations as Obj[])[0])).to.deep.equal(['name', 'uuid', 'links']);
    expect(page.next).to.include(`marker=${a.uuid as string}`);
    const rest = await json('GET', `/v1/allocations?limit=1&marker=${a.uuid as string}`);
    expect(uuids(rest)).to.deep.equal([b.uuid]);
    expectFault(await call('GET', '/v1/allocations?sort_key=traits'), 400, 'is an invalid field for sorting');
  });

  it('updates name and extra from 1.57 and refuses other fields', async () => {
    const a = await json('POST', '/v1/allocations', { body: { resource_class: 'bronze', name: 'before' } });
    const patched = await json('PATCH', `/v1/allocations/${a.uuid as string}`, { body: [{ op: 'replace', path: '/name', value: 'after' }, { op: 'add', path: '/extra/x', value: 1 }] });
    expect(patched).to.include({ name: 'after' });
    expect(patched.extra).to.deep.equal({ x: 1 });
    expectFault(await call('PATCH', '/v1/allocations/after', { body: [{ op: 'replace', path: '/resource_class', value: 'x' }] }), 400, 'Cannot patch /resource_class. Only the following can be updated: name, extra');
    expectFault(await call('PATCH', '/v1/allocations/after', { body: [{ op: 'replace', path: '/name', value: 'bad name' }] }), 400, "Cannot update allocation with invalid name 'bad name'");
    expectFault(await call('PATCH', '/v1/allocations/after', { version: '1.56', body: [{ op: 'replace', path: '/name', value: 'x' }] }), 405);
    expect((await json('GET', '/v1/allocations/after')).name).to.equal('after');
  });

  it('refuses bad bodies and duplicates, and creates nothing', async () => {
    expectFault(await call('POST', '/v1/allocations', { body: {} }), 400, 'The resource_class field is mandatory when not backfilling');
    expectFault(await call('POST', '/v1/allocations', { body: { resource_class: 'x', name: 'bad name' } }), 400, "Cannot create allocation with invalid name 'bad name'");
    expectFault(await call('POST', '/v1/allocations', { body: { resource_class: 'x', traits: ['nope'] } }), 400);
    expectFault(await call('POST', '/v1/allocations', { body: { resource_class: 'x', color: 'red' } }), 400, "'color' was unexpected");
    expectFault(await call('POST', '/v1/allocations', { body: { resource_class: 'x', uuid: 'not-a-uuid' } }), 400);
    expectFault(await call('POST', '/v1/allocations', { version: '1.57', body: { resource_class: 'x', node: 'n1' } }), 400, 'Cannot set node when creating an allocation in this API version');
    expect(await t.tdb.knex('allocations').count('* as n').first()).to.satisfy((r: { n: unknown }) => Number(r.n) === 0);
    await json('POST', '/v1/allocations', { body: { resource_class: 'x', name: 'dup' } });
    expectFault(await call('POST', '/v1/allocations', { body: { resource_class: 'x', name: 'dup' } }), 409, 'An allocation with name dup already exists.');
  });

  it('is gated at 1.52: reads 404, writes 405', async () => {
    expect((await call('GET', '/v1/allocations', { version: '1.51' })).statusCode).to.equal(404);
    expect((await call('POST', '/v1/allocations', { version: '1.51', body: { resource_class: 'x' } })).statusCode).to.equal(405);
    expect((await call('GET', '/v1/nodes/x/allocation', { version: '1.51' })).statusCode).to.equal(404);
  });

  it('deleting an allocation frees its node; an active node keeps it unless in maintenance', async () => {
    const node = await availableNode('n1');
    const a = await json('POST', '/v1/allocations', { body: { resource_class: 'gold' } });
    await waitSettled(a.uuid as string);
    await t.tdb.knex('nodes').where('uuid', node).update({ provision_state: 'active' });
    expectFault(await call('DELETE', `/v1/allocations/${a.uuid as string}`), 409, `Cannot remove allocation ${a.uuid as string} for node ${node}, because the node is active (and maintenance mode is off)`);
    await t.tdb.knex('nodes').where('uuid', node).update({ provision_state: 'available' });
    expect((await call('DELETE', `/v1/nodes/${node}/allocation`)).statusCode).to.equal(204);
    expectFault(await call('GET', `/v1/allocations/${a.uuid as string}`), 404, `Allocation ${a.uuid as string} could not be found.`);
    expectFault(await call('GET', `/v1/nodes/${node}/allocation`), 404, `Allocation for node ${node} was not found`);
    expect(await json('GET', `/v1/nodes/${node}`)).to.include({ instance_uuid: null, allocation_uuid: null });
  });

  it('a node with an allocation refuses another instance_uuid; removing it removes the allocation', async () => {
    const node = await availableNode('n1');
    const a = await json('POST', '/v1/allocations', { body: { resource_class: 'gold' } });
    await waitSettled(a.uuid as string);
    expectFault(await call('PATCH', `/v1/nodes/${node}`, { body: [{ op: 'replace', path: '/instance_uuid', value: '1d2c3b4a-0000-4000-8000-00000000bbbb' }] }), 409, `Node ${node} is associated with instance ${a.uuid as string}.`);
    await t.tdb.knex('nodes').where('uuid', node).update({ provision_state: 'active' });
    expectFault(await call('PATCH', `/v1/nodes/${node}`, { body: [{ op: 'remove', path: '/instance_uuid' }] }), 409, 'with an allocation can not have instance_uuid removed');
    await t.tdb.knex('nodes').where('uuid', node).update({ provision_state: 'available' });
    const patched = await json('PATCH', `/v1/nodes/${node}`, { body: [{ op: 'remove', path: '/instance_uuid' }] });
    expect(patched).to.include({ instance_uuid: null, allocation_uuid: null });
    expect((await call('GET', `/v1/allocations/${a.uuid as string}`)).statusCode).to.equal(404);
  });

  it('deleting a node removes its allocation; out of maintenance the allocation\'s instance keeps the node, as Ironic', async () => {
    const node = await availableNode('n1');
    const a = await json('POST', '/v1/allocations', { body: { resource_class: 'gold' } });
    await waitSettled(a.uuid as string);
    expectFault(await call('DELETE', `/v1/nodes/${node}`), 409, `Node ${node} is associated with instance ${a.uuid as string}.`);
    expect((await call('PUT', `/v1/nodes/${node}/maintenance`)).statusCode).to.equal(202);
    expect((await call('DELETE', `/v1/nodes/${node}`)).statusCode).to.equal(204);
    expect((await call('GET', `/v1/allocations/${a.uuid as string}`)).statusCode).to.equal(404);
  });

  it('backfills (1.58) an active node at once, by Ironic\'s rules, or refuses and writes nothing', async () => {
    const node = await availableNode('n1', 'gold', { provision_state: 'active' });
    await availableNode('n2', 'gold');
    expectFault(await call('POST', '/v1/allocations', { body: { node: 'n2' } }), 400, 'Node must be in the "active" state, but the current state is "available"');
    expectFault(await call('POST', '/v1/allocations', { body: { node: 'n1', resource_class: 'silver' } }), 400, 'Resource class gold does not match the requested resource class silver');
    expectFault(await call('POST', '/v1/allocations', { body: { node: 'missing' } }), 400, 'Node missing could not be found.');
    expect(Number((await t.tdb.knex('allocations').count('* as n').first())?.n)).to.equal(0);
    const a = await json('POST', '/v1/allocations', { body: { node: 'n1' } });
    expect(a).to.include({ state: 'active', node_uuid: node, resource_class: 'gold', last_error: null });
    expect((await json('GET', `/v1/nodes/${node}`)).allocation_uuid).to.equal(a.uuid);
    expectFault(await call('POST', '/v1/allocations', { body: { node: 'n1', uuid: '1d2c3b4a-0000-4000-8000-00000000cccc' } }), 409, `Node ${node} is associated with instance ${a.uuid as string}.`);
  });
});

describe('allocation passes racing on one database', function () {
  it('two conductors\' passes never give one node to two allocations', async function () {
    this.timeout(60_000);
    const tdb = await freshDatabase();
    const pools = [createKnex(tdb.url, { poolMax: 4 }), createKnex(tdb.url, { poolMax: 4 })];
    const log = pino({ level: 'silent' });
    try {
      for (let round = 0; round < 5; round++) {
        await tdb.knex('allocations').delete();
        await tdb.knex('nodes').delete();
        const nodes = Array.from({ length: 12 }, (_, i) => ({
          uuid: crypto.randomUUID(), name: `n${i}`, driver: 'fake-hardware', provision_state: 'available', power_state: 'power off', resource_class: 'gold',
        }));
        await tdb.knex('nodes').insert(nodes);
        for (let i = 0; i < 20; i++) await createAllocation(tdb.knex, { resourceClass: 'gold' });
        // Small batches and a short busy timeout make the passes interleave and contend.
        const allocators = pools.map((db, i) => new Allocator(db, `c${i}`, log, { batchSize: 2, busyTimeoutMs: 5_000 }));
        const pending = async () => Number((await tdb.knex('allocations').where('state', 'allocating').count('* as n').first())?.n);
        await Promise.all(allocators.map(async (a) => {
          while (await pending() > 0) await a.runPass();
        }));
        const rows: Array<{ uuid: string; state: string; node_id: number | null; conductor: string }> = await tdb.knex('allocations').select('uuid', 'state', 'node_id', 'conductor');
        const active = rows.filter((r) => r.state === 'active');
        expect(active, `round ${round}`).to.have.length(12);
        expect(new Set(active.map((r) => r.node_id)).size).to.equal(12);
        expect(rows.filter((r) => r.state === 'error')).to.have.length(8);
        const held: Array<{ id: number; instance_uuid: string; allocation_id: number }> = await tdb.knex('nodes').select('id', 'instance_uuid', 'allocation_id');
        const byNode = new Map(active.map((r) => [r.node_id, r.uuid]));
        for (const n of held) expect(n.instance_uuid).to.equal(byNode.get(n.id));
        if (round === 4) expect(new Set(rows.map((r) => r.conductor)).size, 'both passes took part').to.equal(2);
      }
    } finally {
      await Promise.all(pools.map((p) => p.destroy()));
      await tdb.drop();
    }
  });
});
