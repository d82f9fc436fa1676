/**
 * The `redfish-virtual-media` boot interface against the Redfish simulator: prepareInstance
 * and cleanUpInstance on the synthetic BMC under every vendor quirk profile and on every
 * mockup tree, checked by reading the BMC back over Redfish, and the failures an operator
 * must be told about (InsertMedia refused, no CD slot, no virtual media, BMC down).
 */
import { expect } from 'chai';
import path from 'node:path';
import { BmcRejected, BmcUnreachable, InvalidParameterValue, VirtualMediaUnavailable } from '../../common/errors.js';
import type { InstanceBootRequest } from '../../drivers/interfaces.js';
import type { RedfishDriver } from '../../drivers/redfish/index.js';
import { startRedfishSim, type RedfishSim, type RedfishSimOptions } from '../../sim/redfish/index.js';
import { MOCKUPS, mockupTreesOrPending } from '../helpers/mockups.js';
import { ctxFor, makeDriver, rejection, resourceRequests, setFaults, simControl, simStats, simWithDriver, type SimStats } from '../helpers/redfish.js';

const ISO = 'http://images.example.test/live.iso';
const CONFIGDRIVE = 'http://images.example.test/configdrive.img';
const BASIC = { authorization: `Basic ${Buffer.from('admin:password').toString('base64')}` };
/** Fast retries: the simulator's "eject in progress" and "sticky" windows are short. */
const RETRY = { attempts: 5, intervalMs: 200 };

type Json = Record<string, unknown>;

async function getJson(url: string, p: string): Promise<Json> {
  const res = await fetch(`${url}${p}`, { headers: BASIC });
  expect(res.status, `GET ${p}`).to.equal(200);
  return (await res.json()) as Json;
}

const id = (v: unknown): string => (v as { '@odata.id': string })['@odata.id'];

async function systemOf(url: string): Promise<{ path: string; body: Json }> {
  const systems = await getJson(url, '/redfish/v1/Systems');
  const p = id((systems.Members as unknown[])[0]);
  return { path: p, body: await getJson(url, p) };
}

interface SlotView {
  path: string;
  mediaTypes: string[];
  inserted: boolean;
  image: string | null;
}

/** Every VirtualMedia slot of the BMC's system, read back over Redfish. */
async function slotsOf(url: string): Promise<SlotView[]> {
  const { body } = await systemOf(url);
  const collections: string[] = [];
  if (body.VirtualMedia) collections.push(id(body.VirtualMedia));
  else {
    for (const m of ((body.Links as Json).ManagedBy as unknown[]) ?? []) {
      const mgr = await getJson(url, id(m));
      if (mgr.VirtualMedia) collections.push(id(mgr.VirtualMedia));
    }
  }
  const out: SlotView[] = [];
  for (const c of collections) {
    for (const m of ((await getJson(url, c)).Members as unknown[]) ?? []) {
      const s = await getJson(url, id(m));
      out.push({ path: id(m), mediaTypes: (s.MediaTypes as string[]) ?? [], inserted: s.Inserted === true, image: (s.Image as string | null) || null });
    }
  }
  return out;
}

async function bootOf(url: string): Promise<Json> {
  return (await systemOf(url)).body.Boot as Json;
}

/** The slot that holds `image`, which must be the only one holding it. */
function holding(slots: SlotView[], image: string): SlotView {
  const hits = slots.filter((s) => s.inserted && s.image === image);
  expect(hits, `slots holding ${image}: ${JSON.stringify(slots)}`).to.have.length(1);
  return hits[0];
}

/** What a profile changes in what the BMC must show after prepareInstance. */
interface Expectation {
  target?: string;
  enabled?: string;
  /** The media type of the slot the ISO lands in. */
  slotType?: string;
  configdrive?: boolean;
  /** The workaround the profile needs, as the BMC's request log shows it during a redeploy. */
  log?: (log: string[]) => void;
}

/** `METHOD path status` of each request, logins aside. */
function logLines(stats: SimStats): string[] {
  return stats.log.filter((e) => !/\/SessionService\/Sessions/i.test(e[1])).map((e) => `${e[0]} ${e[1]} ${e[2]}`);
}

/** Index of the first line matching `re` at or after `from`; fails when there is none. */
function find(log: string[], re: RegExp, from = 0): number {
  const i = log.findIndex((l, n) => n >= from && re.test(l));
  expect(i, `${re} in ${JSON.stringify(log, null, 1)}`).to.be.at.least(0);
  return i;
}

const PROFILES: Record<string, Expectation> = {
  none: { configdrive: true },
  supermicro: { target: 'UsbCd', log: (l) => expect(l.filter((x) => /InsertMedia 4\d\d$/.test(x))).to.deep.equal([]) },
  'ilo-eject': { log: (l) => find(l, /^POST \S+EjectMedia 2\d\d$/, find(l, /^POST \S+EjectMedia 4(00|15)$/)) },
  'needs-transfer-protocol': { log: (l) => find(l, /^POST \S+InsertMedia 2\d\d$/, find(l, /^POST \S+InsertMedia 400$/)) },
  'patch-only': {
    log: (l) => {
      expect(l.filter((x) => /^POST \S+VirtualMedia/i.test(x))).to.deep.equal([]);
      expect(l.filter((x) => /^PATCH \S+VirtualMedia\S* 2\d\d$/i.test(x))).to.have.length(2);
    },
  },
  'dvd-only': { slotType: 'DVD' },
  'vmedia-under-systems': { log: (l) => expect(l.some((x) => /^GET \/redfish\/v1\/Managers/i.test(x))).to.equal(false) },
  'no-continuous': { enabled: 'Once', log: (l) => find(l, /^PATCH \/redfish\/v1\/Systems\/\S+ 2\d\d$/, find(l, /^PATCH \/redfish\/v1\/Systems\/\S+ 400$/)) },
  'sticky-inserted': { log: (l) => expect(l.filter((x) => /InsertMedia 4\d\d$/.test(x))).to.deep.equal([]) },
  'eject-in-progress': { log: (l) => find(l, /^POST \S+InsertMedia 2\d\d$/, find(l, /^POST \S+InsertMedia 5\d\d$/)) },
  'no-eject-action': { log: (l) => find(l, /^POST \S+InsertMedia 2\d\d$/, find(l, /^PATCH \S+VirtualMedia\S* 2\d\d$/i)) },
};

/** Timed quirks last half a second here, well within RETRY's waits. */
const TIMED_QUIRKS = new Set(['sticky-inserted', 'eject-in-progress']);

function simOptions(profile: string): RedfishSimOptions {
  const opts: RedfishSimOptions = { count: 1 };
  if (profile !== 'none') opts.vmediaQuirks = [TIMED_QUIRKS.has(profile) ? `${profile}=0.5` : profile];
  return opts;
}

function simFor(profile: string): Promise<RedfishSim> {
  return startRedfishSim(simOptions(profile));
}

async function prepare(driver: RedfishDriver, url: string, req: Partial<InstanceBootRequest> = {}, info: Json = {}): Promise<void> {
  await driver.boot.prepareInstance(ctxFor(url, info), { bootIso: ISO, ...req });
}

describe('redfish virtual media boot under each quirk profile', function () {
  this.timeout(60_000);
  for (const [profile, want] of Object.entries(PROFILES)) {
    describe(profile, () => {
      const f = simWithDriver(simOptions(profile), { vmediaRetry: RETRY });

      it('inserts the ISO, syncs the boot mode and boots from the CD; a second deploy replaces the ISO', async () => {
        const req: Partial<InstanceBootRequest> = { bootMode: 'bios', ...(want.configdrive ? { configdrive: CONFIGDRIVE } : {}) };
        await prepare(f.driver, f.url, req);
        let slots = await slotsOf(f.url);
        const slot = holding(slots, ISO);
        expect(slot.mediaTypes).to.include(want.slotType ?? 'CD');
        if (want.configdrive) expect(holding(slots, CONFIGDRIVE).mediaTypes).to.include('USBStick');
        const boot = await bootOf(f.url);
        expect(boot).to.include({ BootSourceOverrideTarget: want.target ?? 'Cd', BootSourceOverrideEnabled: want.enabled ?? 'Continuous', BootSourceOverrideMode: 'Legacy' });

        const other = 'http://images.example.test/other.iso';
        await simControl(f.url, 'reset');
        await prepare(f.driver, f.url, { bootIso: other, bootMode: 'uefi' });
        want.log?.(logLines(await simStats(f.url)));
        slots = await slotsOf(f.url);
        holding(slots, other);
        expect(slots.filter((s) => s.image === ISO && s.inserted)).to.deep.equal([]);
        expect(await bootOf(f.url)).to.include({ BootSourceOverrideMode: 'UEFI' });
      });

      it('cleans up: nothing inserted, no boot override', async () => {
        await f.driver.boot.cleanUpInstance(ctxFor(f.url));
        expect((await slotsOf(f.url)).filter((s) => s.inserted && s.mediaTypes.some((t) => ['CD', 'DVD', 'USBStick'].includes(t)))).to.deep.equal([]);
        expect((await bootOf(f.url)).BootSourceOverrideEnabled).to.equal('Disabled');
        // A second clean up finds nothing to do and changes nothing.
        await simControl(f.url, 'reset');
        await f.driver.boot.cleanUpInstance(ctxFor(f.url));
        expect(resourceRequests(await simStats(f.url)).filter((r) => !r.startsWith('GET '))).to.deep.equal([]);
      });

      it('honours force_persistent_boot_device=Never with a one-time override', async () => {
        await prepare(f.driver, f.url, { forcePersistentBootDevice: 'Never' });
        expect((await bootOf(f.url)).BootSourceOverrideEnabled).to.equal('Once');
        await f.driver.boot.cleanUpInstance(ctxFor(f.url));
      });
    });
  }
});

describe('redfish virtual media boot, end to end', () => {
  it('makes the host boot the ISO at the next power on, and the disk after clean up', async () => {
    const sim = await simFor('none');
    const driver = makeDriver({ vmediaRetry: RETRY });
    const url = sim.bmcs[0].url;
    const running = async () => ((await (await fetch(`${url}/_sim/state`)).json()) as { systems: Record<string, { running: { device: string; image: string | null } | null }> }).systems;
    try {
      await driver.power.setPowerState(ctxFor(url), 'power off');
      await prepare(driver, url);
      await driver.power.setPowerState(ctxFor(url), 'power on');
      expect(Object.values(await running())[0].running).to.include({ device: 'Cd', image: ISO });
      await driver.boot.cleanUpInstance(ctxFor(url));
      await driver.power.setPowerState(ctxFor(url), 'rebooting');
      expect(Object.values(await running())[0].running?.image).to.equal(null);
    } finally {
      await driver.close();
      await sim.stop();
    }
  });
});

describe('redfish virtual media boot, requests', () => {
  it('reads each slot once to eject and insert when nothing was inserted, again after an eject, and the manager once', async () => {
    const sim = await simFor('none');
    const driver = makeDriver({ vmediaRetry: RETRY });
    const url = sim.bmcs[0].url;
    const slotReads = async () => logLines(await simStats(url)).filter((l) => /^GET \S+\/VirtualMedia\/[^/\s]+ 200$/.test(l)).length;
    try {
      const slots = (await slotsOf(url)).length;
      expect(slots).to.be.at.least(2);
      await simControl(url, 'reset');
      await prepare(driver, url);
      expect(await slotReads()).to.equal(slots);
      // The CD now holds the ISO: the eject changes that collection, whose slots are read again.
      await simControl(url, 'reset');
      await prepare(driver, url);
      // The eject's read, its wait for the slot to empty, the insert's read.
      expect(await slotReads()).to.equal(2 * slots + 1);
      // Where the manager keeps its virtual media was read at the first boot only.
      expect(logLines(await simStats(url)).filter((l) => /^GET \/redfish\/v1\/Managers\/[^/\s]+ 200$/.test(l))).to.deep.equal([]);
    } finally {
      await driver.close();
      await sim.stop();
    }
  });
});

describe('redfish virtual media boot on the mockup trees', function () {
  this.timeout(60_000);
  const trees = mockupTreesOrPending();
  /** Trees whose BMC has no slot to take an ISO, and why. */
  const UNAVAILABLE: Record<string, RegExp> = {
    'intel-bmc': /has no CD or DVD slot/,
    'openbmc-bmcweb': /has no VirtualMedia on the system or its managers/,
  };
  for (const tree of trees) {
    describe(tree, () => {
      const f = simWithDriver({ count: 1, mockup: path.join(MOCKUPS, tree) }, { vmediaRetry: RETRY });

      it('prepares and cleans up, or says why the BMC cannot', async () => {
        const unavailable = UNAVAILABLE[tree];
        if (unavailable) {
          const err = await rejection(prepare(f.driver, f.url));
          expect(err).to.be.instanceOf(VirtualMediaUnavailable);
          expect(err.message).to.match(unavailable).and.include(ISO);
        } else {
          await prepare(f.driver, f.url, { bootMode: 'uefi' });
          holding(await slotsOf(f.url), ISO);
          expect(await bootOf(f.url)).to.include({ BootSourceOverrideTarget: 'Cd', BootSourceOverrideEnabled: 'Continuous', BootSourceOverrideMode: 'UEFI' });
        }
        await f.driver.boot.cleanUpInstance(ctxFor(f.url));
        expect((await slotsOf(f.url)).filter((s) => s.inserted && s.image === ISO)).to.deep.equal([]);
      });
    });
  }
});

describe('redfish virtual media boot failures', function () {
  this.timeout(60_000);
  let driver: RedfishDriver;
  beforeEach(() => {
    driver = makeDriver({ vmediaRetry: RETRY, connectionAttempts: 2, retryIntervalMs: 10 });
  });
  afterEach(() => driver.close());

  it('refuses a boot_iso that is not a URL without talking to the BMC', async () => {
    const sim = await startRedfishSim({ count: 1 });
    try {
      const err = await rejection(prepare(driver, sim.bmcs[0].url, { bootIso: '/srv/live.iso' }));
      expect(err).to.be.instanceOf(InvalidParameterValue);
      expect(err.message).to.include('instance_info/boot_iso');
      expect(resourceRequests(await simStats(sim.bmcs[0].url))).to.deep.equal([]);
    } finally {
      await sim.stop();
    }
  });

  it('fails with BmcUnreachable when the BMC is down', async () => {
    const sim = await startRedfishSim({ count: 1 });
    const url = sim.bmcs[0].url;
    await sim.stop();
    expect(await rejection(prepare(driver, url))).to.be.instanceOf(BmcUnreachable);
    expect(await rejection(driver.boot.cleanUpInstance(ctxFor(url)))).to.be.instanceOf(BmcUnreachable);
  });

  for (const status of [400, 500]) {
    it(`reports an InsertMedia refused with ${status}, naming the node, the image and the BMC's answer`, async () => {
      const sim = await simFor('none');
      const url = sim.bmcs[0].url;
      try {
        await setFaults(url, { insertMediaStatus: status } as Parameters<typeof setFaults>[1]);
        const err = await rejection(prepare(driver, url));
        expect(err.message).to.include('Virtual media mount failed for node 1be26c0b-03f2-4d2e-ae87-c02d7f33c123 with image http://images.example.test/live.iso');
        expect(err.message).to.include(`HTTP ${status}`);
        if (status === 400) {
          // A refusal: the slot is skipped, nothing else takes the ISO, and trying again would not help.
          expect(err).to.be.instanceOf(VirtualMediaUnavailable);
          expect((err as BmcRejected).transient).to.equal(false);
        } else {
          // A server error is retried (an eject in progress), then left for the caller to retry later.
          expect(err).to.be.instanceOf(BmcRejected);
          expect((err as BmcRejected).transient).to.equal(true);
          const inserts = resourceRequests(await simStats(url)).filter((r) => /InsertMedia/i.test(r));
          expect(inserts).to.have.length(RETRY.attempts);
        }
        // Nothing was left half done: no boot override was set.
        expect((await bootOf(url)).BootSourceOverrideTarget).to.not.equal('Cd');
      } finally {
        await sim.stop();
      }
    });
  }
});
