/**
 * The API changes of microversions 1.79 and later, each asked at its version and just below it,
 * with Ironic's status codes and messages.
 */
import { expect } from 'chai';
import type { LightMyRequestResponse } from 'fastify';
import { faultOf, type TestApp, suiteApp } from '../helpers/app.js';
import { until } from '../helpers/until.js';
import { startRedfishSim, type RedfishSim } from '../../sim/redfish/index.js';

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

/** Polls the node until `check` holds (the conductor runs intents asynchronously). */
function untilNode(t: TestApp, ident: string, check: (n: Obj) => boolean, what: string): Promise<Obj> {
  let last: Obj = {};
  return until(() => `${what}: ${JSON.stringify(last)}`, async () => {
    last = (await call(t, 'GET', `/v1/nodes/${ident}`, 'latest')).json<Obj>();
    return check(last) && last;
  }, 20_000, 100);
}

async function moveTo(t: TestApp, ident: string, verb: string, state: string, body: Obj = {}): Promise<Obj> {
  const res = await call(t, 'PUT', `/v1/nodes/${ident}/states/provision`, 'latest', { target: verb, ...body });
  expect(res.statusCode, res.body).to.equal(202);
  return untilNode(t, ident, (n) => n.provision_state === state && n.target_provision_state === null, `${ident} ${state}`);
}

describe('microversions 1.79 and later', function () {
  const t = suiteApp({ conductor: false });

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

  describe('1.84 continue_inspection', () => {
    const data = (macs: string[], extra: Obj = {}) => ({ inventory: { interfaces: macs.map((m) => ({ mac_address: m })), ...extra } });

    it('is served at 1.1 and from 1.84 only, and checks the data first', async () => {
      expectFault(await call(t, 'POST', '/v1/continue_inspection', '1.83', data(['52:54:00:00:00:01'])), 404, 'API version 1.84 or newer is required');
      expectFault(await call(t, 'POST', '/v1/continue_inspection', '1.83', {}), 400, "Schema error for data: 'inventory' is a required property");
      expectFault(await call(t, 'POST', '/v1/continue_inspection', '1.84', { inventory: { interfaces: [] } }), 400, 'Schema error for data: [] should be non-empty');
      expectFault(await call(t, 'POST', '/v1/continue_inspection', '1.84', { inventory: { interfaces: [{}] } }), 400, "Schema error for data: 'mac_address' is a required property");
      expectFault(await call(t, 'POST', '/v1/continue_inspection', '1.84', data(['not-a-mac'])), 400, 'No lookup information provided');
      // node_uuid is newer than the inspector-compatible 1.1.
      const uuid = '4b0ae52d-6a5c-4f5e-9f1e-0123456789ab';
      expectFault(await call(t, 'POST', `/v1/continue_inspection?node_uuid=${uuid}`, '1.1', data(['52:54:00:00:00:01'])), 404, 'API version 1.84 or newer is required');
      expectFault(await call(t, 'POST', '/v1/continue_inspection?node_uuid=nope', '1.84', data(['52:54:00:00:00:01'])), 400, 'Expected UUID for node_uuid: nope');
      expect((await call(t, 'GET', '/v1', '1.84')).json<Obj>()).to.have.property('continue_inspection');
    });

    it('answers 404 alike when no node waits: unknown MACs, an unknown node, a node not in inspect wait', async () => {
      const node = await createNode(t, { name: 'inspect-lookup' });
      const port = await call(t, 'POST', '/v1/ports', 'latest', { address: '52:54:00:aa:bb:01', node_uuid: node.uuid });
      expect(port.statusCode, port.body).to.equal(201);
      for (const [url, body] of [
        ['/v1/continue_inspection', data(['52:54:00:ff:ff:ff'])],
        ['/v1/continue_inspection', data(['not-a-mac'], { bmc_address: '192.0.2.1' })],
        [`/v1/continue_inspection?node_uuid=${'0'.repeat(8)}-0000-0000-0000-${'0'.repeat(12)}`, data(['52:54:00:ff:ff:ff'])],
        ['/v1/continue_inspection', data(['52:54:00:AA:BB:01'])],
        [`/v1/continue_inspection?node_uuid=${String(node.uuid)}`, data(['52:54:00:ff:ff:fe'])],
      ] as Array<[string, Obj]>) {
        expectFault(await call(t, 'POST', url, '1.84', body), 404, 'Resource could not be found.');
        expectFault(await call(t, 'POST', url.replace(/\?.*/, ''), '1.1', body), 404, 'Resource could not be found.');
      }
    });
  });

  describe('1.85 unhold', () => {
    it('is not acceptable below 1.85 and refused in any state a node can reach', async () => {
      const node = await createNode(t, { name: 'unhold-node' });
      expect((await call(t, 'PUT', '/v1/nodes/unhold-node/states/provision', '1.84', { target: 'unhold' })).statusCode).to.equal(406);
      expectFault(await call(t, 'PUT', '/v1/nodes/unhold-node/states/provision', '1.85', { target: 'unhold' }), 400,
        `The requested action "unhold" can not be performed on node "${String(node.uuid)}" while it is in state "enroll".`);
    });
  });

  describe('1.86 firmware', () => {
    it('lists no firmware components for the fake and no-firmware interfaces, and shows the interface in drivers', async () => {
      await createNode(t, { name: 'fw-node' });
      expectFault(await call(t, 'GET', '/v1/nodes/fw-node/firmware', '1.85'), 404, 'The resource could not be found.');
      const res = await call(t, 'GET', '/v1/nodes/fw-node/firmware', '1.86');
      expect(res.statusCode, res.body).to.equal(200);
      expect(res.json()).to.deep.equal({ firmware: [] });
      expect((await call(t, 'GET', '/v1/nodes/nope/firmware', '1.86')).statusCode).to.equal(404);
      const at86 = (await call(t, 'GET', '/v1/drivers/fake-hardware', '1.86')).json<Obj>();
      expect(at86.enabled_firmware_interfaces).to.include('fake');
      expect(at86).to.have.property('default_firmware_interface');
      const at85 = (await call(t, 'GET', '/v1/drivers/fake-hardware', '1.85')).json<Obj>();
      expect(at85).to.not.have.property('enabled_firmware_interfaces');
      expect((await call(t, 'GET', '/v1/drivers/fake-hardware', '1.39')).json<Obj>()).to.not.have.property('default_bios_interface');
    });
  });

  describe('1.88 port name', () => {
    it('names ports and finds them by name from 1.88', async () => {
      const node = await createNode(t, { name: 'port-name-node' });
      expect((await call(t, 'POST', '/v1/ports', '1.87', { address: '52:54:00:00:88:01', node_uuid: node.uuid, name: 'p1' })).statusCode).to.equal(406);
      const created = await call(t, 'POST', '/v1/ports', '1.88', { address: '52:54:00:00:88:01', node_uuid: node.uuid, name: 'p1' });
      expect(created.statusCode, created.body).to.equal(201);
      const uuid = created.json<Obj>().uuid as string;
      expect(created.json<Obj>().name).to.equal('p1');
      expect((await call(t, 'GET', `/v1/ports/${uuid}`, '1.87')).json<Obj>()).to.not.have.property('name');
      expect((await call(t, 'GET', '/v1/ports/p1', '1.88')).json<Obj>().uuid).to.equal(uuid);
      expectFault(await call(t, 'GET', '/v1/ports/p1', '1.87'), 400, 'Expected UUID for port_uuid: p1');
      expectFault(await call(t, 'GET', '/v1/ports/bad:name', '1.88'), 400, 'Expected UUID or name for port_ident: bad:name');
      expect((await call(t, 'POST', '/v1/ports', '1.88', { address: '52:54:00:00:88:02', node_uuid: node.uuid, name: 'p1' })).statusCode).to.equal(409);
      const renamed = await call(t, 'PATCH', '/v1/ports/p1', '1.88', [{ op: 'replace', path: '/name', value: 'p2' }]);
      expect(renamed.statusCode, renamed.body).to.equal(200);
      expect(renamed.json<Obj>().name).to.equal('p2');
      expect((await call(t, 'DELETE', '/v1/ports/p2', '1.88')).statusCode).to.equal(204);
    });
  });

  describe('1.90 OVN VTEP local link connection', () => {
    it('accepts the VTEP switch keys from 1.90 and hides them below', async () => {
      const node = await createNode(t, { name: 'vtep-node' });
      const llc = { port_id: 'p', 'vtep-logical-switch': 'ls', 'vtep-physical-switch': 'ps' };
      expect((await call(t, 'POST', '/v1/ports', '1.89', { address: '52:54:00:00:90:01', node_uuid: node.uuid, local_link_connection: llc })).statusCode).to.equal(406);
      const created = await call(t, 'POST', '/v1/ports', '1.90', { address: '52:54:00:00:90:01', node_uuid: node.uuid, local_link_connection: llc });
      expect(created.statusCode, created.body).to.equal(201);
      expect(created.json<Obj>().local_link_connection).to.deep.equal(llc);
      const uuid = created.json<Obj>().uuid as string;
      expect((await call(t, 'GET', `/v1/ports/${uuid}`, '1.89')).json<Obj>().local_link_connection).to.deep.equal({});
      expect((await call(t, 'POST', '/v1/ports', '1.90', { address: '52:54:00:00:90:02', node_uuid: node.uuid, local_link_connection: { port_id: 'p', 'vtep-logical-switch': 'ls' } })).statusCode).to.equal(400);
    });
  });

  describe('1.91 .json is part of the name', () => {
    it('strips .json below 1.91 only when the version is asked for', async () => {
      await createNode(t, { name: 'plain' });
      await createNode(t, { name: 'dotted.json' });
      expect((await call(t, 'GET', '/v1/nodes/plain.json', '1.90')).json<Obj>().name).to.equal('plain');
      // Stripped, not found, then looked up again with the suffix (Ironic's _get_with_suffix).
      expect((await call(t, 'GET', '/v1/nodes/dotted.json', '1.90')).json<Obj>().name).to.equal('dotted.json');
      expect((await call(t, 'GET', '/v1/nodes/plain.json', '1.91')).statusCode).to.equal(404);
      expect((await call(t, 'GET', '/v1/nodes/dotted.json', '1.91')).json<Obj>().name).to.equal('dotted.json');
      expect((await call(t, 'GET', '/v1/nodes.json', '1.90')).statusCode).to.equal(200);
    });
  });

  describe('1.94 ports created with the node name', () => {
    it('takes node_ident (UUID or name) from 1.94', async () => {
      const node = await createNode(t, { name: 'ident-node' });
      expect((await call(t, 'POST', '/v1/ports', '1.93', { address: '52:54:00:00:94:01', node_ident: 'ident-node' })).statusCode).to.equal(406);
      const created = await call(t, 'POST', '/v1/ports', '1.94', { address: '52:54:00:00:94:01', node_ident: 'ident-node' });
      expect(created.statusCode, created.body).to.equal(201);
      expect(created.json<Obj>().node_uuid).to.equal(node.uuid);
      expect((await call(t, 'POST', '/v1/ports', '1.94', { address: '52:54:00:00:94:02', node_ident: 'nope' })).statusCode).to.equal(400);
      expect((await call(t, 'POST', '/v1/ports', '1.94', { address: '52:54:00:00:94:03', node_ident: 'ident-node', node_uuid: node.uuid })).statusCode).to.equal(400);
    });
  });
});

describe('microversions 1.87 to 1.95 with a conductor', function () {
  const t = suiteApp();

  async function activeNode(name: string, extra: Obj = {}): Promise<Obj> {
    await createNode(t, { name, ...extra });
    await moveTo(t, name, 'manage', 'manageable');
    await moveTo(t, name, 'provide', 'available');
    return moveTo(t, name, 'active', 'active');
  }

  describe('1.87 service', () => {
    it('checks the request: version, steps required and only with service', async () => {
      await createNode(t, { name: 'svc-check' });
      const steps = [{ interface: 'power', step: 'power_on' }];
      expect((await call(t, 'PUT', '/v1/nodes/svc-check/states/provision', '1.86', { target: 'service', service_steps: steps })).statusCode).to.equal(406);
      expectFault(await call(t, 'PUT', '/v1/nodes/svc-check/states/provision', '1.87', { target: 'service' }), 400,
        '"service_steps" is required when setting target provision state to service');
      expectFault(await call(t, 'PUT', '/v1/nodes/svc-check/states/provision', '1.87', { target: 'manage', service_steps: steps }), 400,
        '"service_steps" is only valid when setting target provision state to service');
      const node = (await call(t, 'GET', '/v1/nodes/svc-check', '1.87')).json<Obj>();
      expect(node.service_step).to.deep.equal({});
      expect((await call(t, 'GET', '/v1/nodes/svc-check', '1.86')).json<Obj>()).to.not.have.property('service_step');
      expectFault(await call(t, 'PUT', '/v1/nodes/svc-check/states/provision', '1.87', { target: 'service', service_steps: steps }), 400,
        `The requested action "service" can not be performed on node "${String(node.uuid)}" while it is in state "enroll".`);
    });

    it('runs power flow steps on an active node and returns it to active', async () => {
      await activeNode('svc-ok');
      const done = await moveTo(t, 'svc-ok', 'service', 'active', { service_steps: [{ interface: 'power', step: 'power_off' }, { interface: 'power', step: 'power_on' }] });
      expect(done.power_state).to.equal('power on');
      expect(done.last_error).to.equal(null);
    });

    it('fails a step no interface offers into service failed, from which abort returns to active', async () => {
      const node = await activeNode('svc-fail');
      const failed = await moveTo(t, 'svc-fail', 'service', 'service failed', { service_steps: [{ interface: 'bios', step: 'apply_configuration', args: { settings: [] } }] });
      expect(failed.last_error).to.equal(`Cannot service node ${String(node.uuid)}: node does not support this service step: {'interface': 'bios', 'step': 'apply_configuration', 'args': {'settings': []}}`);
      expect((await call(t, 'GET', '/v1/nodes?provision_state=service%20failed', '1.87')).json<{ nodes: Obj[] }>().nodes.map((n) => n.name)).to.include('svc-fail');
      await moveTo(t, 'svc-fail', 'abort', 'active');
    });
  });

  describe('1.89 and 1.93 virtual media', () => {
    it('is not found below 1.89 (1.93 to read) and checks the request', async () => {
      await createNode(t, { name: 'vm-check' });
      const body = { device_type: 'cdrom', image_url: 'http://images.example/a.iso' };
      expectFault(await call(t, 'POST', '/v1/nodes/vm-check/vmedia', '1.88', body), 404, 'The resource could not be found.');
      expectFault(await call(t, 'DELETE', '/v1/nodes/vm-check/vmedia', '1.88'), 404, 'The resource could not be found.');
      expectFault(await call(t, 'GET', '/v1/nodes/vm-check/vmedia', '1.92'), 404, 'The resource could not be found.');
      expectFault(await call(t, 'POST', '/v1/nodes/vm-check/vmedia', '1.89', { image_url: 'http://x/a.iso' }), 400, "Schema error for vmedia: 'device_type' is a required property");
      expectFault(await call(t, 'POST', '/v1/nodes/vm-check/vmedia', '1.89', { ...body, device_type: 'dvd' }), 400, "Schema error for vmedia: 'dvd' is not one of ['disk', 'cdrom', 'floppy']");
      expectFault(await call(t, 'POST', '/v1/nodes/vm-check/vmedia', '1.89', { ...body, image_url: 'ftp://x/a.iso' }), 400, 'Unsupported or missing URL scheme: ftp');
      expectFault(await call(t, 'DELETE', '/v1/nodes/vm-check/vmedia?device_types=cdrom,usb', '1.89'), 400, 'Invalid device type(s) usb (valid are disk, cdrom, floppy)');
    });

    it('attaches, reads and detaches through a Redfish BMC', async () => {
      const sim: RedfishSim = await startRedfishSim({ count: 1 });
      try {
        await createNode(t, {
          name: 'vm-redfish', driver: 'redfish',
          driver_info: { redfish_address: sim.bmcs[0].url, redfish_username: 'admin', redfish_password: 'password' },
        });
        const iso = 'http://images.example/live.iso';
        // ?wait= (Galvanic's) waits for the BMC: 204 once the medium is in.
        const attached = await call(t, 'POST', '/v1/nodes/vm-redfish/vmedia?wait=30', '1.89', { device_type: 'cdrom', image_url: iso, image_download_source: 'http' });
        expect(attached.statusCode, attached.body).to.equal(204);
        const slots = await call(t, 'GET', '/v1/nodes/vm-redfish/vmedia', '1.93');
        expect(slots.statusCode, slots.body).to.equal(200);
        const list = slots.json<Array<{ media_types: string[]; inserted: boolean; image: string | null }>>();
        expect(list.find((m) => m.inserted)).to.deep.include({ image: iso });
        expect((await call(t, 'DELETE', '/v1/nodes/vm-redfish/vmedia?device_types=cdrom&wait=30', '1.89')).statusCode).to.equal(204);
        const after = (await call(t, 'GET', '/v1/nodes/vm-redfish/vmedia', '1.93')).json<Array<{ inserted: boolean }>>();
        expect(after.some((m) => m.inserted)).to.equal(false);
        expect((await call(t, 'GET', '/v1/nodes/vm-redfish', '1.93')).json<Obj>().last_error).to.equal(null);
      } finally {
        await sim.stop();
      }
    });

    it('records on the node that fake-hardware has no virtual media, and refuses to read it', async () => {
      const node = await createNode(t, { name: 'vm-fake' });
      const res = await call(t, 'POST', '/v1/nodes/vm-fake/vmedia', '1.89', { device_type: 'cdrom', image_url: 'http://images.example/a.iso' });
      expect(res.statusCode, res.body).to.equal(204);
      const after = await untilNode(t, 'vm-fake', (n) => n.last_error !== null, 'the attach to fail');
      expect(after.last_error).to.equal(`Could not attach device cdrom to node ${String(node.uuid)}: Driver fake-hardware does not support attach_virtual_media (disabled or not implemented).`);
      expectFault(await call(t, 'GET', '/v1/nodes/vm-fake/vmedia', '1.93'), 400, 'Driver fake-hardware does not support get_virtual_media (disabled or not implemented).');
      expect((await call(t, 'DELETE', '/v1/nodes/vm-fake/vmedia', '1.89')).statusCode).to.equal(204);
      await untilNode(t, 'vm-fake', (n) => String(n.last_error).startsWith('Could not detach device(s) None'), 'the detach to fail');
    });
  });

  describe('1.92 runbooks', () => {
    const steps = [{ interface: 'power', step: 'power_on', args: {}, order: 1 }];

    it('creates, lists, patches and deletes runbooks from 1.92', async () => {
      expectFault(await call(t, 'GET', '/v1/runbooks', '1.91'), 404, 'The API version does not allow runbooks');
      expectFault(await call(t, 'POST', '/v1/runbooks', '1.91', { name: 'CUSTOM_RB', steps }), 405, 'The API version does not allow runbooks');
      expect((await call(t, 'GET', '/v1', '1.92')).json<Obj>()).to.have.property('runbooks');
      const created = await call(t, 'POST', '/v1/runbooks', '1.92', { name: 'CUSTOM_RB', steps, extra: { a: 1 } });
      expect(created.statusCode, created.body).to.equal(201);
      const rb = created.json<Obj>();
      expect(rb).to.deep.include({ name: 'CUSTOM_RB', public: false, owner: null, disable_ramdisk: false, extra: { a: 1 }, steps });
      expect((await call(t, 'POST', '/v1/runbooks', '1.92', { name: 'CUSTOM_RB', steps })).statusCode).to.equal(409);
      expect((await call(t, 'POST', '/v1/runbooks', '1.92', { name: 'not-a-trait', steps })).statusCode).to.equal(400);
      expect((await call(t, 'POST', '/v1/runbooks', '1.92', { name: 'CUSTOM_X', steps: [{ interface: 'power', step: 'x' }] })).statusCode).to.equal(400);
      // A standalone caller has no project: Ironic refuses an owner on create.
      expectFault(await call(t, 'POST', '/v1/runbooks', '1.92', { name: 'CUSTOM_OWNED', steps, owner: 'p1' }), 400,
        'Cannot create a runbook as a project scoped admin with an owner other than your own project.');
      const list = (await call(t, 'GET', '/v1/runbooks', '1.92')).json<{ runbooks: Obj[] }>().runbooks;
      expect(list.map((r) => Object.keys(r).sort())).to.deep.equal([['links', 'name', 'uuid']]);
      const owned = await call(t, 'PATCH', '/v1/runbooks/CUSTOM_RB', '1.92', [{ op: 'add', path: '/owner', value: 'p1' }]);
      expect(owned.statusCode, owned.body).to.equal(200);
      expect(owned.json<Obj>().owner).to.equal('p1');
      expectFault(await call(t, 'PATCH', '/v1/runbooks/CUSTOM_RB', '1.92', [{ op: 'replace', path: '/owner', value: 'p2' }, { op: 'replace', path: '/public', value: true }]), 400,
        'There cannot be an owner for a public runbook');
      const pub = await call(t, 'PATCH', `/v1/runbooks/${String(rb.uuid)}`, '1.92', [{ op: 'replace', path: '/public', value: true }]);
      expect(pub.json<Obj>()).to.deep.include({ public: true, owner: null });
      expect((await call(t, 'PATCH', '/v1/runbooks/CUSTOM_RB', '1.92', [{ op: 'replace', path: '/disable_ramdisk', value: true }])).statusCode).to.equal(400);
      expect((await call(t, 'DELETE', '/v1/runbooks/CUSTOM_RB', '1.92')).statusCode).to.equal(204);
      expectFault(await call(t, 'GET', '/v1/runbooks/CUSTOM_RB', '1.92'), 404, 'Runbook CUSTOM_RB could not be found.');
    });

    it('runs a runbook for servicing on a node that has its trait', async () => {
      const created = await call(t, 'POST', '/v1/runbooks', '1.92', { name: 'CUSTOM_SERVICE', steps: [{ interface: 'power', step: 'reboot', order: 0 }] });
      expect(created.statusCode, created.body).to.equal(201);
      const node = await activeNode('rb-node');
      expect((await call(t, 'PUT', '/v1/nodes/rb-node/states/provision', '1.91', { target: 'service', runbook: 'CUSTOM_SERVICE' })).statusCode).to.equal(406);
      expectFault(await call(t, 'PUT', '/v1/nodes/rb-node/states/provision', '1.92', { target: 'service', runbook: 'CUSTOM_NONE' }), 404, 'Runbook CUSTOM_NONE could not be found.');
      expectFault(await call(t, 'PUT', '/v1/nodes/rb-node/states/provision', '1.92', { target: 'service', runbook: 'CUSTOM_SERVICE' }), 400,
        `This runbook has not been approved for use on this node ${String(node.uuid)}. Please ask an administrator to add it to your node traits.`);
      expect((await call(t, 'PUT', '/v1/nodes/rb-node/traits/CUSTOM_SERVICE', '1.92')).statusCode).to.equal(204);
      expectFault(await call(t, 'PUT', '/v1/nodes/rb-node/states/provision', '1.92', { target: 'service', runbook: 'CUSTOM_SERVICE', service_steps: [{ interface: 'power', step: 'reboot' }] }), 400,
        'Please provide either "service_steps" or a runbook, but not both.');
      const done = await moveTo(t, 'rb-node', 'service', 'active', { runbook: 'CUSTOM_SERVICE' });
      expect(done.last_error).to.equal(null);
      const history = (await call(t, 'GET', '/v1/nodes/rb-node/history', '1.92')).json<{ history: Array<{ event: string }> }>().history;
      expect(history.map((h) => h.event)).to.include('Servicing (1 step(s)) done, node is active.');
    });
  });

  describe('1.95 disable_power_off', () => {
    it('is set on create from 1.95 and refuses power off, in the API and under the lock', async () => {
      expect((await call(t, 'POST', '/v1/nodes', '1.94', { driver: 'fake-hardware', disable_power_off: true })).statusCode).to.equal(406);
      const node = await createNode(t, { name: 'dpo-node', disable_power_off: true }, '1.95');
      expect(node.disable_power_off).to.equal(true);
      expect((await call(t, 'GET', '/v1/nodes/dpo-node', '1.94')).json<Obj>()).to.not.have.property('disable_power_off');
      for (const target of ['power off', 'soft power off']) {
        expectFault(await call(t, 'PUT', '/v1/nodes/dpo-node/states/power', '1.95', { target }), 409, `Failed to set node power state to ${target}.`);
      }
      const on = await call(t, 'PUT', '/v1/nodes/dpo-node/states/power', '1.95', { target: 'power on' });
      expect(on.statusCode, on.body).to.equal(202);
      await untilNode(t, 'dpo-node', (n) => n.power_state === 'power on' && n.target_power_state === null, 'power on');
      const unset = await call(t, 'PATCH', '/v1/nodes/dpo-node', '1.95', [{ op: 'replace', path: '/disable_power_off', value: false }]);
      expect(unset.json<Obj>().disable_power_off).to.equal(false);
      expect((await call(t, 'PUT', '/v1/nodes/dpo-node/states/power', '1.95', { target: 'power off' })).statusCode).to.equal(202);
      await untilNode(t, 'dpo-node', (n) => n.power_state === 'power off' && n.target_power_state === null, 'power off');
    });

    it('fails a power_off service step on such a node', async () => {
      const node = await activeNode('dpo-svc', { disable_power_off: true });
      const failed = await moveTo(t, 'dpo-svc', 'service', 'service failed', { service_steps: [{ interface: 'power', step: 'power_off' }] });
      expect(failed.last_error).to.equal(`Cannot service node ${String(node.uuid)}: Failed to set node power state to power off.`);
    });
  });
});
