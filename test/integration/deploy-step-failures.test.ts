/**
 * How a deploy that fails once its agent has booted leaves the machine, end to end: a real
 * `galvanic all-in-one` with its HTTP root (the agent ISO published there), the Redfish
 * simulator, whose hosts run an agent when they boot that ISO, and Postgres. As Ironic's
 * handlers leave it: a deploy step the conductor runs, or one the agent reports failed, fails
 * through deploying_error_handler, whose clean_up ejects and withdraws the agent ISO and leaves
 * the power alone; a deploy the
 * agent's heartbeat aborts fails through set_failed_state, which powers the node off and cleans
 * nothing up. Either way the node's power_state says what the machine's power is.
 */
import { expect } from 'chai';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setAgentFaults } from '../helpers/agent-sim.js';
import { AGENT_TEST_ENV, directNodeBody, galvanicAndSim, publishedAgentIso, watchStates } from '../helpers/agent-deploy.js';
import { createNode, insertedMedia, provision, provisionAndSettle, simState, untilNode } from '../helpers/provisioning.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

describe('a deploy that fails after its agent booted (real processes)', function () {
  this.timeout(120_000);
  const work = path.join(os.tmpdir(), `galvanic-deploy-step-failures-${process.pid}`);
  const { env: isoEnv, isoPattern, rootFiles } = publishedAgentIso(work);
  const g = galvanicAndSim({
    images: true,
    env: {
      ...AGENT_TEST_ENV, ...isoEnv,
      GALVANIC_CONDUCTOR__AUTOMATED_CLEAN: 'false',
      GALVANIC_CONDUCTOR__ALLOW_PROVISIONING_IN_MAINTENANCE: 'false',
      GALVANIC_DEFAULT__ENABLED_BIOS_INTERFACES: 'no-bios,redfish',
    },
    sim: (apiUrl) => ({ count: 3, agent: { apiUrl, isoPattern, bootSeconds: [0.2, 0.5], heartbeatMinGapMs: 200, lookupRetryMs: 300 } }),
    cleanExit: false,
  });
  const { api } = g;

  after(async () => {
    await fs.rm(work, { recursive: true, force: true });
  });

  /** A node on BMC `i`, inspected (its ports, by which its agent looks itself up, come from the BMC) and available. */
  async function availableNode(i: number, extra: Record<string, unknown> = {}): Promise<string> {
    const node = await createNode(api, directNodeBody(`deploy-fail-${i}`, g.sim.bmcs[i].url, g.images, extra));
    expect((await provisionAndSettle(api, node.uuid, 'manage')).provision_state).to.equal('manageable');
    expect((await provisionAndSettle(api, node.uuid, 'inspect')).provision_state).to.equal('manageable');
    expect((await provisionAndSettle(api, node.uuid, 'provide')).provision_state).to.equal('available');
    return node.uuid;
  }

  /** The BMC's system: power and boot override. */
  async function system(i: number): Promise<Json> {
    return Object.values((await simState(g.sim.bmcs[i].url)).systems)[0] as Json;
  }

  /** The node's agent token as Galvanic keeps it, or null. */
  async function storedToken(uuid: string): Promise<string | null> {
    const row = await g.galvanic.tdb.knex('agent_tokens').join('nodes', 'nodes.id', 'agent_tokens.node_id').where('nodes.uuid', uuid).first('agent_tokens.token');
    return row ? (row.token as string) : null;
  }

  it('cleans the agent\'s boot up after a deploy step the conductor runs fails, and leaves the power alone', async () => {
    const uuid = await availableNode(0, { bios_interface: 'redfish' });
    // Run by the conductor at the BMC once the agent is up; the BMC's registry refuses the value.
    const step = { interface: 'bios', step: 'apply_configuration', args: { settings: [{ name: 'ProcTurboMode', value: 'Sometimes' }] }, priority: 90 };
    await provision(api, uuid, 'active', { deploy_steps: [step] });
    const { states, node } = await watchStates(api, uuid);
    expect(states, 'the agent booted before the step ran').to.include('wait call-back');
    expect(node.provision_state).to.equal('deploy failed');
    expect(node.last_error).to.equal(`Deploy step bios.apply_configuration failed: Redfish BIOS apply_configuration failed for node ${uuid}: invalid value for setting(s): ProcTurboMode`);
    expect(node.deploy_step).to.deep.equal({});
    expect(node.driver_internal_info).to.not.have.any.keys('agent_url', 'deploy_steps', 'deploy_step_index', 'agent_cached_deploy_steps');
    // The deploy interface's clean_up: the agent ISO ejected and withdrawn, its token wiped.
    expect(insertedMedia(await simState(g.sim.bmcs[0].url)), 'virtual media').to.deep.equal([]);
    expect(await rootFiles(uuid), 'HTTP root').to.deep.equal([]);
    expect((await system(0)).boot.BootSourceOverrideEnabled).to.equal('Disabled');
    expect(await storedToken(uuid)).to.equal(null);
    // deploying_error_handler does not power the node off.
    expect((await system(0)).power).to.equal('On');
    expect(node.power_state).to.equal('power on');
  });

  it('records the power off of a deploy its agent\'s heartbeat aborts, and cleans nothing up', async () => {
    const uuid = await availableNode(1);
    const url = g.sim.bmcs[1].url;
    await setAgentFaults(url, { hangStep: 'write_image' });
    await provision(api, uuid, 'active');
    const writing = await untilNode(api, uuid, (n) => n.provision_state === 'wait call-back' && (n.deploy_step as Json).step === 'write_image', 'to write its image', 30_000);
    expect(writing.power_state).to.equal('power on');
    expect((await api('PUT', `/v1/nodes/${uuid}/maintenance`, { reason: 'rack move' })).status).to.equal(202);
    const { node } = await watchStates(api, uuid);
    expect(node).to.include({ provision_state: 'deploy failed', last_error: 'Deploy aborted as node is in maintenance mode' });
    expect((await system(1)).power).to.equal('Off');
    // Recorded as the power off happened, not left for the power sync (off in these tests).
    expect(node.power_state).to.equal('power off');
    // set_failed_state leaves the boot as it is.
    expect(insertedMedia(await simState(url)), 'virtual media').to.have.length(1);
    expect(await rootFiles(uuid), 'HTTP root').to.deep.equal([`redfish/boot-${uuid}.iso`]);
    await setAgentFaults(url, {});
  });

  it('cleans the agent\'s boot up after a deploy step the agent reports failed, and leaves the power alone', async () => {
    const uuid = await availableNode(2);
    const url = g.sim.bmcs[2].url;
    await setAgentFaults(url, { failStep: 'write_image', failMessage: 'disk on fire' });
    await provision(api, uuid, 'active');
    const { states, node } = await watchStates(api, uuid);
    expect(states, 'the agent booted before the step ran').to.include('wait call-back');
    expect(node.provision_state).to.equal('deploy failed');
    // Ironic's _continue_steps words it, with the command's error as get_command_error gives it (its details).
    expect(node.last_error).to.equal(`Deploy step deploy.write_image failed on node ${uuid}. disk on fire`);
    expect(node.deploy_step).to.deep.equal({});
    expect(node.driver_internal_info).to.not.have.any.keys('agent_url', 'deploy_steps', 'deploy_step_index', 'agent_cached_deploy_steps');
    expect(insertedMedia(await simState(url)), 'virtual media').to.deep.equal([]);
    expect(await rootFiles(uuid), 'HTTP root').to.deep.equal([]);
    expect(await storedToken(uuid)).to.equal(null);
    expect((await system(2)).power).to.equal('On');
    expect(node.power_state).to.equal('power on');
    await setAgentFaults(url, {});
  });
});
