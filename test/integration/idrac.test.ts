/**
 * The `idrac` hardware type against the simulator's iDRAC (quirk `idrac`: a PowerEdge whose
 * firmware 5 boots the physical optical drive for a `Cd` override, with the Dell OEM services)
 * and simulated agents, real processes: the node BMO registers for an `idrac-virtualmedia://`
 * address inspected, cleaned and deployed through the OEM virtual CD boot; the iDRAC's clean
 * steps; RAID waiting for real-time readiness; a pending configuration power-cycled away; and
 * the plain `redfish-virtual-media` boot refused on an old iDRAC, as Ironic refuses it.
 */
import { expect } from 'chai';
import { startRedfishSim, type RedfishSim } from '../../sim/redfish/index.js';
import { AGENT_TEST_ENV, galvanicAndSim, watchStates } from '../helpers/agent-deploy.js';
import { clearSimEvents, createNode, getNode, nodePorts, provision, provisionAndSettle, simEvents } from '../helpers/provisioning.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const AUTH = { authorization: `Basic ${Buffer.from('admin:password').toString('base64')}`, 'content-type': 'application/json' };
const SYSTEM = '/redfish/v1/Systems/System.Embedded.1';
const MANAGER = '/redfish/v1/Managers/iDRAC.Embedded.1';
const IMPORT = `${MANAGER}/Actions/Oem/EID_674_Manager.ImportSystemConfiguration`;

/** Interfaces as metal3's ironic-image enables them (ironic-config/ironic.conf.j2). */
const IRONIC_IMAGE_ENV: Record<string, string> = {
  GALVANIC_DEFAULT__ENABLED_HARDWARE_TYPES: 'ipmi,idrac,fake-hardware,redfish',
  GALVANIC_DEFAULT__ENABLED_BIOS_INTERFACES: 'no-bios,redfish,idrac-redfish',
  GALVANIC_DEFAULT__ENABLED_BOOT_INTERFACES: 'pxe,fake,redfish-virtual-media,idrac-redfish-virtual-media',
  GALVANIC_DEFAULT__ENABLED_FIRMWARE_INTERFACES: 'no-firmware,fake,redfish',
  GALVANIC_DEFAULT__ENABLED_INSPECT_INTERFACES: 'no-inspect,agent,fake,redfish,idrac-redfish',
  GALVANIC_DEFAULT__ENABLED_MANAGEMENT_INTERFACES: 'ipmitool,fake,redfish,idrac-redfish',
  GALVANIC_DEFAULT__ENABLED_POWER_INTERFACES: 'ipmitool,fake,redfish,idrac-redfish',
  GALVANIC_DEFAULT__ENABLED_RAID_INTERFACES: 'no-raid,fake,redfish,idrac-redfish',
  GALVANIC_DEFAULT__ENABLED_VENDOR_INTERFACES: 'no-vendor,idrac-redfish,redfish,fake',
  GALVANIC_DEFAULT__DEFAULT_INSPECT_INTERFACE: 'agent',
};

async function redfish(bmcUrl: string, method: string, path: string, body?: object): Promise<Response> {
  return fetch(`${bmcUrl}${path}`, { method, headers: AUTH, body: body ? JSON.stringify(body) : undefined });
}

/** The node baremetal-operator registers for `idrac-virtualmedia://` (pkg/hardwareutils/bmc/idrac_virtualmedia.go). */
function bmoIdracNode(name: string, bmcUrl: string, isoUrl: string, image: { url: string; sha256: string }, extra: Json = {}): Json {
  return {
    name,
    driver: 'idrac',
    bios_interface: 'idrac-redfish',
    boot_interface: 'idrac-redfish-virtual-media',
    firmware_interface: 'redfish',
    inspect_interface: 'agent',
    management_interface: 'idrac-redfish',
    power_interface: 'idrac-redfish',
    raid_interface: 'idrac-redfish',
    vendor_interface: 'idrac-redfish',
    deploy_interface: 'direct',
    disable_power_off: false,
    properties: { capabilities: 'boot_mode:uefi', cpu_arch: 'x86_64' },
    driver_info: {
      redfish_address: bmcUrl, redfish_system_id: SYSTEM, redfish_username: 'admin', redfish_password: 'password', redfish_verify_ca: false, deploy_iso: isoUrl,
    },
    instance_info: { image_source: image.url, image_os_hash_algo: 'sha256', image_os_hash_value: image.sha256 },
    ...extra,
  };
}

function oemEvents(events: Json[]): string[] {
  return events.filter((e) => e.type === 'idrac' || (e.type === 'refused' && e.call === 'ImportSystemConfiguration') || (e.type === 'boot-started'))
    .map((e) => (e.type === 'idrac' ? `${String(e.op)}${e.state ? ` ${String(e.state)}` : ''}` : e.type === 'refused' ? `refused ${String(e.messageId)}` : `boot ${String(e.device)}${e.image ? ' image' : ''}`));
}

describe('the simulated iDRAC 5: the Cd override boots the physical drive; the OEM import boots the virtual CD', function () {
  this.timeout(30_000);
  let sim: RedfishSim;
  before(async () => {
    sim = await startRedfishSim({ count: 1, vmediaQuirks: ['idrac'] });
  });
  after(() => sim.stop());

  it('is a Dell PowerEdge with an iDRAC manager and the Dell OEM services', async () => {
    const url = sim.bmcs[0].url;
    const system = (await (await redfish(url, 'GET', SYSTEM)).json()) as Json;
    expect(system.Manufacturer).to.equal('Dell Inc.');
    expect(system.Links.ManagedBy).to.deep.equal([{ '@odata.id': MANAGER }]);
    const manager = (await (await redfish(url, 'GET', MANAGER)).json()) as Json;
    expect(manager.FirmwareVersion).to.match(/^5\./);
    expect(manager.Links.Oem.Dell.DellJobService['@odata.id']).to.equal(`${MANAGER}/Oem/Dell/DellJobService`);
    expect(Object.keys(manager.Actions.Oem)[0]).to.match(/#OemManager\.ImportSystemConfiguration$/);
  });

  it('boots the disk for a Cd override with the ISO inserted, and the ISO after a VCD-DVD import', async () => {
    const url = sim.bmcs[0].url;
    const cd = `${MANAGER}/VirtualMedia/Cd`;
    expect((await redfish(url, 'POST', `${cd}/Actions/VirtualMedia.InsertMedia`, { Image: 'http://images.test/boot.iso' })).status).to.equal(204);
    expect((await redfish(url, 'PATCH', SYSTEM, { Boot: { BootSourceOverrideTarget: 'Cd', BootSourceOverrideEnabled: 'Once' } })).status).to.equal(204);
    await clearSimEvents(url);
    expect((await redfish(url, 'POST', `${SYSTEM}/Actions/ComputerSystem.Reset`, { ResetType: 'ForceRestart' })).status).to.equal(204);

    const profile = '<SystemConfiguration><Component FQDD="iDRAC.Embedded.1"><Attribute Name="ServerBoot.1#BootOnce">Enabled</Attribute>'
      + '<Attribute Name="ServerBoot.1#FirstBootDevice">VCD-DVD</Attribute></Component></SystemConfiguration>';
    const accepted = await redfish(url, 'POST', IMPORT, { ShareParameters: { Target: 'ALL' }, ImportBuffer: profile });
    expect(accepted.status).to.equal(202);
    const job = accepted.headers.get('location') ?? '';
    expect(job).to.match(/\/Jobs\/JID_/);
    let r = await redfish(url, 'GET', job);
    expect(r.status, 'a running job answers 202').to.equal(202);
    for (let i = 0; i < 50 && r.status === 202; i++) {
      await new Promise((res) => setTimeout(res, 50));
      r = await redfish(url, 'GET', job);
    }
    expect(((await r.json()) as Json).JobState).to.equal('Completed');
    expect((await redfish(url, 'POST', `${SYSTEM}/Actions/ComputerSystem.Reset`, { ResetType: 'ForceRestart' })).status).to.equal(204);

    const boots = (await simEvents(url)).filter((e) => e.type === 'boot-started').map((e) => [e.device, e.image ?? null, e.requested ?? null]);
    expect(boots).to.deep.equal([['Hdd', null, 'Cd'], ['Cd', 'http://images.test/boot.iso', null]]);
  });

  it('refuses an import while BIOS settings are pending (LC068) and a profile that is not one', async () => {
    const url = sim.bmcs[0].url;
    expect((await redfish(url, 'PATCH', `${SYSTEM}/Bios/Settings`, { Attributes: { ProcTurboMode: 'Disabled' } })).status).to.equal(204);
    const refused = await redfish(url, 'POST', IMPORT, { ImportBuffer: '<SystemConfiguration></SystemConfiguration>' });
    expect(refused.status).to.equal(400);
    expect(JSON.stringify(await refused.json())).to.include('LC068');
    const garbage = await redfish(url, 'POST', IMPORT, { ImportBuffer: 'not a profile' });
    expect(garbage.status).to.equal(400);
    // The job queue cleared drops the pending settings: the import is taken again.
    const cleared = await redfish(url, 'POST', `${MANAGER}/Oem/Dell/DellJobService/Actions/DellJobService.DeleteJobQueue`, { JobID: 'JID_CLEARALL' });
    expect(cleared.status).to.equal(200);
    expect(((await (await redfish(url, 'GET', `${SYSTEM}/Bios/Settings`)).json()) as Json).Attributes).to.deep.equal({});
    expect((await redfish(url, 'POST', IMPORT, { ImportBuffer: '<SystemConfiguration></SystemConfiguration>' })).status).to.equal(202);
  });
});

describe('idrac hardware type: the node BMO registers for idrac-virtualmedia:// (real processes)', function () {
  this.timeout(180_000);
  const g = galvanicAndSim({
    images: true,
    env: { ...AGENT_TEST_ENV, ...IRONIC_IMAGE_ENV, GALVANIC_CONDUCTOR__AUTOMATED_CLEAN: 'true' },
    sim: (apiUrl) => ({
      count: 6, vmediaQuirks: ['idrac'], idracResetMs: 600,
      agent: { apiUrl, bootSeconds: [0.2, 0.4], heartbeatMinGapMs: 200, lookupRetryMs: 300 },
    }),
    cleanExit: false,
  });
  const { api } = g;

  async function register(i: number, extra: Json = {}): Promise<string> {
    const node = await createNode(api, bmoIdracNode(`idrac-${i}`, g.sim.bmcs[i].url, g.images.isoUrl, g.images.image, extra));
    return node.uuid;
  }

  it('lists the idrac driver with its interfaces, Ironic\'s defaults first', async () => {
    const res = await api('GET', '/v1/drivers/idrac?detail=true');
    expect(res.status, res.body).to.equal(200);
    const d = res.json<Json>();
    expect(d.default_boot_interface).to.equal('idrac-redfish-virtual-media');
    expect(d.default_management_interface).to.equal('idrac-redfish');
    expect(d.default_power_interface).to.equal('idrac-redfish');
    expect(d.enabled_raid_interfaces).to.deep.equal(['idrac-redfish', 'no-raid']);
    expect(d.enabled_vendor_interfaces).to.deep.equal(['idrac-redfish', 'redfish', 'no-vendor']);
  });

  it('refuses the interfaces Ironic\'s idrac type does not support, creating nothing', async () => {
    const url = g.sim.bmcs[5].url;
    for (const [kind, iface] of [['boot', 'redfish-virtual-media'], ['management', 'redfish'], ['inspect', 'redfish'], ['raid', 'redfish']]) {
      const res = await api('POST', '/v1/nodes', bmoIdracNode(`refused-${kind}`, url, g.images.isoUrl, g.images.image, { [`${kind}_interface`]: iface }));
      expect(res.status, `${kind} ${iface}`).to.equal(400);
      expect(JSON.parse(res.json<Json>().error_message).faultstring).to.include(`Could not find a suitable ${kind} interface "${iface}" for hardware type "idrac"`);
      expect((await api('GET', `/v1/nodes/refused-${kind}`)).status).to.equal(404);
    }
  });

  it('manages (vendor cached), inspects, cleans and deploys through the OEM virtual CD boot', async () => {
    const url = g.sim.bmcs[0].url;
    const uuid = await register(0);
    let node = await provisionAndSettle(api, uuid, 'manage');
    expect(node.provision_state, node.last_error ?? '').to.equal('manageable');
    expect((node.properties as Json).vendor).to.equal('Dell Inc.');

    await clearSimEvents(url);
    node = await provisionAndSettle(api, uuid, 'inspect', {}, 60_000);
    expect(node.provision_state, node.last_error ?? '').to.equal('manageable');
    expect(await nodePorts(api, uuid)).to.have.length(2);
    const inspection = oemEvents(await simEvents(url));
    expect(inspection).to.include('import Completed');
    expect(inspection.indexOf('import Completed')).to.be.lessThan(inspection.indexOf('boot Cd image'));

    await provision(api, uuid, 'provide');
    const provided = await watchStates(api, uuid, 90_000);
    expect(provided.node.provision_state, provided.node.last_error ?? '').to.equal('available');
    expect(provided.states).to.include('clean wait');

    await clearSimEvents(url);
    await provision(api, uuid, 'active');
    const deployed = await watchStates(api, uuid, 90_000);
    expect(deployed.node.provision_state, deployed.node.last_error ?? '').to.equal('active');
    const boots = oemEvents(await simEvents(url)).filter((e) => e.startsWith('boot'));
    // The agent from the virtual CD, then the written image from the disk.
    expect(boots[0]).to.equal('boot Cd image');
    expect(boots.at(-1)).to.equal('boot Hdd');
  });

  it('runs the iDRAC\'s clean steps without the agent: job queue cleared, iDRAC reset, known good state', async () => {
    const url = g.sim.bmcs[1].url;
    const uuid = await register(1);
    expect((await provisionAndSettle(api, uuid, 'manage')).provision_state).to.equal('manageable');
    expect((await redfish(url, 'PATCH', `${SYSTEM}/Bios/Settings`, { Attributes: { ProcTurboMode: 'Disabled' } })).status).to.equal(204);
    await clearSimEvents(url);
    const clean_steps = ['clear_job_queue', 'reset_idrac', 'known_good_state'].map((step) => ({ interface: 'management', step }));
    const node = await provisionAndSettle(api, uuid, 'clean', { clean_steps }, 60_000);
    expect(node.provision_state, node.last_error ?? '').to.equal('manageable');
    const events = await simEvents(url);
    expect(oemEvents(events)).to.deep.equal(['job-queue-cleared', 'reset', 'reset', 'job-queue-cleared']);
    expect(events.find((e) => e.type === 'idrac' && e.op === 'job-queue-cleared')?.bios).to.deep.equal(['ProcTurboMode']);
    expect(events.some((e) => e.type === 'agent-started'), 'no agent booted').to.equal(false);
  });

  it('fails a clean step with the iDRAC\'s message when its job service refuses', async () => {
    // A BMC without the Dell services: the redfish simulator of another vendor.
    const other = await startRedfishSim({ count: 1 });
    try {
      const uuid = await register(2, { name: 'not-an-idrac', driver_info: { redfish_address: other.bmcs[0].url, redfish_username: 'admin', redfish_password: 'password', deploy_iso: g.images.isoUrl } });
      expect((await provisionAndSettle(api, uuid, 'manage')).provision_state).to.equal('manageable');
      const node = await provisionAndSettle(api, uuid, 'clean', { clean_steps: [{ interface: 'management', step: 'clear_job_queue' }] }, 60_000);
      expect(node.provision_state).to.equal('clean failed');
      expect(node.last_error).to.include('Clean step management.clear_job_queue failed').and.include('shows no Dell OEM section');
    } finally {
      await other.stop();
    }
  });

  it('creates a RAID volume once the iDRAC is ready for real-time operations, powering the node on for it', async () => {
    const url = g.sim.bmcs[3].url;
    const uuid = await register(3);
    expect((await provisionAndSettle(api, uuid, 'manage')).provision_state).to.equal('manageable');
    await api('PUT', `/v1/nodes/${uuid}/states/power`, { target: 'power off' }, { prefer: 'wait=20' });
    expect((await api('PUT', `/v1/nodes/${uuid}/states/raid`, { logical_disks: [{ size_gb: 100, raid_level: '1', is_root_volume: true }] })).status).to.equal(204);
    await clearSimEvents(url);
    const clean_steps = [{ interface: 'raid', step: 'delete_configuration' }, { interface: 'raid', step: 'create_configuration' }];
    const node = await provisionAndSettle(api, uuid, 'clean', { clean_steps }, 60_000) as Json;
    expect(node.provision_state, node.last_error ?? '').to.equal('manageable');
    expect(node.raid_config.logical_disks).to.have.length(1);
    expect(node.raid_config.logical_disks[0]).to.include({ raid_level: '1', size_gb: 100 });
    const events = await simEvents(url);
    const reset = events.findIndex((e) => e.type === 'reset' && e.to === 'On');
    const firstVolume = events.findIndex((e) => e.type === 'volume');
    expect(reset, 'powered on first').to.be.greaterThan(-1).and.lessThan(firstVolume);
    expect(events.some((e) => e.type === 'agent-started'), 'no agent booted').to.equal(false);
  });

  it('power cycles a pending configuration away (LC068) before it sets the virtual CD', async () => {
    const url = g.sim.bmcs[4].url;
    const uuid = await register(4);
    expect((await provisionAndSettle(api, uuid, 'manage')).provision_state).to.equal('manageable');
    expect((await redfish(url, 'PATCH', `${SYSTEM}/Bios/Settings`, { Attributes: { ProcVirtualization: 'Disabled' } })).status).to.equal(204);
    await clearSimEvents(url);
    const node = await provisionAndSettle(api, uuid, 'inspect', {}, 60_000);
    expect(node.provision_state, node.last_error ?? '').to.equal('manageable');
    const story = oemEvents(await simEvents(url));
    expect(story.slice(0, 3)).to.deep.equal(['refused LC068', 'boot Hdd', 'import Completed']);
    const bios = (await (await redfish(url, 'GET', `${SYSTEM}/Bios`)).json()) as Json;
    expect(bios.Attributes.ProcVirtualization, 'the pending setting applied by the power cycle').to.equal('Disabled');
  });

  it('refuses redfish-virtual-media on a Dell node with iDRAC firmware before 6, as Ironic does', async () => {
    const url = g.sim.bmcs[5].url;
    const node = await createNode(api, {
      name: 'dell-on-redfish', driver: 'redfish', boot_interface: 'redfish-virtual-media', deploy_interface: 'direct', inspect_interface: 'agent',
      driver_info: { redfish_address: url, redfish_username: 'admin', redfish_password: 'password', deploy_iso: g.images.isoUrl },
    });
    expect((await provisionAndSettle(api, node.uuid, 'manage')).provision_state).to.equal('manageable');
    expect((await getNode(api, node.uuid)).properties).to.include({ vendor: 'Dell Inc.' });
    const failed = await provisionAndSettle(api, node.uuid, 'inspect', {}, 30_000);
    expect(failed.provision_state).to.equal('inspect failed');
    expect(failed.last_error).to.include(`The redfish-virtual-media boot interface is not suitable for node ${node.uuid} with vendor Dell Inc. and BMC version 5.10.50.00, upgrade to 6.00.00.00 or newer or use idrac-redfish-virtual-media instead`);
  });
});
