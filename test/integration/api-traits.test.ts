/**
 * Node traits through `app.inject()` on a real database: Ironic's endpoints, trait syntax,
 * the per-node limit, version gates, and traits on the node and its lists.
 */
import { expect } from 'chai';
import { createNode, expectFault, inject, type InjectOptions, suiteApp } from '../helpers/app.js';

type Method = 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE';

describe('node traits API', function () {
  const t = suiteApp({ conductor: false, clear: ['nodes'] });
  let node: string;

  const call = (method: Method, url: string, opts: InjectOptions = {}) => inject(t, method, url, { ...opts, version: opts.version ?? '1.37' });
  const traits = async (): Promise<string[]> => (JSON.parse((await call('GET', `/v1/nodes/${node}/traits`)).body) as { traits: string[] }).traits;

  beforeEach(async () => {
    node = (await createNode(t, { name: 'n1' }, '1.37')).uuid;
  });

  it('replaces the traits with PUT, lists them sorted, and removes them all', async () => {
    expect(await traits()).to.deep.equal([]);
    const res = await call('PUT', `/v1/nodes/${node}/traits`, { body: { traits: ['HW_CPU_X86_VMX', 'CUSTOM_B', 'CUSTOM_A', 'CUSTOM_A'] } });
    expect(res.statusCode, res.body).to.equal(204);
    expect(await traits()).to.deep.equal(['CUSTOM_A', 'CUSTOM_B', 'HW_CPU_X86_VMX']);
    await call('PUT', `/v1/nodes/${node}/traits`, { body: { traits: ['CUSTOM_C'] } });
    expect(await traits()).to.deep.equal(['CUSTOM_C']);
    expect((await call('DELETE', `/v1/nodes/${node}/traits`)).statusCode).to.equal(204);
    expect(await traits()).to.deep.equal([]);
  });

  it('adds one trait with PUT .../traits/{trait}, once, with a Location', async () => {
    const res = await call('PUT', `/v1/nodes/n1/traits/CUSTOM_ONE`);
    expect(res.statusCode, res.body).to.equal(204);
    expect(res.headers.location).to.match(/\/v1\/nodes\/n1\/traits\/CUSTOM_ONE$/);
    await call('PUT', `/v1/nodes/n1/traits/CUSTOM_ONE`);
    await call('PUT', `/v1/nodes/n1/traits/CUSTOM_TWO`);
    expect(await traits()).to.deep.equal(['CUSTOM_ONE', 'CUSTOM_TWO']);
    expectFault(await call('PUT', `/v1/nodes/n1/traits/CUSTOM_X`, { body: { traits: ['CUSTOM_Y'] } }), 400, 'No body should be provided');
  });

  it('takes a 255-character trait and refuses a 256-character one', async () => {
    const long = `CUSTOM_${'T'.repeat(248)}`;
    expect((await call('PUT', `/v1/nodes/${node}/traits/${long}`)).statusCode).to.equal(204);
    expectFault(await call('PUT', `/v1/nodes/${node}/traits/${long}X`), 400, 'is not valid under any of the given schemas');
    expect(await traits()).to.deep.equal([long]);
  });

  it('refuses traits that are neither standard nor CUSTOM_, and changes nothing', async () => {
    await call('PUT', `/v1/nodes/${node}/traits`, { body: { traits: ['CUSTOM_KEEP'] } });
    for (const bad of ['custom_lower', 'CUSTOM_', 'NOT_A_TRAIT', 'CUSTOM_BAD-DASH']) {
      expectFault(await call('PUT', `/v1/nodes/${node}/traits`, { body: { traits: [bad] } }), 400, bad);
      expectFault(await call('PUT', `/v1/nodes/${node}/traits/${bad}`), 400);
    }
    expectFault(await call('PUT', `/v1/nodes/${node}/traits`, { body: { traits: 'CUSTOM_A' } }), 400);
    expectFault(await call('PUT', `/v1/nodes/${node}/traits`, { body: {} }), 400, 'A single node trait may be added');
    expect(await traits()).to.deep.equal(['CUSTOM_KEEP']);
  });

  it('allows 50 traits per node and refuses the 51st, by either PUT', async () => {
    const fifty = Array.from({ length: 50 }, (_, i) => `CUSTOM_T${String(i).padStart(2, '0')}`);
    expectFault(await call('PUT', `/v1/nodes/${node}/traits`, { body: { traits: [...fifty, 'CUSTOM_T50'] } }), 400, '(51 vs. 50)');
    expect(await traits()).to.deep.equal([]);
    expect((await call('PUT', `/v1/nodes/${node}/traits`, { body: { traits: fifty } })).statusCode).to.equal(204);
    expectFault(await call('PUT', `/v1/nodes/${node}/traits/CUSTOM_T50`), 400, 'maximum number of traits per node');
    expect(await traits()).to.have.length(50);
  });

  it('removes one trait, and says which one a node lacks', async () => {
    await call('PUT', `/v1/nodes/${node}/traits`, { body: { traits: ['CUSTOM_A', 'HW_CPU_X86_VMX'] } });
    expect((await call('DELETE', `/v1/nodes/${node}/traits/CUSTOM_A`)).statusCode).to.equal(204);
    expect(await traits()).to.deep.equal(['HW_CPU_X86_VMX']);
    expectFault(await call('DELETE', `/v1/nodes/${node}/traits/CUSTOM_A`), 404, `Node ${node} doesn't have a trait 'CUSTOM_A'`);
  });

  it('answers 404 for a node that does not exist', async () => {
    const missing = '1d2c3b4a-0000-4000-8000-00000000beef';
    expectFault(await call('GET', `/v1/nodes/${missing}/traits`), 404, missing);
    expectFault(await call('PUT', `/v1/nodes/${missing}/traits`, { body: { traits: ['CUSTOM_A'] } }), 404);
    expectFault(await call('PUT', `/v1/nodes/${missing}/traits/CUSTOM_A`), 404);
    expectFault(await call('DELETE', `/v1/nodes/${missing}/traits`), 404);
  });

  it('is gated at 1.37 as Ironic gates it: GET 406, PUT 405, DELETE 404', async () => {
    expect((await call('GET', `/v1/nodes/${node}/traits`, { version: '1.36' })).statusCode).to.equal(406);
    expect((await call('PUT', `/v1/nodes/${node}/traits`, { version: '1.36', body: { traits: ['CUSTOM_A'] } })).statusCode).to.equal(405);
    expect((await call('PUT', `/v1/nodes/${node}/traits/CUSTOM_A`, { version: '1.36' })).statusCode).to.equal(405);
    expect((await call('DELETE', `/v1/nodes/${node}/traits`, { version: '1.36' })).statusCode).to.equal(404);
    expect(await traits()).to.deep.equal([]);
  });

  it('shows traits on the node, its detailed list and fields=traits from 1.37 only', async () => {
    await call('PUT', `/v1/nodes/${node}/traits`, { body: { traits: ['CUSTOM_A', 'HW_CPU_X86_VMX'] } });
    const show = JSON.parse((await call('GET', `/v1/nodes/${node}`)).body) as { traits: string[] };
    expect(show.traits).to.deep.equal(['CUSTOM_A', 'HW_CPU_X86_VMX']);
    const old = JSON.parse((await call('GET', `/v1/nodes/${node}`, { version: '1.36' })).body) as object;
    expect(old).to.not.have.property('traits');
    const detail = JSON.parse((await call('GET', '/v1/nodes/detail')).body) as { nodes: Array<{ traits: string[] }> };
    expect(detail.nodes[0].traits).to.deep.equal(['CUSTOM_A', 'HW_CPU_X86_VMX']);
    const fields = JSON.parse((await call('GET', '/v1/nodes?fields=uuid,traits')).body) as { nodes: object[] };
    expect(fields.nodes[0]).to.deep.equal({ uuid: node, traits: ['CUSTOM_A', 'HW_CPU_X86_VMX'] });
    expect((await call('GET', '/v1/nodes?fields=traits', { version: '1.36' })).statusCode).to.equal(406);
    // The list is rendered from a cache keyed by the node's version: a change of traits must show.
    await call('DELETE', `/v1/nodes/${node}/traits/CUSTOM_A`);
    const again = JSON.parse((await call('GET', '/v1/nodes/detail')).body) as { nodes: Array<{ traits: string[] }> };
    expect(again.nodes[0].traits).to.deep.equal(['HW_CPU_X86_VMX']);
  });

  it('changes the node ETag when its traits change, and refuses PATCH of /traits', async () => {
    const before = (await call('GET', `/v1/nodes/${node}`)).headers.etag;
    await call('PUT', `/v1/nodes/${node}/traits/CUSTOM_A`);
    const after = (await call('GET', `/v1/nodes/${node}`)).headers.etag;
    expect(after).to.not.equal(before);
    expectFault(await call('PATCH', `/v1/nodes/${node}`, { body: [{ op: 'add', path: '/traits', value: ['CUSTOM_B'] }] }), 400);
    expect(await traits()).to.deep.equal(['CUSTOM_A']);
  });

  it('removes the traits with their node', async () => {
    await call('PUT', `/v1/nodes/${node}/traits/CUSTOM_A`);
    expect((await call('DELETE', `/v1/nodes/${node}`)).statusCode).to.equal(204);
    expect(Number((await t.tdb.knex('node_traits').count('* as n').first())?.n)).to.equal(0);
  });
});
