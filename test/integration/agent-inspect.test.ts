/**
 * In-band inspection (`inspect_interface=agent`) against the Redfish simulator, with the test
 * posting what the agent would post to /v1/continue_inspection: the whole flow (ports from the
 * BMC's MACs, the agent ISO booted once, `inspect wait`, the inventory processed by the hooks,
 * the boot torn down, `manageable`), the timeout, bad inventories, the wrong state, abort.
 */
import { expect } from 'chai';
import { startRedfishSim, type RedfishSim, type RedfishSimOptions } from '../../sim/redfish/index.js';
import { nicMacs } from '../../sim/redfish/model-synthetic.js';
import { buildTestApp, faultOf, type TestApp } from '../helpers/app.js';
import {
  clearSimEvents, createNode, expectInOrder, getNode, injector, insertedMedia, nodeHistory, nodePorts, provision, provisionAndSettle,
  redfishNodeBody, settled, simEvents, untilNode, simState, story, type ApiCall, type NodeView,
} from '../helpers/provisioning.js';
import { simControl } from '../helpers/redfish.js';
import { agentWitness, setAgentFaults } from '../helpers/agent-sim.js';

const ISO = 'http://127.0.0.1:9/ipa.iso';
/** Agent inspection enabled, the optional hooks on; an inspect wait short enough for the silent agents' cases (the others post long before it). */
const ENV = {
  GALVANIC_DEFAULT__ENABLED_INSPECT_INTERFACES: 'redfish,agent,no-inspect',
  GALVANIC_INSPECTOR__HOOKS: '$default_hooks,memory,cpus,boot-mode,root-device',
  GALVANIC_CONDUCTOR__INSPECT_WAIT_TIMEOUT: '4',
  GALVANIC_CONDUCTOR__CHECK_PROVISION_STATE_INTERVAL: '1',
  GALVANIC_CONDUCTOR__SYNC_POWER_STATE_INTERVAL: '0',
};

/** An IPA-shaped inventory of the simulator's BMC `index` (its NIC MACs). */
function inventoryOf(index: number, extra: Record<string, unknown> = {}): Record<string, unknown> {
  const [m1, m2] = nicMacs(0, index);
  return {
    interfaces: [
      { name: 'eno1', mac_address: m1, ipv4_address: '192.0.2.10', has_carrier: true },
      { name: 'eno2', mac_address: m2, ipv4_address: null, has_carrier: false },
      { name: 'lo', mac_address: '00:00:00:00:00:00', ipv4_address: '127.0.0.1' },
    ],
    cpu: { count: 8, architecture: 'x86_64', model_name: 'Simulated CPU', frequency: '2100.000', flags: ['vmx'] },
    memory: { total: 34359738368, physical_mb: 32768 },
    disks: [{ name: '/dev/sda', size: 480103981056, rotational: false, model: 'SIM SSD', serial: 'S1' }],
    system_vendor: { product_name: 'Sim', serial_number: 'SN1', manufacturer: 'Galvanic' },
    boot: { current_boot_mode: 'uefi', pxe_interface: null },
    bmc_address: '127.0.0.1',
    ...extra,
  };
}

/**
 * The suite's app (ENV, with its conductor) and simulator, both stopped after the suite; the
 * simulator's options are made once the app is built. Read `sim` from hooks and tests only.
 */
function appAndSim(simOptions: (t: TestApp) => Promise<RedfishSimOptions>): { readonly sim: RedfishSim; api: ApiCall } {
  let t: TestApp | undefined;
  let sim: RedfishSim | undefined;
  before(async () => {
    t = await buildTestApp(ENV);
    sim = await startRedfishSim(await simOptions(t));
  });
  after(() => Promise.all([t?.close(), sim?.stop()]));
  return {
    get sim() {
      if (!sim) throw new Error('the simulator is not started');
      return sim;
    },
    api: (...args) => injector(t!.app)(...args),
  };
}

describe('agent (in-band) inspection', function () {
  this.timeout(60_000);
  const s = appAndSim(async () => ({ count: 6 }));
  const { api } = s;

  /** A manageable agent-inspected node of BMC `index`. */
  async function manageable(name: string, index: number, driverInfo: Record<string, unknown> = { deploy_iso: ISO }): Promise<NodeView> {
    const body = redfishNodeBody(name, s.sim.bmcs[index].url, { inspect_interface: 'agent' });
    body.driver_info = { ...(body.driver_info as object), ...driverInfo };
    const node = await createNode(api, body);
    const m = await provisionAndSettle(api, node.uuid, 'manage');
    expect(m.provision_state, m.last_error ?? '').to.equal('manageable');
    await simControl(s.sim.bmcs[index].url, 'state', { initial: true });
    await clearSimEvents(s.sim.bmcs[index].url);
    return m;
  }

  async function waiting(name: string, index: number): Promise<NodeView> {
    const node = await manageable(name, index);
    await provision(api, node.uuid, 'inspect');
    return untilNode(api, node.uuid, (n) => n.provision_state === 'inspect wait' && n.reservation === null, 'to wait for its agent');
  }

  function post(body: unknown, version = '1.84', query = ''): ReturnType<ApiCall> {
    return api('POST', `/v1/continue_inspection${query}`, body, { 'x-openstack-ironic-api-version': version });
  }

  it('boots the agent ISO once, waits, processes the inventory with the hooks and ends manageable, powered off', async () => {
    const node = await waiting('agent-1', 0);
    const url = s.sim.bmcs[0].url;
    expect(node.target_provision_state).to.equal('manageable');
    expect(node.inspection_started_at).to.be.a('string');
    // Ports for the BMC's MACs exist before the agent boots, so that it can be found by them.
    expect(await nodePorts(api, node.uuid)).to.deep.equal([...nicMacs(0, 0)].sort());
    const media = insertedMedia(await simState(url));
    expect(media).to.have.length(1);
    expect(media[0]).to.match(/\/Cd: http:\/\/127\.0\.0\.1:9\/ipa\.iso$/);
    expectInOrder(story(await simEvents(url)), [/^insert ipa\.iso/, /^boot-override Cd\/Once/, /^reset On/]);

    const res = await post({ inventory: inventoryOf(0), root_disk: { name: '/dev/sda', size: 480103981056 }, logs: 'bG9ncw==' });
    expect(res.status, res.body).to.equal(202);
    const answer = res.json<{ node: { uuid: string }; config: Record<string, unknown> }>();
    expect(answer.node.uuid).to.equal(node.uuid);
    expect(answer.config).to.have.property('agent_token_required', true);

    const done = await settled(api, node.uuid);
    expect(done.provision_state, done.last_error ?? '').to.equal('manageable');
    expect(done.last_error).to.equal(null);
    expect(done.power_state).to.equal('power off');
    expect(done.inspection_finished_at).to.be.a('string');
    expect(done.properties).to.deep.include({ cpu_arch: 'x86_64', memory_mb: 32768, cpus: 8, local_gb: 446, capabilities: 'boot_mode:uefi' });
    // add_ports = pxe with no PXE NIC named: every non-loopback NIC; keep_ports = all.
    expect(await nodePorts(api, node.uuid)).to.deep.equal([...nicMacs(0, 0)].sort());
    const inv = await api('GET', `/v1/nodes/${node.uuid}/inventory`);
    expect(inv.status, inv.body).to.equal(200);
    const stored = inv.json<{ inventory: Record<string, unknown>; plugin_data: Record<string, unknown> }>();
    expect(stored.inventory).to.deep.equal(inventoryOf(0));
    expect(stored.plugin_data).to.have.property('macs').that.deep.equals(nicMacs(0, 0));
    expect(stored.plugin_data).to.have.property('local_gb', 446);
    expect(stored.plugin_data).to.not.have.property('logs');
    expect(insertedMedia(await simState(url))).to.deep.equal([]);
    expect(story(await simEvents(url))).to.include('reset ForceOff');
    expect((await nodeHistory(api, node.uuid)).map((h) => h.event)).to.include('Inspection data processed, node is manageable.');
  });

  it('answers the old-style {uuid} at 1.1', async () => {
    const node = await waiting('agent-old', 1);
    const res = await post({ inventory: inventoryOf(1) }, '1.1');
    expect(res.status, res.body).to.equal(202);
    expect(res.json()).to.deep.equal({ uuid: node.uuid });
    expect((await settled(api, node.uuid)).provision_state).to.equal('manageable');
  });

  it('refuses an inventory without interfaces (400, the node still waits), and fails one without memory as Ironic does', async () => {
    const node = await waiting('agent-bad', 2);
    const empty = await post({ inventory: { ...inventoryOf(2), interfaces: [] } });
    expect(empty.status, empty.body).to.equal(400);
    expect(faultOf(empty.body).faultstring).to.equal('Schema error for data: [] should be non-empty');
    expect((await getNode(api, node.uuid)).provision_state).to.equal('inspect wait');

    const { memory: _m, ...noMemory } = inventoryOf(2);
    const res = await post({ inventory: noMemory });
    expect(res.status, res.body).to.equal(202);
    const failed = await settled(api, node.uuid);
    expect(failed.provision_state).to.equal('inspect failed');
    expect(failed.last_error).to.equal(
      `Failed to finish inspection: Failed to inspect hardware. Reason: failed to run inspection hooks: Failed to inspect hardware. Reason: `
      + `Unexpected exception InvalidNodeInventory during processing for node: ${node.uuid}. Error: Inventory for node ${node.uuid} is invalid: `
      + `Inventory has missing memory information: None for node ${node.uuid}.`,
    );
    // The agent's boot is torn down on failure too.
    expect(failed.power_state).to.equal('power off');
    expect(insertedMedia(await simState(s.sim.bmcs[2].url))).to.deep.equal([]);
  });

  it('answers 404 for a node that does not wait for inspection data, and changes nothing', async () => {
    const node = await manageable('agent-idle', 3);
    const res = await post({ inventory: inventoryOf(3) }, '1.84', `?node_uuid=${node.uuid}`);
    expect(res.status, res.body).to.equal(404);
    expect(faultOf(res.body).faultstring).to.equal('Resource could not be found.');
    const after = await getNode(api, node.uuid);
    expect(after.provision_state).to.equal('manageable');
    expect(after.properties).to.deep.equal(node.properties);
  });

  it('fails the inspection with Ironic\'s message when the agent never answers, and tears its boot down', async () => {
    const node = await waiting('agent-silent', 4);
    const failed = await untilNode(api, node.uuid, (n) => n.provision_state === 'inspect failed', 'to fail inspection', 20_000);
    expect(failed.last_error).to.equal('Timeout reached while inspecting the node. Please check if the ramdisk responsible for the inspection is running on the node.');
    const clean = await untilNode(api, node.uuid, (n) => n.power_state === 'power off' && n.reservation === null, 'to be powered off');
    expect(clean.provision_state).to.equal('inspect failed');
    expect(insertedMedia(await simState(s.sim.bmcs[4].url))).to.deep.equal([]);
  });

  it('aborts in inspect wait from 1.41 (406 before), tearing the boot down', async () => {
    const node = await waiting('agent-abort', 5);
    const early = await api('PUT', `/v1/nodes/${node.uuid}/states/provision`, { target: 'abort' }, { 'x-openstack-ironic-api-version': '1.40' });
    expect(early.status, early.body).to.equal(406);
    expect((await getNode(api, node.uuid)).provision_state).to.equal('inspect wait');
    const aborted = await provisionAndSettle(api, node.uuid, 'abort');
    expect(aborted.provision_state).to.equal('inspect failed');
    // Ironic's message, which Metal3 looks for to tell an abort from a failure.
    expect(aborted.last_error).to.equal('Inspection was aborted by request.');
    expect(aborted.power_state).to.equal('power off');
    expect(insertedMedia(await simState(s.sim.bmcs[5].url))).to.deep.equal([]);
    // A late inventory is refused: the node no longer waits.
    expect((await post({ inventory: inventoryOf(5) })).status).to.equal(404);
  });

  it('refuses to start without an agent ISO, with Ironic\'s validation message', async () => {
    const node = await manageable('agent-noiso', 0, {});
    const res = await api('PUT', `/v1/nodes/${node.uuid}/states/provision`, { target: 'inspect' });
    expect(res.status, res.body).to.equal(400);
    expect(faultOf(res.body).faultstring).to.equal(
      "RPC inspect_hardware failed to validate inspection or power info. Error: Error validating Redfish virtual media. Some parameters were missing in node's driver_info. Missing are: ['deploy_kernel', 'deploy_ramdisk']",
    );
    expect((await getNode(api, node.uuid)).provision_state).to.equal('manageable');
  });
});

describe('agent (in-band) inspection with the agent simulator', function () {
  this.timeout(60_000);
  // The simulated agents call the app over HTTP.
  const s = appAndSim(async (t) => ({
    count: 2, agent: { apiUrl: await t.app.listen({ port: 0, host: '127.0.0.1' }), bootSeconds: [0.2, 0.4], lookupRetryMs: 300 },
  }));
  const { api } = s;

  async function agentNode(name: string, index: number): Promise<NodeView> {
    const body = redfishNodeBody(name, s.sim.bmcs[index].url, { inspect_interface: 'agent' });
    body.driver_info = { ...(body.driver_info as object), deploy_iso: ISO };
    const node = await createNode(api, body);
    expect((await provisionAndSettle(api, node.uuid, 'manage')).provision_state).to.equal('manageable');
    return node;
  }

  it('inspects through the agent: its inventory becomes properties, ports and the stored inventory; the node ends off', async () => {
    const node = await agentNode('sim-agent-0', 0);
    const done = await provisionAndSettle(api, node.uuid, 'inspect', {}, 30_000);
    expect(done.provision_state, done.last_error ?? '').to.equal('manageable');
    const witness = await agentWitness(s.sim.bmcs[0].url);
    expect(witness.inspectionStatuses).to.deep.equal({ 202: 1 });
    expect(witness.running).to.equal(false);
    const { inventory } = (await api('GET', `/v1/nodes/${node.uuid}/inventory`)).json<{ inventory: Record<string, any> }>(); // eslint-disable-line @typescript-eslint/no-explicit-any
    expect(inventory.interfaces.map((i: { mac_address: string }) => i.mac_address)).to.deep.equal(nicMacs(0, 0));
    expect(done.properties).to.deep.include({
      cpu_arch: inventory.cpu.architecture, memory_mb: inventory.memory.physical_mb, cpus: inventory.cpu.count,
      capabilities: `boot_mode:${inventory.boot.current_boot_mode as string}`,
    });
    expect(done.properties.local_gb).to.be.a('number').above(0);
    expect(await nodePorts(api, node.uuid)).to.deep.equal([...nicMacs(0, 0)].sort());
    expect(done.power_state).to.equal('power off');
    expect(insertedMedia(await simState(s.sim.bmcs[0].url))).to.deep.equal([]);
    // The agent's token is never shown by the API.
    expect(witness.token).to.be.a('string');
    expect(JSON.stringify(await getNode(api, node.uuid))).to.not.include(witness.token as string);
  });

  it('fails with Ironic\'s timeout message when the agent never boots', async () => {
    await setAgentFaults(s.sim.bmcs[1].url, { noBoot: true });
    const node = await agentNode('sim-agent-1', 1);
    await provision(api, node.uuid, 'inspect');
    const failed = await untilNode(api, node.uuid, (n) => n.provision_state === 'inspect failed' && n.reservation === null && n.power_state === 'power off', 'to fail inspection', 30_000);
    expect(failed.last_error).to.equal('Timeout reached while inspecting the node. Please check if the ramdisk responsible for the inspection is running on the node.');
    expect((await agentWitness(s.sim.bmcs[1].url)).inspections).to.equal(0);
  });
});
