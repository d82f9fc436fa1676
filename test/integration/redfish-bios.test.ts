/**
 * The `redfish` BIOS interface against the simulator's Bios resource, with simulated agents:
 * the settings cached at inspection and served at GET /v1/nodes/{n}/bios, the
 * apply_configuration and factory_reset clean steps (pending settings, reboot into the agent,
 * verified after it), and bad input answered as Ironic answers it, with nothing changed.
 */
import { expect } from 'chai';
import { setFaults } from '../helpers/redfish.js';
import { AGENT_TEST_ENV, directNodeBody, galvanicAndSim, watchStates } from '../helpers/agent-deploy.js';
import { createNode, provision, provisionAndSettle, simEvents, story } from '../helpers/provisioning.js';

type Setting = Record<string, unknown> & { name: string; value: string | null };

describe('redfish BIOS interface: settings cached and changed through the BMC (real processes)', function () {
  this.timeout(60_000);
  const g = galvanicAndSim({
    images: true,
    env: { ...AGENT_TEST_ENV, GALVANIC_CONDUCTOR__AUTOMATED_CLEAN: 'false', GALVANIC_DEFAULT__ENABLED_BIOS_INTERFACES: 'fake,no-bios,redfish' },
    sim: (apiUrl) => ({ count: 5, agent: { apiUrl, bootSeconds: [0.1, 0.2], heartbeatMinGapMs: 200, lookupRetryMs: 300 } }),
    cleanExit: false,
  });
  const { api } = g;

  /** The attributes the BMC has now (not what Galvanic cached). */
  async function bmcAttributes(i: number): Promise<Record<string, unknown>> {
    const res = await fetch(`${g.sim.bmcs[i].url}/redfish/v1/Systems/System.Embedded.1/Bios`, { headers: { authorization: `Basic ${Buffer.from('admin:password').toString('base64')}` } });
    expect(res.status).to.equal(200);
    return ((await res.json()) as { Attributes: Record<string, unknown> }).Attributes;
  }

  async function biosList(uuid: string, query = '', version = 'latest'): Promise<Setting[]> {
    const res = await api('GET', `/v1/nodes/${uuid}/bios${query}`, undefined, { 'x-openstack-ironic-api-version': version });
    expect(res.status, res.body).to.equal(200);
    return res.json<{ bios: Setting[] }>().bios;
  }

  const valueOf = (list: Setting[], name: string) => list.find((s) => s.name === name)?.value;

  /** A manageable, inspected node with the redfish BIOS interface on BMC `i`. */
  async function inspectedNode(i: number): Promise<string> {
    const node = await createNode(api, directNodeBody(`bios-${i}`, g.sim.bmcs[i].url, g.images, { bios_interface: 'redfish' }));
    expect(node.bios_interface).to.equal('redfish');
    expect((await provisionAndSettle(api, node.uuid, 'manage')).provision_state).to.equal('manageable');
    expect((await provisionAndSettle(api, node.uuid, 'inspect')).provision_state).to.equal('manageable');
    return node.uuid;
  }

  /** Back to manageable after a failed cleaning, which put the node in maintenance (as Ironic does). */
  async function recover(uuid: string): Promise<void> {
    expect((await api('DELETE', `/v1/nodes/${uuid}/maintenance`)).status).to.equal(202);
    expect((await provisionAndSettle(api, uuid, 'manage')).provision_state).to.equal('manageable');
  }

  async function clean(uuid: string, steps: unknown[]) {
    await provision(api, uuid, 'clean', { clean_steps: steps });
    return watchStates(api, uuid);
  }

  it('caches the BMC\'s settings at inspection: GET bios lists them, with the registry from 1.74', async () => {
    const uuid = await inspectedNode(0);
    const list = await biosList(uuid, '', '1.40');
    expect(list.map((s) => s.name)).to.include.members(['BootMode', 'ProcTurboMode', 'ProcCoreDisable', 'SriovGlobalEnable', 'SystemBiosVersion']);
    expect(Object.keys(list[0]).sort()).to.deep.equal(['created_at', 'links', 'name', 'updated_at', 'value']);
    expect(valueOf(list, 'ProcCoreDisable')).to.equal('0');
    expect(valueOf(list, 'SriovGlobalEnable')).to.equal('False');

    const detailed = await biosList(uuid, '?detail=true');
    const turbo = detailed.find((s) => s.name === 'ProcTurboMode')!;
    expect(turbo).to.include({ attribute_type: 'Enumeration', read_only: false, reset_required: true, value: 'Enabled' });
    expect(turbo.allowable_values).to.deep.equal(['Enabled', 'Disabled']);
    expect(detailed.find((s) => s.name === 'ProcCoreDisable')).to.include({ attribute_type: 'Integer', lower_bound: 0, upper_bound: 32 });
    expect(detailed.find((s) => s.name === 'SystemBiosVersion')).to.include({ read_only: true });

    const only = await biosList(uuid, '?fields=name,read_only');
    expect(Object.keys(only[0]).sort()).to.deep.equal(['created_at', 'links', 'name', 'read_only', 'updated_at']);

    const one = await api('GET', `/v1/nodes/${uuid}/bios/ProcTurboMode`);
    expect(one.status).to.equal(200);
    expect(one.json<Record<string, Setting>>().ProcTurboMode).to.include({ name: 'ProcTurboMode', value: 'Enabled', attribute_type: 'Enumeration' });
    const old = await api('GET', `/v1/nodes/${uuid}/bios/ProcTurboMode`, undefined, { 'x-openstack-ironic-api-version': '1.40' });
    expect(Object.keys(old.json<Record<string, Setting>>().ProcTurboMode).sort()).to.deep.equal(['created_at', 'links', 'name', 'updated_at', 'value']);

    // Ironic's gates: no such resource before 1.40; no query before 1.74.
    expect((await api('GET', `/v1/nodes/${uuid}/bios`, undefined, { 'x-openstack-ironic-api-version': '1.39' })).status).to.equal(404);
    expect((await api('GET', `/v1/nodes/${uuid}/bios/ProcTurboMode`, undefined, { 'x-openstack-ironic-api-version': '1.39' })).status).to.equal(404);
    expect((await api('GET', `/v1/nodes/${uuid}/bios?detail=true`, undefined, { 'x-openstack-ironic-api-version': '1.73' })).status).to.equal(400);
    expect((await api('GET', `/v1/nodes/${uuid}/bios?detail=true&fields=name`)).status).to.equal(400);
    expect((await api('GET', `/v1/nodes/${uuid}/bios?fields=bogus`)).status).to.equal(400);
    const missing = await api('GET', `/v1/nodes/${uuid}/bios/NoSuchSetting`);
    expect(missing.status).to.equal(404);
    expect(missing.body).to.include(`Node ${uuid} doesn't have a BIOS setting 'NoSuchSetting'`);
  });

  it('applies settings in manual cleaning through the agent\'s reboot, then factory-resets them', async () => {
    const uuid = await inspectedNode(1);
    const applied = await clean(uuid, [{
      interface: 'bios', step: 'apply_configuration',
      args: { settings: [{ name: 'ProcTurboMode', value: 'Disabled' }, { name: 'ProcCoreDisable', value: '4' }, { name: 'SriovGlobalEnable', value: 'true' }] },
    }]);
    expect(applied.node.provision_state, applied.node.last_error ?? '').to.equal('manageable');
    expect(applied.states).to.include('clean wait');
    expect(applied.node.driver_internal_info).to.not.have.property('redfish_bios_state');
    // Typed as the registry says: an Integer and a Boolean, not the strings given.
    expect(await bmcAttributes(1)).to.include({ ProcTurboMode: 'Disabled', ProcCoreDisable: 4, SriovGlobalEnable: true });
    const list = await biosList(uuid);
    expect([valueOf(list, 'ProcTurboMode'), valueOf(list, 'ProcCoreDisable'), valueOf(list, 'SriovGlobalEnable')]).to.deep.equal(['Disabled', '4', 'True']);

    const reset = await clean(uuid, [{ interface: 'bios', step: 'factory_reset', args: {} }]);
    expect(reset.node.provision_state, reset.node.last_error ?? '').to.equal('manageable');
    expect(await bmcAttributes(1)).to.include({ ProcTurboMode: 'Enabled', ProcCoreDisable: 0, SriovGlobalEnable: false });
    expect(valueOf(await biosList(uuid), 'ProcTurboMode')).to.equal('Enabled');
  });

  it('refuses bad settings as Ironic does, and the BMC keeps its values', async () => {
    const uuid = await inspectedNode(2);
    const before = await bmcAttributes(2);

    // A missing required argument: as in Ironic, the steps are checked once the agent offers its
    // own, so the cleaning fails before any step runs.
    const noArgs = await clean(uuid, [{ interface: 'bios', step: 'apply_configuration', args: {} }]);
    expect(noArgs.node.provision_state).to.equal('clean failed');
    expect(noArgs.node.last_error).to.include('clean step bios.apply_configuration is missing these required arguments: settings');
    await recover(uuid);

    // A read-only attribute: Ironic's check against the registry fails the step.
    const readOnly = await clean(uuid, [{ interface: 'bios', step: 'apply_configuration', args: { settings: [{ name: 'SystemBiosVersion', value: 'X' }] } }]);
    expect(readOnly.node.provision_state).to.equal('clean failed');
    expect(readOnly.node.last_error).to.include(`Redfish BIOS apply_configuration failed for node ${uuid}: invalid value for setting(s): SystemBiosVersion`);
    await recover(uuid);

    // An attribute the BMC does not have: the BMC's refusal fails the step.
    const unknown = await clean(uuid, [{ interface: 'bios', step: 'apply_configuration', args: { settings: [{ name: 'NoSuchKnob', value: 'On' }] } }]);
    expect(unknown.node.provision_state).to.equal('clean failed');
    expect(unknown.node.last_error).to.include('Redfish BIOS apply configuration failed').and.include('NoSuchKnob');
    await recover(uuid);

    // A value the registry does not allow.
    const badValue = await clean(uuid, [{ interface: 'bios', step: 'apply_configuration', args: { settings: [{ name: 'PowerProfile', value: 'Turbo' }] } }]);
    expect(badValue.node.provision_state).to.equal('clean failed');
    expect(badValue.node.last_error).to.include('invalid value for setting(s): PowerProfile');

    expect(await bmcAttributes(2)).to.deep.equal(before);
  });

  it('fails the cleaning with Ironic\'s message when the BMC does not apply a setting at the reboot', async () => {
    const uuid = await inspectedNode(3);
    await setFaults(g.sim.bmcs[3].url, { biosUnapplied: ['PowerProfile'] });
    const res = await clean(uuid, [{ interface: 'bios', step: 'apply_configuration', args: { settings: [{ name: 'PowerProfile', value: 'Balanced' }, { name: 'NicBoot1', value: 'Disabled' }] } }]);
    expect(res.node.provision_state).to.equal('clean failed');
    expect(res.node.driver_internal_info).to.not.have.property('redfish_bios_state');
    expect(res.node.last_error).to.include('Redfish BIOS apply_configuration step failed. Attributes {\'PowerProfile\': \'Balanced\'} are not updated.');
    expect(await bmcAttributes(3)).to.include({ PowerProfile: 'MaxPerf', NicBoot1: 'Disabled' });
    // The cache shows what the BMC has, not what was asked.
    const list = await biosList(uuid);
    expect([valueOf(list, 'PowerProfile'), valueOf(list, 'NicBoot1')]).to.deep.equal(['MaxPerf', 'Disabled']);
  });

  it('applies settings and factory-resets them in servicing, rebooting the instance in place (no agent)', async () => {
    const uuid = await inspectedNode(4);
    expect((await provisionAndSettle(api, uuid, 'provide')).provision_state).to.equal('available');
    await provision(api, uuid, 'active');
    expect((await watchStates(api, uuid)).node.provision_state).to.equal('active');

    const service = async (steps: unknown[]) => {
      const before = (await simEvents(g.sim.bmcs[4].url)).length;
      await provision(api, uuid, 'service', { service_steps: steps });
      const run = await watchStates(api, uuid);
      return { ...run, resets: story((await simEvents(g.sim.bmcs[4].url)).slice(before)).filter((e) => e.startsWith('reset ')) };
    };
    const applied = await service([{ interface: 'bios', step: 'apply_configuration', args: { settings: [{ name: 'ProcTurboMode', value: 'Disabled' }, { name: 'ProcCoreDisable', value: 3 }] } }]);
    expect(applied.node.provision_state, applied.node.last_error ?? '').to.equal('active');
    expect(applied.states).to.not.include('service wait');
    expect(applied.resets, 'one reboot of the instance').to.have.length(1);
    expect(applied.node.driver_internal_info).to.not.have.property('redfish_bios_state');
    expect(await bmcAttributes(4)).to.include({ ProcTurboMode: 'Disabled', ProcCoreDisable: 3 });
    expect([valueOf(await biosList(uuid), 'ProcTurboMode'), valueOf(await biosList(uuid), 'ProcCoreDisable')]).to.deep.equal(['Disabled', '3']);

    const reset = await service([{ interface: 'bios', step: 'factory_reset', args: {} }]);
    expect(reset.node.provision_state, reset.node.last_error ?? '').to.equal('active');
    expect(reset.resets).to.have.length(1);
    expect(await bmcAttributes(4)).to.include({ ProcTurboMode: 'Enabled', ProcCoreDisable: 0 });

    // Not applied at the reboot: service failed with Ironic's message, the instance running.
    await setFaults(g.sim.bmcs[4].url, { biosUnapplied: ['PowerProfile'] });
    const unapplied = await service([{ interface: 'bios', step: 'apply_configuration', args: { settings: [{ name: 'PowerProfile', value: 'PowerSaver' }] } }]);
    expect(unapplied.node.provision_state).to.equal('service failed');
    expect(unapplied.node.last_error).to.include('Redfish BIOS apply_configuration step failed. Attributes {\'PowerProfile\': \'PowerSaver\'} are not updated.');
    expect(unapplied.node.power_state).to.equal('power on');
  });
});
