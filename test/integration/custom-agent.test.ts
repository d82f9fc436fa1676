/**
 * The `custom-agent` deploy interface (Ironic's CustomAgentDeploy) against simulated
 * ironic-python-agents: no image to write, the user's deploy steps run on the agent, and the
 * deploy ends as an agent deploy does.
 */
import { expect } from 'chai';
import { agentWitness } from '../helpers/agent-sim.js';
import { AGENT_TEST_ENV, directNodeBody, galvanicAndSim, watchStates } from '../helpers/agent-deploy.js';
import { createNode, nodePorts, provision, provisionAndSettle } from '../helpers/provisioning.js';

const AUTH = { authorization: `Basic ${Buffer.from('admin:password').toString('base64')}` };

describe('custom-agent deploy: the agent\'s deploy steps, no image written (real processes)', function () {
  this.timeout(120_000);
  const g = galvanicAndSim({
    images: true,
    env: { ...AGENT_TEST_ENV, GALVANIC_CONDUCTOR__DEPLOY_CALLBACK_TIMEOUT: '20', GALVANIC_CONDUCTOR__AUTOMATED_CLEAN: 'false' },
    sim: (apiUrl) => ({ count: 3, agent: { apiUrl, bootSeconds: [0.2, 0.5], heartbeatMinGapMs: 200, lookupRetryMs: 300 } }),
    cleanExit: false,
  });
  const { api } = g;

  /** An available custom-agent node on BMC `i`, with no image in its instance_info. */
  async function availableNode(i: number): Promise<string> {
    const body = { ...directNodeBody(`custom-${i}`, g.sim.bmcs[i].url, g.images, { deploy_interface: 'custom-agent' }), instance_info: {} };
    const node = await createNode(api, body);
    expect((await provisionAndSettle(api, node.uuid, 'manage')).provision_state).to.equal('manageable');
    expect((await provisionAndSettle(api, node.uuid, 'inspect')).provision_state).to.equal('manageable');
    expect(await nodePorts(api, node.uuid)).to.have.length.at.least(1);
    expect((await provisionAndSettle(api, node.uuid, 'provide')).provision_state).to.equal('available');
    return node.uuid;
  }

  it('validates without an image, and runs the user\'s agent step between booting the agent and its tear-down', async () => {
    const uuid = await availableNode(0);
    const validate = (await api('GET', `/v1/nodes/${uuid}/validate`)).json<Record<string, { result: boolean; reason?: string }>>();
    expect(validate.deploy, JSON.stringify(validate.deploy)).to.deep.equal({ result: true });

    // The priority as a string of digits, which Ironic's deploy step schema takes too.
    await provision(api, uuid, 'active', { deploy_steps: [{ interface: 'deploy', step: 'erase_devices_metadata', priority: '70', args: {} }] });
    const { states, node } = await watchStates(api, uuid);
    expect(node.provision_state, node.last_error ?? '').to.equal('active');
    expect(states).to.include('wait call-back');
    expect(node.deploy_step).to.deep.equal({});
    expect(node.driver_internal_info).to.not.have.property('deploy_steps');

    const w = await agentWitness(g.sim.bmcs[0].url);
    expect(w.received['deploy.execute_deploy_step/erase_devices_metadata'], JSON.stringify(w.received)).to.equal(1);
    expect(Object.keys(w.received).filter((k) => k.includes('write_image')), 'custom-agent writes no image').to.deep.equal([]);
    // tear_down_agent: the agent was asked to power the node off.
    expect(w.received['standby.power_off']).to.equal(1);
    // prepare_instance_boot (Ironic's CustomAgentDeploy has it too): the agent's ISO ejected,
    // the disk the boot device for good; else the instance's power on boots the agent again.
    const cd = (await (await fetch(`${g.sim.bmcs[0].url}/redfish/v1/Managers/BMC/VirtualMedia/Cd`, { headers: AUTH })).json()) as { Inserted: boolean };
    expect(cd.Inserted).to.equal(false);
    const system = (await (await fetch(`${g.sim.bmcs[0].url}/redfish/v1/Systems/System.Embedded.1`, { headers: AUTH })).json()) as { Boot: Record<string, unknown> };
    expect(system.Boot).to.deep.include({ BootSourceOverrideTarget: 'Hdd', BootSourceOverrideEnabled: 'Continuous' });
    expect(w.instance).to.equal(null);
  });

  it('runs no RAID step of the agent on a no-raid node: a manual cleaning asking for one fails', async () => {
    const uuid = await availableNode(2);
    expect((await provisionAndSettle(api, uuid, 'manage')).provision_state).to.equal('manageable');
    await provision(api, uuid, 'clean', { clean_steps: [{ interface: 'raid', step: 'create_configuration', args: {} }] });
    const { node } = await watchStates(api, uuid);
    expect(node.provision_state).to.equal('clean failed');
    expect(node.last_error).to.include(`Node ${uuid} has no clean step "create_configuration" on its raid interface (nor does its agent).`);
    const w = await agentWitness(g.sim.bmcs[2].url);
    expect(Object.keys(w.received).filter((k) => k.includes('create_configuration'))).to.deep.equal([]);
  });

  it('fails the deploy, with Ironic\'s reason, when the user names a step the agent does not offer', async () => {
    const uuid = await availableNode(1);
    await provision(api, uuid, 'active', { deploy_steps: [{ interface: 'deploy', step: 'install_coreos', priority: 80, args: {} }] });
    const { node } = await watchStates(api, uuid);
    expect(node.provision_state).to.equal('deploy failed');
    expect(node.last_error).to.include('Deploy step deploy.install_coreos has not been found among the agent\'s steps.');
  });
});
