/**
 * Direct deploy and cleaning through simulated ironic-python-agents, end to end: a real
 * `galvanic all-in-one`, the Redfish simulator whose hosts run an agent when they boot the
 * agent ISO, and an HTTP server for the image. The agents look themselves up, heartbeat and
 * run the conductor's commands over real HTTP. Then the faults a conductor must survive, and
 * the agent token's secrecy (API responses, history and the process's whole log).
 */
import { expect } from 'chai';
import { nicMacs } from '../../sim/redfish/model-synthetic.js';
import { agentWitness, setAgentFaults } from '../helpers/agent-sim.js';
import { until } from '../helpers/until.js';
import { AGENT_TEST_ENV, directNodeBody, galvanicAndSim, watchStates } from '../helpers/agent-deploy.js';
import { createNode, getNode, nodeHistory, nodePorts, provision, provisionAndSettle } from '../helpers/provisioning.js';

describe('direct deploy and cleaning through the agent (real processes)', function () {
  this.timeout(180_000);
  const g = galvanicAndSim({
    images: true,
    // The callback timeouts: two tests wait them out; an agent here calls back within a second.
    env: {
      ...AGENT_TEST_ENV, GALVANIC_DEFAULT__ENABLED_INSPECT_INTERFACES: 'redfish,agent,no-inspect', GALVANIC_CONDUCTOR__DEPLOY_CALLBACK_TIMEOUT: '6', GALVANIC_AGENT__COMMAND_WAIT_INTERVAL: '1', GALVANIC_CONDUCTOR__CLEAN_CALLBACK_TIMEOUT: '6', GALVANIC_DEFAULT__DEBUG: 'true' },
    sim: (apiUrl) => ({ count: 15, agent: { apiUrl, bootSeconds: [0.2, 0.5], heartbeatMinGapMs: 200, lookupRetryMs: 300, writeMBps: 20 } }),
    cleanExit: false,
  });
  const { api } = g;
  const tokens = new Set<string>();

  /** A node on BMC `i`, enrolled, managed and inspected (its ports come from the BMC). */
  async function manageableNode(i: number, extra: Record<string, unknown> = {}): Promise<string> {
    const node = await createNode(api, directNodeBody(`agent-${i}`, g.sim.bmcs[i].url, g.images, extra));
    expect((await provisionAndSettle(api, node.uuid, 'manage')).provision_state).to.equal('manageable');
    expect((await provisionAndSettle(api, node.uuid, 'inspect')).provision_state).to.equal('manageable');
    expect(await nodePorts(api, node.uuid)).to.have.length.at.least(1);
    return node.uuid;
  }

  /** Waits until the node is in clean wait with `step` running on its agent. */
  async function cleanStepRunning(uuid: string, step: string): Promise<void> {
    await until('the clean step to run', async () => {
      const n = await getNode(api, uuid);
      return n.provision_state === 'clean wait' && (n.clean_step as { step?: string }).step === step;
    }, 30_000);
  }

  /** Starts a group operation; resolves with its UUID. */
  async function startOperation(body: Record<string, unknown>): Promise<string> {
    const res = await api('POST', '/v1/operations', body);
    expect(res.status, res.body).to.equal(201);
    return res.json<{ uuid: string }>().uuid;
  }

  /** Runs a group operation to its end. */
  async function runOperation(body: Record<string, unknown>): Promise<{ finished_at: string | null; state: string }> {
    return operationEnd(await startOperation(body));
  }

  function operationEnd(uuid: string): Promise<{ finished_at: string | null; state: string }> {
    return until('the operation to end', async () => {
      const op = (await api('GET', `/v1/operations/${uuid}`)).json<{ finished_at: string | null; state: string }>();
      return op.finished_at !== null ? op : null;
    }, 120_000, 100);
  }

  async function rememberToken(i: number): Promise<void> {
    const w = await agentWitness(g.sim.bmcs[i].url);
    if (w.token) tokens.add(w.token);
  }

  it('cleans on provide, deploys the image, cleans on undeploy and cleans by hand, all through the agent', async () => {
    const uuid = await manageableNode(0);
    await provision(api, uuid, 'provide');
    const provided = await watchStates(api, uuid);
    expect(provided.node.provision_state, provided.node.last_error ?? '').to.equal('available');
    expect(provided.states).to.include.members(['clean wait']);
    await rememberToken(0);

    await provision(api, uuid, 'active');
    const deployed = await watchStates(api, uuid);
    expect(deployed.node.provision_state, deployed.node.last_error ?? '').to.equal('active');
    const seen = deployed.states.join(' → ');
    expect(seen).to.match(/deploying → wait call-back → (.* → )?deploying → (.* → )?active/);
    const witness = await agentWitness(g.sim.bmcs[0].url);
    expect(witness.disk?.sha256, JSON.stringify(witness)).to.equal(g.images.image.sha256);
    expect(witness.disk?.imageUrl).to.equal(g.images.image.url);
    expect(deployed.node.power_state).to.equal('power on');
    expect(deployed.node.deploy_step).to.deep.equal({});
    if (witness.token) tokens.add(witness.token);
    const names = witness.commands.map((c) => c.command_name);
    expect(names).to.include.members(['get_deploy_steps', 'execute_deploy_step', 'get_partition_uuids', 'power_off']);
    // A whole-disk image brings its own bootloader; in UEFI mode (inspection found the node
    // UEFI) the agent registers it in the machine's boot entries, as Ironic's configure_local_boot has it.
    expect(witness.disk?.bootloader, JSON.stringify(witness)).to.deep.equal({ rootUuid: (deployed.node.driver_internal_info as Record<string, unknown>).root_uuid_or_disk_id, efiSystemPartUuid: null, targetBootMode: 'uefi' });
    expect(witness.commands.find((c) => c.command_name === 'install_bootloader')?.command_status).to.equal('SUCCEEDED');

    await provision(api, uuid, 'deleted');
    const undeployed = await watchStates(api, uuid);
    expect(undeployed.node.provision_state, undeployed.node.last_error ?? '').to.equal('available');
    // `cleaning` may last less than one poll; `clean wait` lasts until the agent's heartbeat.
    expect(undeployed.states).to.include.members(['deleting', 'clean wait']);
    const cleaner = await agentWitness(g.sim.bmcs[0].url);
    expect(cleaner.commands.map((c) => c.command_name), 'the cleaning agent\'s commands').to.include('execute_clean_step');
    await rememberToken(0);

    await provisionAndSettle(api, uuid, 'manage');
    await provision(api, uuid, 'clean', { clean_steps: [{ interface: 'deploy', step: 'erase_devices_metadata' }] });
    const cleaned = await watchStates(api, uuid);
    expect(cleaned.node.provision_state, cleaned.node.last_error ?? '').to.equal('manageable');
    const after = await agentWitness(g.sim.bmcs[0].url);
    if (after.token) tokens.add(after.token);
    const steps = after.commands.filter((c) => c.command_name === 'execute_clean_step')
      .map((c) => ((c.command_result ?? {}) as { clean_step?: { step?: string } }).clean_step?.step);
    expect(steps).to.deep.equal(['erase_devices_metadata']);
    const history = await nodeHistory(api, uuid);
    expect(history.map((h) => h.event).join('\n')).to.include('Cleaning through the agent done');
  });

  it('aborts cleaning in clean wait (1.13) and leaves the node clean failed', async () => {
    const uuid = await manageableNode(1);
    await setAgentFaults(g.sim.bmcs[1].url, { hangStep: 'erase_devices_metadata' });
    await provision(api, uuid, 'clean', { clean_steps: [{ interface: 'deploy', step: 'erase_devices_metadata' }] });
    await cleanStepRunning(uuid, 'erase_devices_metadata');
    await rememberToken(1);
    await provision(api, uuid, 'abort');
    const aborted = await watchStates(api, uuid);
    expect(aborted.node.provision_state).to.equal('clean failed');
    expect(aborted.node.last_error).to.include('By request, the clean operation was aborted during or after the completion of step "deploy.erase_devices_metadata"');
    await setAgentFaults(g.sim.bmcs[1].url, {});
  });

  it('aborts after a clean step that is not abortable, once the step has ended (abort_after)', async () => {
    const bmc = g.sim.bmcs[10].url;
    const uuid = await manageableNode(10);
    await setAgentFaults(bmc, { unabortableStep: 'erase_devices_metadata', stepSeconds: { erase_devices_metadata: 3 } });
    await provision(api, uuid, 'clean', {
      clean_steps: [{ interface: 'deploy', step: 'erase_devices_metadata' }, { interface: 'deploy', step: 'erase_devices_express' }],
    });
    await cleanStepRunning(uuid, 'erase_devices_metadata');
    await rememberToken(10);
    await provision(api, uuid, 'abort');
    // Only marked: the step runs on, and so does the cleaning until it ends.
    const marked = await getNode(api, uuid);
    expect(marked.provision_state).to.equal('clean wait');
    expect(marked.clean_step).to.include({ step: 'erase_devices_metadata', abortable: false, abort_after: true });
    const aborted = await watchStates(api, uuid);
    expect(aborted.states).to.deep.equal(['clean wait', 'clean failed']);
    expect(aborted.node).to.include({ provision_state: 'clean failed', maintenance: false, power_state: 'power off' });
    expect(aborted.node.last_error).to.equal('By request, the clean operation was aborted during or after the completion of step "deploy.erase_devices_metadata"');
    expect(aborted.node.clean_step).to.deep.equal({});
    const ran = (await agentWitness(bmc)).commands.filter((c) => c.command_name === 'execute_clean_step');
    expect(ran.map((c) => [((c.command_result ?? {}) as { clean_step?: { step?: string } }).clean_step?.step, c.command_status])).to.deep.equal([['erase_devices_metadata', 'SUCCEEDED']]);
    await setAgentFaults(bmc, {});
  });

  it('deploys a partition image and has the agent install the bootloader on its partitions', async () => {
    const bmc = g.sim.bmcs[13].url;
    const uuid = await manageableNode(13, { automated_clean: false });
    await provisionAndSettle(api, uuid, 'provide');
    const ii = { image_source: g.images.image.url, image_os_hash_algo: 'sha256', image_os_hash_value: g.images.image.sha256, image_type: 'partition', root_gb: 10 };
    const res = await api('PATCH', `/v1/nodes/${uuid}`, [{ op: 'replace', path: '/instance_info', value: ii }]);
    expect(res.status, res.body).to.equal(200);
    await provision(api, uuid, 'active');
    const deployed = await watchStates(api, uuid);
    expect(deployed.node.provision_state, deployed.node.last_error ?? '').to.equal('active');
    const witness = await agentWitness(bmc);
    expect(witness.disk, JSON.stringify(witness)).to.include({ sha256: g.images.image.sha256, imageType: 'partition' });
    // Inspection found the node UEFI: GRUB goes to the root and EFI system partitions the agent reported.
    const bootloader = witness.disk!.bootloader;
    expect(bootloader, JSON.stringify(witness)).to.include({ targetBootMode: 'uefi' });
    expect(bootloader!.efiSystemPartUuid).to.be.a('string');
    expect(deployed.node.driver_internal_info).to.include({ root_uuid_or_disk_id: bootloader!.rootUuid });
    const install = witness.commands.find((c) => c.command_name === 'install_bootloader');
    expect(install?.command_status).to.equal('SUCCEEDED');
    await rememberToken(13);
  });

  it('aborts after a step that is not abortable in a group operation: the node\'s step fails with the cleaning', async () => {
    const bmc = g.sim.bmcs[14].url;
    const uuid = await manageableNode(14);
    await setAgentFaults(bmc, { unabortableStep: 'erase_devices_metadata', stepSeconds: { erase_devices_metadata: 3 } });
    const op = await startOperation({ nodes: [uuid], steps: [{ action: 'provide' }] });
    await cleanStepRunning(uuid, 'erase_devices_metadata');
    await provision(api, uuid, 'abort');
    const ended = await operationEnd(op);
    expect(ended.state, JSON.stringify(ended)).to.equal('failed');
    const node = await watchStates(api, uuid);
    expect(node.node).to.include({ provision_state: 'clean failed', maintenance: false });
    expect(node.node.last_error).to.equal('By request, the clean operation was aborted during or after the completion of step "deploy.erase_devices_metadata"');
    // erase_devices (priority 10) never ran.
    const ran = (await agentWitness(bmc)).commands.filter((c) => c.command_name === 'execute_clean_step');
    expect(ran.map((c) => ((c.command_result ?? {}) as { clean_step?: { step?: string } }).clean_step?.step)).to.deep.equal(['erase_devices_metadata']);
    await rememberToken(14);
    await setAgentFaults(bmc, {});
  });

  it('fails the deploy on a bad checksum, with the agent\'s reason', async () => {
    const uuid = await manageableNode(2, { automated_clean: false });
    await provisionAndSettle(api, uuid, 'provide');
    const bad = { image_source: g.images.image.url, image_os_hash_algo: 'sha256', image_os_hash_value: '0'.repeat(64) };
    const res = await api('PATCH', `/v1/nodes/${uuid}`, [{ op: 'replace', path: '/instance_info', value: bad }]);
    expect(res.status, res.body).to.equal(200);
    await provision(api, uuid, 'active');
    const failed = await watchStates(api, uuid);
    expect(failed.node.provision_state).to.equal('deploy failed');
    expect(failed.node.last_error).to.match(/deploy\.write_image/).and.match(/checksum|hash/i);
    const history = await nodeHistory(api, uuid);
    expect(history.some((h) => h.severity === 'ERROR' && /write_image/.test(h.event))).to.equal(true);
    await rememberToken(2);
  });

  it('fails the deploy at the callback timeout when the agent never boots, or dies in write_image', async () => {
    const never = await manageableNode(3, { automated_clean: false });
    const crash = await manageableNode(4, { automated_clean: false });
    await provisionAndSettle(api, never, 'provide');
    await provisionAndSettle(api, crash, 'provide');
    await setAgentFaults(g.sim.bmcs[3].url, { noBoot: true });
    await setAgentFaults(g.sim.bmcs[4].url, { crashDuringStep: 'write_image' });
    await provision(api, never, 'active');
    await provision(api, crash, 'active');
    const [a, b] = await Promise.all([watchStates(api, never, 60_000), watchStates(api, crash, 60_000)]);
    for (const r of [a, b]) {
      expect(r.node.provision_state).to.equal('deploy failed');
      expect(r.node.last_error).to.include('Timeout reached while waiting for callback');
    }
    expect(a.states).to.include('wait call-back');
    await rememberToken(4);
  });

  it('refuses heartbeats with a wrong token (counted by the agent) and changes nothing', async () => {
    const uuid = await manageableNode(5);
    await setAgentFaults(g.sim.bmcs[5].url, { wrongToken: true });
    await provision(api, uuid, 'provide');
    const w = await until('refused heartbeats', async () => {
      const x = await agentWitness(g.sim.bmcs[5].url);
      return (x.heartbeatStatuses['400'] ?? 0) >= 2 ? x : null;
    }, 30_000);
    expect(w.heartbeatStatuses['202'] ?? 0).to.equal(0);
    const node = await getNode(api, uuid);
    expect(node.provision_state).to.equal('clean wait');
    expect(node.clean_step).to.deep.equal({});
    expect((node.driver_internal_info as Record<string, unknown>).agent_url).to.equal(undefined);
    if (w.token) tokens.add(w.token);
    // Nothing moves it on: the callback timeout fails it.
    const timedOut = await watchStates(api, uuid, 60_000);
    expect(timedOut.node.provision_state).to.equal('clean failed');
  });

  it('deploys and cleans through the agent in group operations: a node is done once active / available, failures isolated', async () => {
    const nodes = [];
    for (const i of [6, 7, 8, 9]) nodes.push(await createNode(api, directNodeBody(`group-${i}`, g.sim.bmcs[i].url, g.images)));
    const uuids = nodes.map((n) => n.uuid);
    const ready = await runOperation({ nodes: uuids, steps: [{ action: 'manage' }, { action: 'inspect' }, { action: 'provide' }] });
    expect(ready.state, JSON.stringify(ready)).to.equal('succeeded');
    for (const u of uuids) expect((await getNode(api, u)).provision_state).to.equal('available');
    // One node's image write fails: only that node fails.
    await setAgentFaults(g.sim.bmcs[9].url, { failStep: 'write_image', failMessage: 'disk on fire' });
    const deployed = await runOperation({ nodes: uuids, steps: [{ action: 'deploy' }] });
    expect(deployed.state, JSON.stringify(deployed)).to.equal('partially_failed');
    for (const u of uuids.slice(0, 3)) {
      const n = await getNode(api, u);
      expect(n.provision_state, n.last_error ?? '').to.equal('active');
      expect(n.target_provision_state).to.equal(null);
    }
    const failed = await getNode(api, uuids[3]);
    expect(failed.provision_state).to.equal('deploy failed');
    expect(failed.last_error).to.include('disk on fire');
    for (const i of [6, 7, 8]) expect((await agentWitness(g.sim.bmcs[i].url)).disk?.sha256).to.equal(g.images.image.sha256);
    const undeployed = await runOperation({ nodes: uuids.slice(0, 3), steps: [{ action: 'undeploy' }] });
    expect(undeployed.state, JSON.stringify(undeployed)).to.equal('succeeded');
    for (const u of uuids.slice(0, 3)) expect((await getNode(api, u)).provision_state).to.equal('available');
    await setAgentFaults(g.sim.bmcs[9].url, {});
  });

  it('inspects through the agent in a group operation: a node is done once manageable, with its inventory processed', async () => {
    const uuids = [];
    for (const i of [11, 12]) uuids.push((await createNode(api, directNodeBody(`group-inspect-${i}`, g.sim.bmcs[i].url, g.images, { inspect_interface: 'agent' }))).uuid);
    const op = await runOperation({ nodes: uuids, steps: [{ action: 'manage' }, { action: 'inspect' }] });
    expect(op.state, JSON.stringify(op)).to.equal('succeeded');
    // Read as the operation ended: not in inspect wait or inspecting any more.
    for (const [k, u] of uuids.entries()) {
      const n = await getNode(api, u);
      expect(n, n.last_error ?? '').to.include({ provision_state: 'manageable', target_provision_state: null, power_state: 'power off', last_error: null });
      expect(n.properties).to.include({ cpu_arch: 'x86_64' });
      expect(await nodePorts(api, u)).to.deep.equal([...nicMacs(0, 11 + k)].sort());
      expect((await agentWitness(g.sim.bmcs[11 + k].url)).inspections).to.equal(1);
    }
  });

  it('never shows an agent token in API responses, node history or the logs', async () => {
    expect(tokens.size).to.be.at.least(3);
    const bodies: string[] = [];
    for (const url of ['/v1/nodes/detail', '/v1/ports/detail']) bodies.push((await api('GET', url)).body);
    const nodes = (await api('GET', '/v1/nodes')).json<{ nodes: Array<{ uuid: string }> }>().nodes;
    for (const n of nodes) {
      bodies.push((await api('GET', `/v1/nodes/${n.uuid}`)).body);
      bodies.push((await api('GET', `/v1/nodes/${n.uuid}/history?detail=true`)).body);
    }
    const log = g.galvanic.output();
    expect(log.length).to.be.greaterThan(1000);
    for (const token of tokens) {
      for (const b of bodies) expect(b.includes(token), 'token in an API response').to.equal(false);
      expect(log.includes(token), 'token in the log').to.equal(false);
    }
  });
});
