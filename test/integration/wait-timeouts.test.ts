/**
 * A wait for the agent past its [conductor] timeout, end to end: a real `galvanic all-in-one`
 * with its HTTP root (the agent ISO published there, `ramdisk_image_download_source = local`),
 * the Redfish simulator, whose hosts run an agent when they boot that ISO, and Postgres. The
 * node fails with Ironic's last_error, and its conductor tears the agent's boot down as Ironic's
 * error handlers do: the ISO ejected at the BMC and withdrawn from the HTTP root; after a
 * cleaning the machine powered off, or left on in maintenance when a step was running; after a
 * servicing the instance booted again. A BMC that fails during the tear-down leaves its error
 * in last_error and the node free for its next verb, which no tear-down undoes. A node of a
 * group operation, whose step stays open while its node waits, times out all the same: its
 * step fails once with the node's last_error, and the operation ends.
 */
import { expect } from 'chai';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pyRepr } from '../../common/py-repr.js';
import { agentWitness, setAgentFaults } from '../helpers/agent-sim.js';
import { AGENT_TEST_ENV, directNodeBody, galvanicAndSim, publishedAgentIso, watchStates } from '../helpers/agent-deploy.js';
import { createNode, getNode, insertedMedia, provision, provisionAndSettle, simState, untilNode, type NodeView } from '../helpers/provisioning.js';
import { until } from '../helpers/until.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const TIMEOUT_S = 5;

describe('a wait for the agent that times out tears its boot down (real processes)', function () {
  this.timeout(180_000);
  const work = path.join(os.tmpdir(), `galvanic-wait-timeouts-${process.pid}`);
  const { env: isoEnv, isoPattern, rootFiles } = publishedAgentIso(work);
  const g = galvanicAndSim({
    images: true,
    env: {
      ...AGENT_TEST_ENV, ...isoEnv,
      GALVANIC_CONDUCTOR__DEPLOY_CALLBACK_TIMEOUT: String(TIMEOUT_S), GALVANIC_CONDUCTOR__CLEAN_CALLBACK_TIMEOUT: String(TIMEOUT_S),
      GALVANIC_CONDUCTOR__SERVICE_CALLBACK_TIMEOUT: String(TIMEOUT_S), GALVANIC_CONDUCTOR__AUTOMATED_CLEAN: 'false',
      GALVANIC_AGENT__COMMAND_WAIT_INTERVAL: '1',
    },
    sim: (apiUrl) => ({ count: 14, agent: { apiUrl, isoPattern, bootSeconds: [0.2, 0.5], heartbeatMinGapMs: 200, lookupRetryMs: 300, writeMBps: 20 } }),
    cleanExit: false,
  });
  const { api } = g;

  after(async () => {
    await fs.rm(work, { recursive: true, force: true });
  });

  /** A node on BMC `i`, manageable, with its ports (by which an agent looks itself up). */
  async function manageableNode(i: number, extra: Record<string, unknown> = {}): Promise<string> {
    const node = await createNode(api, directNodeBody(`wait-${i}`, g.sim.bmcs[i].url, g.images, extra));
    expect((await provisionAndSettle(api, node.uuid, 'manage')).provision_state).to.equal('manageable');
    expect((await provisionAndSettle(api, node.uuid, 'inspect')).provision_state).to.equal('manageable');
    return node.uuid;
  }

  async function availableNode(i: number): Promise<string> {
    const uuid = await manageableNode(i);
    expect((await provisionAndSettle(api, uuid, 'provide')).provision_state).to.equal('available');
    return uuid;
  }

  /** The BMC's system: power and boot override. */
  async function system(i: number): Promise<Json> {
    return Object.values((await simState(g.sim.bmcs[i].url)).systems)[0] as Json;
  }

  /** Waits until the node waits in `state` with the agent ISO inserted and published (what the tear-down must undo). */
  async function waitingWithIso(i: number, uuid: string, state: string, ready: (n: NodeView) => boolean = () => true): Promise<NodeView> {
    const node = await untilNode(api, uuid, (n) => n.provision_state === state && n.reservation === null && ready(n), `to wait in ${state}`, 60_000);
    expect(insertedMedia(await simState(g.sim.bmcs[i].url))).to.have.length(1);
    expect(await rootFiles(uuid)).to.deep.equal([`redfish/boot-${uuid}.iso`]);
    return node;
  }

  /** The node once in `state` with no intent left to run (the tear-down's has ended, if there is one). */
  async function failedAndQuiet(uuid: string, state: string): Promise<NodeView> {
    await untilNode(api, uuid, (n) => n.provision_state === state, `to reach ${state}`, (TIMEOUT_S + 20) * 1000);
    await until(`the intents of ${uuid} to end`, async () => {
      const res = await api('GET', `/v1/nodes/${uuid}/intents`);
      return !res.json<{ intents: Array<{ state: string }> }>().intents.some((i) => i.state === 'queued' || i.state === 'running');
    }, 60_000, 100);
    return getNode(api, uuid);
  }

  it('fails a deploy whose agent never calls back with Ironic\'s message, ejecting and withdrawing the agent ISO', async () => {
    const uuid = await availableNode(0);
    await setAgentFaults(g.sim.bmcs[0].url, { noBoot: true });
    await provision(api, uuid, 'active');
    await waitingWithIso(0, uuid, 'wait call-back');
    const node = await failedAndQuiet(uuid, 'deploy failed');
    expect(node.last_error).to.equal(`Timeout reached while waiting for callback for node ${uuid}`);
    expect(node.reservation).to.equal(null);
    expect(insertedMedia(await simState(g.sim.bmcs[0].url)), 'virtual media').to.deep.equal([]);
    expect(await rootFiles(uuid), 'HTTP root').to.deep.equal([]);
    expect((await system(0)).boot.BootSourceOverrideEnabled).to.equal('Disabled');
    // Ironic's clean_up after a deploy does not power the node off.
    expect(node.power_state).to.equal('power on');
    expect((node.driver_internal_info as Json).agent_url).to.equal(undefined);
  });

  it('fails a cleaning whose agent never calls back, the machine powered off and the agent\'s boot undone', async () => {
    const uuid = await manageableNode(1, { automated_clean: true });
    await setAgentFaults(g.sim.bmcs[1].url, { noBoot: true });
    await provision(api, uuid, 'provide');
    await waitingWithIso(1, uuid, 'clean wait');
    const node = await failedAndQuiet(uuid, 'clean failed');
    // No step had started: Ironic's `{}`, no maintenance.
    expect(node.last_error).to.equal('Timeout reached while cleaning the node. Please check if the ramdisk responsible for the cleaning is running on the node. Failed on step {}.');
    expect(node).to.include({ maintenance: false, fault: null, power_state: 'power off', reservation: null });
    expect((await system(1)).power).to.equal('Off');
    expect(insertedMedia(await simState(g.sim.bmcs[1].url)), 'virtual media').to.deep.equal([]);
    expect(await rootFiles(uuid), 'HTTP root').to.deep.equal([]);
  });

  it('fails a cleaning whose agent died in a step into maintenance, leaving the machine on as the failure left it', async () => {
    const uuid = await manageableNode(2, { automated_clean: true });
    const url = g.sim.bmcs[2].url;
    // Dead 0.1 s into the step, before its next heartbeat (at least the gap after the one that
    // started it): a heartbeat sent before the crash and handled after it would fail the
    // cleaning through the agent's 404 instead, as Ironic's heartbeat would.
    await setAgentFaults(url, { crashDuringStep: 'erase_devices_metadata', stepSeconds: { erase_devices_metadata: 0.2 } });
    await provision(api, uuid, 'provide');
    const waiting = await waitingWithIso(2, uuid, 'clean wait', (n) => (n.clean_step as Json).step === 'erase_devices_metadata');
    const node = await failedAndQuiet(uuid, 'clean failed');
    const message = `Timeout reached while cleaning the node. Please check if the ramdisk responsible for the cleaning is running on the node. Failed on step ${pyRepr(waiting.clean_step)}.`;
    expect(node.last_error).to.equal(message);
    expect(node).to.include({ maintenance: true, fault: 'clean failure', maintenance_reason: message });
    expect(node.clean_step).to.deep.equal({});
    // Ironic's tear_down_cleaning after a failed step: no power off.
    expect((await system(2)).power).to.equal('On');
    expect(insertedMedia(await simState(url)), 'virtual media').to.deep.equal([]);
    expect(await rootFiles(uuid), 'HTTP root').to.deep.equal([]);
  });

  it('fails a servicing whose agent never calls back, and boots the instance again', async () => {
    const uuid = await availableNode(3);
    const url = g.sim.bmcs[3].url;
    await provision(api, uuid, 'active');
    expect((await watchStates(api, uuid, 60_000)).node.provision_state).to.equal('active');
    await setAgentFaults(url, { noBoot: true });
    await provision(api, uuid, 'service', { service_steps: [{ interface: 'deploy', step: 'burnin_cpu' }] });
    await waitingWithIso(3, uuid, 'service wait');
    const node = await failedAndQuiet(uuid, 'service failed');
    expect(node.last_error).to.equal('Timeout reached while servicing the node. Please check if the ramdisk responsible for the servicing is running on the node. Failed on step {}.');
    expect(node).to.include({ maintenance: false, power_state: 'power on' });
    expect(insertedMedia(await simState(url)), 'virtual media').to.deep.equal([]);
    expect(await rootFiles(uuid), 'HTTP root').to.deep.equal([]);
    expect((await system(3)).boot).to.include({ BootSourceOverrideTarget: 'Hdd', BootSourceOverrideEnabled: 'Continuous' });
    expect((await agentWitness(url)).instance?.running, 'the instance runs again').to.equal(true);
  });

  it('records a BMC that fails during the tear-down in last_error, and leaves the node to its next verb', async () => {
    const uuid = await availableNode(4);
    const url = g.sim.bmcs[4].url;
    await setAgentFaults(url, { noBoot: true });
    await provision(api, uuid, 'active');
    await waitingWithIso(4, uuid, 'wait call-back');
    await bmcFaults(url, { failRate: 1 });
    const node = await failedAndQuiet(uuid, 'deploy failed');
    expect(node.last_error).to.match(new RegExp(`^Timeout reached while waiting for callback for node ${uuid}\\. Also failed to clean up due to: \\S`));
    expect(node.reservation).to.equal(null);
    // The BMC back, the node is torn down by the next verb.
    await bmcFaults(url, { failRate: 0 });
    const torn = await provisionAndSettle(api, uuid, 'deleted', {}, 60_000);
    expect(torn.provision_state, torn.last_error ?? '').to.equal('available');
    expect(insertedMedia(await simState(url))).to.deep.equal([]);
    expect(await rootFiles(uuid)).to.deep.equal([]);
  });

  it('leaves a verb the API took during the tear-down in force, its state and last_error', async () => {
    const uuid = await manageableNode(5, { automated_clean: true });
    const url = g.sim.bmcs[5].url;
    await setAgentFaults(url, { noBoot: true });
    await provision(api, uuid, 'provide');
    await waitingWithIso(5, uuid, 'clean wait');
    // A slow BMC that fails: the tear-down holds the node for seconds, and then fails.
    await bmcFaults(url, { failRate: 1, latencyMs: [1500, 1500] });
    await untilNode(api, uuid, (n) => n.provision_state === 'clean failed' && n.reservation !== null, 'to be torn down', (TIMEOUT_S + 20) * 1000);
    await provision(api, uuid, 'manage');
    const node = await failedAndQuiet(uuid, 'manageable');
    expect(node).to.include({ provision_state: 'manageable', target_provision_state: null, last_error: null });
    await bmcFaults(url, { failRate: 0, latencyMs: [0, 0] });
  });

  /** Starts a group operation; its UUID. */
  async function startOperation(body: Json): Promise<string> {
    const res = await api('POST', '/v1/operations', body);
    expect(res.status, res.body).to.equal(201);
    return res.json<Json>().uuid as string;
  }

  /** The operation once ended (bounded well past the timeout), with its nodes. */
  function operationEnd(uuid: string): Promise<Json> {
    return until(`operation ${uuid} to end`, async () => {
      const op = (await api('GET', `/v1/operations/${uuid}?limit=100`)).json<Json>();
      return op.finished_at !== null && op;
    }, (TIMEOUT_S + 40) * 1000, 200);
  }

  /** The node's intents of the operation: its one step, ended once as failed with the node's last_error. */
  async function failedStep(uuid: string, operation: string, lastError: string): Promise<void> {
    const res = await api('GET', `/v1/nodes/${uuid}/intents`);
    const steps = res.json<{ intents: Json[] }>().intents.filter((i) => i.operation === operation);
    expect(steps.map((i) => [i.action, i.state, i.error]), res.body).to.deep.equal([['provision_step', 'failed', lastError]]);
  }

  it('fails a node of a group deploy whose agent never calls back, tears its boot down, and ends the operation', async () => {
    const uuids = [await availableNode(6), await availableNode(7), await availableNode(8)];
    await setAgentFaults(g.sim.bmcs[7].url, { noBoot: true });
    const started = await startOperation({ nodes: uuids, steps: [{ action: 'deploy' }] });
    const bad = uuids[1];
    // Its step stays open while it waits: the operation's intent, not a heartbeat's, is the node's.
    await waitingWithIso(7, bad, 'wait call-back');
    const op = await operationEnd(started);
    const message = `Timeout reached while waiting for callback for node ${bad}`;
    expect(op.state, JSON.stringify(op)).to.equal('partially_failed');
    expect(op.counts).to.include({ succeeded: 2, failed: 1, running: 0, pending: 0 });
    const rows = new Map((op.nodes as Json[]).map((n) => [n.node_uuid, n]));
    expect(rows.get(bad)).to.include({ state: 'failed', last_error: message });
    for (const u of [uuids[0], uuids[2]]) expect((await getNode(api, u)).provision_state).to.equal('active');

    const node = await failedAndQuiet(bad, 'deploy failed');
    expect(node).to.include({ last_error: message, reservation: null, target_provision_state: null });
    await failedStep(bad, op.uuid, message);
    expect(insertedMedia(await simState(g.sim.bmcs[7].url)), 'virtual media').to.deep.equal([]);
    expect(await rootFiles(bad), 'HTTP root').to.deep.equal([]);
    expect((await system(7)).boot.BootSourceOverrideEnabled).to.equal('Disabled');
    expect((node.driver_internal_info as Json).agent_url).to.equal(undefined);
    await setAgentFaults(g.sim.bmcs[7].url, {});
  });

  it('fails a node of a group provide whose agent never calls back, powered off and its boot undone', async () => {
    const uuids = [await manageableNode(9, { automated_clean: true }), await manageableNode(10, { automated_clean: true }), await manageableNode(11, { automated_clean: true })];
    await setAgentFaults(g.sim.bmcs[9].url, { noBoot: true });
    const started = await startOperation({ nodes: uuids, steps: [{ action: 'provide' }] });
    const bad = uuids[0];
    await waitingWithIso(9, bad, 'clean wait');
    const op = await operationEnd(started);
    const message = 'Timeout reached while cleaning the node. Please check if the ramdisk responsible for the cleaning is running on the node. Failed on step {}.';
    expect(op.state, JSON.stringify(op)).to.equal('partially_failed');
    expect(op.counts).to.include({ succeeded: 2, failed: 1, running: 0, pending: 0 });
    for (const u of uuids.slice(1)) expect((await getNode(api, u)).provision_state).to.equal('available');

    const node = await failedAndQuiet(bad, 'clean failed');
    expect(node).to.include({ last_error: message, maintenance: false, power_state: 'power off', reservation: null });
    await failedStep(bad, op.uuid, message);
    expect((await system(9)).power).to.equal('Off');
    expect(insertedMedia(await simState(g.sim.bmcs[9].url)), 'virtual media').to.deep.equal([]);
    expect(await rootFiles(bad), 'HTTP root').to.deep.equal([]);
    await setAgentFaults(g.sim.bmcs[9].url, {});
  });

  it('aborts a group deploy (on_failure=abort) when its node times out: the nodes not yet admitted are cancelled', async () => {
    const uuids = [await availableNode(12), await availableNode(13)];
    await setAgentFaults(g.sim.bmcs[12].url, { noBoot: true });
    const started = await startOperation({ nodes: uuids, max_parallel: 1, on_failure: 'abort', steps: [{ action: 'deploy' }] });
    await waitingWithIso(12, uuids[0], 'wait call-back');
    const op = await operationEnd(started);
    expect(op.state, JSON.stringify(op)).to.equal('failed');
    expect(op.counts).to.include({ succeeded: 0, failed: 1, cancelled: 1 });
    const node = await failedAndQuiet(uuids[0], 'deploy failed');
    expect(node.last_error).to.equal(`Timeout reached while waiting for callback for node ${uuids[0]}`);
    expect(insertedMedia(await simState(g.sim.bmcs[12].url)), 'virtual media').to.deep.equal([]);
    expect((await getNode(api, uuids[1])).provision_state).to.equal('available');
    await setAgentFaults(g.sim.bmcs[12].url, {});
  });

  async function bmcFaults(url: string, faults: Json): Promise<void> {
    const res = await fetch(`${url}/_sim/faults`, { method: 'POST', body: JSON.stringify(faults) });
    expect(res.status, await res.text()).to.equal(200);
  }
});
