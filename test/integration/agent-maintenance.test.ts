/**
 * A node in maintenance while its cleaning waits for the agent, through a real `galvanic
 * all-in-one` and the Redfish simulator's agents, under `[conductor]
 * allow_provisioning_in_maintenance` as Ironic has it. True (the default): a node whose clean
 * step failed (maintenance, fault `clean failure`) is managed and provided again, its cleaning
 * boots the agent and pauses in clean wait, its heartbeats recorded and nothing asked of the
 * agent or the BMC, until maintenance is unset. False: the heartbeat aborts the cleaning, and
 * provide and automated cleaning of a node in maintenance are refused with Ironic's messages.
 */
import { expect } from 'chai';
import { agentWitness, setAgentFaults, type AgentFaults } from '../helpers/agent-sim.js';
import { AGENT_TEST_ENV, directNodeBody, galvanicAndSim, watchStates, type GalvanicAndSim } from '../helpers/agent-deploy.js';
import { faultOf } from '../helpers/app.js';
import { createNode, getNode, nodeHistory, nodePorts, provision, provisionAndSettle, simState, untilNode, type ApiCall, type NodeView } from '../helpers/provisioning.js';
import { simStats } from '../helpers/redfish.js';
import { until } from '../helpers/until.js';

const sim = (apiUrl: string) => ({ count: 1, agent: { apiUrl, bootSeconds: [0.2, 0.5] as [number, number], heartbeatMinGapMs: 200, lookupRetryMs: 300, writeMBps: 20 } });

function dii(n: NodeView): Record<string, unknown> {
  return n.driver_internal_info as Record<string, unknown>;
}

/** A node on the suite's BMC, enrolled, managed and inspected (its ports come from the BMC). */
async function manageableNode(g: GalvanicAndSim): Promise<string> {
  const node = await createNode(g.api, directNodeBody('maint-0', g.sim.bmcs[0].url, g.images));
  expect((await provisionAndSettle(g.api, node.uuid, 'manage')).provision_state).to.equal('manageable');
  expect((await provisionAndSettle(g.api, node.uuid, 'inspect')).provision_state).to.equal('manageable');
  expect(await nodePorts(g.api, node.uuid)).to.have.length.at.least(1);
  return node.uuid;
}

/** A node of the suite made manageable, its agent given `faults`, and provided: its cleaning starts. */
async function provideWithFaults(g: GalvanicAndSim, faults: AgentFaults): Promise<{ api: ApiCall; bmc: string; uuid: string }> {
  const bmc = g.sim.bmcs[0].url;
  const uuid = await manageableNode(g);
  await setAgentFaults(bmc, faults);
  await provision(g.api, uuid, 'provide');
  return { api: g.api, bmc, uuid };
}

/** The clean steps the BMC's current agent was asked to run, in order. */
async function cleanStepsRun(bmcUrl: string): Promise<Array<string | undefined>> {
  return (await agentWitness(bmcUrl)).commands.filter((c) => c.command_name === 'execute_clean_step')
    .map((c) => ((c.command_result ?? {}) as { clean_step?: { step?: string } }).clean_step?.step);
}

/**
 * What a refused request must leave as it was: the node's row, its history and its intents,
 * read once the conductor has finished with the node (`manage` ends when the API accepts it;
 * its intent records the history afterwards).
 */
async function footprint(g: GalvanicAndSim, uuid: string): Promise<unknown> {
  const knex = g.galvanic.tdb.knex;
  const row = await until('the node to be left alone', async () => {
    const r = await knex('nodes').where({ uuid }).first();
    const open = await knex('intents').where({ node_id: r.id }).whereNull('finished_at').first();
    return r.reservation === null && !open ? r : null;
  }, 10_000);
  const history = await knex('node_history').where({ node_id: row.id }).count<{ n: string }[]>({ n: '*' });
  const intents = await knex('intents').where({ node_id: row.id }).count<{ n: string }[]>({ n: '*' });
  return { row, history: history[0].n, intents: intents[0].n };
}

async function refused(api: ApiCall, uuid: string, body: Record<string, unknown>): Promise<string> {
  const res = await api('PUT', `/v1/nodes/${uuid}/states/provision`, body);
  expect(res.status, res.body).to.equal(400);
  return faultOf(res.body).faultstring;
}

describe('a node in maintenance while its run waits for the agent ([conductor] allow_provisioning_in_maintenance)', function () {
  this.timeout(120_000);

  describe('true (the default)', () => {
    const g = galvanicAndSim({ images: true, env: { ...AGENT_TEST_ENV }, sim });

    it('pauses the cleaning in clean wait across heartbeats, asking nothing of the agent or the BMC, and finishes it once maintenance is unset', async () => {
      // A clean step fails: clean failed, in maintenance with fault `clean failure`.
      const { api, bmc, uuid } = await provideWithFaults(g, { failStep: 'erase_devices_metadata' });
      const failed = await watchStates(api, uuid);
      expect(failed.node).to.include({ provision_state: 'clean failed', maintenance: true, fault: 'clean failure' });
      // Left on for the operator, as Ironic's tear_down_inband_cleaning leaves a node whose step failed.
      expect(failed.node.power_state).to.equal('power on');
      expect((Object.values((await simState(bmc)).systems)[0] as { power?: unknown }).power).to.equal('On');
      await setAgentFaults(bmc, {});

      expect((await provisionAndSettle(api, uuid, 'manage')).provision_state).to.equal('manageable');
      // Manual cleaning of a node in maintenance is refused whatever the option says (Ironic's do_node_clean).
      const before = await footprint(g, uuid);
      expect(await refused(api, uuid, { target: 'clean', clean_steps: [{ interface: 'deploy', step: 'erase_devices_metadata' }] }))
        .to.equal(`The cleaning operation can't be performed on node ${uuid} because it's in maintenance mode.`);
      expect(await footprint(g, uuid)).to.deep.equal(before);

      await provision(api, uuid, 'provide');
      const first = await untilNode(api, uuid, (n) => typeof dii(n).agent_last_heartbeat === 'string' || n.target_provision_state === null, 'the agent to heartbeat', 30_000);
      expect(first, first.last_error ?? '').to.include({ provision_state: 'clean wait' });
      const bmcRequests = (await simStats(bmc)).requests;
      const agent = await agentWitness(bmc);
      await until('three more heartbeats, or the cleaning to end', async () => {
        return (await agentWitness(bmc)).heartbeats >= agent.heartbeats + 3 || (await getNode(api, uuid)).provision_state !== 'clean wait';
      }, 20_000);

      const paused = await getNode(api, uuid);
      expect(paused).to.include({ provision_state: 'clean wait', target_provision_state: 'available', maintenance: true, fault: 'clean failure', last_error: null });
      expect(paused.clean_step).to.deep.equal({});
      // Recorded as any heartbeat is.
      expect(dii(paused).agent_url).to.equal(agent.callbackUrl);
      expect(dii(paused).agent_last_heartbeat).to.not.equal(dii(first).agent_last_heartbeat);
      const after = await agentWitness(bmc);
      expect(Object.keys(after.heartbeatStatuses)).to.deep.equal(['202']);
      expect(after.commands, 'commands sent to the paused agent').to.deep.equal([]);
      expect((await simStats(bmc)).requests, 'requests to the BMC while paused').to.equal(bmcRequests);
      expect(g.galvanic.output()).to.include('heartbeat from a node in maintenance mode; not taking any action');

      expect((await api('DELETE', `/v1/nodes/${uuid}/maintenance`)).status).to.equal(202);
      const done = await watchStates(api, uuid);
      expect(done.node.provision_state, done.node.last_error ?? '').to.equal('available');
      expect(done.node).to.include({ maintenance: false, fault: null, power_state: 'power off' });
      expect(await cleanStepsRun(bmc)).to.deep.equal(['erase_devices_metadata', 'erase_devices']);
    });
  });

  describe('false', () => {
    const g = galvanicAndSim({ images: true, env: { ...AGENT_TEST_ENV, GALVANIC_CONDUCTOR__ALLOW_PROVISIONING_IN_MAINTENANCE: 'false' }, sim });

    it('aborts the cleaning at the next heartbeat, then refuses provide of the node in maintenance with nothing written', async () => {
      const { api, bmc, uuid } = await provideWithFaults(g, { hangStep: 'erase_devices_metadata' });
      await untilNode(api, uuid, (n) => n.provision_state === 'clean wait' && (n.clean_step as { step?: string }).step === 'erase_devices_metadata', 'the clean step to run', 30_000);
      expect((await api('PUT', `/v1/nodes/${uuid}/maintenance`, { reason: 'disk check' })).status).to.equal(202);
      const aborted = await watchStates(api, uuid);
      expect(aborted.node).to.include({
        provision_state: 'clean failed', last_error: 'Cleaning aborted as node is in maintenance mode',
        maintenance: true, maintenance_reason: 'disk check', fault: 'clean failure',
      });
      expect(aborted.node.clean_step).to.deep.equal({});
      await setAgentFaults(bmc, {});

      expect((await provisionAndSettle(api, uuid, 'manage')).provision_state).to.equal('manageable');
      const before = await footprint(g, uuid);
      expect(await refused(api, uuid, { target: 'provide' }))
        .to.equal(`The providing operation can't be performed on node ${uuid} because it's in maintenance mode.`);
      expect(await footprint(g, uuid)).to.deep.equal(before);
      // Nor through a group operation.
      const op = await api('POST', '/v1/operations', { nodes: [uuid], steps: [{ action: 'provide' }] });
      expect(op.status, op.body).to.equal(400);
      expect(faultOf(op.body).faultstring).to.equal(`The providing operation can't be performed on node ${uuid} because it's in maintenance mode.`);
      expect(await footprint(g, uuid)).to.deep.equal(before);
    });

    it('fails the automated cleaning after an undeploy of a node in maintenance, with the instance torn down', async () => {
      const { api } = g;
      const node = await createNode(api, {
        name: 'fake-maint', driver: 'fake-hardware', deploy_interface: 'ramdisk', instance_info: { boot_iso: 'http://images.example/live.iso' },
      });
      expect((await provisionAndSettle(api, node.uuid, 'manage')).provision_state).to.equal('manageable');
      expect((await provisionAndSettle(api, node.uuid, 'provide')).provision_state).to.equal('available');
      expect((await provisionAndSettle(api, node.uuid, 'active')).provision_state).to.equal('active');
      expect((await api('PUT', `/v1/nodes/${node.uuid}/maintenance`, { reason: 'rack move' })).status).to.equal(202);
      const undeployed = await provisionAndSettle(api, node.uuid, 'deleted');
      expect(undeployed).to.include({
        provision_state: 'clean failed', target_provision_state: null, last_error: 'Cleaning a node in maintenance mode is not allowed',
        maintenance: true, maintenance_reason: 'rack move', fault: null,
      });
      expect(undeployed.instance_info).to.deep.equal({});
      expect((await nodeHistory(api, node.uuid)).map((h) => h.event).join('\n')).to.include('Cleaning a node in maintenance mode is not allowed');
    });
  });
});
