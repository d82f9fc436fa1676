/**
 * Bad input on the paths Metal3's baremetal-operator takes (registration, inspection, BIOS,
 * RAID and firmware, provisioning with deploy steps and config drives, servicing, adoption,
 * power, BMC event subscriptions, virtual media), sent over gophercloud as BMO sends it, to
 * redfish nodes on the simulator's BMCs: each gets Ironic's status and message, and changes
 * nothing, neither in the database nor at the BMC.
 *
 * What Ironic refuses only in its conductor is failed there, with the BMC untouched: an adoption
 * with no instance to boot (below); an unknown or read-only BIOS attribute and a value outside
 * the registry (redfish-bios.test.ts), a RAID level the controller lacks and a size larger than
 * the disks (redfish-raid.test.ts), a firmware image URL that answers 404 and settings outside
 * the update's schema (redfish-firmware.test.ts), a deploy step the agent lacks
 * (custom-agent.test.ts).
 */
import { expect } from 'chai';
import type { Knex } from 'knex';
import { AGENT_TEST_ENV, galvanicAndSim } from '../helpers/agent-deploy.js';
import { BmoHost, METAL3_ENV, type HostData } from '../helpers/bmo.js';
import { resourceRequests, simStats } from '../helpers/redfish.js';
import { until } from '../helpers/until.js';

type Json = Record<string, unknown>;

interface Case {
  name: string;
  method: string;
  /** Under /v1/; `{m}` is the manageable node, `{v}` the available one, `{a}` the active one, `{mac}` the manageable node's port address. */
  path: string;
  body?: unknown;
  /** The microversion; BMO's 1.95 when absent. */
  version?: string;
  status: number;
  /** A part of Ironic's faultstring. */
  message?: string;
}

const SYSTEM = '/redfish/v1/Systems/System.Embedded.1';
const steps = (target: string, extra: Json) => ({ target, ...extra });
const disk = (d: Json) => ({ logical_disks: [{ size_gb: 100, raid_level: '1', ...d }] });

const CASES: Case[] = [
  // Registration: interfaces the hardware type lacks or that are not enabled, bad node fields.
  { name: 'an unknown firmware interface', method: 'POST', path: 'nodes', body: { driver: 'redfish', firmware_interface: 'bogus' }, status: 400, message: 'bogus' },
  { name: 'an unknown inspect interface', method: 'POST', path: 'nodes', body: { driver: 'redfish', inspect_interface: 'bogus' }, status: 400, message: 'bogus' },
  { name: 'a deploy interface redfish does not support', method: 'POST', path: 'nodes', body: { driver: 'redfish', deploy_interface: 'fake' }, status: 400, message: 'fake' },
  { name: 'a BIOS interface that is not enabled', method: 'POST', path: 'nodes', body: { driver: 'redfish', bios_interface: 'fake' }, status: 400, message: 'fake' },
  { name: 'disable_power_off that is not a boolean', method: 'POST', path: 'nodes', body: { driver: 'redfish', disable_power_off: 'maybe' }, status: 400, message: 'maybe' },
  { name: 'a RAID interface that is not enabled', method: 'PATCH', path: 'nodes/{m}', body: [{ op: 'add', path: '/raid_interface', value: 'bogus' }], status: 400, message: 'bogus' },
  // Ironic takes "yes", "off" and the like as booleans (strutils.bool_from_string).
  { name: 'automated_clean that is not a boolean', method: 'PATCH', path: 'nodes/{m}', body: [{ op: 'add', path: '/automated_clean', value: 'maybe' }], status: 400, message: 'maybe' },
  { name: 'memory_mb that is not an integer', method: 'PATCH', path: 'nodes/{m}', body: [{ op: 'add', path: '/properties/memory_mb', value: 'lots' }], status: 400, message: 'should be non-negative integers, but provided values are: memory_mb=lots' },
  { name: 'a field nodes do not have', method: 'PATCH', path: 'nodes/{m}', body: [{ op: 'add', path: '/colour', value: 'red' }], status: 400, message: 'colour' },
  { name: 'the deploy interface of an active node', method: 'PATCH', path: 'nodes/{a}', body: [{ op: 'add', path: '/deploy_interface', value: 'custom-agent' }], status: 409, message: 'deploy_interface' },
  { name: 'a port with a MAC another port has', method: 'POST', path: 'ports', body: { node_uuid: '{m}', address: '{mac}', pxe_enabled: true }, status: 409, message: 'already exists' },
  { name: 'a port with a bad MAC', method: 'POST', path: 'ports', body: { node_uuid: '{m}', address: '02:00:zz', pxe_enabled: true }, status: 400, message: '02:00:zz' },
  // Manual cleaning, as BMO asks for RAID, BIOS and firmware.
  { name: 'clean without clean_steps', method: 'PUT', path: 'nodes/{m}/states/provision', body: { target: 'clean' }, status: 400, message: 'clean_steps' },
  { name: 'a clean step of an unknown interface', method: 'PUT', path: 'nodes/{m}/states/provision', body: steps('clean', { clean_steps: [{ interface: 'bogus', step: 'x' }] }), status: 400, message: "'interface' must be one of" },
  { name: 'a clean step without its name', method: 'PUT', path: 'nodes/{m}/states/provision', body: steps('clean', { clean_steps: [{ interface: 'raid' }] }), status: 400, message: 'step' },
  { name: 'clean step args that are not an object', method: 'PUT', path: 'nodes/{m}/states/provision', body: steps('clean', { clean_steps: [{ interface: 'bios', step: 'apply_configuration', args: 'x' }] }), status: 400, message: 'args' },
  { name: 'clean_steps that are not a list', method: 'PUT', path: 'nodes/{m}/states/provision', body: steps('clean', { clean_steps: { interface: 'raid', step: 'create_configuration' } }), status: 400, message: 'clean_steps' },
  // The RAID target.
  { name: 'a RAID level Ironic does not know', method: 'PUT', path: 'nodes/{m}/states/raid', body: disk({ raid_level: '7' }), status: 400, message: "'7' is not one of" },
  { name: 'a negative size', method: 'PUT', path: 'nodes/{m}/states/raid', body: disk({ size_gb: -1 }), status: 400, message: '-1' },
  { name: 'a size that is neither a number nor MAX', method: 'PUT', path: 'nodes/{m}/states/raid', body: disk({ size_gb: 'half' }), status: 400, message: "'half' is not one of ['MAX']" },
  { name: 'a logical disk property Ironic does not know', method: 'PUT', path: 'nodes/{m}/states/raid', body: disk({ stripe: 64 }), status: 400, message: 'stripe' },
  { name: 'a RAID target without logical disks', method: 'PUT', path: 'nodes/{m}/states/raid', body: { volumes: [] }, status: 400, message: 'logical_disks' },
  // Deploying an available node: deploy steps (a custom deploy) and config drives.
  { name: 'a deploy step without its priority', method: 'PUT', path: 'nodes/{v}/states/provision', body: steps('active', { deploy_steps: [{ interface: 'deploy', step: 'install_coreos', args: {} }] }), status: 400, message: "'priority' is a required property" },
  { name: 'a deploy step without its args', method: 'PUT', path: 'nodes/{v}/states/provision', body: steps('active', { deploy_steps: [{ interface: 'deploy', step: 'install_coreos', priority: 80 }] }), status: 400, message: "'args' is a required property" },
  { name: 'a deploy step with a negative priority', method: 'PUT', path: 'nodes/{v}/states/provision', body: steps('active', { deploy_steps: [{ interface: 'deploy', step: 'install_coreos', args: {}, priority: -1 }] }), status: 400, message: 'priority' },
  { name: 'deploy steps with clean', method: 'PUT', path: 'nodes/{m}/states/provision', body: steps('clean', { clean_steps: [{ interface: 'raid', step: 'delete_configuration' }], deploy_steps: [] }), status: 400, message: 'deploy_steps' },
  { name: 'a config drive whose user_data is a number', method: 'PUT', path: 'nodes/{v}/states/provision', body: steps('active', { configdrive: { user_data: 5 } }), status: 400, message: 'user_data' },
  { name: 'a config drive with an unknown key', method: 'PUT', path: 'nodes/{v}/states/provision', body: steps('active', { configdrive: { meta_data: {}, colour: 'red' } }), status: 400, message: 'colour' },
  { name: 'deploying a manageable node', method: 'PUT', path: 'nodes/{m}/states/provision', body: steps('active', { configdrive: { meta_data: {} } }), status: 400, message: 'manageable' },
  // Servicing.
  { name: 'service below 1.87', method: 'PUT', path: 'nodes/{a}/states/provision', body: steps('service', { service_steps: [{ interface: 'bios', step: 'apply_configuration', args: { settings: [] } }] }), version: '1.86', status: 406 },
  { name: 'service without service_steps', method: 'PUT', path: 'nodes/{a}/states/provision', body: { target: 'service' }, status: 400, message: 'service_steps' },
  { name: 'servicing a manageable node', method: 'PUT', path: 'nodes/{m}/states/provision', body: steps('service', { service_steps: [{ interface: 'firmware', step: 'update', args: { settings: [] } }] }), status: 400, message: 'manageable' },
  // Adoption, inspection and abort in states that do not allow them.
  { name: 'adopting an active node', method: 'PUT', path: 'nodes/{a}/states/provision', body: { target: 'adopt' }, status: 400, message: 'active' },
  { name: 'adopt below 1.17', method: 'PUT', path: 'nodes/{m}/states/provision', body: { target: 'adopt' }, version: '1.16', status: 406 },
  { name: 'inspecting an active node', method: 'PUT', path: 'nodes/{a}/states/provision', body: { target: 'inspect' }, status: 400, message: 'active' },
  { name: 'aborting on a manageable node', method: 'PUT', path: 'nodes/{m}/states/provision', body: { target: 'abort' }, status: 400, message: 'manageable' },
  // Reading BIOS settings and firmware.
  { name: 'a BIOS setting the node does not have', method: 'GET', path: 'nodes/{m}/bios/NoSuchSetting', status: 404, message: 'NoSuchSetting' },
  { name: 'BIOS details below 1.74', method: 'GET', path: 'nodes/{m}/bios?detail=true', version: '1.73', status: 400 },
  { name: 'firmware below 1.86', method: 'GET', path: 'nodes/{m}/firmware', version: '1.85', status: 404 },
  // Power.
  { name: 'soft power off with a zero timeout', method: 'PUT', path: 'nodes/{a}/states/power', body: { target: 'soft power off', timeout: 0 }, status: 400, message: 'timeout' },
  { name: 'an unknown power target', method: 'PUT', path: 'nodes/{a}/states/power', body: { target: 'half on' }, status: 400, message: 'half on' },
  // BMC event subscriptions.
  { name: 'a subscription without a destination', method: 'POST', path: 'nodes/{a}/vendor_passthru?method=create_subscription', body: { Context: 'x' }, status: 400, message: 'Destination' },
  { name: 'deleting a subscription without its id', method: 'DELETE', path: 'nodes/{a}/vendor_passthru?method=delete_subscription', body: {}, status: 400, message: 'id' },
  // Virtual media (a data image).
  { name: 'a virtual media device Ironic does not know', method: 'POST', path: 'nodes/{a}/vmedia', body: { device_type: 'tape', image_url: 'http://images.example/data.iso' }, status: 400, message: 'tape' },
  { name: 'a virtual media image over FTP', method: 'POST', path: 'nodes/{a}/vmedia', body: { device_type: 'cdrom', image_url: 'ftp://images.example/data.iso' }, status: 400, message: 'ftp' },
  { name: 'detaching a device type Ironic does not know', method: 'DELETE', path: 'nodes/{a}/vmedia?device_types=tape', status: 400, message: 'tape' },
  { name: 'reading virtual media below 1.93', method: 'GET', path: 'nodes/{a}/vmedia', version: '1.92', status: 404 },
  // Deletion.
  { name: 'deleting an active node out of maintenance', method: 'DELETE', path: 'nodes/{a}', status: 409, message: 'is associated with instance' },
];

async function snapshot(knex: Knex): Promise<Json> {
  const out: Json = {};
  for (const table of ['nodes', 'ports', 'intents', 'node_history', 'bios_settings', 'firmware_information']) {
    const { rows } = (await knex.raw(`select count(*)::int as count, md5(coalesce(string_agg(t::text, '|' order by t::text), '')) as hash from ${table} t`)) as { rows: unknown[] };
    out[table] = rows[0];
  }
  return out;
}

describe('Metal3 BMO flow: bad input gets Ironic\'s answer and changes nothing (real processes)', function () {
  this.timeout(60_000);
  const g = galvanicAndSim({
    images: true,
    env: { ...AGENT_TEST_ENV, ...METAL3_ENV, GALVANIC_CONDUCTOR__AUTOMATED_CLEAN: 'false' },
    sim: (apiUrl) => ({ count: 4, agent: { apiUrl, bootSeconds: [0.1, 0.2], heartbeatMinGapMs: 200, lookupRetryMs: 300 } }),
    cleanExit: false,
  });
  const base: HostData = { bootMode: 'UEFI', automatedCleaning: false, inspectionMode: 'fast' };
  const host = (i: number, name: string) => new BmoHost(g.galvanic.url, {
    namespace: 'metal3', name, uid: `7c1e0a55-2b3d-4e6f-8a9b-00000000000${i}`, bmcAddress: `redfish-virtualmedia+${g.sim.bmcs[i].url}${SYSTEM}`, username: 'admin', password: 'password',
  }, { deployIsoUrl: g.images.isoUrl, shortDelayMs: 50, longDelayMs: 100 });
  let manageable: BmoHost;
  let available: BmoHost;
  let active: BmoHost;
  let mac = '';

  before(async () => {
    manageable = host(0, 'bad-m');
    active = host(1, 'bad-a');
    available = host(3, 'bad-v');
    for (const h of [manageable, active, available]) {
      await h.discover();
      await h.reconcile('register', () => h.register(base));
      let refresh = true;
      await h.reconcile('inspect', async () => {
        const r = await h.inspectHardware(base, refresh);
        refresh = false;
        return r;
      }, { long: true });
    }
    const image = { url: g.images.image.url, checksum: g.images.image.sha256, checksumType: 'sha256' as const };
    await active.reconcile('provision', () => active.provision({ ...base, image }), { long: true });
    await available.client.expectOk({ method: 'PUT', path: `nodes/${available.nodeId}/states/provision`, body: { target: 'provide' }, ok: [202] });
    await until('available', async () => (await available.getNode()).provision_state === 'available');
    const ports = await manageable.client.expectOk<{ ports: Array<{ address: string }> }>({ method: 'GET', path: `ports?node_uuid=${manageable.nodeId}` });
    mac = ports.ports[0].address;
  });

  it(`has at least 30 cases (${CASES.length})`, () => {
    expect(CASES.length).to.be.at.least(30);
  });

  it('answers each as Ironic does, changing nothing in the database or at the BMCs', async () => {
    const fill = (s: string) => s.replaceAll('{m}', manageable.nodeId).replaceAll('{a}', active.nodeId).replaceAll('{v}', available.nodeId).replaceAll('{mac}', mac);
    const client = manageable.client;
    const bmcWrites = async () => Promise.all([0, 1, 3].map(async (i) => resourceRequests(await simStats(g.sim.bmcs[i].url)).filter((r) => !r.startsWith('GET ')).length));
    const failures: string[] = [];
    for (const c of CASES) {
      const before = await snapshot(g.galvanic.tdb.knex);
      const writes = await bmcWrites();
      client.microversion = c.version ?? '1.95';
      const body = c.body === undefined ? undefined : JSON.parse(fill(JSON.stringify(c.body))) as unknown;
      const res = await client.request({ method: c.method, path: fill(c.path), body });
      const fault = (() => {
        try {
          return (JSON.parse((res.body as { error_message: string }).error_message) as { faultstring: string }).faultstring;
        } catch {
          return res.text;
        }
      })();
      if (res.status !== c.status) failures.push(`${c.name}: ${res.status} (wanted ${c.status}) ${fault}`);
      else if (c.message !== undefined && !fault.includes(c.message)) failures.push(`${c.name}: "${fault}" lacks "${c.message}"`);
      if (JSON.stringify(await snapshot(g.galvanic.tdb.knex)) !== JSON.stringify(before)) failures.push(`${c.name}: changed the database`);
      if (JSON.stringify(await bmcWrites()) !== JSON.stringify(writes)) failures.push(`${c.name}: wrote to a BMC`);
    }
    client.microversion = '1.95';
    expect(failures).to.deep.equal([]);
  });

  it('fails the adoption of a live ISO host whose ISO is unknown, and the BMC is not touched', async () => {
    const adopter = host(2, 'bad-adopt');
    await adopter.discover();
    await adopter.reconcile('register', () => adopter.register({ ...base, image: { url: '', liveIso: true } }));
    // The ramdisk deploy boots the instance from instance_info/boot_iso, which this node lacks.
    expect((await adopter.getNode()).deploy_interface).to.equal('ramdisk');
    const writes = resourceRequests(await simStats(g.sim.bmcs[2].url)).filter((r) => !r.startsWith('GET ')).length;
    const r = await adopter.reconcile('adopt', () => adopter.adopt(false), { allowFailure: true });
    expect(r.errorMessage).to.match(/^Host adoption failed: Error while attempting to adopt node .+: .*boot_iso/);
    const node = await until('adopt failed', async () => {
      const n = await adopter.getNode();
      return n.provision_state === 'adopt failed' && n;
    });
    expect(node.power_state).to.equal(null);
    expect(resourceRequests(await simStats(g.sim.bmcs[2].url)).filter((x) => !x.startsWith('GET ')).length).to.equal(writes);
  });
});
