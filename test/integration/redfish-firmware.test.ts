/**
 * The `redfish` firmware interface against the simulator's UpdateService, with a real
 * `galvanic` and simulated agents: the components cached at inspection and listed at
 * `GET /v1/nodes/{n}/firmware` (1.86), `firmware.update` in manual cleaning (a BIOS image
 * applied by a reboot into the agent, a BMC image at once) and in servicing (rebooted in
 * place), and the ways an update fails: the BMC's task ends in Exception, the BMC cannot be
 * reached after the reboot, bad settings.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import { AGENT_TEST_ENV, directNodeBody, galvanicAndSim, startFirmwareServer, watchStates } from '../helpers/agent-deploy.js';
import { createNode, provision, provisionAndSettle, simEvents, type NodeView } from '../helpers/provisioning.js';
import { setFaults } from '../helpers/redfish.js';
import { agentWitness } from '../helpers/agent-sim.js';

type Json = Record<string, unknown>;

interface Component {
  component: string;
  initial_version: string;
  current_version: string | null;
  last_version_flashed: string | null;
  created_at: string;
  updated_at: string | null;
}

describe('redfish firmware interface: UpdateService, firmware.update and GET firmware (real processes)', function () {
  this.timeout(60_000);
  const g = galvanicAndSim({
    images: true,
    env: {
      ...AGENT_TEST_ENV,
      GALVANIC_CONDUCTOR__AUTOMATED_CLEAN: 'false',
      GALVANIC_DEFAULT__ENABLED_FIRMWARE_INTERFACES: 'fake,no-firmware,redfish',
      GALVANIC_REDFISH__FIRMWARE_UPDATE_STATUS_INTERVAL: '0.1',
      GALVANIC_REDFISH__CONNECTION_ATTEMPTS: '3',
    },
    sim: (apiUrl) => ({ count: 7, agent: { apiUrl, bootSeconds: [0.4, 0.6], heartbeatMinGapMs: 200, lookupRetryMs: 300 } }),
    cleanExit: false,
  });
  const { api } = g;
  let fw: { url: string; close(): Promise<void> };
  before(async () => {
    fw = await startFirmwareServer();
  });
  after(async () => fw?.close());

  async function firmware(uuid: string, version = '1.86'): Promise<Component[]> {
    const res = await api('GET', `/v1/nodes/${uuid}/firmware`, undefined, { 'x-openstack-ironic-api-version': version });
    expect(res.status, res.body).to.equal(200);
    return res.json<{ firmware: Component[] }>().firmware;
  }

  function versions(list: Component[]): Record<string, string | null> {
    return Object.fromEntries(list.map((c) => [c.component, c.current_version]));
  }

  /** A manageable, inspected node on BMC `i` (the firmware interface left to its default). */
  async function inspectedNode(i: number, extra: Record<string, unknown> = {}): Promise<string> {
    const node = await createNode(api, directNodeBody(`fw-${i}`, g.sim.bmcs[i].url, g.images, extra));
    expect(node.firmware_interface).to.equal('redfish');
    expect((await provisionAndSettle(api, node.uuid, 'manage')).provision_state).to.equal('manageable');
    expect((await provisionAndSettle(api, node.uuid, 'inspect')).provision_state).to.equal('manageable');
    return node.uuid;
  }

  async function cleanWith(uuid: string, settings: unknown): Promise<{ states: string[]; node: NodeView }> {
    await provision(api, uuid, 'clean', { clean_steps: [{ interface: 'firmware', step: 'update', args: { settings } }] });
    return watchStates(api, uuid);
  }

  /** A node out of clean failed (which put it in maintenance, as Ironic does) and manageable again. */
  async function recover(uuid: string): Promise<void> {
    expect((await api('DELETE', `/v1/nodes/${uuid}/maintenance`)).status).to.equal(202);
    expect((await provisionAndSettle(api, uuid, 'manage')).provision_state).to.equal('manageable');
  }

  const firmwareTasks = async (i: number) => (await simEvents(g.sim.bmcs[i].url)).filter((e: Json) => e.type === 'firmware-task');

  it('caches BIOS and BMC versions at inspection; GET firmware lists them from 1.86 on, 404 below', async () => {
    const uuid = await inspectedNode(0);
    const list = await firmware(uuid);
    expect(list.map((c) => c.component)).to.deep.equal(['bios', 'bmc']);
    expect(list[0]).to.include({ initial_version: '1.0.0', current_version: '1.0.0', last_version_flashed: null });
    expect(list[1]).to.include({ initial_version: '1.0.0-sim', current_version: '1.0.0-sim', last_version_flashed: null });
    expect(Object.keys(list[0]).sort()).to.deep.equal(['component', 'created_at', 'current_version', 'initial_version', 'last_version_flashed', 'updated_at']);
    expect(list[0].created_at).to.match(/\+00:00$/);

    const old = await api('GET', `/v1/nodes/${uuid}/firmware`, undefined, { 'x-openstack-ironic-api-version': '1.85' });
    expect(old.status, old.body).to.equal(404);
    expect(old.body).to.include('The resource could not be found.');
    const some = await api('GET', `/v1/nodes/${uuid}/firmware?fields=component,current_version`, undefined, { 'x-openstack-ironic-api-version': '1.86' });
    expect(some.json<{ firmware: Json[] }>().firmware[0]).to.deep.equal({ component: 'bios', current_version: '1.0.0', created_at: list[0].created_at, updated_at: null });
    const identity = await api('GET', `/v1/nodes/${uuid}/firmware?fields=vendor`, undefined, { 'x-openstack-ironic-api-version': '1.86' });
    expect(identity.status, identity.body).to.equal(400);
    expect(identity.body).to.include('Fields vendor are not allowed in this API version. They require at least API version 1.114.');
  });

  it('updates the BIOS (rebooting into the agent) and then the BMC in a manual cleaning', async () => {
    const uuid = await inspectedNode(1);
    const { states, node } = await cleanWith(uuid, [
      { component: 'bios', url: `${fw.url}/fw/bios-2.0.0.bin` },
      { component: 'bmc', url: `${fw.url}/fw/bmc-2.0.0.bin`, wait: 5 },
    ]);
    expect(node.provision_state, node.last_error ?? '').to.equal('manageable');
    expect(node.last_error).to.equal(null);
    expect(states).to.include('clean wait');
    expect(node.driver_internal_info).to.not.have.property('redfish_fw_updates');
    const list = await firmware(uuid);
    expect(list.find((c) => c.component === 'bios')).to.include({ initial_version: '1.0.0', current_version: '2.0.0', last_version_flashed: '2.0.0' });
    expect(list.find((c) => c.component === 'bmc')).to.include({ initial_version: '1.0.0-sim', current_version: '2.0.0-sim', last_version_flashed: '2.0.0-sim' });
    expect(list.every((c) => c.updated_at !== null)).to.equal(true);

    // One component at a time: the BIOS image waited for the boot that activated it.
    const events = (await simEvents(g.sim.bmcs[1].url)).map((e: Json) => `${e.type as string}:${(e.state as string | undefined) ?? (e.resetType as string | undefined) ?? ''}`);
    const order = ['firmware-task:Running', 'firmware-task:Completed', 'reset:ForceRestart', 'firmware-activated:', 'firmware-task:Running', 'firmware-task:Completed'];
    let at = -1;
    for (const want of order) {
      at = events.indexOf(want, at + 1);
      expect(at, `${want} in ${events.join(' ')}`).to.be.at.least(0);
    }
  });

  it('fails the cleaning with the BMC\'s message when the image cannot be fetched, and flashes nothing', async () => {
    const uuid = await inspectedNode(2);
    const url = `${fw.url}/fw/missing.bin`;
    const { node } = await cleanWith(uuid, [{ component: 'bios', url }]);
    expect(node.provision_state).to.equal('clean failed');
    expect(node.last_error).to.include(`Firmware update failed for node ${uuid}, firmware ${url}. Error: Image '${url}' is being transferred.,  Transfer of image '${url}' failed: the image server answered HTTP 404.`);
    expect(versions(await firmware(uuid))).to.deep.equal({ bios: '1.0.0', bmc: '1.0.0-sim' });
  });

  it('fails the cleaning with a clear last_error when the BMC cannot be reached after the reboot', async () => {
    const uuid = await inspectedNode(3);
    const bmc = g.sim.bmcs[3].url;
    await provision(api, uuid, 'clean', { clean_steps: [{ interface: 'firmware', step: 'update', args: { settings: [{ component: 'bios', url: `${fw.url}/fw/bios-2.0.0.bin` }] } }] });
    // The node waits for the agent the BIOS reboot boots: the BMC goes away then.
    const deadline = Date.now() + 20_000;
    for (;;) {
      const n = (await api('GET', `/v1/nodes/${uuid}`)).json<NodeView>();
      if (n.provision_state === 'clean wait' && (n.clean_step as Json | null)?.step === 'update') break;
      expect(n.provision_state, n.last_error ?? '').to.not.equal('clean failed');
      expect(Date.now()).to.be.below(deadline);
      await sleep(10);
    }
    await setFaults(bmc, { resetRate: 1 });
    try {
      const { node } = await watchStates(api, uuid);
      expect(node.provision_state).to.equal('clean failed');
      expect(node.last_error).to.include(`Firmware update failed for node ${uuid}: the BMC could not be read after the update: `);
    } finally {
      await setFaults(bmc, { resetRate: 0 });
    }
    // The cache keeps what was last read.
    expect(versions(await firmware(uuid))).to.deep.equal({ bios: '1.0.0', bmc: '1.0.0-sim' });
  });

  it('updates the BMC and the BIOS in servicing, rebooting the instance in place for the BIOS', async () => {
    const uuid = await inspectedNode(5);
    expect((await provisionAndSettle(api, uuid, 'provide')).provision_state).to.equal('available');
    await provision(api, uuid, 'active');
    expect((await watchStates(api, uuid)).node.provision_state).to.equal('active');
    const before = (await simEvents(g.sim.bmcs[5].url)).length;
    await provision(api, uuid, 'service', { service_steps: [{ interface: 'firmware', step: 'update', args: { settings: [
      { component: 'bmc', url: `${fw.url}/fw/bmc-2.0.0.bin` },
      { component: 'bios', url: `${fw.url}/fw/bios-3.0.0.bin` },
    ] } }] });
    const { states, node } = await watchStates(api, uuid);
    expect(node.provision_state, node.last_error ?? '').to.equal('active');
    expect(states).to.not.include('service wait');
    expect(versions(await firmware(uuid))).to.deep.equal({ bios: '3.0.0', bmc: '2.0.0-sim' });
    const events = (await simEvents(g.sim.bmcs[5].url)).slice(before).map((e: Json) => e.type);
    expect(events.filter((t) => t === 'reset'), 'one reboot, for the BIOS').to.have.length(1);
    expect(events.indexOf('firmware-activated')).to.be.above(events.indexOf('reset'));

    const url = `${fw.url}/fw/missing.bin`;
    await provision(api, uuid, 'service', { service_steps: [{ interface: 'firmware', step: 'update', args: { settings: [{ component: 'bmc', url }] } }] });
    const failed = (await watchStates(api, uuid)).node;
    expect(failed.provision_state).to.equal('service failed');
    expect(failed.last_error).to.include(`Firmware update failed for node ${uuid}, firmware ${url}. Error: `).and.include('the image server answered HTTP 404');
    expect(versions(await firmware(uuid))).to.deep.equal({ bios: '3.0.0', bmc: '2.0.0-sim' });
  });

  it('updates the BIOS as a deploy step, rebooting into the agent before the image is written', async () => {
    const uuid = await inspectedNode(6);
    expect((await provisionAndSettle(api, uuid, 'provide')).provision_state).to.equal('available');
    const before = (await simEvents(g.sim.bmcs[6].url)).length;
    await provision(api, uuid, 'active', { deploy_steps: [{ interface: 'firmware', step: 'update', priority: 95, args: { settings: [{ component: 'bios', url: `${fw.url}/fw/bios-2.0.0.bin` }] } }] });
    const { states, node } = await watchStates(api, uuid, 60_000);
    expect(node.provision_state, node.last_error ?? '').to.equal('active');
    expect(states).to.include('wait call-back');
    expect(versions(await firmware(uuid))).to.deep.include({ bios: '2.0.0' });
    const events = (await simEvents(g.sim.bmcs[6].url)).slice(before).map((e: Json) => e.type);
    // Flashed with the agent up, activated by the reboot into it, before the image went to disk.
    expect(events.indexOf('firmware-task')).to.be.above(-1);
    expect(events.indexOf('firmware-activated')).to.be.above(events.indexOf('firmware-task'));
    expect((await agentWitness(g.sim.bmcs[6].url)).disk).to.not.equal(null);
  });

  it('refuses bad settings as Ironic does, flashing nothing', async () => {
    const uuid = await inspectedNode(4);
    const cases: Array<[unknown, string]> = [
      [[{ component: 'cpld', url: `${fw.url}/fw/bios-2.0.0.bin` }], "Errors: 'cpld' is not valid under any of the given schemas"],
      [[{ component: 'bios' }], "Errors: 'url' is a required property"],
      [[{ component: 'bios', url: `${fw.url}/fw/bios-2.0.0.bin`, checksum: 'abc' }], "Errors: Additional properties are not allowed ('checksum' was unexpected)"],
      [[], 'Errors: [] is too short'],
      [[{ component: 'bmc', url: `${fw.url}/fw/bmc-2.0.0.bin`, wait: 0 }], 'Errors: 0 is less than the minimum of 1'],
    ];
    for (const [settings, message] of cases) {
      const { node } = await cleanWith(uuid, settings);
      expect(node.provision_state, JSON.stringify(settings)).to.equal('clean failed');
      expect(node.last_error).to.include('Invalid firmware update ').and.include(message);
      await recover(uuid);
    }
    // No settings at all: the step's required argument is missing.
    await provision(api, uuid, 'clean', { clean_steps: [{ interface: 'firmware', step: 'update', args: {} }] });
    const { node } = await watchStates(api, uuid);
    expect(node.provision_state).to.equal('clean failed');
    expect(node.last_error).to.include('clean step firmware.update is missing these required arguments: settings');
    expect(await firmwareTasks(4)).to.deep.equal([]);
    expect(versions(await firmware(uuid))).to.deep.equal({ bios: '1.0.0', bmc: '1.0.0-sim' });
  });
});
