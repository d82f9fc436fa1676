/**
 * The Redfish simulator's provisioning side, over real HTTP: the inventory out-of-band
 * inspection reads, virtual media, boot semantics and the event log, the vendor quirk
 * profiles, and the same on the recorded mockup trees.
 */
import { expect } from 'chai';
import { startRedfishSim, type RedfishSim } from '../../sim/redfish/index.js';

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
});
