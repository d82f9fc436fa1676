/**
 * What a power off or a reboot by the conductor does to the node's agent, end to end (a real
 * `galvanic all-in-one`, the Redfish simulator and its agents): the agent that boots next is a
 * new process that must get a token of its own, so the conductor forgets the old agent's URL,
 * certificate and token before it asks the BMC (Ironic's wipe_internal_info_on_power_off).
 */
import { expect } from 'chai';
import { agentWitness, setAgentFaults } from '../helpers/agent-sim.js';
import { AGENT_TEST_ENV, directNodeBody, galvanicAndSim, watchStates } from '../helpers/agent-deploy.js';
import { createNode, getNode, provision, provisionAndSettle, untilNode, type NodeView } from '../helpers/provisioning.js';

describe('the agent across a power off or reboot by the conductor (real processes)', function () {
  this.timeout(120_000);
  const g = galvanicAndSim({
    images: true,
    env: { ...AGENT_TEST_ENV, GALVANIC_CONDUCTOR__DEPLOY_CALLBACK_TIMEOUT: '8', GALVANIC_CONDUCTOR__CLEAN_CALLBACK_TIMEOUT: '20' },
    sim: (apiUrl) => ({ count: 2, agent: { apiUrl, bootSeconds: [0.2, 0.5], heartbeatMinGapMs: 200, lookupRetryMs: 300 } }),
  });
  const { api } = g;

  /** A node on BMC `i`, managed and inspected (its ports, by which its agent looks itself up, come from the BMC). */
  async function manageableNode(i: number, extra: Record<string, unknown> = {}): Promise<string> {
    const node = await createNode(api, directNodeBody(`reboot-${i}`, g.sim.bmcs[i].url, g.images, extra));
    expect((await provisionAndSettle(api, node.uuid, 'manage')).provision_state).to.equal('manageable');
    expect((await provisionAndSettle(api, node.uuid, 'inspect')).provision_state).to.equal('manageable');
    return node.uuid;
  }

  /** The node's agent token as Galvanic keeps it, or null. */
  async function storedToken(uuid: string): Promise<string | null> {
    const row = await g.galvanic.tdb.knex('agent_tokens').join('nodes', 'nodes.id', 'agent_tokens.node_id').where('nodes.uuid', uuid).first('agent_tokens.token');
    return row ? (row.token as string) : null;
  }

  const dii = (n: NodeView) => (n.driver_internal_info ?? {}) as Record<string, unknown>;

  it('reboots into a new agent after a clean step that asks for it; that agent gets its own token and the cleaning goes on', async () => {
    const bmc = g.sim.bmcs[0].url;
    const uuid = await manageableNode(0);
    // A vendor's firmware step that needs a reboot to take effect, as real hardware managers have.
    await setAgentFaults(bmc, { extraCleanSteps: [{ step: 'flash_firmware', reboot_requested: true }], stepSeconds: { flash_firmware: 1 } });
    const bootsBefore = (await agentWitness(bmc)).boots;
    await provision(api, uuid, 'clean', {
      clean_steps: [{ interface: 'deploy', step: 'flash_firmware' }, { interface: 'deploy', step: 'erase_devices_metadata' }],
    });
    const flashing = await untilNode(api, uuid, (n) => n.provision_state === 'clean wait' && (n.clean_step as { step?: string }).step === 'flash_firmware', 'to run flash_firmware', 30_000);
    expect(flashing.clean_step).to.include({ reboot_requested: true });
    const first = await agentWitness(bmc);
    expect(first.token, 'the first agent\'s token').to.be.a('string');
    // Ironic refuses a power change while a node is being cleaned.
    const refused = await api('PUT', `/v1/nodes/${uuid}/states/power`, { target: 'power off' });
    expect(refused.status, refused.body).to.equal(400);

    const cleaned = await watchStates(api, uuid);
    expect(cleaned.node.provision_state, cleaned.node.last_error ?? '').to.equal('manageable');
    expect(cleaned.node.last_error).to.equal(null);
    const after = await agentWitness(bmc);
    expect(after.boots - bootsBefore, 'agents booted: for the cleaning, then after the step\'s reboot').to.equal(2);
    expect(after.token, 'the rebooted agent\'s token').to.be.a('string').and.not.equal(first.token);
    const ran = after.commands.filter((c) => c.command_name === 'execute_clean_step')
      .map((c) => [((c.command_result ?? {}) as { clean_step?: { step?: string } }).clean_step?.step, c.command_status]);
    expect(ran, 'what the rebooted agent ran').to.deep.equal([['erase_devices_metadata', 'SUCCEEDED']]);
    expect(first.commands.map((c) => c.command_name)).to.include('execute_clean_step');
    await setAgentFaults(bmc, {});
  });

  it('forgets the agent\'s URL, certificate and token when a user powers the node off while the agent works', async () => {
    const bmc = g.sim.bmcs[1].url;
    const uuid = await manageableNode(1, { automated_clean: false });
    expect((await provisionAndSettle(api, uuid, 'provide')).provision_state).to.equal('available');
    await setAgentFaults(bmc, { hangStep: 'write_image' });
    await provision(api, uuid, 'active');
    const writing = await untilNode(api, uuid, (n) => n.provision_state === 'wait call-back' && (n.deploy_step as { step?: string }).step === 'write_image', 'to write its image', 30_000);
    const agent = await agentWitness(bmc);
    expect(dii(writing)).to.include({ agent_url: agent.callbackUrl, agent_verify_ca: agent.verifyCa });
    expect(await storedToken(uuid)).to.equal(agent.token).and.be.a('string');

    const res = await api('PUT', `/v1/nodes/${uuid}/states/power`, { target: 'power off' }, { Prefer: 'wait=30' });
    expect(res.status, res.body).to.be.oneOf([200, 202]);
    const off = await untilNode(api, uuid, (n) => n.power_state === 'power off' && n.target_power_state === null, 'to be powered off');
    expect(dii(off)).to.not.have.any.keys('agent_url', 'agent_verify_ca', 'agent_cached_deploy_steps');
    expect(await storedToken(uuid)).to.equal(null);
    expect((await agentWitness(bmc)).running).to.equal(false);
    // The deploy waits for an agent that will not come, until its deadline: nothing carries it on meanwhile.
    expect((await getNode(api, uuid)).provision_state).to.equal('wait call-back');
    const failed = await watchStates(api, uuid);
    expect(failed.node.provision_state).to.equal('deploy failed');
    expect(failed.node.last_error).to.match(/[Tt]imeout reached while waiting for callback/);
    await setAgentFaults(bmc, {});
  });
});
