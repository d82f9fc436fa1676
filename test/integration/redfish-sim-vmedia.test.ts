/**
 * The Redfish simulator's provisioning side, over real HTTP: the inventory out-of-band
 * inspection reads, virtual media, boot semantics and the event log, the vendor quirk
 * profiles, and the same on the recorded mockup trees.
 */
import { expect } from 'chai';
import http from 'node:http';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { startRedfishSim, type RedfishSim } from '../../sim/redfish/index.js';
import { simEvents, story } from '../helpers/provisioning.js';
import { setFaults, simControl } from '../helpers/redfish.js';
import { MOCKUPS } from '../helpers/mockups.js';

const BASIC = { authorization: `Basic ${Buffer.from('admin:password').toString('base64')}` };
const SYSTEM = '/redfish/v1/Systems/System.Embedded.1';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

interface Answer {
  status: number;
  headers: Headers;
  body: Json;
}

async function call(url: string, method: string, body?: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  const init: RequestInit = { method, headers: { ...BASIC, ...headers } };
  if (body !== undefined) {
    init.body = typeof body === 'string' ? body : JSON.stringify(body);
    (init.headers as Record<string, string>)['content-type'] = 'application/json';
  }
  const res = await fetch(url, init);
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? (JSON.parse(text) as Json) : {} };
}

const get = (url: string) => call(url, 'GET');
const post = (url: string, body?: unknown) => call(url, 'POST', body);
const CD = '/redfish/v1/Managers/BMC/VirtualMedia/Cd';
const ISO = 'http://images.example/deploy/live.iso';

async function simState(url: string): Promise<Json> {
  return (await (await fetch(`${url}/_sim/state`)).json()) as Json;
}

/** The BMC's events as short strings ("insert live.iso", "reset On", …). */
async function storyOf(url: string): Promise<string[]> {
  return story(await simEvents(url));
}

async function fresh(url: string): Promise<void> {
  await setFaults(url, { bootMs: [0, 0], powerDelayMs: 0, insertMediaStatus: 0, powerLost: false, requireIfMatch: false });
  await simControl(url, 'state', { initial: true });
  await simControl(url, 'reset');
}

describe('Redfish simulator: provisioning', function () {
  this.timeout(60_000);

  describe('inventory of the synthetic BMC', () => {
    let sim: RedfishSim;
    before(async () => {
      sim = await startRedfishSim({ count: 3 });
    });
    after(() => sim.stop());

    it('serves memory, processors, NICs, storage, boot mode and identity as inspection reads them', async () => {
      const url = sim.bmcs[1].url;
      const sys = (await get(`${url}${SYSTEM}`)).body;
      expect(sys.MemorySummary.TotalSystemMemoryGiB).to.equal(384);
      expect(sys).to.include({ Manufacturer: 'Galvanic', SerialNumber: 'SIM000001' });
      expect(sys.UUID).to.match(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-8[0-9a-f]{3}-0{11}1$/);
      expect(sys.Boot.BootSourceOverrideMode).to.equal('UEFI');
      expect(sys.Boot['BootSourceOverrideTarget@Redfish.AllowableValues']).to.include.members(['Cd', 'Hdd', 'Pxe', 'None']);
      expect(sys.Links.ManagedBy).to.deep.equal([{ '@odata.id': '/redfish/v1/Managers/BMC' }]);

      const cpus = (await get(`${url}${sys.Processors['@odata.id']}`)).body;
      expect(cpus.Members).to.have.length(2);
      const cpu = (await get(`${url}${cpus.Members[0]['@odata.id']}`)).body;
      expect(cpu).to.include({ InstructionSet: 'x86-64', ProcessorArchitecture: 'x86', TotalThreads: 48, TotalCores: 24, MaxSpeedMHz: 3400 });
      expect(cpu.Model).to.match(/Xeon/);

      const nics = (await get(`${url}${sys.EthernetInterfaces['@odata.id']}`)).body;
      expect(nics.Members).to.have.length(2);
      const nic = (await get(`${url}${nics.Members[0]['@odata.id']}`)).body;
      expect(nic).to.deep.include({ SpeedMbps: 25000, Status: { State: 'Enabled', Health: 'OK' } });
      expect(nic.MACAddress).to.match(/^([0-9a-f]{2}:){5}[0-9a-f]{2}$/);

      const storage = (await get(`${url}${sys.Storage['@odata.id']}`)).body;
      const ctl = (await get(`${url}${storage.Members[0]['@odata.id']}`)).body;
      const drive = (await get(`${url}${ctl.Drives[0]['@odata.id']}`)).body;
      expect(drive.CapacityBytes).to.equal(960197124096);
      const volumes = (await get(`${url}${ctl.Volumes['@odata.id']}`)).body;
      expect((await get(`${url}${volumes.Members[0]['@odata.id']}`)).body.CapacityBytes).to.equal(960197124096);
      const simple = (await get(`${url}${sys.SimpleStorage['@odata.id']}/1`)).body;
      expect(simple.Devices[0].CapacityBytes).to.equal(960197124096);
    });

    it('gives every NIC of the fleet its own MAC, the same on every run, and other MACs to another fleet id', async () => {
      const macs = async (s: RedfishSim) => {
        const out: string[] = [];
        for (const b of s.bmcs) {
          const coll = (await get(`${b.url}${SYSTEM}/EthernetInterfaces`)).body;
          for (const m of coll.Members as Json[]) out.push((await get(`${b.url}${m['@odata.id']}`)).body.MACAddress as string);
        }
        return out;
      };
      const first = await macs(sim);
      expect(new Set(first).size).to.equal(6);
      const again = await startRedfishSim({ count: 3 });
      const other = await startRedfishSim({ count: 3, fleetId: 7 });
      try {
        expect(await macs(again)).to.deep.equal(first);
        const others = await macs(other);
        expect(others.filter((m) => first.includes(m))).to.deep.equal([]);
      } finally {
        await again.stop();
        await other.stop();
      }
    });
  });

  describe('virtual media and boot on the synthetic BMC', () => {
    let sim: RedfishSim;
    let url: string;
    before(async () => {
      sim = await startRedfishSim({ count: 2 });
      url = sim.bmcs[0].url;
    });
    after(() => sim.stop());
    beforeEach(() => fresh(url));

    it('lists a CD and a USB slot under the manager, in the shape sushy reads', async () => {
      const mgr = (await get(`${url}/redfish/v1/Managers/BMC`)).body;
      const coll = (await get(`${url}${mgr.VirtualMedia['@odata.id']}`)).body;
      expect(coll.Members.map((m: Json) => m['@odata.id'])).to.deep.equal([CD, '/redfish/v1/Managers/BMC/VirtualMedia/USB']);
      const cd = await get(`${url}${CD}`);
      expect(cd.headers.get('etag')).to.match(/^W\/"/);
      expect(cd.body).to.include({ Id: 'Cd', Image: '', Inserted: false, WriteProtected: true, ConnectedVia: 'NotConnected', TransferProtocolType: null });
      expect(cd.body.MediaTypes).to.deep.equal(['CD', 'DVD']);
      expect(cd.body.Actions['#VirtualMedia.InsertMedia'].target).to.equal(`${CD}/Actions/VirtualMedia.InsertMedia`);
      expect(cd.body.Actions['#VirtualMedia.EjectMedia'].target).to.equal(`${CD}/Actions/VirtualMedia.EjectMedia`);
      expect(cd.body.Actions['#VirtualMedia.InsertMedia']['TransferProtocolType@Redfish.AllowableValues']).to.include('HTTPS');
      const usb = (await get(`${url}/redfish/v1/Managers/BMC/VirtualMedia/USB`)).body;
      expect(usb.MediaTypes).to.deep.equal(['USBStick']);
    });

    it('inserts with InsertMedia, refuses a second insert, and ejects with or without a body', async () => {
      const before = (await get(`${url}${CD}`)).headers.get('etag');
      expect((await post(`${url}${CD}/Actions/VirtualMedia.InsertMedia`, { Image: ISO })).status).to.equal(204);
      const cd = await get(`${url}${CD}`);
      expect(cd.body).to.include({ Image: ISO, ImageName: 'live.iso', Inserted: true, WriteProtected: true, ConnectedVia: 'URI', TransferProtocolType: 'HTTP' });
      expect(cd.headers.get('etag')).to.not.equal(before);
      const again = await post(`${url}${CD}/Actions/VirtualMedia.InsertMedia`, { Image: ISO });
      expect(again.status).to.equal(400);
      expect(again.body.error['@Message.ExtendedInfo'][0].MessageId).to.match(/ResourceInUse$/);
      expect((await post(`${url}${CD}/Actions/VirtualMedia.InsertMedia`, {})).status).to.equal(400);
      expect((await post(`${url}${CD}/Actions/VirtualMedia.EjectMedia`)).status).to.equal(204);
      expect((await get(`${url}${CD}`)).body).to.include({ Image: '', Inserted: false });
      expect((await post(`${url}${CD}/Actions/VirtualMedia.EjectMedia`, {})).status).to.equal(204);
      expect(await storyOf(url)).to.deep.equal(['insert live.iso', 'refused InsertMedia 400', 'refused InsertMedia 400', 'eject live.iso']);
    });

    it('inserts and ejects by PATCH, honouring If-Match', async () => {
      const etag = (await get(`${url}${CD}`)).headers.get('etag') ?? '';
      const patch = (body: object, h: Record<string, string>) => call(`${url}${CD}`, 'PATCH', body, h);
      expect((await patch({ Image: ISO, Inserted: true, WriteProtected: true }, { 'if-match': 'W/"00000000"' })).status).to.equal(412);
      expect((await patch({ Image: ISO, Inserted: true, WriteProtected: true }, { 'if-match': etag })).status).to.equal(204);
      expect((await get(`${url}${CD}`)).body).to.include({ Image: ISO, Inserted: true });
      expect((await patch({ Image: null, Inserted: false }, { 'if-match': etag })).status).to.equal(412);
      const now = (await get(`${url}${CD}`)).headers.get('etag') ?? '';
      expect((await patch({ Image: null, Inserted: false }, { 'if-match': now })).status).to.equal(204);
      expect((await get(`${url}${CD}`)).body).to.include({ Image: '', Inserted: false });
    });

    it('boots the inserted ISO on a Continuous Cd override, again after a restart, and logs it in order', async () => {
      const sysUrl = `${url}${SYSTEM}`;
      await post(`${sysUrl}/Actions/ComputerSystem.Reset`, { ResetType: 'ForceOff' });
      await post(`${url}${CD}/Actions/VirtualMedia.InsertMedia`, { Image: ISO });
      expect((await call(sysUrl, 'PATCH', { Boot: { BootSourceOverrideTarget: 'Cd', BootSourceOverrideEnabled: 'Continuous' } })).status).to.equal(204);
      await post(`${sysUrl}/Actions/ComputerSystem.Reset`, { ResetType: 'On' });
      let st = (await simState(url)).systems[SYSTEM.toLowerCase()];
      expect(st.running).to.include({ device: 'Cd', image: ISO, slot: CD, phase: 'up' });
      await post(`${sysUrl}/Actions/ComputerSystem.Reset`, { ResetType: 'ForceRestart' });
      st = (await simState(url)).systems[SYSTEM.toLowerCase()];
      expect(st.running).to.include({ device: 'Cd', image: ISO });
      expect((await get(sysUrl)).body.Boot).to.include({ BootSourceOverrideTarget: 'Cd', BootSourceOverrideEnabled: 'Continuous' });
      expect(await storyOf(url)).to.deep.equal([
        'reset ForceOff',
        'insert live.iso',
        'boot-override Cd/Continuous',
        'reset On',
        'boot-started Cd live.iso',
        'boot-finished Cd live.iso',
        'reset ForceRestart',
        'boot-started Cd live.iso',
        'boot-finished Cd live.iso',
      ]);
    });

    it('consumes a Once override at boot and then boots the disk; an override with no media falls through to the disk', async () => {
      const sysUrl = `${url}${SYSTEM}`;
      await post(`${url}${CD}/Actions/VirtualMedia.InsertMedia`, { Image: ISO });
      await call(sysUrl, 'PATCH', { Boot: { BootSourceOverrideTarget: 'Cd', BootSourceOverrideEnabled: 'Once' } });
      await post(`${sysUrl}/Actions/ComputerSystem.Reset`, { ResetType: 'ForceRestart' });
      expect((await get(sysUrl)).body.Boot).to.include({ BootSourceOverrideTarget: 'None', BootSourceOverrideEnabled: 'Disabled' });
      expect((await simState(url)).systems[SYSTEM.toLowerCase()].running).to.include({ device: 'Cd', image: ISO });
      await post(`${sysUrl}/Actions/ComputerSystem.Reset`, { ResetType: 'ForceRestart' });
      expect((await simState(url)).systems[SYSTEM.toLowerCase()].running).to.include({ device: 'Hdd', image: null });
      await post(`${url}${CD}/Actions/VirtualMedia.EjectMedia`);
      await call(sysUrl, 'PATCH', { Boot: { BootSourceOverrideTarget: 'Cd', BootSourceOverrideEnabled: 'Continuous' } });
      await post(`${sysUrl}/Actions/ComputerSystem.Reset`, { ResetType: 'ForceRestart' });
      expect((await simState(url)).systems[SYSTEM.toLowerCase()].running).to.include({ device: 'Hdd', requested: 'Cd' });
      const s = await storyOf(url);
      expect(s.slice(0, 5)).to.deep.equal(['insert live.iso', 'boot-override Cd/Once', 'reset ForceRestart', 'boot-override None/Disabled (consumed)', 'boot-started Cd live.iso']);
    });

    it('stays PoweringOn for the boot time, counts it in the chain, and an off ends it', async () => {
      const sysUrl = `${url}${SYSTEM}`;
      await post(`${sysUrl}/Actions/ComputerSystem.Reset`, { ResetType: 'ForceOff' });
      await setFaults(url, { bootMs: [400, 400] });
      await fetch(`${url}/_sim/chains`, { method: 'POST' });
      await post(`${sysUrl}/Actions/ComputerSystem.Reset`, { ResetType: 'On' });
      expect((await get(sysUrl)).body.PowerState).to.equal('PoweringOn');
      expect((await simState(url)).systems[SYSTEM.toLowerCase()].running).to.include({ device: 'Hdd', phase: 'booting' });
      // A second On while booting does not start another boot.
      expect((await post(`${sysUrl}/Actions/ComputerSystem.Reset`, { ResetType: 'On' })).status).to.equal(204);
      await sleep(550);
      expect((await get(sysUrl)).body.PowerState).to.equal('On');
      const chains = (await (await fetch(`${url}/_sim/chains`)).json()) as { longest: Array<[number, number, number]> };
      expect(chains.longest[0][0]).to.equal(0);
      expect(chains.longest[0][1]).to.equal(400);
      expect((await storyOf(url)).filter((e) => e.startsWith('boot-'))).to.deep.equal(['boot-started Hdd', 'boot-finished Hdd']);

      await simControl(url, 'reset');
      await post(`${sysUrl}/Actions/ComputerSystem.Reset`, { ResetType: 'ForceRestart' });
      await sleep(100);
      await post(`${sysUrl}/Actions/ComputerSystem.Reset`, { ResetType: 'ForceOff' });
      expect((await get(sysUrl)).body.PowerState).to.equal('Off');
      expect((await simState(url)).systems[SYSTEM.toLowerCase()].running).to.equal(null);
      expect(await storyOf(url)).to.deep.equal(['reset ForceRestart', 'boot-started Hdd', 'reset ForceOff']);
    });

    it('counts a boot in the chain only where no request already covers it (polls during the boot overlap it)', async () => {
      const sysUrl = `${url}${SYSTEM}`;
      await post(`${sysUrl}/Actions/ComputerSystem.Reset`, { ResetType: 'ForceOff' });
      await setFaults(url, { bootMs: [400, 400], latencyMs: [100, 100] });
      try {
        await fetch(`${url}/_sim/chains`, { method: 'POST' });
        await post(`${sysUrl}/Actions/ComputerSystem.Reset`, { ResetType: 'On' });
        // Three polls one after another, all made while the host boots: 300 ms of the 400 ms boot.
        for (let i = 0; i < 3; i++) expect((await get(sysUrl)).body.PowerState).to.equal('PoweringOn');
        await sleep(300);
        const chains = (await (await fetch(`${url}/_sim/chains`)).json()) as { longest: Array<[number, number, number]> };
        // 100 (the reset) + 300 (the polls) + the 100 ms of the boot no poll covered; not 100 + 300 + 400.
        expect(chains.longest[0][1]).to.equal(500);
        expect(chains.longest[0][2]).to.equal(4);
      } finally {
        await setFaults(url, { latencyMs: [0, 0], bootMs: [0, 0] });
      }
    });

    it('refuses InsertMedia by fault, and loses power: connections drop, the host is off, the media gone', async () => {
      await setFaults(url, { insertMediaStatus: 500 });
      expect((await post(`${url}${CD}/Actions/VirtualMedia.InsertMedia`, { Image: ISO })).status).to.equal(500);
      await setFaults(url, { insertMediaStatus: 400 });
      expect((await post(`${url}${CD}/Actions/VirtualMedia.InsertMedia`, { Image: ISO })).status).to.equal(400);
      await setFaults(url, { insertMediaStatus: 0 });
      expect((await post(`${url}${CD}/Actions/VirtualMedia.InsertMedia`, { Image: ISO })).status).to.equal(204);
      await setFaults(url, { powerLost: true });
      const lost = await fetch(`${url}${SYSTEM}`, { headers: BASIC }).then(
        () => 'answered',
        () => 'dropped',
      );
      expect(lost).to.equal('dropped');
      expect((await get(`${sim.bmcs[1].url}${SYSTEM}`)).status).to.equal(200);
      await setFaults(url, { powerLost: false });
      expect((await get(`${url}${SYSTEM}`)).body.PowerState).to.equal('Off');
      expect((await get(`${url}${CD}`)).body.Inserted).to.equal(false);
      expect(await storyOf(url)).to.deep.equal(['refused InsertMedia 500', 'refused InsertMedia 400', 'insert live.iso', 'power-lost', 'power-restored']);
    });

    it('sets media from the control API and reports it with the running state', async () => {
      await simControl(url, 'state', { media: { Cd: { Image: ISO } } });
      const st = await simState(url);
      expect(st.media[CD]).to.include({ image: ISO, inserted: true });
      expect((await get(`${url}${CD}`)).body.Inserted).to.equal(true);
      expect((await fetch(`${url}/_sim/state`, { method: 'POST', body: JSON.stringify({ media: { Nope: null } }) })).status).to.equal(400);
    });
  });

  describe('image checks', () => {
    let images: http.Server;
    let base: string;
    before(async () => {
      images = http.createServer((req, res) => res.writeHead(req.url === '/there.iso' ? 200 : 404).end());
      await new Promise<void>((r) => images.listen(0, '127.0.0.1', r));
      base = `http://127.0.0.1:${(images.address() as AddressInfo).port}`;
    });
    after(() => new Promise<void>((r) => images.close(() => r())));

    it('at insert: refuses an image that answers 404', async () => {
      const sim = await startRedfishSim({ count: 1, vmediaCheckImage: 'insert' });
      try {
        const url = sim.bmcs[0].url;
        const missing = await post(`${url}${CD}/Actions/VirtualMedia.InsertMedia`, { Image: `${base}/missing.iso` });
        expect(missing.status).to.equal(400);
        expect(missing.body.error.message).to.contain('404');
        expect((await post(`${url}${CD}/Actions/VirtualMedia.InsertMedia`, { Image: `${base}/there.iso` })).status).to.equal(204);
      } finally {
        await sim.stop();
      }
    });

    it('at boot: the boot of an image that answers 404 fails', async () => {
      const sim = await startRedfishSim({ count: 1, vmediaCheckImage: 'boot', bootMs: [200, 200] });
      try {
        const url = sim.bmcs[0].url;
        expect((await post(`${url}${CD}/Actions/VirtualMedia.InsertMedia`, { Image: `${base}/missing.iso` })).status).to.equal(204);
        await call(`${url}${SYSTEM}`, 'PATCH', { Boot: { BootSourceOverrideTarget: 'Cd', BootSourceOverrideEnabled: 'Continuous' } });
        await post(`${url}${SYSTEM}/Actions/ComputerSystem.Reset`, { ResetType: 'ForceRestart' });
        await sleep(350);
        const running = (await simState(url)).systems[SYSTEM.toLowerCase()].running as Json;
        expect(running).to.include({ device: 'Cd', phase: 'failed' });
        expect(running.error).to.contain('404');
        expect((await storyOf(url)).slice(-2)).to.deep.equal(['boot-started Cd missing.iso', 'boot-failed Cd missing.iso']);
      } finally {
        await sim.stop();
      }
    });
  });

  describe('quirk profiles', () => {
    const withSim = async (quirks: string[], fn: (url: string) => Promise<void>) => {
      const sim = await startRedfishSim({ count: 1, vmediaQuirks: quirks });
      try {
        await fn(sim.bmcs[0].url);
      } finally {
        await sim.stop();
      }
    };
    const insert = (url: string, body: object, slot = CD) => post(`${url}${slot}/Actions/VirtualMedia.InsertMedia`, body);

    it('supermicro: 400 when Inserted/WriteProtected are sent, and UsbCd instead of Cd', () =>
      withSim(['supermicro'], async (url) => {
        const refused = await insert(url, { Image: ISO, Inserted: true, WriteProtected: true });
        expect(refused.status).to.equal(400);
        expect(refused.body.error['@Message.ExtendedInfo'][0].RelatedProperties).to.deep.equal(['#/Inserted', '#/WriteProtected']);
        expect((await insert(url, { Image: ISO })).status).to.equal(204);
        const targets = (await get(`${url}${SYSTEM}`)).body.Boot['BootSourceOverrideTarget@Redfish.AllowableValues'] as string[];
        expect(targets).to.include('UsbCd').and.not.include('Cd');
        expect((await call(`${url}${SYSTEM}`, 'PATCH', { Boot: { BootSourceOverrideTarget: 'Cd' } })).status).to.equal(400);
        await call(`${url}${SYSTEM}`, 'PATCH', { Boot: { BootSourceOverrideTarget: 'UsbCd', BootSourceOverrideEnabled: 'Continuous' } });
        await post(`${url}${SYSTEM}/Actions/ComputerSystem.Reset`, { ResetType: 'ForceRestart' });
        expect((await simState(url)).systems[SYSTEM.toLowerCase()].running).to.include({ device: 'UsbCd', image: ISO });
      }));

    it('ilo-eject: an EjectMedia without a body is 400, with {} it works', () =>
      withSim(['ilo-eject'], async (url) => {
        await insert(url, { Image: ISO });
        expect((await post(`${url}${CD}/Actions/VirtualMedia.EjectMedia`)).status).to.equal(400);
        expect((await post(`${url}${CD}/Actions/VirtualMedia.EjectMedia`, {})).status).to.equal(204);
        expect((await get(`${url}${CD}`)).body.Inserted).to.equal(false);
      }));

    it('needs-transfer-protocol: ActionParameterMissing on #/TransferProtocolType until it is sent', () =>
      withSim(['needs-transfer-protocol'], async (url) => {
        const refused = await insert(url, { Image: ISO });
        expect(refused.status).to.equal(400);
        const info = refused.body.error['@Message.ExtendedInfo'][0];
        expect(info.MessageId).to.match(/ActionParameterMissing$/);
        expect(info.RelatedProperties).to.deep.equal(['#/TransferProtocolType']);
        expect((await insert(url, { Image: ISO, TransferProtocolType: 'HTTP' })).status).to.equal(204);
      }));

    it('patch-only: no Actions, Allow: GET, PATCH, and PATCH with If-Match inserts and ejects', () =>
      withSim(['patch-only'], async (url) => {
        const cd = await get(`${url}${CD}`);
        expect(cd.body).to.not.have.property('Actions');
        expect(cd.headers.get('allow')).to.equal('GET, PATCH');
        // No such action: 405, as on BMCs that route the URI but have nothing there.
        expect((await insert(url, { Image: ISO })).status).to.equal(405);
        expect((await call(`${url}${CD}`, 'PATCH', { Image: ISO, Inserted: true, WriteProtected: true })).status).to.equal(428);
        const etag = cd.headers.get('etag') ?? '';
        expect((await call(`${url}${CD}`, 'PATCH', { Image: ISO, Inserted: true, WriteProtected: true }, { 'if-match': etag })).status).to.equal(204);
        const now = await get(`${url}${CD}`);
        expect(now.body).to.include({ Image: ISO, Inserted: true });
        expect((await call(`${url}${CD}`, 'PATCH', { Image: null, Inserted: false }, { 'if-match': now.headers.get('etag') ?? '' })).status).to.equal(204);
        expect((await get(`${url}${CD}`)).body.Inserted).to.equal(false);
      }));

    it('dvd-only: the CD slot offers DVD only', () =>
      withSim(['dvd-only'], async (url) => {
        expect((await get(`${url}${CD}`)).body.MediaTypes).to.deep.equal(['DVD']);
      }));

    it('vmedia-under-systems: the slots hang off the system, the manager has none', () =>
      withSim(['vmedia-under-systems'], async (url) => {
        const sys = (await get(`${url}${SYSTEM}`)).body;
        expect(sys.VirtualMedia['@odata.id']).to.equal(`${SYSTEM}/VirtualMedia`);
        expect((await get(`${url}/redfish/v1/Managers/BMC`)).body).to.not.have.property('VirtualMedia');
        expect((await get(`${url}${CD}`)).status).to.equal(404);
        const coll = (await get(`${url}${SYSTEM}/VirtualMedia`)).body;
        const first = (await get(`${url}${coll.Members[0]['@odata.id']}`)).body;
        expect(first.MediaTypes).to.include('CD');
        expect((await post(`${url}${first.Actions['#VirtualMedia.InsertMedia'].target}`, { Image: ISO })).status).to.equal(204);
      }));

    it('no-continuous: a Continuous override is 400, Once works', () =>
      withSim(['no-continuous'], async (url) => {
        expect((await call(`${url}${SYSTEM}`, 'PATCH', { Boot: { BootSourceOverrideTarget: 'Cd', BootSourceOverrideEnabled: 'Continuous' } })).status).to.equal(400);
        expect((await call(`${url}${SYSTEM}`, 'PATCH', { Boot: { BootSourceOverrideTarget: 'Cd', BootSourceOverrideEnabled: 'Once' } })).status).to.equal(204);
      }));

    it('sticky-inserted and eject-in-progress: Inserted stays true and inserts are 500 for a while after an eject', () =>
      withSim(['sticky-inserted=0.3', 'eject-in-progress=0.3'], async (url) => {
        await insert(url, { Image: ISO });
        await post(`${url}${CD}/Actions/VirtualMedia.EjectMedia`);
        expect((await get(`${url}${CD}`)).body).to.include({ Inserted: true, Image: ISO });
        expect((await insert(url, { Image: ISO })).status).to.equal(500);
        await sleep(400);
        expect((await get(`${url}${CD}`)).body.Inserted).to.equal(false);
        expect((await insert(url, { Image: ISO })).status).to.equal(204);
      }));

    it('no-eject-action: InsertMedia only, eject by PATCH', () =>
      withSim(['no-eject-action'], async (url) => {
        const cd = (await get(`${url}${CD}`)).body;
        expect(cd.Actions).to.have.keys(['#VirtualMedia.InsertMedia']);
        await insert(url, { Image: ISO });
        expect((await post(`${url}${CD}/Actions/VirtualMedia.EjectMedia`, {})).status).to.equal(405);
        expect((await call(`${url}${CD}`, 'PATCH', { Image: null, Inserted: false })).status).to.equal(204);
        expect((await get(`${url}${CD}`)).body.Inserted).to.equal(false);
      }));

    it('replace-inserted: a second insert replaces the image, as sushy-tools does', () =>
      withSim(['replace-inserted'], async (url) => {
        await insert(url, { Image: ISO });
        expect((await insert(url, { Image: 'http://images.example/other.iso' })).status).to.equal(204);
        expect((await get(`${url}${CD}`)).body.Image).to.equal('http://images.example/other.iso');
      }));

    it('refuses an unknown quirk', async () => {
      let err: Error | null = null;
      try {
        await startRedfishSim({ count: 1, vmediaQuirks: ['nonsense'] });
      } catch (e) {
        err = e as Error;
      }
      expect(err?.message).to.contain('nonsense');
    });
  });

  describe('on the recorded mockups', () => {
    const trees: Array<{ dir: string; system: string; cd: string | null; shape: (slot: Json) => void }> = [
      {
        dir: 'hpe-dl325-gen10plus-ilo5',
        system: '/redfish/v1/Systems/1',
        cd: '/redfish/v1/Managers/1/VirtualMedia/2',
        shape: (slot) => {
          expect(slot.MediaTypes).to.deep.equal(['CD', 'DVD']);
          expect(slot.Oem.Hpe).to.be.an('object');
          expect(slot).to.not.have.property('ImageName');
        },
      },
      {
        dir: 'dmtf-public-rackmount1',
        system: '/redfish/v1/Systems/437XR1138R2',
        cd: '/redfish/v1/Systems/437XR1138R2/VirtualMedia/CD1',
        shape: (slot) => {
          expect(slot).to.not.have.property('Actions');
          expect(slot.VerifyCertificate).to.equal(true);
        },
      },
      { dir: 'intel-bmc', system: '/redfish/v1/Systems/QSBP74100021', cd: null, shape: () => undefined },
      { dir: 'openbmc-bmcweb', system: '/redfish/v1/Systems/system', cd: null, shape: () => undefined },
    ];
    for (const tree of trees) {
      it(`${tree.dir}: virtual media, the boot override and power`, async function () {
        let sim: RedfishSim;
        try {
          sim = await startRedfishSim({ count: 1, mockup: path.join(MOCKUPS, tree.dir) });
        } catch (err) {
          if (process.env.CI === 'true') throw err;
          console.log(`      (skipped: ${tree.dir} is not readable: ${(err as Error).message})`);
          return this.skip();
        }
        try {
          const url = sim.bmcs[0].url;
          await simControl(url, 'state', { power: 'Off' });
          const st = await simState(url);
          if (tree.cd === null) {
            expect(Object.keys(st.media)).to.deep.equal([]);
          } else {
            const slot = await get(`${url}${tree.cd}`);
            expect(slot.status).to.equal(200);
            expect(slot.headers.get('etag')).to.match(/^W\//);
            tree.shape(slot.body);
            const actions = slot.body.Actions as Json | undefined;
            if (slot.body.Inserted) {
              if (actions) expect((await post(`${url}${actions['#VirtualMedia.EjectMedia'].target}`)).status).to.equal(204);
              else expect((await call(`${url}${tree.cd}`, 'PATCH', { Image: null, Inserted: false }, { 'if-match': slot.headers.get('etag') ?? '' })).status).to.equal(204);
            }
            if (actions) expect((await post(`${url}${actions['#VirtualMedia.InsertMedia'].target}`, { Image: ISO })).status).to.equal(204);
            else expect((await call(`${url}${tree.cd}`, 'PATCH', { Image: ISO, Inserted: true, WriteProtected: true })).status).to.equal(204);
            const after = (await get(`${url}${tree.cd}`)).body;
            expect(after).to.include({ Image: ISO, Inserted: true });
            tree.shape(after);
          }
          const patched = await call(`${url}${tree.system}`, 'PATCH', { Boot: { BootSourceOverrideTarget: 'Cd', BootSourceOverrideEnabled: 'Once' } });
          expect(patched.status).to.equal(204);
          const reset = (await get(`${url}${tree.system}`)).body.Actions['#ComputerSystem.Reset'].target as string;
          expect((await post(`${url}${reset}`, { ResetType: 'On' })).status).to.equal(204);
          const sys = (await get(`${url}${tree.system}`)).body;
          expect(sys.PowerState).to.equal('On');
          expect(sys.Boot).to.include({ BootSourceOverrideTarget: 'None', BootSourceOverrideEnabled: 'Disabled' });
          const running = (await simState(url)).systems[tree.system.toLowerCase()].running as Json;
          if (tree.cd) expect(running).to.include({ device: 'Cd', image: ISO, slot: tree.cd });
          else expect(running).to.include({ device: 'Hdd', requested: 'Cd' });
        } finally {
          await sim.stop();
        }
      });
    }

    it('applies behaviour quirks to a mockup: ilo-eject on the HPE tree', async function () {
      let sim: RedfishSim;
      try {
        sim = await startRedfishSim({ count: 1, mockup: path.join(MOCKUPS, 'hpe-dl325-gen10plus-ilo5'), vmediaQuirks: ['ilo-eject'] });
      } catch (err) {
        if (process.env.CI === 'true') throw err;
        return this.skip();
      }
      try {
        const url = sim.bmcs[0].url;
        const target = '/redfish/v1/Managers/1/VirtualMedia/2/Actions/VirtualMedia';
        expect((await post(`${url}${target}.InsertMedia`, { Image: ISO })).status).to.equal(204);
        expect((await post(`${url}${target}.EjectMedia`)).status).to.equal(400);
        expect((await post(`${url}${target}.EjectMedia`, {})).status).to.equal(204);
      } finally {
        await sim.stop();
      }
    });
  });
});
