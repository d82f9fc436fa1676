/**
 * Servicing through the agent (Ironic 2023.2+'s in-band servicing), real processes: a service
 * step that needs the agent boots it (`service wait`), runs on its heartbeats (BIOS settings
 * applied by a reboot into the agent, the agent's own service steps), and the instance is
 * booted again at the end; a failure leaves `service failed` in maintenance, an abort in
 * `service wait` boots the instance again; steps that need no agent still run at once.
 */
import { expect } from 'chai';
import { agentWitness, setAgentFaults } from '../helpers/agent-sim.js';
import { AGENT_TEST_ENV, directNodeBody, galvanicAndSim, watchStates } from '../helpers/agent-deploy.js';
import { createNode, provision, provisionAndSettle, simEvents, untilNode } from '../helpers/provisioning.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const AUTH = { authorization: `Basic ${Buffer.from('admin:password').toString('base64')}` };
const SYSTEM = '/redfish/v1/Systems/System.Embedded.1';

describe('servicing through the agent (real processes)', function () {
  this.timeout(180_000);
  const g = galvanicAndSim({
    images: true,
    env: {
      ...AGENT_TEST_ENV, GALVANIC_CONDUCTOR__AUTOMATED_CLEAN: 'false',
      GALVANIC_DEFAULT__ENABLED_BIOS_INTERFACES: 'fake,no-bios,redfish', GALVANIC_DEFAULT__ENABLED_RAID_INTERFACES: 'fake,no-raid,agent',
    },
    sim: (apiUrl) => ({ count: 4, agent: { apiUrl, bootSeconds: [0.2, 0.4], heartbeatMinGapMs: 200, lookupRetryMs: 300 } }),
    cleanExit: false,
  });
  const { api } = g;

  /** A node on BMC `i` deployed with the direct interface, its instance running. */
  async function activeNode(i: number): Promise<string> {
    const node = await createNode(api, directNodeBody(`svc-${i}`, g.sim.bmcs[i].url, g.images, { bios_interface: 'redfish', raid_interface: 'agent' }));
    expect((await provisionAndSettle(api, node.uuid, 'manage')).provision_state).to.equal('manageable');
    expect((await provisionAndSettle(api, node.uuid, 'inspect')).provision_state).to.equal('manageable');
    expect((await provisionAndSettle(api, node.uuid, 'provide')).provision_state).to.equal('available');
    await provision(api, node.uuid, 'active');
    const deployed = await watchStates(api, node.uuid, 60_000);
    expect(deployed.node.provision_state, deployed.node.last_error ?? '').to.equal('active');
    return node.uuid;
  }

  async function service(uuid: string, steps: Json[]): Promise<{ states: string[]; node: Json }> {
    await provision(api, uuid, 'service', { service_steps: steps });
    return watchStates(api, uuid, 60_000);
  }

  async function bios(i: number): Promise<Json> {
    return ((await (await fetch(`${g.sim.bmcs[i].url}${SYSTEM}/Bios`, { headers: AUTH })).json()) as Json).Attributes as Json;
  }

  it('applies BIOS settings by a reboot into the agent when the servicing runs it, and boots the instance again', async () => {
    const uuid = await activeNode(0);
    const url = g.sim.bmcs[0].url;
    const since = (await simEvents(url)).at(-1)?.seq ?? 0;
    const { states, node } = await service(uuid, [
      { interface: 'deploy', step: 'burnin_cpu' },
      { interface: 'bios', step: 'apply_configuration', args: { settings: [{ name: 'ProcTurboMode', value: 'Disabled' }] } },
    ]);
    expect(node.provision_state, node.last_error ?? '').to.equal('active');
    expect(states).to.include('service wait');
    expect(node.service_step).to.deep.equal({});
    expect(node.power_state).to.equal('power on');
    expect((await bios(0)).ProcTurboMode).to.equal('Disabled');
    const boots = (await simEvents(url)).filter((e) => e.seq > since && e.type === 'boot-started').map((e) => `${String(e.device)}${e.image ? ' image' : ''}`);
    // The agent, the agent again after the settings' reboot, then the instance from its disk.
    expect(boots).to.deep.equal(['Cd image', 'Cd image', 'Hdd']);
    const witness = await agentWitness(url);
    expect(witness.instance?.running, 'the instance runs again').to.equal(true);
    expect(witness.disk, 'the instance\'s disk is untouched').to.not.equal(null);
  });

  it('runs the agent\'s own service steps and a flow step; the agent refuses to build RAID over the instance', async () => {
    const uuid = await activeNode(1);
    const { states, node } = await service(uuid, [{ interface: 'deploy', step: 'burnin_cpu' }, { interface: 'power', step: 'reboot' }]);
    expect(node.provision_state, node.last_error ?? '').to.equal('active');
    expect(states).to.include('service wait');
    expect((await agentWitness(g.sim.bmcs[1].url)).received['service.execute_service_step/burnin_cpu']).to.equal(1);

    // The agent RAID's service step runs on the agent, which finds the instance's partitions (IPA's check).
    const raid = { logical_disks: [{ size_gb: 100, raid_level: '1', controller: 'software' }] };
    const failed = await service(uuid, [{ interface: 'raid', step: 'apply_configuration', args: { raid_config: raid, delete_existing: false } }]);
    expect(failed.node.provision_state).to.equal('service failed');
    expect(failed.node.last_error).to.include('Service step raid.apply_configuration failed').and.include('Partitions detected on devices /dev/sda during RAID config');
    expect((await agentWitness(g.sim.bmcs[1].url)).received['service.execute_service_step/apply_configuration']).to.equal(1);
    expect((await agentWitness(g.sim.bmcs[1].url)).softwareRaid).to.equal(null);
  });

  it('fails with the agent\'s message into service failed and maintenance; abort from service wait boots the instance again', async () => {
    const uuid = await activeNode(2);
    const url = g.sim.bmcs[2].url;
    await setAgentFaults(url, { failStep: 'burnin_memory', failMessage: 'memory test found errors' });
    let { node } = await service(uuid, [{ interface: 'deploy', step: 'burnin_memory' }]);
    expect(node.provision_state).to.equal('service failed');
    expect(node.last_error).to.include('Service step deploy.burnin_memory failed').and.include('memory test found errors');
    expect(node).to.include({ maintenance: true, fault: 'service failure' });
    expect(node.service_step).to.deep.equal({});
    await setAgentFaults(url, {});
    expect((await api('DELETE', `/v1/nodes/${uuid}/maintenance`)).status).to.equal(202);
    expect((await provisionAndSettle(api, uuid, 'abort')).provision_state).to.equal('active');

    await setAgentFaults(url, { hangStep: 'burnin_network' });
    await provision(api, uuid, 'service', { service_steps: [{ interface: 'deploy', step: 'burnin_network' }] });
    await untilNode(api, uuid, (n) => n.provision_state === 'service wait' && (n.service_step as Json).step === 'burnin_network', 'to run burnin_network', 30_000);
    node = await provisionAndSettle(api, uuid, 'abort', {}, 30_000) as Json;
    expect(node.provision_state).to.equal('service failed');
    expect(node.last_error).to.equal('By request, the service operation was aborted during or after the completion of step "deploy.burnin_network"');
    expect(node.power_state).to.equal('power on');
    await setAgentFaults(url, {});
  });

  it('runs steps that need no agent at once, without booting it, and refuses a step no interface offers', async () => {
    const uuid = await activeNode(3);
    // A BIOS step needs no agent in servicing: the instance is rebooted in place.
    const { states, node } = await service(uuid, [
      { interface: 'power', step: 'reboot' },
      { interface: 'bios', step: 'apply_configuration', args: { settings: [{ name: 'ProcVirtualization', value: 'Disabled' }] } },
    ]);
    expect(node.provision_state, node.last_error ?? '').to.equal('active');
    expect(states).to.not.include('service wait');
    expect((await bios(3)).ProcVirtualization).to.equal('Disabled');
    expect((await agentWitness(g.sim.bmcs[3].url)).received['service.get_service_steps'] ?? 0).to.equal(0);

    const refused = await service(uuid, [{ interface: 'bios', step: 'defragment' }]);
    expect(refused.node.provision_state).to.equal('service failed');
    expect(refused.node.last_error).to.include("node does not support this service step: {'interface': 'bios', 'step': 'defragment'}");
  });
});
