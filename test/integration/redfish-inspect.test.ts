/**
 * Out-of-band inspection (`redfish` inspect interface) against the Redfish simulator: every
 * mockup tree of the shared mockups folder, the synthetic BMC, and the failures Ironic
 * reports (no NIC, essential properties missing, BMC down).
 */
import { expect } from 'chai';
import path from 'node:path';
import { BmcUnreachable, HardwareInspectionFailure } from '../../common/errors.js';
import type { InspectionResult } from '../../drivers/interfaces.js';
import type { RedfishDriver } from '../../drivers/redfish/index.js';
import { inspectionResult } from '../../drivers/redfish/inspect.js';
import type { Hardware } from '../../drivers/redfish/inventory.js';
import { startRedfishSim } from '../../sim/redfish/index.js';
import { MOCKUPS, mockupTreesOrPending } from '../helpers/mockups.js';
import { ctxFor, makeDriver, rejection, resourceRequests, simControl, simStats, simWithDriver } from '../helpers/redfish.js';

const NODE = '1be26c0b-03f2-4d2e-ae87-c02d7f33c123';

type Outcome = { result: InspectionResult } | { error: Error };

/** What each known tree must yield; a tree not listed here must at least inspect or fail with HardwareInspectionFailure. */
const EXPECT: Record<string, (o: Outcome) => void> = {
  'dmtf-public-rackmount1': (o) => {
    expect(o).to.have.property('result');
    const r = (o as { result: InspectionResult }).result;
    expect(r.properties).to.deep.equal({
      memory_mb: '98304',
      cpus: 16,
      cpu_arch: 'x86_64',
      // SimpleStorage: bays of 8 TB and 4 TB (two absent): 4e12 B = 3725.29 GiB, less one.
      local_gb: '3724',
      capabilities: 'boot_mode:uefi',
    });
    expect(r.inventory.cpu).to.deep.equal({ count: 16, architecture: 'x86_64', model_name: 'Multi-Core Intel(R) Xeon(R) processor 7xxx Series', frequency: '3700' });
    expect(r.inventory.memory).to.deep.equal({ physical_mb: 98304 });
    expect(r.inventory.boot).to.deep.equal({ current_boot_mode: 'uefi' });
    expect(r.inventory.system_vendor).to.deep.equal({ product_name: '3500', serial_number: '437XR1138R2', manufacturer: 'Contoso', system_uuid: '38947555-7742-3448-3784-823347823834' });
    expect(r.inventory.interfaces).to.deep.include({ name: '12446A3B0411', mac_address: '12:44:6a:3b:04:11', speed_mbps: 1000 });
    expect((r.inventory.disks as unknown[]).length).to.equal(4);
    expect(r.macs).to.include('12:44:6a:3b:04:11');
    expect(r.macs).to.deep.equal([...new Set(r.macs)]);
  },
  'hpe-dl325-gen10plus-ilo5': (o) => {
    expect(o).to.have.property('result');
    const r = (o as { result: InspectionResult }).result;
    // No disk at all in the capture: a disk-less node, as Ironic says with a warning.
    expect(r.properties).to.deep.equal({ memory_mb: '65536', cpus: 32, cpu_arch: 'x86_64', local_gb: '0', capabilities: 'boot_mode:uefi' });
    expect(r.inventory.cpu).to.deep.include({ model_name: 'AMD EPYC 7302P 16-Core Processor', frequency: '4100' });
    // NICs 2 and 4 are UnavailableOffline: in the inventory, without ports.
    expect((r.inventory.interfaces as Array<{ mac_address: string }>).map((i) => i.mac_address)).to.deep.equal(['94:40:c9:5c:86:bc', '94:40:c9:5c:86:bd', '14:02:ec:d9:3a:a0', '14:02:ec:d9:3a:a1']);
    expect(r.macs).to.deep.equal(['94:40:c9:5c:86:bc', '14:02:ec:d9:3a:a0']);
  },
  'intel-bmc': (o) => {
    // An empty EthernetInterfaces collection: Ironic's validate-interfaces hook fails the inspection.
    expect(o).to.have.property('error').that.is.instanceOf(HardwareInspectionFailure);
    expect((o as { error: Error }).error.message).to.equal(`Inventory for node ${NODE} is invalid: no valid network interfaces`);
  },
  'openbmc-bmcweb': (o) => {
    expect(o).to.have.property('error').that.is.instanceOf(HardwareInspectionFailure);
    expect((o as { error: Error }).error.message).to.equal(`Inventory for node ${NODE} is invalid: no valid network interfaces`);
  },
};

/** Trees without a usable NIC: inspection fails on them, as Ironic's does. */
const UNINSPECTABLE = new Set(['intel-bmc', 'openbmc-bmcweb']);

async function inspect(driver: RedfishDriver, url: string, caps?: string): Promise<Outcome> {
  try {
    return { result: await driver.inspect.inspectHardware(ctxFor(url), caps) };
  } catch (err) {
    return { error: err as Error };
  }
}

describe('redfish inspection against the mockup trees', function () {
  const trees = mockupTreesOrPending();
  for (const tree of trees) {
    describe(tree, () => {
      const f = simWithDriver({ count: 1, mockup: path.join(MOCKUPS, tree) });

      it('inspects, or fails the way Ironic does, using only GETs', async () => {
        await simControl(f.sim.bmcs[0].url, 'reset');
        const outcome = await inspect(f.driver, f.sim.bmcs[0].url);
        (EXPECT[tree] ?? ((o) => expect('result' in o || (o.error instanceof HardwareInspectionFailure)).to.equal(true)))(outcome);
        const writes = resourceRequests(await simStats(f.sim.bmcs[0].url)).filter((r) => !r.startsWith('GET '));
        expect(writes).to.deep.equal([]);
      });

      // Only the trees that can be inspected at all (the others fail for want of a NIC, above).
      if (!UNINSPECTABLE.has(tree)) it('keeps a boot_mode capability the node already has and merges into the others', async () => {
        const o = await inspect(f.driver, f.sim.bmcs[0].url, 'boot_mode:bios,secure_boot:true');
        expect(o, 'inspection result').to.have.property('result');
        if (!('result' in o)) return;
        expect(o.result.properties).to.not.have.property('capabilities');
        const merged = await inspect(f.driver, f.sim.bmcs[0].url, 'secure_boot:true');
        expect((merged as { result: InspectionResult }).result.properties.capabilities).to.match(/^secure_boot:true,boot_mode:(uefi|bios)$/);
      });
    });
  }
});

describe('redfish inspection against the synthetic BMC', () => {
  const f = simWithDriver({ count: 2 });

  it('reads memory, processors, storage and NICs into properties, inventory and MACs', async () => {
    const o = await inspect(f.driver, f.sim.bmcs[0].url, 'foo:bar');
    if ('error' in o) throw o.error;
    const { properties, inventory, macs, pluginData } = o.result;
    // 384 GiB; 2 × 48 threads; the 894 GiB RAID1 volume (SimpleStorage has nothing smaller of 4 GiB or more), less one.
    expect(properties).to.deep.equal({ memory_mb: '393216', cpus: 96, cpu_arch: 'x86_64', local_gb: '893', capabilities: 'foo:bar,boot_mode:uefi' });
    expect(inventory.cpu).to.deep.equal({ count: 96, architecture: 'x86_64', model_name: 'Intel(R) Xeon(R) Gold 6330 CPU @ 2.00GHz', frequency: '3400' });
    expect(inventory.memory).to.deep.equal({ physical_mb: 393216 });
    expect(inventory.disks).to.deep.equal([{ name: 'SSD 0', size: 960197124096 }, { name: 'SSD 1', size: 960197124096 }]);
    expect(inventory.interfaces).to.deep.equal([
      { name: 'NIC.Integrated.1-1', mac_address: '02:00:00:00:00:01', speed_mbps: 25000 },
      { name: 'NIC.Integrated.1-2', mac_address: '02:00:00:00:00:02', speed_mbps: 25000 },
    ]);
    expect(inventory.system_vendor).to.include({ manufacturer: 'Galvanic', serial_number: 'SIM000000' });
    expect(inventory.boot).to.deep.equal({ current_boot_mode: 'uefi' });
    expect(macs).to.deep.equal(['02:00:00:00:00:01', '02:00:00:00:00:02']);
    expect(pluginData).to.deep.equal({});
  });

  it('gives each BMC of a fleet its own MACs', async () => {
    const [a, b] = await Promise.all(f.sim.bmcs.map((bmc) => inspect(f.driver, bmc.url)));
    if ('error' in a) throw a.error;
    if ('error' in b) throw b.error;
    expect(a.result.macs.filter((m) => b.result.macs.includes(m))).to.deep.equal([]);
  });

  it('fails with BmcUnreachable when the BMC is down', async () => {
    const down = await startRedfishSim({ count: 1 });
    const url = down.bmcs[0].url;
    await down.stop();
    const d = makeDriver({ connectionAttempts: 2, retryIntervalMs: 10 });
    try {
      const err = await rejection(d.inspect.inspectHardware(ctxFor(url), undefined));
      expect(err).to.be.instanceOf(BmcUnreachable);
    } finally {
      await d.close();
    }
  });
});

describe('redfish inspection rules', () => {
  const GIB = 2 ** 30;
  const base = (): Hardware => ({
    system: { MemorySummary: { TotalSystemMemoryGiB: 16 }, Boot: { BootSourceOverrideMode: 'Legacy' } },
    processors: [{ totalThreads: 8, architecture: 'ARM', instructionSet: 'ARM-A64', model: 'Neoverse', maxSpeedMHz: 3000 }],
    nics: [{ id: 'eth0', mac: 'AA-BB-CC-DD-EE-01', speedMbps: 10000, state: 'Enabled', health: 'OK' }],
    simpleDevices: null,
    storageDrives: null,
    storageVolumes: null,
  });

  it('names every missing essential property, as Ironic 21.4 does', () => {
    const hw = base();
    hw.system = {};
    hw.processors = [{ totalThreads: null, architecture: null, instructionSet: 'OEM', model: null, maxSpeedMHz: null }];
    expect(() => inspectionResult(NODE, hw, undefined)).to.throw(
      HardwareInspectionFailure,
      `Failed to inspect hardware. Reason: Failed to discover the following properties: cpu_arch, cpus, memory_mb on node ${NODE}`,
    );
  });

  it('maps the instruction set, normalises MACs and reads Legacy as bios', () => {
    const r = inspectionResult(NODE, base(), '');
    expect(r.properties).to.deep.equal({ memory_mb: '16384', cpus: 8, cpu_arch: 'aarch64', local_gb: '0', capabilities: 'boot_mode:bios' });
    expect(r.macs).to.deep.equal(['aa:bb:cc:dd:ee:01']);
  });

  it('fails when no NIC has a valid MAC, and creates no port for a disabled or unhealthy one', () => {
    const hw = base();
    hw.nics = [{ id: 'eth0', mac: 'not-a-mac', speedMbps: null, state: 'Enabled', health: 'OK' }];
    expect(() => inspectionResult(NODE, hw, undefined)).to.throw(HardwareInspectionFailure, 'no valid network interfaces');
    hw.nics.push({ id: 'eth1', mac: 'aa:bb:cc:dd:ee:02', speedMbps: null, state: 'Disabled', health: 'OK' }, { id: 'eth2', mac: 'aa:bb:cc:dd:ee:03', speedMbps: null, state: 'Enabled', health: 'Critical' });
    const r = inspectionResult(NODE, hw, undefined);
    expect(r.macs).to.deep.equal([]);
    expect((r.inventory.interfaces as unknown[]).length).to.equal(2);
  });

  it('takes the smallest disk of at least 4 GiB, the smaller of SimpleStorage and Storage, less 1 GiB', () => {
    const hw = base();
    hw.simpleDevices = [
      { name: 'tiny', sizeBytes: 2 * GIB, state: 'Enabled' },
      { name: 'absent', sizeBytes: 10 * GIB, state: 'Absent' },
      { name: 'big', sizeBytes: 100 * GIB, state: 'Enabled' },
    ];
    expect(inspectionResult(NODE, hw, undefined).properties.local_gb).to.equal('99');
    hw.storageVolumes = [{ name: 'v', sizeBytes: 50 * GIB, state: 'Enabled' }];
    hw.storageDrives = [{ name: 'd', sizeBytes: 20 * GIB, state: 'Enabled' }];
    // Volumes win over drives within Storage; then the smaller of the two sources.
    expect(inspectionResult(NODE, hw, undefined).properties.local_gb).to.equal('49');
    hw.storageVolumes = [];
    expect(inspectionResult(NODE, hw, undefined).properties.local_gb).to.equal('19');
  });
});
