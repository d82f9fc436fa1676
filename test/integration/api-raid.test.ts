/**
 * A node's target RAID configuration (API 1.12) through `app.inject()` against a real
 * database: PUT …/states/raid with Ironic's schema checks, the node and states views, and the
 * logical disk properties of a hardware type.
 */
import { expect } from 'chai';
import { LOGICAL_DISK_PROPERTIES } from '../../common/raid.js';
import { createNode, expectFault, type TestApp, inject, type InjectOptions, suiteApp } from '../helpers/app.js';

type Obj = { [key: string]: unknown };

const call = (t: TestApp, method: 'GET' | 'PUT', url: string, opts: InjectOptions = {}) => inject(t, method, url, { version: '1.78', ...opts });


describe('RAID configuration API', function () {
  const t = suiteApp({ conductor: false, clear: ['nodes'] });
  let node: string;

  beforeEach(async () => {
    node = (await createNode(t, { name: 'raid-node' }, '1.78')).uuid;
  });

  async function stored(): Promise<{ target_raid_config: Obj; raid_config: Obj; version: string }> {
    return t.tdb.knex('nodes').where('uuid', node).first('target_raid_config', 'raid_config', 'version');
  }

  it('stores a valid target, shows it on the node and in its states, and {} clears it', async () => {
    const config = {
      logical_disks: [
        { size_gb: 100, raid_level: '1', is_root_volume: true, volume_name: 'root', disk_type: 'ssd' },
        { size_gb: 'MAX', raid_level: '5+0', controller: 'RAID.Integrated.1-1', physical_disks: ['Disk.Bay.0', 'Disk.Bay.1'], number_of_physical_disks: 2 },
      ],
    };
    const put = await call(t, 'PUT', `/v1/nodes/${node}/states/raid`, { body: config });
    expect(put.statusCode, put.body).to.equal(204);
    expect(put.body).to.equal('');
    const shown = (await call(t, 'GET', `/v1/nodes/raid-node`)).json<Obj>();
    expect(shown.target_raid_config).to.deep.equal(config);
    expect(shown.raid_config).to.deep.equal({});
    const states = (await call(t, 'GET', `/v1/nodes/${node}/states`)).json<Obj>();
    expect(states.target_raid_config).to.deep.equal(config);
    expect(states.raid_config).to.deep.equal({});
    const fielded = (await call(t, 'GET', `/v1/nodes/${node}?fields=target_raid_config`)).json<Obj>();
    expect(fielded.target_raid_config).to.deep.equal(config);

    const clear = await call(t, 'PUT', `/v1/nodes/raid-node/states/raid`, { body: {} });
    expect(clear.statusCode, clear.body).to.equal(204);
    expect((await stored()).target_raid_config).to.deep.equal({});
  });

  it('keeps the RAID fields and the call behind 1.12', async () => {
    const old = (await call(t, 'GET', `/v1/nodes/${node}`, { version: '1.11' })).json<Obj>();
    expect(old).to.not.have.any.keys('raid_config', 'target_raid_config');
    expect((await call(t, 'GET', `/v1/nodes/${node}/states`, { version: '1.11' })).json<Obj>()).to.not.have.any.keys('raid_config', 'target_raid_config');
    expectFault(await call(t, 'PUT', `/v1/nodes/${node}/states/raid`, { version: '1.11', body: { logical_disks: [{ size_gb: 1, raid_level: '0' }] } }), 406);
    expectFault(await call(t, 'GET', '/v1/drivers/fake-hardware/raid/logical_disk_properties', { version: '1.11' }), 406);
    expect((await stored()).target_raid_config).to.deep.equal({});
  });

  it("refuses configurations outside Ironic's schema with its messages, changing nothing", async () => {
    const before = await stored();
    const bad: Array<[unknown, string]> = [
      [{ logical_disks: [{ size_gb: 100, raid_level: '7' }] }, "RAID config validation error: '7' is not one of ['JBOD', '0', '1', '2', '5', '6', '1+0', '5+0', '6+0']"],
      // jsonschema's best match (4.23, Ironic 2025.1's): inside anyOf, the error of the branch of the value's type.
      [{ logical_disks: [{ size_gb: -1, raid_level: '1' }] }, 'RAID config validation error: -1 is less than the minimum of 0'],
      [{ logical_disks: [{ size_gb: 'ALL', raid_level: '1' }] }, "RAID config validation error: 'ALL' is not one of ['MAX']"],
      [{ logical_disks: [{ size_gb: 1.5, raid_level: '1' }] }, 'RAID config validation error: 1.5 is not valid under any of the given schemas'],
      [{ logical_disks: [{ size_gb: 1, raid_level: '1', controller: 'c', physical_disks: [{ id: 'd0' }] }] }, "RAID config validation error: {'id': 'd0'} is not of type 'string'"],
      // Of two errors, the shallower; of siblings, the later property.
      [{ logical_disks: [{ size_gb: -1, raid_level: '7' }] }, 'RAID config validation error: -1 is less than the minimum of 0'],
      [{ logical_disks: [{ size_gb: 1, raid_level: '7', speed: 'fast' }] }, "RAID config validation error: Additional properties are not allowed ('speed' was unexpected)"],
      [{ logical_disks: [{ size_gb: 1, raid_level: '1', zz: 1, speed: 2 }] }, "RAID config validation error: Additional properties are not allowed ('speed', 'zz' were unexpected)"],
      [{ logical_disks: [{ size_gb: 1, raid_level: 1 }] }, "RAID config validation error: 1 is not of type 'string'"],
      [{ logical_disks: [{ size_gb: 1, raid_level: '1', volume_name: "it's" }, { size_gb: 'x', raid_level: '1' }] }, "RAID config validation error: 'x' is not one of ['MAX']"],
      [{ logical_disks: [{ raid_level: '1' }] }, "'size_gb' is a required property"],
      [{ logical_disks: [] }, 'RAID config validation error: [] should be non-empty'],
      [{ disks: [] }, "'logical_disks' is a required property"],
      [{ logical_disks: [{ size_gb: 1, raid_level: '1' }], colour: 'red' }, "Additional properties are not allowed ('colour' was unexpected)"],
      [{ logical_disks: [{ size_gb: 1, raid_level: '1', speed: 'fast' }] }, "('speed' was unexpected)"],
      [{ logical_disks: [{ size_gb: 1, raid_level: '1', physical_disks: ['d0'] }] }, "'controller' is a dependency of 'physical_disks'"],
      [{ logical_disks: [{ size_gb: 1, raid_level: '1', is_root_volume: 'yes' }] }, "'yes' is not of type 'boolean'"],
      [{ logical_disks: [{ size_gb: 1, raid_level: '1', disk_type: 'tape' }] }, "'tape' is not one of ['hdd', 'ssd']"],
      [{ logical_disks: [{ size_gb: 1, raid_level: '1', number_of_physical_disks: 0 }] }, '0 is less than or equal to the minimum of 0'],
      [{ logical_disks: 'all' }, "'all' is not of type 'array'"],
      [{ logical_disks: [{ size_gb: 1, raid_level: '1', is_root_volume: true }, { size_gb: 2, raid_level: '0', is_root_volume: true }] },
        'Raid config cannot have more than one root volume. 2 root volumes were specified'],
      [[{ size_gb: 1, raid_level: '1' }], 'target_raid_config'],
    ];
    for (const [body, message] of bad) {
      expectFault(await call(t, 'PUT', `/v1/nodes/${node}/states/raid`, { body }), 400, message);
    }
    expect(await stored()).to.deep.equal(before);
    expectFault(await call(t, 'PUT', '/v1/nodes/no-such-node/states/raid', { body: {} }), 404, 'no-such-node');
  });

  it('refuses a configuration for a node whose RAID interface is no-raid with 404, and still lets {} clear it', async function () {
    // The interface becomes a node column with the other interface kinds; until then every node has RAID.
    if (!(await t.tdb.knex.schema.hasColumn('nodes', 'raid_interface'))) this.skip();
    await t.tdb.knex('nodes').where('uuid', node).update({ raid_interface: 'no-raid' });
    expectFault(await call(t, 'PUT', `/v1/nodes/${node}/states/raid`, { body: { logical_disks: [{ size_gb: 1, raid_level: '1' }] } }), 404,
      'Driver fake-hardware does not support raid (disabled or not implemented).');
    const clear = await call(t, 'PUT', `/v1/nodes/${node}/states/raid`, { body: {} });
    expect(clear.statusCode, clear.body).to.equal(204);
  });

  it("lists the logical disk properties of Ironic's schema for a hardware type", async () => {
    for (const url of ['/v1/drivers/fake-hardware/raid/logical_disk_properties', '/drivers/fake-hardware/raid/logical_disk_properties']) {
      const res = await call(t, 'GET', url, { version: '1.12' });
      expect(res.statusCode, res.body).to.equal(200);
      expect(res.json(), url).to.deep.equal(LOGICAL_DISK_PROPERTIES);
    }
    expect(Object.keys(LOGICAL_DISK_PROPERTIES).sort()).to.deep.equal([
      'controller', 'disk_type', 'interface_type', 'is_root_volume', 'number_of_physical_disks', 'physical_disks', 'raid_level',
      'share_physical_disks', 'size_gb', 'volume_name',
    ]);
    expectFault(await call(t, 'GET', '/v1/drivers/no-such-hw/raid/logical_disk_properties'), 404, 'no-such-hw');
  });
});

describe('RAID configuration API: the node\'s RAID interface checks what it adds to the schema', function () {
  const t = suiteApp({ conductor: false, clear: ['nodes'], env: { GALVANIC_DEFAULT__ENABLED_RAID_INTERFACES: 'fake,no-raid,redfish' } });

  it('refuses scsi disks for the redfish RAID interface (Ironic\'s RedfishRAID.validate_raid_config), not for fake', async () => {
    const scsi = { logical_disks: [{ size_gb: 100, raid_level: '1', interface_type: 'scsi' }] };
    const redfish = await createNode<{ uuid: string }>(t, {
      name: 'raid-redfish', driver: 'redfish', raid_interface: 'redfish', driver_info: { redfish_address: 'https://bmc.example.test', redfish_username: 'u', redfish_password: 'p' },
    }, '1.78');
    expectFault(await call(t, 'PUT', `/v1/nodes/${redfish.uuid}/states/raid`, { body: scsi }), 400, 'interface type `scsi` not supported by Redfish RAID');
    expect((await t.tdb.knex('nodes').where('uuid', redfish.uuid).first('target_raid_config')).target_raid_config).to.deep.equal({});
    // The schema still comes first.
    expectFault(await call(t, 'PUT', `/v1/nodes/${redfish.uuid}/states/raid`, { body: { logical_disks: [] } }), 400, '[] should be non-empty');
    const fake = await createNode<{ uuid: string }>(t, { name: 'raid-fake' }, '1.78');
    const ok = await call(t, 'PUT', `/v1/nodes/${fake.uuid}/states/raid`, { body: scsi });
    expect(ok.statusCode, ok.body).to.equal(204);
  });
});
