/**
 * Metal3's baremetal-operator against Galvanic, request for request: BMO's Ironic provisioner
 * (re-told over gophercloud in test/helpers/bmo.ts, with every answer checked against the Go
 * types gophercloud decodes it into) takes a `redfish-virtualmedia` host through its life on the
 * Redfish simulator's BMCs and simulated agents, with Galvanic configured as Metal3 configures
 * Ironic: register → inspect (agent, then redfish) → BIOS settings and firmware read → RAID,
 * BIOS and firmware in one manual cleaning → provide → deploy an image with a config drive →
 * power cycles → BMC event subscription and data image → servicing (BIOS, firmware) →
 * deprovision → a live ISO → a custom deploy (OpenShift's install_coreos) → delete; and the
 * adoption of an externally provisioned host.
 */
import { expect } from 'chai';
import { agentWitness, resetHost, setAgentFaults } from '../helpers/agent-sim.js';
import { AGENT_TEST_ENV, galvanicAndSim, startFirmwareServer } from '../helpers/agent-deploy.js';
import { BmoHost, METAL3_ENV, type BmoConfig, type HostData, type HostIdentity } from '../helpers/bmo.js';
import { simEvents, simState, story } from '../helpers/provisioning.js';
import { until } from '../helpers/until.js';

type Json = Record<string, unknown>;

const SYSTEM = '/redfish/v1/Systems/System.Embedded.1';
const AUTH = { authorization: `Basic ${Buffer.from('admin:password').toString('base64')}` };
const GIB = 2 ** 30;

describe('Metal3 BMO flow: a redfish-virtualmedia host through its life, as BMO asks it (real processes)', function () {
  this.timeout(120_000);
  const g = galvanicAndSim({
    images: true,
    env: { ...AGENT_TEST_ENV, ...METAL3_ENV, GALVANIC_REDFISH__FIRMWARE_UPDATE_STATUS_INTERVAL: '0.1' },
    sim: (apiUrl) => ({ count: 2, agent: { apiUrl, bootSeconds: [0.1, 0.2], heartbeatMinGapMs: 200, lookupRetryMs: 300, coreosInstaller: true } }),
    cleanExit: false,
  });
  let fw: { url: string; close(): Promise<void> };
  before(async () => {
    fw = await startFirmwareServer();
  });
  after(async () => fw?.close());

  const config = (): BmoConfig => ({ deployIsoUrl: g.images.isoUrl, shortDelayMs: 50, longDelayMs: 100 });
  const base: HostData = { bootMode: 'UEFI', automatedCleaning: true, inspectionMode: 'agent' };

  async function redfish<T>(i: number, path: string): Promise<T> {
    const res = await fetch(`${g.sim.bmcs[i].url}${path}`, { headers: AUTH });
    expect(res.status, path).to.equal(200);
    return (await res.json()) as T;
  }

  /** The BareMetalHost of BMC `i`: its BMC address as BMO takes it, and the first NIC's MAC as bootMACAddress. */
  async function identity(i: number, name: string): Promise<HostIdentity> {
    const nics = await redfish<{ Members: Array<{ '@odata.id': string }> }>(i, `${SYSTEM}/EthernetInterfaces`);
    const nic = await redfish<{ MACAddress: string }>(i, nics.Members[0]['@odata.id']);
    return {
      namespace: 'metal3', name, uid: `5a3c81e2-4f1b-4c39-9d7e-00000000000${i}`,
      bmcAddress: `redfish-virtualmedia+${g.sim.bmcs[i].url}${SYSTEM}`, username: 'admin', password: 'password', bootMACAddress: nic.MACAddress.toLowerCase(),
    };
  }

  const biosOf = async (bmo: BmoHost) => Object.fromEntries((await bmo.firmwareSettings(false)).map((s) => [s.name, s.value]));
  const versionsOf = async (bmo: BmoHost) => Object.fromEntries((await bmo.firmwareComponents()).map((c) => [c.component, c.current_version]));

  /** Prepare or Service as BMO's controller drives them: with unprepared set until the operation has started. */
  async function untilStarted(bmo: BmoHost, what: string, step: (unprepared: boolean) => Promise<{ dirty: boolean; errorMessage?: string; started?: boolean }>) {
    let unprepared = true;
    return bmo.reconcile(what, async () => {
      const r = await step(unprepared);
      if (r.started) unprepared = false;
      return r;
    }, { long: true });
  }

  let bmo: BmoHost;
  let host: HostIdentity;

  it('discovers the API as gophercloud does and works at 1.95', async () => {
    host = await identity(0, 'worker-0');
    bmo = new BmoHost(g.galvanic.url, host, config());
    expect(await bmo.discover()).to.equal('1.95');
  });

  it('registers the host with BMO\'s interfaces, its boot MAC\'s port, manages it and configures it', async () => {
    await bmo.reconcile('register', () => bmo.register(base));
    const node = await bmo.getNode();
    expect(node).to.include({
      name: 'metal3~worker-0', driver: 'redfish', provision_state: 'manageable', boot_interface: 'redfish-virtual-media', deploy_interface: 'direct',
      inspect_interface: 'agent', firmware_interface: 'redfish', raid_interface: 'redfish', bios_interface: 'redfish', vendor_interface: 'redfish',
      power_interface: 'redfish', management_interface: 'redfish', automated_clean: true, disable_power_off: false,
    });
    expect(node.driver_info).to.include({ deploy_iso: g.images.isoUrl, redfish_system_id: SYSTEM, redfish_password: '******' });
    expect(node.properties).to.include({ capabilities: 'boot_mode:uefi', cpu_arch: 'x86_64' });
    const ports = (await bmo.client.expectOk<{ ports: Json[] }>({ method: 'GET', path: `ports/detail?node_uuid=${node.uuid}` })).ports;
    expect(ports.map((p) => [p.address, p.pxe_enabled])).to.deep.equal([[host.bootMACAddress, true]]);

    // A later reconcile finds everything as BMO wants it: no write.
    let seen = bmo.client.log.length;
    await bmo.reconcile('register again', () => bmo.register(base));
    expect(bmo.client.log.slice(seen).filter((l) => !l.startsWith('GET ')), 'steady state').to.deep.equal([]);

    // New BMC credentials: BMO replaces driver_info whole, then puts the agent's ISO back.
    seen = bmo.client.log.length;
    await bmo.reconcile('register (credentials changed)', () => bmo.register(base, { credentialsChanged: true }));
    expect(bmo.client.log.slice(seen).filter((l) => l.startsWith('PATCH '))).to.have.length(2);
    const rotated = await bmo.getNode();
    expect(rotated.driver_info).to.include({ deploy_iso: g.images.isoUrl, redfish_password: '******' });
    expect(rotated.power_state).to.be.oneOf(['power on', 'power off']);
  });

  it('inspects in-band through the agent (again after BMO aborts it), then out-of-band (fast), and reads the hardware details', async () => {
    // A new preprovisioning image while the inspection waits for its agent: BMO aborts it and
    // starts again, having found "aborted" in last_error.
    await setAgentFaults(g.sim.bmcs[0].url, { noBoot: true });
    expect((await bmo.inspectHardware(base)).dirty).to.equal(true);
    await until('inspect wait', async () => (await bmo.getNode()).provision_state === 'inspect wait');
    expect((await bmo.inspectHardware(base, false, true)).started).to.equal(true);
    const aborted = await until('inspect failed', async () => {
      const n = await bmo.getNode();
      return n.provision_state === 'inspect failed' && n;
    });
    expect(aborted.last_error).to.include('aborted');
    await setAgentFaults(g.sim.bmcs[0].url, {});

    const agent = await bmo.reconcile('inspect (agent)', () => bmo.inspectHardware(base), { long: true });
    const inv = agent.inventory!.inventory as Json & { interfaces: Json[]; memory: Json; cpu: Json; disks: Json[] };
    expect(inv.interfaces.map((i) => i.mac_address)).to.include(host.bootMACAddress);
    expect(inv.memory.physical_mb).to.equal(384 * 1024);
    expect(inv.disks).to.have.length.at.least(1);

    let refresh = true;
    const fast = await bmo.reconcile('inspect (fast)', async () => {
      const r = await bmo.inspectHardware({ ...base, inspectionMode: 'fast' }, refresh);
      refresh = false;
      return r;
    }, { long: true });
    expect((await bmo.getNode()).inspect_interface).to.equal('redfish');
    const oob = fast.inventory!.inventory as Json & { interfaces: Json[]; cpu: Json };
    expect(oob.interfaces.map((i) => i.mac_address)).to.include(host.bootMACAddress);
    expect(oob.cpu.count).to.be.a('number');
  });

  it('reads the BIOS settings (with their schema) and the firmware components', async () => {
    const detailed = await bmo.firmwareSettings(true);
    const turbo = detailed.find((s) => s.name === 'ProcTurboMode')!;
    expect(turbo).to.include({ value: 'Enabled', attribute_type: 'Enumeration', read_only: false });
    expect(detailed.find((s) => s.name === 'ProcCoreDisable')).to.include({ value: '0', lower_bound: 0, upper_bound: 32 });
    expect(await biosOf(bmo)).to.include({ ProcTurboMode: 'Enabled', SriovGlobalEnable: 'False' });
    expect(await versionsOf(bmo)).to.deep.equal({ bios: '1.0.0', bmc: '1.0.0-sim' });
  });

  it('prepares the host: RAID, BIOS settings and firmware in one manual cleaning', async () => {
    const data: HostData = {
      ...base,
      raidVolumes: [{ sizeGibibytes: 100, level: '1', name: 'root' }],
      biosSettings: { ProcTurboMode: 'Disabled', ProcCoreDisable: 2 },
      firmwareUpdates: [{ component: 'bios', url: `${fw.url}/fw/bios-2.0.0.bin` }, { component: 'bmc', url: `${fw.url}/fw/bmc-2.0.0.bin` }],
    };
    const actual = await biosOf(bmo);
    await untilStarted(bmo, 'prepare', (unprepared) => bmo.prepare(data, actual, unprepared));
    const node = await bmo.getNode();
    expect(node.provision_state, node.last_error ?? '').to.equal('manageable');
    expect((node.raid_config as { logical_disks: Json[] }).logical_disks.map((d) => [d.raid_level, d.size_gb, d.name])).to.deep.equal([['1', 100, 'root']]);
    const volumes = Object.values(((await (await fetch(`${g.sim.bmcs[0].url}/_sim/storage`)).json()) as { volumes: Record<string, Json[]> }).volumes).flat();
    expect(volumes.map((v) => [v.raidType, v.capacityBytes])).to.deep.equal([['RAID1', 100 * GIB]]);
    expect(await biosOf(bmo)).to.include({ ProcTurboMode: 'Disabled', ProcCoreDisable: '2' });
    expect(await versionsOf(bmo)).to.deep.equal({ bios: '2.0.0', bmc: '2.0.0-sim' });
  });

  const imageData = (): HostData => ({
    ...base,
    image: { url: g.images.image.url, checksum: g.images.image.sha256, checksumType: 'sha256', diskFormat: 'raw' },
    userData: '#cloud-config\nhostname: worker-0\n',
    networkData: { links: [{ id: 'eth0', type: 'phy', ethernet_mac_address: host.bootMACAddress }], networks: [], services: [] },
  });

  it('provides the host and deploys an image with a config drive', async () => {
    await bmo.reconcile('provision', () => bmo.provision(imageData()), { long: true });
    const node = await bmo.getNode();
    expect(node).to.include({ provision_state: 'active', instance_uuid: host.uid, deploy_interface: 'direct', power_state: 'power on' });
    expect(node.instance_info).to.include({ image_source: g.images.image.url, image_os_hash_algo: 'sha256' });
    const w = await agentWitness(g.sim.bmcs[0].url);
    expect(w.disk?.sha256).to.equal(g.images.image.sha256);
    expect(w.received['clean.execute_clean_step/erase_devices_metadata'], 'automated cleaning at provide').to.be.at.least(1);
    expect(w.instance?.running).to.equal(true);
  });

  it('power cycles the host: soft off, on, hard off, on', async () => {
    const before = (await simEvents(g.sim.bmcs[0].url)).length;
    await bmo.reconcile('soft power off', () => bmo.powerOff(true));
    await bmo.reconcile('power on', () => bmo.powerOn());
    await bmo.reconcile('power off', () => bmo.powerOff(false));
    await bmo.reconcile('power on', () => bmo.powerOn());
    const resets = story((await simEvents(g.sim.bmcs[0].url)).slice(before)).filter((s) => s.startsWith('reset '));
    expect(resets).to.deep.equal(['reset GracefulShutdown', 'reset On', 'reset ForceOff', 'reset On']);
    expect((await bmo.getNode()).power_state).to.equal('power on');
  });

  it('subscribes to the BMC\'s events and attaches a data image, as BMO\'s other controllers do', async () => {
    const id = await bmo.addSubscription('http://events.example/metal3', 'worker-0', [{ Authorization: 'Bearer sesame' }]);
    expect(id).to.be.a('string').and.not.equal('');
    const subs = await redfish<{ Members: unknown[] }>(0, '/redfish/v1/EventService/Subscriptions');
    expect(subs.Members).to.have.length(1);
    await bmo.removeSubscription(id);
    expect((await redfish<{ Members: unknown[] }>(0, '/redfish/v1/EventService/Subscriptions')).Members).to.have.length(0);

    const attached = async () => bmo.reconcile('data image status', async () => {
      const s = await bmo.dataImageAttached();
      return s === 'busy' ? { dirty: true } : { dirty: false, attached: s };
    });
    await bmo.attachDataImage(`${g.images.url}/data.iso`);
    expect((await attached()).attached).to.equal(true);
    await bmo.detachDataImage();
    expect((await attached()).attached).to.equal(false);
  });

  it('services the active host: a BIOS setting and a firmware update', async () => {
    const data: HostData = { ...imageData(), biosSettings: { ProcTurboMode: 'Enabled' }, firmwareUpdates: [{ component: 'bios', url: `${fw.url}/fw/bios-3.0.0.bin` }] };
    const actual = await biosOf(bmo);
    await untilStarted(bmo, 'service', (unprepared) => bmo.service(data, actual, unprepared));
    const node = await bmo.getNode();
    expect(node.provision_state, node.last_error ?? '').to.equal('active');
    expect(await biosOf(bmo)).to.include({ ProcTurboMode: 'Enabled' });
    expect((await versionsOf(bmo)).bios).to.equal('3.0.0');
  });

  it('deprovisions the host (automated cleaning)', async () => {
    await bmo.reconcile('deprovision', () => bmo.deprovision(true), { long: true });
    const node = await bmo.getNode();
    expect(node).to.include({ provision_state: 'available', instance_uuid: null });
    expect(node.instance_info).to.deep.equal({});
  });

  it('boots a live ISO (the ramdisk deploy), then deprovisions it', async () => {
    const iso = `${g.images.url}/live/fcos-live.iso`;
    const data: HostData = { ...base, image: { url: iso, diskFormat: 'live-iso', liveIso: true } };
    await bmo.reconcile('provision (live ISO)', () => bmo.provision(data), { long: true });
    const node = await bmo.getNode();
    expect(node).to.include({ provision_state: 'active', deploy_interface: 'ramdisk', power_state: 'power on' });
    expect(node.instance_info).to.include({ boot_iso: iso });
    // BMO sends an empty config drive ({}) with a live ISO, which Ironic takes as none.
    expect(node.instance_info).to.not.have.property('configdrive');
    const state = await simState(g.sim.bmcs[0].url);
    expect(Object.values(state.media).map((m) => m.image)).to.include(iso);
    await bmo.reconcile('deprovision (live ISO)', () => bmo.deprovision(true), { long: true });
    expect((await bmo.getNode()).provision_state).to.equal('available');
  });

  it('undoes a deploy waiting for its agent when a new preprovisioning image comes (forced reboot)', async () => {
    await setAgentFaults(g.sim.bmcs[0].url, { noBoot: true });
    await bmo.reconcile('provision until wait call-back', async () => {
      await bmo.provision(imageData());
      return { dirty: (await bmo.getNode()).provision_state !== 'wait call-back' };
    });
    await setAgentFaults(g.sim.bmcs[0].url, {});
    expect((await bmo.provision(imageData(), true)).dirty).to.equal(true);
    await bmo.reconcile('deprovision (forced reboot)', () => bmo.deprovision(true), { long: true });
    const node = await bmo.getNode();
    expect(node).to.include({ provision_state: 'available', instance_uuid: null, last_error: null });
  });

  it('deploys with a custom deploy step (OpenShift\'s install_coreos), its Ignition in the config drive', async () => {
    const ignition = JSON.stringify({ ignition: { version: '3.2.0' } });
    const data: HostData = { ...base, customDeploy: 'install_coreos', userData: ignition };
    await bmo.reconcile('provision (custom deploy)', () => bmo.provision(data), { long: true });
    const node = await bmo.getNode();
    expect(node.provision_state, node.last_error ?? '').to.equal('active');
    expect(node.deploy_interface).to.equal('custom-agent');
    const w = await agentWitness(g.sim.bmcs[0].url);
    expect(w.received['deploy.execute_deploy_step/install_coreos']).to.equal(1);
    expect(w.disk).to.include({ imageUrl: 'coreos-installer:offline', ignition });
  });

  it('deprovisions and deletes the host', async () => {
    await bmo.reconcile('deprovision (custom deploy)', () => bmo.deprovision(true), { long: true });
    await bmo.reconcile('delete', () => bmo.delete());
    const gone = await bmo.client.request({ method: 'GET', path: `nodes/${bmo.nodeId}` });
    expect(gone.status).to.equal(404);
    const ports = (await bmo.client.expectOk<{ ports: Json[] }>({ method: 'GET', path: `ports?address=${encodeURIComponent(host.bootMACAddress!)}` })).ports;
    expect(ports).to.deep.equal([]);
  });

  it('adopts an externally provisioned host, then deletes it without deprovisioning', async () => {
    const ext = await identity(1, 'control-plane-0');
    const adopter = new BmoHost(g.galvanic.url, ext, config());
    await adopter.discover();
    await resetHost(g.sim.bmcs[1].url, 'On');
    await adopter.reconcile('register', () => adopter.register(base));
    await adopter.reconcile('adopt', () => adopter.adopt(false));
    const node = await adopter.getNode();
    expect(node).to.include({ provision_state: 'active', power_state: 'power on' });
    const before = (await simEvents(g.sim.bmcs[1].url)).length;
    await adopter.reconcile('delete', () => adopter.delete());
    expect((await adopter.client.request({ method: 'GET', path: `nodes/${adopter.nodeId}` })).status).to.equal(404);
    expect(story((await simEvents(g.sim.bmcs[1].url)).slice(before)).filter((s) => s.startsWith('reset')), 'the host keeps running').to.deep.equal([]);
  });
});
