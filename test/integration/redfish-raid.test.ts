/**
 * The `redfish` RAID interface against the simulator's Storage controllers and agents (real
 * processes): target_raid_config → Volumes on the BMC → raid_config, with a BMC that applies
 * volume changes at once and one that applies them at the next boot (the node rebooted into
 * the agent to finish), and the BMC's and Ironic's refusals.
 */
import { expect } from 'chai';
import { AGENT_TEST_ENV, directNodeBody, galvanicAndSim } from '../helpers/agent-deploy.js';
import { createNode, nodePorts, provisionAndSettle, type NodeView } from '../helpers/provisioning.js';

interface SimVolume {
  id: string;
  raidType: string;
  capacityBytes: number;
  drives: string[];
}

const GIB = 2 ** 30;
const DRIVE_BYTES = 960197124096;
const CONTROLLER = 'RAID.Integrated.1';
const BOTH_DRIVES = ['Disk.Bay.0', 'Disk.Bay.1'];

describe('redfish RAID interface: Storage volumes from target_raid_config (real processes)', function () {
  this.timeout(120_000);
  const g = galvanicAndSim({
    images: true,
    env: { ...AGENT_TEST_ENV, GALVANIC_CONDUCTOR__AUTOMATED_CLEAN: 'false', GALVANIC_DEFAULT__ENABLED_RAID_INTERFACES: 'fake,no-raid,redfish' },
    sim: (apiUrl) => ({ count: 3, agent: { apiUrl, bootSeconds: [0.2, 0.4], heartbeatMinGapMs: 200, lookupRetryMs: 300 } }),
    cleanExit: false,
  });
  const { api } = g;

  async function storage(i: number, change?: Record<string, unknown>): Promise<{ volumes: Record<string, SimVolume[]> }> {
    const res = await fetch(`${g.sim.bmcs[i].url}/_sim/storage`, change ? { method: 'PUT', body: JSON.stringify(change) } : {});
    expect(res.status).to.equal(200);
    return (await res.json()) as { volumes: Record<string, SimVolume[]> };
  }

  async function volumes(i: number): Promise<SimVolume[]> {
    return Object.values((await storage(i)).volumes).flat();
  }

  /** A manageable node with the redfish RAID interface on BMC `i`, inspected (its ports let its agent look itself up). */
  async function manageableNode(i: number): Promise<string> {
    const node = await createNode(api, directNodeBody(`raid-${i}`, g.sim.bmcs[i].url, g.images, { raid_interface: 'redfish' }));
    expect(node.raid_interface).to.equal('redfish');
    expect((await provisionAndSettle(api, node.uuid, 'manage')).provision_state).to.equal('manageable');
    expect((await provisionAndSettle(api, node.uuid, 'inspect')).provision_state).to.equal('manageable');
    expect(await nodePorts(api, node.uuid)).to.have.length.at.least(1);
    return node.uuid;
  }

  /** A node whose cleaning failed (and put it in maintenance) made manageable again. */
  async function recover(uuid: string): Promise<void> {
    expect((await api('DELETE', `/v1/nodes/${uuid}/maintenance`)).status).to.equal(202);
    expect((await provisionAndSettle(api, uuid, 'manage')).provision_state).to.equal('manageable');
  }

  async function setTarget(uuid: string, logicalDisks: Array<Record<string, unknown>>): Promise<void> {
    const res = await api('PUT', `/v1/nodes/${uuid}/states/raid`, { logical_disks: logicalDisks });
    expect(res.status, res.body).to.equal(204);
  }

  async function clean(uuid: string, steps: string[]): Promise<NodeView & { raid_config: { logical_disks?: Array<Record<string, unknown>> } }> {
    const clean_steps = steps.map((step) => ({ interface: 'raid', step, args: {} }));
    return (await provisionAndSettle(api, uuid, 'clean', { clean_steps }, 60_000)) as NodeView & { raid_config: { logical_disks?: Array<Record<string, unknown>> } };
  }

  it('creates the target volumes on the BMC and records them in raid_config; deletes them all', async () => {
    const uuid = await manageableNode(0);
    let node = await clean(uuid, ['delete_configuration']);
    expect(node.provision_state, node.last_error ?? '').to.equal('manageable');
    expect(await volumes(0)).to.deep.equal([]);
    expect(node.raid_config.logical_disks).to.deep.equal([]);
    expect(node.raid_config).to.have.property('last_updated').that.is.a('string');

    await setTarget(uuid, [{ size_gb: 100, raid_level: '1', is_root_volume: true, volume_name: 'root' }]);
    node = await clean(uuid, ['create_configuration']);
    expect(node.provision_state, node.last_error ?? '').to.equal('manageable');
    const created = await volumes(0);
    expect(created.map((v) => [v.raidType, v.capacityBytes, v.drives.length])).to.deep.equal([['RAID1', 100 * GIB, 2]]);
    expect(node.raid_config.logical_disks).to.deep.equal([{ id: created[0].id, name: 'root', controller: CONTROLLER, size_gb: 100, raid_level: '1' }]);

    // size_gb MAX (which needs its physical disks): the controller sizes the volume.
    await setTarget(uuid, [{ size_gb: 'MAX', raid_level: '0', controller: CONTROLLER, physical_disks: BOTH_DRIVES }]);
    node = await clean(uuid, ['delete_configuration', 'create_configuration']);
    expect(node.provision_state, node.last_error ?? '').to.equal('manageable');
    const max = await volumes(0);
    expect(max.map((v) => [v.raidType, v.capacityBytes])).to.deep.equal([['RAID0', 2 * DRIVE_BYTES]]);
    expect(node.raid_config.logical_disks).to.have.length(1);
    expect(node.raid_config.logical_disks?.[0]).to.include({ raid_level: '0', size_gb: Math.floor((2 * DRIVE_BYTES) / GIB) });

    // Larger than the disks: refused before the BMC is asked, nothing created.
    await setTarget(uuid, [{ size_gb: 5000, raid_level: '1', controller: CONTROLLER, physical_disks: BOTH_DRIVES }]);
    node = await clean(uuid, ['create_configuration']);
    expect(node.provision_state).to.equal('clean failed');
    expect(node.last_error).to.include('Clean step raid.create_configuration failed').and.include('is not enough for the size of the logical disk (5368709120000 bytes)');
    expect(await volumes(0)).to.deep.equal(max);
    // Without named disks, Ironic's matching finds none that fit.
    await recover(uuid);
    await setTarget(uuid, [{ size_gb: 5000, raid_level: '1' }]);
    node = await clean(uuid, ['create_configuration']);
    expect(node.provision_state).to.equal('clean failed');
    expect(node.last_error).to.include('failed to find matching physical disks for all logical disks');
    expect(await volumes(0)).to.deep.equal(max);

    await recover(uuid);
    node = await clean(uuid, ['delete_configuration']);
    expect(node.provision_state, node.last_error ?? '').to.equal('manageable');
    expect(await volumes(0)).to.deep.equal([]);
    expect(node.raid_config.logical_disks).to.deep.equal([]);
  });

  it('with a BMC that applies volume changes at the next boot: reboots into the agent and finishes there', async () => {
    await storage(1, { applyTime: 'OnReset' });
    const uuid = await manageableNode(1);
    await setTarget(uuid, [{ size_gb: 200, raid_level: '1', is_root_volume: true }]);
    const since = (await (await fetch(`${g.sim.bmcs[1].url}/_sim/events`)).json() as { events: Array<{ seq: number }> }).events.at(-1)?.seq ?? 0;
    const node = await clean(uuid, ['delete_configuration', 'create_configuration']);
    expect(node.provision_state, node.last_error ?? '').to.equal('manageable');
    const vols = await volumes(1);
    expect(vols.map((v) => [v.raidType, v.capacityBytes])).to.deep.equal([['RAID1', 200 * GIB]]);
    expect(node.raid_config.logical_disks).to.deep.equal([{ id: vols[0].id, name: vols[0].id.replace('Disk.Virtual.', 'Virtual Disk '), controller: CONTROLLER, size_gb: 200, raid_level: '1' }]);
    expect(node.driver_internal_info).to.not.have.property('raid_configs');
    const events = (await (await fetch(`${g.sim.bmcs[1].url}/_sim/events?since=${since}`)).json() as { events: Array<Record<string, unknown>> }).events;
    const volumeEvents = events.filter((e) => e.type === 'volume').map((e) => `${String(e.op)}${e.pending ? ' pending' : ''}${e.applied ? ' applied' : ''}`);
    expect(volumeEvents).to.deep.equal(['delete pending', 'delete applied', 'create pending', 'create applied']);
  });

  it('fails the cleaning with the BMC\'s message for a RAID level its controller lacks, and creates nothing', async () => {
    await storage(2, { raidTypes: ['RAID1'] });
    const uuid = await manageableNode(2);
    const before = await volumes(2);
    await setTarget(uuid, [{ size_gb: 100, raid_level: '0' }]);
    const node = await clean(uuid, ['create_configuration']);
    expect(node.provision_state).to.equal('clean failed');
    expect(node.last_error).to.include('Redfish driver failed to create virtual disk').and.include('The value "RAID0" for the property RAIDType is not in the list of acceptable values');
    expect(await volumes(2)).to.deep.equal(before);
  });
});
