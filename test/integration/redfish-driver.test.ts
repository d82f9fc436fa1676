/**
 * The redfish hardware type against the simulator (in-process, free ports): power, boot,
 * sensors, sessions, per-BMC limits, retries and timeouts, counted at the simulator.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import { BmcAuthFailed, BmcBadResponse, BmcRejected, BmcTimeout, BmcUnreachable, InvalidDriverInfo, InvalidParameterValue } from '../../common/errors.js';
import { buildRegistry } from '../../drivers/build-registry.js';
import type { RedfishDriver } from '../../drivers/redfish/index.js';
import { startRedfishSim, type RedfishSim } from '../../sim/redfish/index.js';
import { freePort } from '../helpers/net.js';
import { testConfig } from '../helpers/app.js';
import { ctxFor, makeDriver, rejection, resourceRequests, setFaults, simControl, simStats } from '../helpers/redfish.js';

const SYSTEM = '/redfish/v1/Systems/System.Embedded.1';

async function resetBmc(url: string): Promise<void> {
  await simControl(url, 'expire-sessions');
  await setFaults(url, {
    hang: false, garbageRate: 0, failRate: 0, resetRate: 0, timeoutRate: 0, requireIfMatch: false, sessionLimit: 4, sessionLimitStatus: 503,
    unavailable: { count: 0, retryAfter: 1 }, latencyMs: [0, 0], powerDelayMs: 0,
  });
  await simControl(url, 'state', { power: 'On', boot: { BootSourceOverrideTarget: 'None', BootSourceOverrideEnabled: 'Disabled' } });
  await simControl(url, 'reset');
}

describe('redfish driver', function () {
  this.timeout(60_000);
  let sim: RedfishSim;
  let sensorsOnly: RedfishSim;
  let noExpand: RedfishSim;
  let driver: RedfishDriver;
  let url: string;
  let other: string;

  before(async () => {
    sim = await startRedfishSim({ count: 4 });
    sensorsOnly = await startRedfishSim({ count: 1, chassis: 'sensors' });
    noExpand = await startRedfishSim({ count: 1, expand: false });
    url = sim.bmcs[0].url;
    other = sim.bmcs[1].url;
  });
  after(async () => {
    await sim.stop();
    await sensorsOnly.stop();
    await noExpand.stop();
  });
  beforeEach(async () => {
    for (const b of [...sim.bmcs, ...sensorsOnly.bmcs, ...noExpand.bmcs]) await resetBmc(b.url);
    driver = makeDriver();
  });
  afterEach(async () => {
    await driver.close();
  });

  describe('driver_info', () => {
    const validate = (info: Record<string, unknown>) => () => driver.power.validate(info);

    it('accepts an address with or without scheme, and the optional keys', () => {
      expect(validate({ redfish_address: 'bmc.example.com' })).to.not.throw();
      expect(validate({ redfish_address: 'https://10.0.0.1:8443', redfish_system_id: '/redfish/v1/Systems/1', redfish_verify_ca: 'false', redfish_auth_type: 'basic', redfish_timeout: '30' })).to.not.throw();
      expect(validate({ redfish_address: 'http://127.0.0.1:8000', redfish_username: 'u', redfish_password: 'p', redfish_verify_ca: true })).to.not.throw();
      expect(validate({ redfish_address: 'https://bmc', redfish_verify_ca: '/etc/ssl/certs/ca.pem' })).to.not.throw();
    });

    it('names the key and the problem', () => {
      expect(validate({})).to.throw(InvalidDriverInfo, 'Missing the following Redfish properties in driver_info: redfish_address');
      expect(validate({ redfish_address: 'ftp://bmc' })).to.throw(InvalidDriverInfo, 'redfish_address: the scheme must be https or http');
      expect(validate({ redfish_address: 'https://bmc/some/path' })).to.throw(InvalidDriverInfo, 'must not have a path');
      expect(validate({ redfish_address: 'https://user:pw@bmc' })).to.throw(InvalidDriverInfo, 'credentials belong in redfish_username');
      expect(validate({ redfish_address: 'bmc', redfish_auth_type: 'digest' })).to.throw(InvalidDriverInfo, 'redfish_auth_type: "digest"; valid values are auto, session, basic');
      expect(validate({ redfish_address: 'bmc', redfish_timeout: 'soon' })).to.throw(InvalidDriverInfo, 'redfish_timeout');
      expect(validate({ redfish_address: 'bmc', redfish_timeout: 0 })).to.throw(InvalidDriverInfo, 'redfish_timeout');
      expect(validate({ redfish_address: 'bmc', redfish_verify_ca: 3 })).to.throw(InvalidDriverInfo, 'redfish_verify_ca');
      expect(validate({ redfish_address: 'bmc', redfish_password: 'p' })).to.throw(InvalidDriverInfo, 'redfish_username is not');
      expect(validate({ redfish_address: 'http://bmc', redfish_verify_ca: '/ca.pem' })).to.throw(InvalidDriverInfo, 'plain http');
    });
  });

  it('is registered as hardware type redfish: redfish power and management, redfish or agent inspect, virtual-media boot, ramdisk, direct or custom-agent deploy, no-console, redfish vendor', async () => {
    const registry = buildRegistry(testConfig());
    try {
      const supported = registry.hardwareType('redfish').supported;
      expect(supported.power).to.deep.equal(['redfish']);
      expect(supported.management).to.deep.equal(['redfish']);
      expect(supported.inspect).to.deep.equal(['redfish', 'agent', 'no-inspect']);
      expect(supported.deploy).to.deep.equal(['ramdisk', 'direct', 'custom-agent']);
      expect(registry.resolve('redfish', {})).to.deep.equal({
        bios: 'no-bios', boot: 'redfish-virtual-media', console: 'no-console', deploy: 'ramdisk', firmware: 'no-firmware',
        inspect: 'redfish', management: 'redfish', network: 'noop', power: 'redfish', raid: 'no-raid', rescue: 'no-rescue',
        storage: 'noop', vendor: 'redfish',
      });
      expect(registry.hardwareType('redfish').properties).to.have.property('redfish_address');
      expect(registry.management('redfish')?.getSensorDataAsync).to.be.a('function');
    } finally {
      await registry.close();
    }
  });

  describe('power', () => {
    it('reads the power state with one GET once the system is known', async () => {
      const ctx = ctxFor(url);
      expect(await driver.power.getPowerState(ctx)).to.equal('power on');
      await simControl(url, 'reset');
      await simControl(url, 'state', { power: 'Off' });
      expect(await driver.power.getPowerState(ctx)).to.equal('power off');
      expect(resourceRequests(await simStats(url))).to.deep.equal([`GET ${SYSTEM}`]);
    });

    it('powers off, on, reboots and soft-powers-off through Reset, waiting for the state', async () => {
      const ctx = ctxFor(url);
      await driver.power.setPowerState(ctx, 'power off');
      expect(await driver.power.getPowerState(ctx)).to.equal('power off');
      await driver.power.setPowerState(ctx, 'power on');
      expect(await driver.power.getPowerState(ctx)).to.equal('power on');
      await simControl(url, 'reset');
      await driver.power.setPowerState(ctx, 'rebooting');
      await driver.power.setPowerState(ctx, 'soft power off');
      await driver.power.setPowerState(ctx, 'soft rebooting');
      const resets = (await simStats(url)).log.filter((e) => e[0] === 'POST' && e[1].endsWith('ComputerSystem.Reset'));
      expect(resets).to.have.length(3);
      expect(await driver.power.getPowerState(ctx)).to.equal('power on');
    });

    it('does nothing when the node is already in the requested state', async () => {
      const ctx = ctxFor(url);
      await driver.power.setPowerState(ctx, 'power on');
      expect((await simStats(url)).log.some((e) => e[0] === 'POST' && e[1].includes('Reset'))).to.equal(false);
    });

    it('polls until a slow BMC reports the new state', async () => {
      await setFaults(url, { powerDelayMs: 700 });
      const ctx = ctxFor(url);
      const started = Date.now();
      await driver.power.setPowerState(ctx, 'power off');
      expect(Date.now() - started).to.be.at.least(600);
      expect(await driver.power.getPowerState(ctx)).to.equal('power off');
      const polls = (await simStats(url)).log.filter((e) => e[0] === 'GET' && e[1] === SYSTEM);
      expect(polls.length).to.be.within(3, 10);
    });

    it('sees a long transition end within about a second: polls back off to 1 s, no further', async () => {
      await setFaults(url, { powerDelayMs: 4000 });
      const started = Date.now();
      await driver.power.setPowerState(ctxFor(url), 'power off');
      // Polls at about 0, 0.25, 0.75, 1.75, 2.75, 3.75 and 4.75 s; backing off to 2 s, the
      // state landing at 4 s was seen only at 5.75 s.
      expect(Date.now() - started - 4000).to.be.within(0, 1300);
    });

    it('fails with BmcTimeout when the state is not reached within the timeout', async () => {
      await setFaults(url, { powerDelayMs: 5000 });
      const err = await rejection(driver.power.setPowerState(ctxFor(url), 'power off', 1));
      expect(err).to.be.instanceOf(BmcTimeout);
      expect(err.message).to.contain('did not reach PowerState Off');
    });

    it('lists the power states the advertised reset types allow', async () => {
      expect(await driver.power.getSupportedPowerStates(ctxFor(url))).to.have.members(['power on', 'power off', 'rebooting', 'soft power off', 'soft rebooting']);
    });
  });

  describe('boot device', () => {
    it('sets the boot device once and persistently and reads it back', async () => {
      const ctx = ctxFor(url);
      expect(await driver.management.getBootDevice(ctx)).to.deep.equal({ bootDevice: null, persistent: null });
      await driver.management.setBootDevice(ctx, 'pxe', false);
      expect(await driver.management.getBootDevice(ctx)).to.deep.equal({ bootDevice: 'pxe', persistent: false });
      await driver.management.setBootDevice(ctx, 'disk', true);
      expect(await driver.management.getBootDevice(ctx)).to.deep.equal({ bootDevice: 'disk', persistent: true });
      const state = (await simControl(url, 'state')) as { systems: Record<string, { boot: Record<string, string> }> };
      expect(Object.values(state.systems)[0].boot).to.include({ BootSourceOverrideTarget: 'Hdd', BootSourceOverrideEnabled: 'Continuous' });
    });

    it('lists the supported devices from the allowed targets, and refuses others', async () => {
      const ctx = ctxFor(url);
      expect(await driver.management.getSupportedBootDevices(ctx)).to.have.members(['pxe', 'cdrom', 'usb', 'disk', 'bios', 'uefi-http']);
      const err = await rejection(driver.management.setBootDevice(ctx, 'floppy', false));
      expect(err).to.be.instanceOf(InvalidParameterValue);
      expect(err.message).to.contain('floppy');
    });

    it('sends If-Match with the ETag, and retries once with a fresh one when it went stale', async () => {
      await setFaults(url, { requireIfMatch: true });
      const ctx = ctxFor(url);
      await driver.management.setBootDevice(ctx, 'cdrom', false);
      expect(await driver.management.getBootDevice(ctx)).to.deep.include({ bootDevice: 'cdrom' });
      const patches = (await simStats(url)).log.filter((e) => e[0] === 'PATCH');
      expect(patches.map((e) => e[2])).to.deep.equal([204]);
    });
  });

  describe('sensors', () => {
    it("returns Ironic's structure from Thermal, Power and SimpleStorage of the chassis that has them", async () => {
      const data = await driver.management.getSensorDataAsync?.(ctxFor(url));
      expect(data).to.have.keys(['Temperature', 'Fan', 'Power', 'Drive']);
      expect(Object.keys(data?.Temperature ?? {})).to.deep.equal(['0@Baseboard', '1@Baseboard', '2@Baseboard', '3@Baseboard']);
      expect(data?.Temperature['0@Baseboard']).to.deep.equal({
        identity: '0', max_reading_range_temp: 120, min_reading_range_temp: 0, reading_celsius: 47, physical_context: 'CPU', sensor_number: 5, state: 'enabled', health: 'OK',
      });
      expect(Object.keys(data?.Fan ?? {})).to.have.length(4);
      expect(data?.Fan['2@Baseboard']).to.include({ reading: 5520, reading_units: 'RPM', state: 'enabled' });
      expect(data?.Power['1:Power@Baseboard']).to.deep.equal({
        power_capacity_watts: 800, line_input_voltage: 230, last_power_output_watts: 176, serial_number: 'SIMPSU0002', state: 'enabled', health: 'OK',
      });
      expect(data?.Drive['SATA Bay 2:1@System.Embedded.1']).to.deep.equal({ name: 'SATA Bay 2', model: 'SIM-SSD-960', capacity_bytes: 960197124096, state: 'enabled', health: 'Warning' });
    });

    it('reads the chassis with Thermal and Power expanded, and storage, at once and only them, once the topology is known', async () => {
      const ctx = ctxFor(url);
      const first = await driver.management.getSensorDataAsync?.(ctx);
      await simControl(url, 'reset');
      await setFaults(url, { latencyMs: [300, 300] });
      const started = Date.now();
      const again = await driver.management.getSensorDataAsync?.(ctx);
      const elapsed = Date.now() - started;
      const stats = await simStats(url);
      expect(resourceRequests(stats)).to.have.members([
        'GET /redfish/v1/Chassis/Baseboard?$expand=.($levels=1)',
        `GET ${SYSTEM}/SimpleStorage/1`,
      ]);
      expect(stats.maxConcurrent).to.equal(2);
      // Two sequential requests would take 600 ms.
      expect(elapsed).to.be.below(550);
      expect(again).to.deep.equal(first);
    });

    it('discovers a BMC one request at a time for a periodic read, and at once for an operator\'s', async () => {
      // Chassis, storage and the service root are looked up after the system: at once, they
      // overlap. The read after discovery sends its two GETs together either way.
      await setFaults(url, { latencyMs: [50, 50] });
      await setFaults(other, { latencyMs: [50, 50] });
      const periodic = await driver.management.getSensorDataAsync?.({ ...ctxFor(url), priority: 'periodic' });
      const byIntent = await driver.management.getSensorDataAsync?.(ctxFor(other));
      expect((await simStats(url)).maxConcurrent, 'periodic read').to.equal(2);
      expect((await simStats(other)).maxConcurrent, "operator's read").to.be.above(2);
      expect(periodic).to.deep.equal(byIntent);
    });

    it('reads Thermal and Power one by one from a BMC that does not advertise $expand, with the same result', async () => {
      const plain = noExpand.bmcs[0].url;
      const expanded = await driver.management.getSensorDataAsync?.(ctxFor(url));
      const ctx = ctxFor(plain);
      const first = await driver.management.getSensorDataAsync?.(ctx);
      expect(first).to.deep.equal(expanded);
      await simControl(plain, 'reset');
      expect(await driver.management.getSensorDataAsync?.(ctx)).to.deep.equal(expanded);
      expect(resourceRequests(await simStats(plain))).to.have.members([
        'GET /redfish/v1/Chassis/Baseboard/Thermal',
        'GET /redfish/v1/Chassis/Baseboard/Power',
        `GET ${SYSTEM}/SimpleStorage/1`,
      ]);
    });

    it('uses the Sensors collection, expanded in one request, when Thermal and Power are absent', async () => {
      const s = sensorsOnly.bmcs[0].url;
      const ctx = ctxFor(s);
      const data = await driver.management.getSensorDataAsync?.(ctx);
      expect(Object.keys(data?.Temperature ?? {})).to.have.length(4);
      expect(data?.Temperature['Temp0@Baseboard']).to.include({ identity: 'Temp0', reading_celsius: 47, physical_context: 'CPU', state: 'enabled', health: 'OK' });
      expect(Object.keys(data?.Fan ?? {})).to.have.length(4);
      expect(data?.Fan['Fan1@Baseboard']).to.include({ reading: 5280, reading_units: 'RPM' });
      expect(Object.keys(data?.Power ?? {})).to.deep.equal(['PSU0Power:Sensors@Baseboard', 'PSU1Power:Sensors@Baseboard']);
      await simControl(s, 'reset');
      await driver.management.getSensorDataAsync?.(ctx);
      expect(resourceRequests(await simStats(s))).to.have.members(['GET /redfish/v1/Chassis/Baseboard/Sensors?$expand=.($levels=1)', `GET ${SYSTEM}/SimpleStorage/1`]);
    });

    it('discovers a BMC too slow for one read over successive reads, keeping every step it completed', async () => {
      // One request at a time, 300 ms each, 1 s per read: login and discovery (7 requests) plus
      // the read (2) need 2.7 s. A step cut off by the read's deadline still finishes, is kept,
      // and the next read goes on from there instead of starting discovery over.
      const one = makeDriver({ maxConcurrentPerBmc: 1 });
      try {
        await setFaults(url, { latencyMs: [300, 300] });
        const ctx = ctxFor(url, { redfish_timeout: 1 });
        const outcomes: string[] = [];
        let data: Awaited<ReturnType<NonNullable<typeof one.management.getSensorDataAsync>>> | undefined;
        for (let i = 0; i < 6 && !data; i++) {
          try {
            data = await one.management.getSensorDataAsync!(ctx);
            outcomes.push('ok');
          } catch (err) {
            expect(err).to.be.instanceOf(BmcTimeout);
            outcomes.push('timeout');
            // Lets the step in flight finish, as the next iteration would.
            await sleep(400);
          }
        }
        expect(outcomes[0]).to.equal('timeout');
        expect(outcomes.at(-1)).to.equal('ok');
        expect(Object.keys(data?.Temperature ?? {})).to.have.length(4);
        const log = (await simStats(url)).log.map((e) => `${e[0]} ${e[1]}`);
        // Every discovery request was made once: none was lost with the read that sent it.
        for (const path of ['/redfish/v1/Systems', SYSTEM, '/redfish/v1/Chassis/Enclosure', '/redfish/v1/Chassis/Baseboard', `${SYSTEM}/SimpleStorage`, '/redfish/v1']) {
          expect(log.filter((l) => l === `GET ${path}`), path).to.have.length(1);
        }
        expect(log.filter((l) => l.startsWith('POST '))).to.have.length(1);
      } finally {
        await one.close();
      }
    });

    it("trusts where the sensors are for an hour (±20 %), then looks again", async () => {
      const ctx = ctxFor(url);
      const first = await driver.management.getSensorDataAsync!(ctx);
      const realNow = Date.now;
      const chassisLookups = async () => (await simStats(url)).log.map((e) => `${e[0]} ${e[1]}`)
        .filter((l) => l === 'GET /redfish/v1/Chassis/Baseboard' || l === 'GET /redfish/v1/Chassis/Enclosure');
      try {
        for (const [hours, lookups] of [[0.79, 0], [1.21, 2]] as const) {
          await simControl(url, 'reset');
          Date.now = () => realNow() + hours * 3_600_000;
          expect(await driver.management.getSensorDataAsync!(ctx), `${hours} h later`).to.deep.equal(first);
          expect(await chassisLookups(), `${hours} h later`).to.have.length(lookups);
        }
      } finally {
        Date.now = realNow;
      }
    });

    it('opens exactly one session for 50 concurrent reads of one BMC and never exceeds the per-BMC limit', async () => {
      await setFaults(url, { latencyMs: [20, 60] });
      const ctx = ctxFor(url);
      const results = await Promise.all(Array.from({ length: 50 }, () => driver.management.getSensorDataAsync?.(ctx)));
      for (const r of results) expect(Object.keys(r?.Temperature ?? {})).to.have.length(4);
      const stats = await simStats(url);
      expect(stats.sessionsCreated).to.equal(1);
      expect(stats.logins).to.equal(1);
      expect(stats.maxConcurrent).to.be.at.most(4);
      expect(stats.maxConcurrent).to.be.at.least(2);
      // Discovery happened once, not once per caller.
      expect(stats.log.filter((e) => e[1] === SYSTEM)).to.have.length(1);
      expect(stats.log.filter((e) => e[1] === '/redfish/v1/Chassis/Baseboard?$expand=.($levels=1)')).to.have.length(50);
    });
  });

  describe('sessions', () => {
    it('logs in again exactly once when the session expired (401)', async () => {
      const ctx = ctxFor(url);
      await driver.power.getPowerState(ctx);
      await simControl(url, 'expire-sessions');
      await simControl(url, 'reset');
      const states = await Promise.all(Array.from({ length: 10 }, () => driver.power.getPowerState(ctx)));
      expect(states).to.deep.equal(Array(10).fill('power on'));
      const stats = await simStats(url);
      expect(stats.logins).to.equal(1);
      expect(stats.sessionsCreated).to.equal(1);
      expect(stats.unauthorized).to.be.at.least(1);
    });

    it('waits for a free session slot (503 with Retry-After) and recovers', async () => {
      await setFaults(url, { sessionLimit: 1 });
      const held = await fetch(`${url}/redfish/v1/SessionService/Sessions`, { method: 'POST', body: JSON.stringify({ UserName: 'admin', Password: 'password' }) });
      const location = held.headers.get('location') ?? '';
      const token = held.headers.get('x-auth-token') ?? '';
      setTimeout(() => void fetch(`${url}${location}`, { method: 'DELETE', headers: { 'x-auth-token': token } }), 1500);
      const started = Date.now();
      expect(await driver.power.getPowerState(ctxFor(url, { redfish_auth_type: 'session' }))).to.equal('power on');
      expect(Date.now() - started).to.be.at.least(900);
      const stats = await simStats(url);
      const logins = stats.log.filter((e) => e[0] === 'POST').map((e) => e[2]);
      expect(logins[0]).to.equal(201);
      expect(logins.slice(1, -1).every((s) => s === 503)).to.equal(true);
      expect(logins[logins.length - 1]).to.equal(201);
      expect(stats.sessionsOpen).to.equal(1);
    });

    it('backs off on a 400 SessionLimitExceeded too', async () => {
      await setFaults(url, { sessionLimit: 1, sessionLimitStatus: 400 });
      const held = await fetch(`${url}/redfish/v1/SessionService/Sessions`, { method: 'POST', body: JSON.stringify({ UserName: 'admin', Password: 'password' }) });
      setTimeout(() => void simControl(url, 'expire-sessions'), 400);
      expect(held.status).to.equal(201);
      expect(await driver.power.getPowerState(ctxFor(url, { redfish_auth_type: 'session' }))).to.equal('power on');
      const statuses = (await simStats(url)).log.filter((e) => e[0] === 'POST').map((e) => e[2]);
      expect(statuses).to.include(400);
      expect(statuses[statuses.length - 1]).to.equal(201);
    });

    it('falls back to Basic in auto mode when no session can be opened', async () => {
      await setFaults(url, { sessionLimit: 0 });
      const d = makeDriver({ connectionAttempts: 2, retryIntervalMs: 50 });
      try {
        expect(await d.power.getPowerState(ctxFor(url))).to.equal('power on');
        expect((await simStats(url)).sessionsCreated).to.equal(0);
      } finally {
        await d.close();
      }
    });

    it('uses Basic authentication without sessions when asked to', async () => {
      expect(await driver.power.getPowerState(ctxFor(url, { redfish_auth_type: 'basic' }))).to.equal('power on');
      expect((await simStats(url)).logins).to.equal(0);
    });

    it('fails with BmcAuthFailed on wrong credentials', async () => {
      const err = await rejection(driver.power.getPowerState(ctxFor(url, { redfish_password: 'wrong' })));
      expect(err).to.be.instanceOf(BmcAuthFailed);
      const basic = await rejection(driver.power.getPowerState(ctxFor(url, { redfish_password: 'wrong', redfish_auth_type: 'basic' })));
      expect(basic).to.be.instanceOf(BmcAuthFailed);
    });

    it('logs out on close, and when the least recently used session makes room', async () => {
      const small = makeDriver({ cacheSize: 2 });
      await small.power.getPowerState(ctxFor(sim.bmcs[0].url));
      await small.power.getPowerState(ctxFor(sim.bmcs[1].url));
      await small.power.getPowerState(ctxFor(sim.bmcs[2].url));
      await sleep(200);
      expect((await simStats(sim.bmcs[0].url)).sessionsOpen).to.equal(0);
      expect((await simStats(sim.bmcs[2].url)).sessionsOpen).to.equal(1);
      await small.close();
      expect((await simStats(sim.bmcs[1].url)).sessionsOpen).to.equal(0);
      expect((await simStats(sim.bmcs[2].url)).sessionsOpen).to.equal(0);
    });
  });

  describe('faults', () => {
    it('retries a 503 after its Retry-After and recovers', async () => {
      const ctx = ctxFor(url);
      await driver.power.getPowerState(ctx);
      await simControl(url, 'reset');
      await setFaults(url, { unavailable: { count: 2, retryAfter: 1 } });
      const started = Date.now();
      expect(await driver.power.getPowerState(ctx)).to.equal('power on');
      expect(Date.now() - started).to.be.at.least(1800);
      expect((await simStats(url)).log.map((e) => e[2])).to.deep.equal([503, 503, 200]);
    });

    it('fails a call to a BMC that never answers within redfish_timeout, while another BMC is served', async () => {
      await setFaults(url, { hang: true });
      const started = Date.now();
      const hung = rejection(driver.power.getPowerState(ctxFor(url, { redfish_timeout: 2 }))).then((err) => ({ err, at: Date.now() - started }));
      const others = Promise.all(Array.from({ length: 20 }, () => driver.management.getSensorDataAsync?.(ctxFor(other)))).then(() => Date.now() - started);
      const [{ err, at }, othersAt] = await Promise.all([hung, others]);
      expect(err).to.be.instanceOf(BmcTimeout);
      expect(at).to.be.within(1900, 4500);
      expect(othersAt).to.be.below(at);
    });

    it('turns garbage bodies into BmcBadResponse, and keeps working afterwards', async () => {
      const ctx = ctxFor(url, { redfish_auth_type: 'basic' });
      await setFaults(url, { garbageRate: 1 });
      for (let i = 0; i < 5; i++) expect(await rejection(driver.power.getPowerState(ctx))).to.be.instanceOf(BmcBadResponse);
      expect(await rejection(driver.management.getSensorDataAsync?.(ctx) ?? Promise.resolve())).to.be.instanceOf(BmcBadResponse);
      await setFaults(url, { garbageRate: 0 });
      expect(await driver.power.getPowerState(ctx)).to.equal('power on');
    });

    it('retries connection resets, and reports BmcUnreachable when they persist', async () => {
      const ctx = ctxFor(url, { redfish_auth_type: 'basic' });
      await setFaults(url, { resetRate: 1 });
      const err = await rejection(driver.power.getPowerState(ctx));
      expect(err).to.be.instanceOf(BmcUnreachable);
      expect((await simStats(url)).log.length).to.equal(4);
    });

    it('reports BmcUnreachable for a closed port', async () => {
      const port = await freePort();
      const err = await rejection(driver.power.getPowerState(ctxFor(`http://127.0.0.1:${port}`)));
      expect(err).to.be.instanceOf(BmcUnreachable);
      expect(err.message).to.contain('ECONNREFUSED');
    });

    it('gives up as soon as the caller aborts', async () => {
      await setFaults(url, { hang: true });
      const started = Date.now();
      const err = await rejection(driver.power.getPowerState(ctxFor(url, {}, AbortSignal.timeout(300))));
      expect(err).to.be.instanceOf(BmcTimeout);
      expect(Date.now() - started).to.be.below(3000);
    });

    it('reports a Reset type the BMC refuses as BmcRejected with its status', async () => {
      // The synthetic BMC does not offer PowerCycle; sending one directly shows the error path.
      const r = await driver.client.run(ctxFor(url), (call) => call.send('POST', `${SYSTEM}/Actions/ComputerSystem.Reset`, { body: { ResetType: 'PowerCycle' } }));
      expect(r.status).to.equal(400);
      const err = await rejection(driver.client.run(ctxFor(url), (call) => call.get('/redfish/v1/Nope')));
      expect(err).to.be.instanceOf(BmcRejected);
      expect((err as BmcRejected).status).to.equal(404);
      expect(err.message).to.contain('ResourceMissingAtURI');
    });
  });
});
