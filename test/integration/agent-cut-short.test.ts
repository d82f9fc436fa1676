/**
 * A conductor SIGKILLed while its `agent_continue` waits for the agent's answer to a step's
 * command (the agent has it, the outcome is not recorded), then started again: its recovery
 * puts the intent back in the queue, and the repeat finds the command in the agent's list and
 * waits on it instead of sending it again. The deploy ends active, the cleaning manageable.
 */
import { expect } from 'chai';
import { startRedfishSim, type RedfishSim } from '../../sim/redfish/index.js';
import { restartConductor, startCluster, stopCluster, type Cluster } from '../helpers/cluster.js';
import { AGENT_TEST_ENV, directNodeBody, startImageServer, type ImageServer } from '../helpers/agent-deploy.js';
import { agentWitness, setAgentFaults } from '../helpers/agent-sim.js';
import { until } from '../helpers/until.js';
import { createNode, getNode, httpClient, provision, provisionAndSettle, settled, type ApiCall } from '../helpers/provisioning.js';

describe('agent: a conductor SIGKILLed after sending a step\'s command, before recording it', function () {
  this.timeout(180_000);
  const ENV = { ...AGENT_TEST_ENV, GALVANIC_CONDUCTOR__HEARTBEAT_INTERVAL: '1' };
  /** How long the agent holds its answer: the conductor is killed meanwhile. */
  const HOLD_MS = 4000;
  let c: Cluster | undefined;
  let sim: RedfishSim | undefined;
  let images: ImageServer | undefined;
  let api: ApiCall;

  before(async () => {
    images = await startImageServer(4 * 1024 * 1024);
    c = await startCluster('cutshort', { conductors: 1, env: ENV });
    sim = await startRedfishSim({ count: 2, agent: { apiUrl: c.api.url, bootSeconds: [0.2, 0.5], heartbeatMinGapMs: 200, lookupRetryMs: 300, writeMBps: 4 } });
    api = httpClient(c.api.url);
  });

  after(async () => {
    await stopCluster(c);
    await sim?.stop();
    await images?.close();
  });

  async function manageableNode(i: number, extra: Record<string, unknown> = {}): Promise<{ uuid: string; bmc: string }> {
    const bmc = sim!.bmcs[i].url;
    const n = await createNode(api, directNodeBody(`cut-${i}`, bmc, images!, extra));
    await provisionAndSettle(api, n.uuid, 'manage');
    // Inspection creates the ports the agent looks itself up by.
    expect((await provisionAndSettle(api, n.uuid, 'inspect')).provision_state).to.equal('manageable');
    return { uuid: n.uuid, bmc };
  }

  /**
   * Kills the conductor once the agent has received `key` (the answer held), checks the node
   * shows the step running, and starts the conductor again.
   */
  async function killAfterSent(uuid: string, bmc: string, key: string, state: string): Promise<void> {
    let seen: unknown;
    await until(() => `the agent to receive ${key}: ${JSON.stringify(seen)}`, async () => {
      const w = await agentWitness(bmc);
      seen = { received: w.received, node: await getNode(api, uuid) };
      return (w.received[key] ?? 0) > 0;
    }, 60_000, 20);
    await c!.conductors[0].kill();
    const cut = await getNode(api, uuid);
    expect(cut.provision_state, 'the outcome was not recorded').to.equal(state);
    await restartConductor(c!, 0, ENV);
  }

  /** What the agent received of the commands that change something: each exactly once. */
  function changing(received: Record<string, number>): Record<string, number> {
    return Object.fromEntries(Object.entries(received).filter(([k]) => !/\.get_/.test(k)));
  }

  it('a deploy: write_image is waited on, not sent again, and the node ends active', async () => {
    const { uuid, bmc } = await manageableNode(0, { automated_clean: false });
    expect((await provisionAndSettle(api, uuid, 'provide')).provision_state).to.equal('available');
    await fetch(`${bmc}/_sim/reset`, { method: 'POST' });
    await setAgentFaults(bmc, { holdAnswer: { command: 'deploy.execute_deploy_step', ms: HOLD_MS } });
    await provision(api, uuid, 'active');
    await killAfterSent(uuid, bmc, 'deploy.execute_deploy_step/write_image', 'deploying');
    const done = await settled(api, uuid, 60_000);
    expect(done.provision_state, done.last_error ?? '').to.equal('active');
    const w = await agentWitness(bmc);
    expect(w.disk?.sha256).to.equal(images!.image.sha256);
    // The node is UEFI: the whole-disk image's bootloader is registered by the agent, once too.
    expect(changing(w.received)).to.deep.equal({ 'deploy.execute_deploy_step/write_image': 1, 'image.install_bootloader': 1, 'standby.power_off': 1 });
  });

  it('a manual cleaning: the clean step is waited on, not sent again, and the node ends manageable', async () => {
    const { uuid, bmc } = await manageableNode(1);
    await fetch(`${bmc}/_sim/reset`, { method: 'POST' });
    await setAgentFaults(bmc, { holdAnswer: { command: 'clean.execute_clean_step', ms: HOLD_MS } });
    await provision(api, uuid, 'clean', { clean_steps: [{ interface: 'deploy', step: 'erase_devices_metadata' }] });
    await killAfterSent(uuid, bmc, 'clean.execute_clean_step/erase_devices_metadata', 'cleaning');
    const done = await settled(api, uuid, 60_000);
    expect(done.provision_state, done.last_error ?? '').to.equal('manageable');
    expect(done.maintenance).to.equal(false);
    expect(changing((await agentWitness(bmc)).received)).to.deep.equal({ 'clean.execute_clean_step/erase_devices_metadata': 1 });
  });
});
