/**
 * The `agent` RAID interface through simulated agents (real processes): software RAID
 * (`controller: software`) built and deleted by the agent's RAID clean steps and its
 * `raid.apply_configuration` deploy step, raid_config and the node's properties set as
 * Ironic's post-step hooks set them, and the agent's and Ironic's refusals.
 */
import { expect } from 'chai';
import { agentWitness } from '../helpers/agent-sim.js';
import { AGENT_TEST_ENV, directNodeBody, galvanicAndSim, watchStates } from '../helpers/agent-deploy.js';
import { createNode, provision, provisionAndSettle, type NodeView } from '../helpers/provisioning.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const SOFTWARE_RAID = {
  logical_disks: [
    { size_gb: 100, raid_level: '1', controller: 'software', is_root_volume: true, volume_name: 'root' },
    { size_gb: 'MAX', raid_level: '0', controller: 'software' },
  ],
};

describe('agent RAID interface: software RAID through the agent (real processes)', function () {
  this.timeout(150_000);
  const g = galvanicAndSim({
    images: true,
    env: { ...AGENT_TEST_ENV, GALVANIC_CONDUCTOR__AUTOMATED_CLEAN: 'false', GALVANIC_DEFAULT__ENABLED_RAID_INTERFACES: 'fake,no-raid,agent' },
    sim: (apiUrl) => ({ count: 4, agent: { apiUrl, bootSeconds: [0.2, 0.4], heartbeatMinGapMs: 200, lookupRetryMs: 300 } }),
    cleanExit: false,
  });
  const { api } = g;

  async function manageableNode(i: number): Promise<string> {
    const node = await createNode(api, directNodeBody(`agent-raid-${i}`, g.sim.bmcs[i].url, g.images, { raid_interface: 'agent' }));
    expect(node.raid_interface).to.equal('agent');
    expect((await provisionAndSettle(api, node.uuid, 'manage')).provision_state).to.equal('manageable');
    expect((await provisionAndSettle(api, node.uuid, 'inspect')).provision_state).to.equal('manageable');
    return node.uuid;
  }

  async function setTarget(uuid: string, config: Json): Promise<void> {
    const res = await api('PUT', `/v1/nodes/${uuid}/states/raid`, config);
    expect(res.status, res.body).to.equal(204);
  }

  async function clean(uuid: string, steps: string[]): Promise<NodeView & Json> {
    return (await provisionAndSettle(api, uuid, 'clean', { clean_steps: steps.map((step) => ({ interface: 'raid', step })) }, 60_000)) as NodeView & Json;
  }

  async function recover(uuid: string): Promise<void> {
    expect((await api('DELETE', `/v1/nodes/${uuid}/maintenance`)).status).to.equal(202);
    expect((await provisionAndSettle(api, uuid, 'manage')).provision_state).to.equal('manageable');
  }

  it('builds the target on the agent and records it, with the root volume\'s size and level; deletes it', async () => {
    const uuid = await manageableNode(0);
    await setTarget(uuid, SOFTWARE_RAID);
    let node = await clean(uuid, ['delete_configuration', 'create_configuration']);
    expect(node.provision_state, node.last_error ?? '').to.equal('manageable');
    const { last_updated: stamp, ...recorded } = node.raid_config as Json;
    expect(recorded).to.deep.equal(SOFTWARE_RAID);
    expect(stamp).to.match(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}$/);
    expect(node.properties).to.include({ local_gb: 100 });
    expect(String((node.properties as Json).capabilities)).to.include('raid_level:1');
    const built = (await agentWitness(g.sim.bmcs[0].url)).softwareRaid;
    expect(built?.map((d) => [d.name, d.raidLevel, d.sizeGb, d.holders])).to.deep.equal([
      ['/dev/md0', '1', 100, ['/dev/sda', '/dev/sdb']],
      ['/dev/md1', '0', 'MAX', ['/dev/sda', '/dev/sdb']],
    ]);

    node = await clean(uuid, ['delete_configuration']);
    expect(node.provision_state, node.last_error ?? '').to.equal('manageable');
    expect(node.raid_config).to.deep.equal({});
    expect((await agentWitness(g.sim.bmcs[0].url)).softwareRaid).to.equal(null);
  });

  it('fails the cleaning with the agent\'s message for a configuration it cannot build, and records nothing', async () => {
    const uuid = await manageableNode(1);
    await setTarget(uuid, { logical_disks: [{ size_gb: 100, raid_level: '5', controller: 'software' }] });
    let node = await clean(uuid, ['create_configuration']);
    expect(node.provision_state).to.equal('clean failed');
    expect(node.last_error).to.include('Clean step raid.create_configuration failed').and.include('Software RAID Configuration requires RAID-1 for the first logical disk');
    expect(node.raid_config).to.deep.equal({});

    // A hardware RAID target: the generic agent builds nothing and says so with an empty result.
    await recover(uuid);
    await setTarget(uuid, { logical_disks: [{ size_gb: 100, raid_level: '1' }] });
    node = await clean(uuid, ['create_configuration']);
    expect(node.provision_state).to.equal('clean failed');
    expect(node.last_error).to.include('post clean step hook failed for clean step').and.include(`IronicException: Agent ramdisk didn't return a proper command result while building RAID on ${uuid}`);
    expect((await agentWitness(g.sim.bmcs[1].url)).softwareRaid).to.equal(null);
  });

  it('refuses arguments the agent\'s RAID clean steps do not take, before any step runs', async () => {
    const uuid = await manageableNode(2);
    await setTarget(uuid, SOFTWARE_RAID);
    const node = await provisionAndSettle(api, uuid, 'clean', { clean_steps: [{ interface: 'raid', step: 'create_configuration', args: { create_root_volume: false } }] }, 60_000);
    expect(node.provision_state).to.equal('clean failed');
    expect(node.last_error).to.include('clean step raid.create_configuration has these unexpected arguments: create_root_volume');
    expect((await agentWitness(g.sim.bmcs[2].url)).softwareRaid).to.equal(null);
  });

  it('applies a RAID configuration as a deploy step, and fails a deploy whose configuration is not Ironic\'s schema', async () => {
    const uuid = await manageableNode(3);
    expect((await provisionAndSettle(api, uuid, 'provide')).provision_state).to.equal('available');
    const raid = { logical_disks: [{ size_gb: 'MAX', raid_level: '1', controller: 'software', is_root_volume: true }] };
    await provision(api, uuid, 'active', { deploy_steps: [{ interface: 'raid', step: 'apply_configuration', args: { raid_config: raid }, priority: 90 }] });
    const deployed = await watchStates(api, uuid, 90_000);
    expect(deployed.node.provision_state, deployed.node.last_error ?? '').to.equal('active');
    const { last_updated: _stamp, ...recorded } = (deployed.node as Json).raid_config as Json;
    expect(recorded).to.deep.equal(raid);
    expect(String((deployed.node.properties as Json).capabilities)).to.include('raid_level:1');
    expect((await agentWitness(g.sim.bmcs[3].url)).softwareRaid).to.have.length(1);

    await provision(api, uuid, 'deleted');
    expect((await watchStates(api, uuid, 60_000)).node.provision_state).to.equal('available');
    const image = g.images.image;
    const patched = await api('PATCH', `/v1/nodes/${uuid}`, [{ op: 'add', path: '/instance_info', value: { image_source: image.url, image_os_hash_algo: 'sha256', image_os_hash_value: image.sha256 } }]);
    expect(patched.status, patched.body).to.equal(200);
    await provision(api, uuid, 'active', { deploy_steps: [{ interface: 'raid', step: 'apply_configuration', args: { raid_config: { logical_disks: [] } }, priority: 90 }] });
    const failed = await watchStates(api, uuid, 60_000);
    expect(failed.node.provision_state).to.equal('deploy failed');
    expect(failed.node.last_error).to.include('RAID config validation error: [] should be non-empty');
  });
});
