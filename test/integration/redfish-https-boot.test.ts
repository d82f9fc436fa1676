/**
 * The `redfish-https` boot interface (UEFI HTTP boot: `UefiHttp` with `HttpBootUri`, no virtual
 * media) against the simulator: what the simulated firmware boots for the override, the
 * interface against the synthetic BMC and the recorded mockups, and a node of the kind BMO
 * registers for `redfish-uefihttp://` inspected, cleaned and deployed through its agents.
 */
import { expect } from 'chai';
import path from 'node:path';
import { InvalidParameterValue, UnsupportedHardwareFeature } from '../../common/errors.js';
import { startRedfishSim, type RedfishSim } from '../../sim/redfish/index.js';
import { AGENT_TEST_ENV, directNodeBody, galvanicAndSim, watchStates } from '../helpers/agent-deploy.js';
import { MOCKUPS } from '../helpers/mockups.js';
import { clearSimEvents, createNode, nodePorts, provision, provisionAndSettle, settled, simEvents } from '../helpers/provisioning.js';
import { until } from '../helpers/until.js';
import { ctxFor, rejection, simWithDriver } from '../helpers/redfish.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const AUTH = { authorization: `Basic ${Buffer.from('admin:password').toString('base64')}`, 'content-type': 'application/json' };
const SYSTEM = '/redfish/v1/Systems/System.Embedded.1';
const ISO = 'http://images.example.test/live.iso';

async function redfish(url: string, method: string, p: string, body?: object): Promise<Response> {
  return fetch(`${url}${p}`, { method, headers: AUTH, body: body ? JSON.stringify(body) : undefined });
}

async function bootOf(url: string, p = SYSTEM): Promise<Json> {
  return ((await (await redfish(url, 'GET', p)).json()) as Json).Boot as Json;
}

function boots(events: Json[]): Array<[string, string | null]> {
  return events.filter((e) => e.type === 'boot-started').map((e) => [String(e.device), (e.image as string | undefined) ?? null]);
}

describe('the simulated firmware\'s UEFI HTTP boot', function () {
  this.timeout(20_000);
  let sim: RedfishSim;
  before(async () => {
    sim = await startRedfishSim({ count: 1 });
  });
  after(() => sim.stop());

  it('boots HttpBootUri once in UEFI mode; the disk without a URI or in Legacy mode', async () => {
    const url = sim.bmcs[0].url;
    expect((await bootOf(url)).HttpBootUri).to.equal(null);
    await clearSimEvents(url);
    const restart = () => redfish(url, 'POST', `${SYSTEM}/Actions/ComputerSystem.Reset`, { ResetType: 'ForceRestart' });
    expect((await redfish(url, 'PATCH', SYSTEM, { Boot: { BootSourceOverrideTarget: 'UefiHttp', BootSourceOverrideEnabled: 'Once', HttpBootUri: ISO } })).status).to.equal(204);
    expect(await bootOf(url)).to.include({ BootSourceOverrideTarget: 'UefiHttp', HttpBootUri: ISO });
    await restart();
    await restart();
    expect((await redfish(url, 'PATCH', SYSTEM, { Boot: { BootSourceOverrideTarget: 'UefiHttp', BootSourceOverrideEnabled: 'Once', HttpBootUri: null } })).status).to.equal(204);
    await restart();
    expect((await redfish(url, 'PATCH', SYSTEM, { Boot: { BootSourceOverrideTarget: 'UefiHttp', BootSourceOverrideEnabled: 'Once', BootSourceOverrideMode: 'Legacy', HttpBootUri: ISO } })).status).to.equal(204);
    await restart();
    expect(boots(await simEvents(url))).to.deep.equal([['UefiHttp', ISO], ['Hdd', null], ['Hdd', null], ['Hdd', null]]);
  });

  it('refuses an HttpBootUri that is no URL, or not a string', async () => {
    const url = sim.bmcs[0].url;
    for (const bad of ['not a url', 42]) {
      const res = await redfish(url, 'PATCH', SYSTEM, { Boot: { BootSourceOverrideTarget: 'UefiHttp', HttpBootUri: bad } });
      expect(res.status, String(bad)).to.equal(400);
    }
  });
});

describe('redfish-https boot interface against the simulator', () => {
  const f = simWithDriver({ count: 1 });

  it('prepareRamdisk boots the agent ISO once over HTTP; cleanUpRamdisk clears the override', async () => {
    const ctx = ctxFor(f.url, { deploy_iso: ISO });
    await f.driver.httpsBoot.prepareRamdisk(ctx, { bootMode: 'uefi' });
    expect(await bootOf(f.url)).to.include({ BootSourceOverrideTarget: 'UefiHttp', BootSourceOverrideEnabled: 'Once', HttpBootUri: ISO });
    await f.driver.httpsBoot.cleanUpRamdisk(ctx);
    expect(await bootOf(f.url)).to.include({ BootSourceOverrideTarget: 'None', BootSourceOverrideEnabled: 'Disabled', HttpBootUri: null });
  });

  it('prepareInstance boots the ramdisk deploy\'s ISO at every boot, syncing the boot mode', async () => {
    const ctx = ctxFor(f.url);
    await f.driver.httpsBoot.prepareInstance(ctx, { bootIso: ISO, bootMode: 'uefi' });
    expect(await bootOf(f.url)).to.include({ BootSourceOverrideTarget: 'UefiHttp', BootSourceOverrideEnabled: 'Continuous', HttpBootUri: ISO, BootSourceOverrideMode: 'UEFI' });
    const err = await rejection(f.driver.httpsBoot.prepareInstance(ctx, { bootIso: 'nfs://server/live.iso' }));
    expect(err).to.be.instanceOf(InvalidParameterValue);
    await f.driver.httpsBoot.cleanUpInstance(ctx);
    expect(await bootOf(f.url)).to.include({ BootSourceOverrideEnabled: 'Disabled' });
  });

  it('leaves an override it did not set alone', async () => {
    const ctx = ctxFor(f.url);
    await f.driver.management.setBootDevice(ctx, 'pxe', true);
    await f.driver.httpsBoot.cleanUpInstance(ctx);
    expect(await bootOf(f.url)).to.include({ BootSourceOverrideTarget: 'Pxe', BootSourceOverrideEnabled: 'Continuous' });
  });
});

describe('redfish-https boot interface against the recorded mockups', () => {
  for (const [tree, offers] of [['hpe-dl325-gen10plus-ilo5', true], ['dmtf-public-rackmount1', false], ['openbmc-bmcweb', false]] as const) {
    describe(tree, () => {
      const f = simWithDriver({ count: 1, mockup: path.join(MOCKUPS, tree) });
      it(offers ? 'sets UefiHttp with the URI' : 'refuses a BMC that does not offer UefiHttp (Ironic\'s UnsupportedHardwareFeature)', async function () {
        const ctx = ctxFor(f.url, { deploy_iso: ISO });
        if (!offers) {
          const err = await rejection(f.driver.httpsBoot.prepareRamdisk(ctx, {}));
          expect(err).to.be.instanceOf(UnsupportedHardwareFeature);
          expect(err.message).to.equal(`Node ${ctx.nodeUuid} hardware does not support feature UefiHttp boot, which is required based upon the requested configuration.`);
          return;
        }
        await f.driver.httpsBoot.prepareRamdisk(ctx, {});
        const systems = (await (await redfish(f.url, 'GET', '/redfish/v1/Systems')).json()) as Json;
        const boot = await bootOf(f.url, systems.Members[0]['@odata.id'] as string);
        expect(boot).to.include({ BootSourceOverrideTarget: 'UefiHttp', BootSourceOverrideEnabled: 'Once', HttpBootUri: ISO });
      });
    });
  }
});

describe('redfish-https: the node BMO registers for redfish-uefihttp:// (real processes)', function () {
  this.timeout(120_000);
  const g = galvanicAndSim({
    images: true,
    env: {
      ...AGENT_TEST_ENV, GALVANIC_CONDUCTOR__AUTOMATED_CLEAN: 'true',
      GALVANIC_DEFAULT__ENABLED_BOOT_INTERFACES: 'fake,redfish-virtual-media,redfish-https',
      GALVANIC_DEFAULT__ENABLED_INSPECT_INTERFACES: 'no-inspect,agent,redfish',
    },
    sim: (apiUrl) => ({ count: 2, vmediaCheckImage: 'boot', bootMs: [100, 200], agent: { apiUrl, bootSeconds: [0.2, 0.4], heartbeatMinGapMs: 200, lookupRetryMs: 300 } }),
    cleanExit: false,
  });
  const { api } = g;

  it('inspects, cleans and deploys with the agent booted over UEFI HTTP, no virtual media', async () => {
    const url = g.sim.bmcs[0].url;
    const node = await createNode(api, directNodeBody('uefihttp-0', url, g.images, {
      boot_interface: 'redfish-https', inspect_interface: 'agent', properties: { capabilities: 'boot_mode:uefi' },
    }));
    expect(node.boot_interface).to.equal('redfish-https');
    expect((await provisionAndSettle(api, node.uuid, 'manage')).provision_state).to.equal('manageable');
    await clearSimEvents(url);
    const inspected = await provisionAndSettle(api, node.uuid, 'inspect', {}, 60_000);
    expect(inspected.provision_state, inspected.last_error ?? '').to.equal('manageable');
    expect(await nodePorts(api, node.uuid)).to.have.length(2);

    await provision(api, node.uuid, 'provide');
    const provided = await watchStates(api, node.uuid, 60_000);
    expect(provided.node.provision_state, provided.node.last_error ?? '').to.equal('available');
    await provision(api, node.uuid, 'active');
    const deployed = await watchStates(api, node.uuid, 60_000);
    expect(deployed.node.provision_state, deployed.node.last_error ?? '').to.equal('active');

    const events = await simEvents(url);
    expect(events.filter((e) => e.type === 'insert'), 'nothing inserted').to.deep.equal([]);
    const seen = boots(events);
    expect(seen.filter(([d]) => d === 'UefiHttp')).to.have.length(3);
    expect(seen.filter(([d]) => d === 'UefiHttp').every(([, image]) => image === g.images.isoUrl)).to.equal(true);
    expect(seen.at(-1)).to.deep.equal(['Hdd', null]);
  });

  it('fails the inspection with the firmware\'s failure when the agent ISO is not there', async () => {
    const url = g.sim.bmcs[1].url;
    const node = await createNode(api, directNodeBody('uefihttp-1', url, g.images, {
      boot_interface: 'redfish-https', inspect_interface: 'agent', properties: { capabilities: 'boot_mode:uefi' },
      driver_info: { redfish_address: url, redfish_username: 'admin', redfish_password: 'password', deploy_iso: `${g.images.url}/missing.iso` },
    }));
    expect((await provisionAndSettle(api, node.uuid, 'manage')).provision_state).to.equal('manageable');
    await clearSimEvents(url);
    await provision(api, node.uuid, 'inspect');
    const failed = await until('the HTTP boot of the missing ISO to fail', async () => (await simEvents(url)).find((e) => e.type === 'boot-failed'), 20_000);
    expect(failed).to.include({ device: 'UefiHttp', image: `${g.images.url}/missing.iso` });
    expect(String(failed.error)).to.include('404');
    await provision(api, node.uuid, 'abort');
    expect((await settled(api, node.uuid)).provision_state).to.equal('inspect failed');
  });
});
