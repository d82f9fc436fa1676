/**
 * The port resource through `app.inject()` against a real database: create, show, list
 * (per node, detail, fields, pagination), PATCH and DELETE, with Ironic's codes and messages.
 */
import { expect } from 'chai';
import { expectFault, inject, suiteApp, eachTwoNodes } from '../helpers/app.js';

type Obj = { [key: string]: unknown };

interface PortBody extends Obj {
  uuid: string;
  address: string;
  node_uuid: string;
  extra: Obj;
}

interface PortList {
  ports: PortBody[];
  next?: string;
}

const call = inject;


describe('ports API', function () {
  const t = suiteApp({ conductor: false, clear: ['nodes'] });
  const nodes = eachTwoNodes(t);

  async function createPort(body: Obj): Promise<PortBody> {
    const res = await call(t, 'POST', '/v1/ports', { body });
    expect(res.statusCode, res.body).to.equal(201);
    return res.json<PortBody>();
  }

  async function portCount(): Promise<number> {
    const row = await t.tdb.knex('ports').count({ n: '*' }).first();
    return Number(row?.n);
  }

  it('creates a port: 201, Location, MAC normalised to lower case with colons', async () => {
    const res = await call(t, 'POST', '/v1/ports', {
      body: { address: 'AA-BB-CC-00-11-22', node_uuid: nodes.a, extra: { slot: 1 }, pxe_enabled: false, local_link_connection: { switch_id: 'sw1', port_id: 'eth1' } },
    });
    expect(res.statusCode, res.body).to.equal(201);
    const port = res.json<PortBody>();
    expect(res.headers.location).to.match(new RegExp(`/v1/ports/${port.uuid}$`));
    expect(port).to.include({ address: 'aa:bb:cc:00:11:22', node_uuid: nodes.a, pxe_enabled: false, physical_network: null, portgroup_uuid: null });
    expect(port.extra).to.deep.equal({ slot: 1 });
    expect(port.local_link_connection).to.deep.equal({ switch_id: 'sw1', port_id: 'eth1' });
    expect(port).to.include.keys('created_at', 'updated_at', 'links', 'internal_info', 'is_smartnic');
    const shown = await call(t, 'GET', `/v1/ports/${port.uuid}`);
    expect(shown.json()).to.deep.equal(port);
  });

  it('hides port fields newer than the requested version', async () => {
    const port = await createPort({ address: '52:54:00:00:00:01', node_uuid: nodes.a });
    const old = (await call(t, 'GET', `/v1/ports/${port.uuid}`, { version: '1.1' })).json<Obj>();
    expect(Object.keys(old).sort()).to.deep.equal(['address', 'created_at', 'extra', 'links', 'node_uuid', 'updated_at', 'uuid']);
  });

  it('refuses a MAC already in use, whatever its spelling, with 409', async () => {
    await createPort({ address: '52:54:00:aa:bb:cc', node_uuid: nodes.a });
    expectFault(await call(t, 'POST', '/v1/ports', { body: { address: '52-54-00-AA-BB-CC', node_uuid: nodes.b } }), 409, '52:54:00:aa:bb:cc');
    expect(await portCount()).to.equal(1);
  });

  it('refuses a malformed MAC with 400', async () => {
    for (const address of ['52:54:00:aa:bb', 'zz:54:00:aa:bb:cc', '', 5, null, '52:54:00:aa:bb:cc:dd']) {
      expectFault(await call(t, 'POST', '/v1/ports', { body: { address, node_uuid: nodes.a } }), 400);
    }
    expect(await portCount()).to.equal(0);
  });

  it('refuses a port for a node that does not exist with 400, as Ironic does', async () => {
    const missing = '7b7b7b7b-0000-4000-8000-000000000000';
    expectFault(await call(t, 'POST', '/v1/ports', { body: { address: '52:54:00:00:00:09', node_uuid: missing } }), 400, missing);
    expect(await portCount()).to.equal(0);
  });

  it('lists default fields, /detail and ?detail=true, ?fields, and the ports of one node by UUID or name', async () => {
    const a1 = await createPort({ address: '52:54:00:00:00:01', node_uuid: nodes.a });
    const a2 = await createPort({ address: '52:54:00:00:00:02', node_uuid: nodes.a });
    const b1 = await createPort({ address: '52:54:00:00:00:03', node_uuid: nodes.b });

    const plain = (await call(t, 'GET', '/v1/ports')).json<PortList>();
    expect(plain.ports.map((p) => p.uuid)).to.deep.equal([a1.uuid, a2.uuid, b1.uuid]);
    expect(Object.keys(plain.ports[0]).sort()).to.deep.equal(['address', 'links', 'uuid']);
    for (const url of ['/v1/ports/detail', '/v1/ports?detail=true']) {
      expect((await call(t, 'GET', url)).json<PortList>().ports, url).to.deep.equal([a1, a2, b1]);
    }
    const fielded = (await call(t, 'GET', '/v1/ports?fields=address,node_uuid')).json<PortList>();
    expect(fielded.ports[2]).to.deep.equal({ uuid: b1.uuid, address: b1.address, node_uuid: nodes.b });

    for (const ident of [nodes.a, 'node-a']) {
      const res = await call(t, 'GET', `/v1/nodes/${ident}/ports`);
      expect(res.statusCode, res.body).to.equal(200);
      expect(res.json<PortList>().ports.map((p) => p.uuid), ident).to.deep.equal([a1.uuid, a2.uuid]);
    }
    const detail = (await call(t, 'GET', '/v1/nodes/node-b/ports/detail')).json<PortList>();
    expect(detail.ports).to.deep.equal([b1]);
    expect((await call(t, 'GET', `/v1/ports?node=node-b`)).json<PortList>().ports.map((p) => p.uuid)).to.deep.equal([b1.uuid]);
    expect((await call(t, 'GET', `/v1/ports?node_uuid=${nodes.b}`)).json<PortList>().ports.map((p) => p.uuid)).to.deep.equal([b1.uuid]);
    expect((await call(t, 'GET', '/v1/ports?address=52-54-00-00-00-02')).json<PortList>().ports.map((p) => p.uuid)).to.deep.equal([a2.uuid]);
    expectFault(await call(t, 'GET', '/v1/nodes/no-such-node/ports'), 404);
  });

  it('pages through ports with limit, marker and next, by id and by address descending', async () => {
    const made: PortBody[] = [];
    const macs = ['52:54:00:00:00:05', '52:54:00:00:00:01', '52:54:00:00:00:04', '52:54:00:00:00:02', '52:54:00:00:00:03'];
    for (const address of macs) made.push(await createPort({ address, node_uuid: nodes.a }));
    const walk = async (first: string, limit: number): Promise<string[]> => {
      const seen: string[] = [];
      let url: string | undefined = first;
      for (let page = 0; url !== undefined; page++) {
        expect(page).to.be.below(10);
        const body: PortList = (await call(t, 'GET', url)).json<PortList>();
        if (body.ports.length === limit) expect(body.next, `page ${page}`).to.be.a('string');
        else expect(body, `page ${page}`).to.not.have.property('next');
        seen.push(...body.ports.map((p) => p.address));
        url = body.next === undefined ? undefined : new URL(body.next).pathname + new URL(body.next).search;
      }
      return seen;
    };
    expect(await walk('/v1/ports?limit=2', 2)).to.deep.equal(macs);
    expect(await walk('/v1/ports?limit=2&sort_key=address&sort_dir=desc', 2)).to.deep.equal([...macs].sort().reverse());
    expect(await walk('/v1/ports?limit=5&sort_key=created_at', 5)).to.deep.equal(macs);
    expect(await walk(`/v1/nodes/${nodes.a}/ports?limit=3`, 3)).to.deep.equal(macs);
  });

  it('updates a port by JSON patch, normalising the MAC, and moves it to another node', async () => {
    const port = await createPort({ address: '52:54:00:00:00:01', node_uuid: nodes.a, extra: { a: 1 } });
    const res = await call(t, 'PATCH', `/v1/ports/${port.uuid}`, {
      body: [
        { op: 'replace', path: '/address', value: '52:54:00:00:00:FF' },
        { op: 'add', path: '/extra/b', value: 2 },
        { op: 'remove', path: '/extra/a' },
        { op: 'replace', path: '/pxe_enabled', value: false },
        { op: 'replace', path: '/node_uuid', value: nodes.b },
      ],
    });
    expect(res.statusCode, res.body).to.equal(200);
    const patched = res.json<PortBody>();
    expect(patched).to.include({ address: '52:54:00:00:00:ff', pxe_enabled: false, node_uuid: nodes.b });
    expect(patched.extra).to.deep.equal({ b: 2 });
    expect((await call(t, 'GET', `/v1/nodes/${nodes.b}/ports`)).json<PortList>().ports.map((p) => p.uuid)).to.deep.equal([port.uuid]);
    expect((await call(t, 'GET', `/v1/nodes/${nodes.a}/ports`)).json<PortList>().ports).to.deep.equal([]);
  });

  it('refuses a PATCH that would duplicate a MAC, or names a missing node, and keeps the port', async () => {
    const one = await createPort({ address: '52:54:00:00:00:01', node_uuid: nodes.a });
    const two = await createPort({ address: '52:54:00:00:00:02', node_uuid: nodes.a });
    expectFault(await call(t, 'PATCH', `/v1/ports/${two.uuid}`, { body: [{ op: 'replace', path: '/address', value: one.address.toUpperCase() }] }), 409);
    const missing = '7b7b7b7b-0000-4000-8000-000000000000';
    expectFault(await call(t, 'PATCH', `/v1/ports/${two.uuid}`, { body: [{ op: 'replace', path: '/node_uuid', value: missing }] }), 400, missing);
    expect((await call(t, 'GET', `/v1/ports/${two.uuid}`)).json()).to.deep.equal(two);
  });

  it('deletes a port: 204, then 404', async () => {
    const port = await createPort({ address: '52:54:00:00:00:01', node_uuid: nodes.a });
    const res = await call(t, 'DELETE', `/v1/ports/${port.uuid}`);
    expect(res.statusCode).to.equal(204);
    expect(res.body).to.equal('');
    expectFault(await call(t, 'GET', `/v1/ports/${port.uuid}`), 404, `Port ${port.uuid} could not be found.`);
    expectFault(await call(t, 'DELETE', `/v1/ports/${port.uuid}`), 404);
  });

  it('removes the ports of a deleted node', async () => {
    const a1 = await createPort({ address: '52:54:00:00:00:01', node_uuid: nodes.a });
    await createPort({ address: '52:54:00:00:00:02', node_uuid: nodes.a });
    const b1 = await createPort({ address: '52:54:00:00:00:03', node_uuid: nodes.b });
    expect((await call(t, 'DELETE', `/v1/nodes/${nodes.a}`)).statusCode).to.equal(204);
    expect((await call(t, 'GET', '/v1/ports')).json<PortList>().ports.map((p) => p.uuid)).to.deep.equal([b1.uuid]);
    expectFault(await call(t, 'GET', `/v1/ports/${a1.uuid}`), 404);
    // The MAC is free again.
    await createPort({ address: '52:54:00:00:00:01', node_uuid: nodes.b });
  });
});
