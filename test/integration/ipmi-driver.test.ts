/**
 * The ipmi hardware type against real BMC simulators (ipmi_sim): power, boot device, sensors,
 * error mapping, process hygiene (no ipmitool outlives its call, no password on any argv) and
 * per-BMC command spacing.
 */
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { pino } from 'pino';
import { BmcAuthFailed, BmcRejected, BmcTimeout, BmcUnreachable, InvalidDriverInfo } from '../../common/errors.js';
import { IpmitoolManagement } from '../../drivers/ipmi/management.js';
import { IpmitoolPower } from '../../drivers/ipmi/power.js';
import { IpmitoolRunner, type IpmitoolRunnerOptions } from '../../drivers/ipmi/runner.js';
import type { DriverContext } from '../../drivers/interfaces.js';
import {
  allCommandLines, childIpmitools, freeUdpPort, requireIpmiSim, startSimBmcs, stopSimBmcs, type SimBmc,
} from '../helpers/ipmi-sim.js';

const log = pino({ level: 'silent' });
// Unique per run, so that finding it on some process's argv can only mean a leak.
const PASSWORD = `pw-${randomBytes(6).toString('hex')}`;

const BASE: IpmitoolRunnerOptions = {
  workers: 2,
  commandTimeoutMs: 20_000,
  minCommandIntervalMs: 200,
  commandRetryTimeoutMs: 5_000,
  useIpmitoolRetries: false,
};

interface Driver {
  runner: IpmitoolRunner;
  power: IpmitoolPower;
  management: IpmitoolManagement;
}

function makeDriver(opts: Partial<IpmitoolRunnerOptions> = {}): Driver {
  const runner = new IpmitoolRunner({ ...BASE, ...opts });
  return { runner, power: new IpmitoolPower(runner, { defaultTimeoutS: 30, pollIntervalMs: 100 }), management: new IpmitoolManagement(runner) };
}

function ctxFor(driverInfo: Record<string, unknown>, signal?: AbortSignal): DriverContext {
  return { nodeUuid: '1be26c0b-03f2-4d2e-ae87-c02d7f33c123', driverInfo, log, signal };
}

/** Child ipmitools once there are `n` (a new pool's first thread can be slow to start on a busy machine). */
async function waitForIpmitools(n: number, withinMs = 3000): Promise<number[]> {
  const deadline = Date.now() + withinMs;
  let pids = await childIpmitools();
  while (pids.length < n && Date.now() < deadline) {
    await sleep(20);
    pids = await childIpmitools();
  }
  return pids;
}

async function rejection(p: Promise<unknown>): Promise<Error> {
  try {
    await p;
  } catch (err) {
    return err as Error;
  }
  throw new Error('expected a rejection');
}

describe('ipmi driver against ipmi_sim', function () {
  this.timeout(120_000);
  let bmcs: SimBmc[] = [];
  let a: SimBmc;
  let b: SimBmc;
  let d: Driver;
  const closers: Array<() => Promise<void>> = [];

  before(async function () {
    requireIpmiSim(this);
    bmcs = await startSimBmcs(2, { password: PASSWORD });
    [a, b] = bmcs;
    d = makeDriver();
    closers.push(() => d.runner.close());
  });

  after(async () => {
    for (const close of closers.splice(0).reverse()) await close();
    await stopSimBmcs(bmcs);
  });

  afterEach(async () => {
    // Every call below has settled by the end of its test: none of its processes may remain.
    expect(await childIpmitools(), 'ipmitool processes left behind').to.deep.equal([]);
  });

  describe('power', () => {
    it('reads the power state and powers on and off, polling until the state is reached', async () => {
      const ctx = ctxFor(a.driverInfo());
      await a.setPower(0);
      expect(await d.power.getPowerState(ctx)).to.equal('power off');
      await d.power.setPowerState(ctx, 'power on');
      expect(await a.power()).to.equal(1);
      expect(await d.power.getPowerState(ctx)).to.equal('power on');
      await d.power.setPowerState(ctx, 'power off');
      expect(await a.power()).to.equal(0);
      expect(await d.power.getPowerState(ctx)).to.equal('power off');
      expect((await a.chassisLog()).map((e) => e.action)).to.include.members(['set power 1', 'set power 0']);
    });

    it('reboots with power cycle when on and power on when off', async () => {
      const ctx = ctxFor(a.driverInfo());
      await a.setPower(1);
      const before = (await a.chassisLog()).length;
      await d.power.setPowerState(ctx, 'rebooting');
      expect((await a.chassisLog()).slice(before).map((e) => e.action)).to.deep.equal(['set power 0', 'set power 1']);
      expect(await a.power()).to.equal(1);

      await a.setPower(0);
      const mid = (await a.chassisLog()).length;
      await d.power.setPowerState(ctx, 'rebooting');
      expect((await a.chassisLog()).slice(mid).map((e) => e.action)).to.deep.equal(['set power 1']);
      expect(await a.power()).to.equal(1);
    });

    it('soft powers off and soft reboots', async () => {
      const ctx = ctxFor(a.driverInfo());
      await a.setPower(1);
      const start = (await a.chassisLog()).length;
      await d.power.setPowerState(ctx, 'soft power off', 20);
      expect(await a.power()).to.equal(0);
      await d.power.setPowerState(ctx, 'power on');
      await d.power.setPowerState(ctx, 'soft rebooting', 20);
      expect(await a.power()).to.equal(1);
      expect((await a.chassisLog()).slice(start).map((e) => e.action)).to.deep.equal(['set shutdown 1', 'set power 1', 'set shutdown 1', 'set power 1']);
    });

    it('lists the power states it supports', async () => {
      expect(await d.power.getSupportedPowerStates()).to.have.members(['power on', 'power off', 'rebooting', 'soft power off', 'soft rebooting']);
    });
  });

  describe('boot device', () => {
    it('sets the boot device and reads it back', async () => {
      const ctx = ctxFor(a.driverInfo());
      await d.management.setBootDevice(ctx, 'pxe', false);
      expect(await a.bootDevice()).to.equal('pxe');
      expect(await d.management.getBootDevice(ctx)).to.deep.equal({ bootDevice: 'pxe', persistent: false });
      await d.management.setBootDevice(ctx, 'disk', true);
      // ipmi_sim keeps the device but not the persistent flag (always "only next boot").
      expect((await d.management.getBootDevice(ctx)).bootDevice).to.equal('disk');
      await d.management.setBootDevice(ctx, 'cdrom', false);
      expect((await d.management.getBootDevice(ctx)).bootDevice).to.equal('cdrom');
      await d.management.setBootDevice(ctx, 'bios', false);
      expect((await d.management.getBootDevice(ctx)).bootDevice).to.equal('bios');
    });

    it('sends options=persistent and efiboot, after disabling the boot flag timeout', async () => {
      // A wrapper records ipmitool's argv: ipmi_sim ignores those flags, so ask the command line.
      const tmp = await fs.mkdtemp(path.join(os.tmpdir(), 'galvanic-ipmitool-'));
      const argvLog = path.join(tmp, 'argv.log');
      const wrapper = path.join(tmp, 'ipmitool');
      await fs.writeFile(wrapper, `#!/bin/sh\nprintf '%s\\n' "$*" >> '${argvLog}'\nexec ipmitool "$@"\n`, { mode: 0o755 });
      const rec = makeDriver({ binary: wrapper });
      try {
        const ctx = ctxFor(a.driverInfo());
        await rec.management.setBootDevice(ctx, 'disk', true);
        await rec.management.setBootDevice(ctx, 'pxe', true, { efiboot: true });
        await rec.management.setBootDevice(ctx, 'pxe', false);
        await rec.management.setBootDevice(ctx, 'cdrom', false);
        const lines = (await fs.readFile(argvLog, 'utf8')).trim().split('\n');
        const commands = lines.map((l) => l.slice(l.indexOf(' -v ') + 4));
        expect(commands).to.deep.equal([
          'raw 0x00 0x08 0x03 0x08', 'chassis bootdev disk options=persistent',
          'raw 0x00 0x08 0x03 0x08', 'chassis bootdev pxe options=persistent,efiboot',
          'raw 0x00 0x08 0x03 0x08', 'chassis bootdev pxe',
          'raw 0x00 0x08 0x03 0x08', 'chassis bootdev cdrom',
        ]);
        expect(lines[0]).to.match(/^-I lanplus -H 127\.0\.0\.1 -p \d+ -U admin -L ADMINISTRATOR -C 3 -R 1 -N 1 -E -v /);
        for (const l of lines) expect(l).to.not.contain(PASSWORD);
        const noTimeout = ctxFor(a.driverInfo({ ipmi_disable_boot_timeout: false }));
        await rec.management.setBootDevice(noTimeout, 'disk', false);
        expect((await fs.readFile(argvLog, 'utf8')).trim().split('\n')).to.have.length(lines.length + 1);
      } finally {
        await rec.runner.close();
        await fs.rm(tmp, { recursive: true, force: true });
      }
    });

    it('reports a boot device the BMC refuses as BmcRejected although ipmitool exits 0', async () => {
      // ipmi_sim's chassis control has no "safe" mode: "Set Chassis Boot Parameter 5 failed".
      const err = await rejection(d.management.setBootDevice(ctxFor(a.driverInfo()), 'safe', false));
      expect(err).to.be.instanceOf(BmcRejected);
      expect(err.message).to.contain('Unspecified error');
    });

    it('lists Ironic\'s ipmitool boot devices and refuses others before any I/O', async () => {
      expect(await d.management.getSupportedBootDevices()).to.deep.equal(['pxe', 'disk', 'cdrom', 'bios', 'safe']);
      const err = await rejection(d.management.setBootDevice(ctxFor(a.driverInfo()), 'floppy', false));
      expect(err.message).to.contain('Invalid boot device floppy');
    });
  });

  describe('sensors', () => {
    it('parses `ipmitool sdr -v` into Ironic\'s structure', async () => {
      const ctx = ctxFor(b.driverInfo());
      await d.power.setPowerState(ctx, 'power on');
      const data = await d.management.getSensorData(ctx);
      expect(data).to.have.all.keys('Temperature', 'Fan', 'Current', 'Voltage', 'Power');
      expect(data.Temperature).to.have.all.keys('Inlet Temp (0x1)', 'CPU1 Temp (0x2)');
      const inlet = data.Temperature['Inlet Temp (0x1)'];
      expect(inlet).to.include({ 'Sensor ID': 'Inlet Temp (0x1)', 'Entity ID': '39.1 (External Environment)', 'Sensor Type (Threshold)': 'Temperature (0x01)', Status: 'ok' });
      expect(inlet['Sensor Reading']).to.match(/^\d+ \(\+\/- \d+\) degrees C$/);
      expect(data.Fan['FAN1 (0x3)']['Sensor Reading']).to.match(/RPM$/);
      expect(data.Voltage['12V (0x5)']['Sensor Reading']).to.match(/Volts$/);
      expect(data.Current['PSU1 Power (0x4)']['Sensor Reading']).to.match(/Watts$/);
      expect(data.Power['PSU1 Status (0x6)']).to.include({ 'Sensor Type (Discrete)': 'Power Supply (0x08)', 'Sensor Reading': '0h' });
      for (const group of Object.values(data)) {
        for (const sensor of Object.values(group)) {
          for (const v of Object.values(sensor)) expect(v).to.be.a('string');
        }
      }
    });
  });

  describe('failures', () => {
    it('maps a wrong password to BmcAuthFailed, quickly', async () => {
      const started = Date.now();
      const err = await rejection(d.power.getPowerState(ctxFor(a.driverInfo({ ipmi_password: 'wrong-password' }))));
      expect(err).to.be.instanceOf(BmcAuthFailed);
      expect(err.message).to.match(/RAKP 2 HMAC is invalid/);
      expect(Date.now() - started).to.be.below(10_000);
    });

    it('maps an unknown user to BmcAuthFailed, with IPMI 1.5 too', async () => {
      expect(await rejection(d.power.getPowerState(ctxFor(a.driverInfo({ ipmi_username: 'nobody' }))))).to.be.instanceOf(BmcAuthFailed);
      const v15 = a.driverInfo({ ipmi_protocol_version: '1.5', ipmi_cipher_suite: undefined, ipmi_password: 'wrong' });
      expect(await rejection(d.power.getPowerState(ctxFor(v15)))).to.be.instanceOf(BmcAuthFailed);
      const ok15 = a.driverInfo({ ipmi_protocol_version: '1.5', ipmi_cipher_suite: undefined });
      expect(await d.power.getPowerState(ctxFor(ok15))).to.be.oneOf(['power on', 'power off']);
    });

    it('fails a BMC nobody answers with BmcUnreachable within the command timeout', async () => {
      const port = await freeUdpPort();
      const started = Date.now();
      const err = await rejection(d.power.getPowerState(ctxFor(a.driverInfo({ ipmi_port: port }))));
      expect(err).to.be.instanceOf(BmcUnreachable);
      expect((err as BmcUnreachable).transient).to.equal(true);
      expect(Date.now() - started).to.be.below(BASE.commandTimeoutMs);
    });

    it('kills ipmitool at the command timeout and leaves no process behind', async () => {
      // ipmitool's own retries (-R 30 -N 1) would keep it going for about a minute.
      const slow = makeDriver({ commandTimeoutMs: 1500, useIpmitoolRetries: true, commandRetryTimeoutMs: 30_000, minCommandIntervalMs: 1000 });
      try {
        const port = await freeUdpPort();
        const before = await childIpmitools();
        expect(before).to.deep.equal([]);
        const started = Date.now();
        const call = slow.power.getPowerState(ctxFor(a.driverInfo({ ipmi_port: port })));
        expect(await waitForIpmitools(1), 'ipmitool runs during the call').to.have.length(1);
        const err = await rejection(call);
        const elapsed = Date.now() - started;
        expect(err).to.be.instanceOf(BmcTimeout);
        expect(elapsed).to.be.within(1400, 8000);
        expect(await childIpmitools()).to.deep.equal([]);
      } finally {
        await slow.runner.close();
      }
    });

    it('kills ipmitool when the caller aborts', async () => {
      const port = await freeUdpPort();
      const ac = new AbortController();
      const call = d.power.getPowerState(ctxFor(a.driverInfo({ ipmi_port: port }), ac.signal));
      await sleep(500);
      const reason = new Error('operator gave up');
      ac.abort(reason);
      const started = Date.now();
      expect(await rejection(call)).to.equal(reason);
      expect(Date.now() - started).to.be.below(3000);
      expect(await childIpmitools()).to.deep.equal([]);
    });

    it('stops running ipmitools when the driver closes', async () => {
      const closing = makeDriver();
      const [p1, p2] = [await freeUdpPort(), await freeUdpPort()];
      // Three calls to one dead BMC (one runs, two wait for their turn) and one to another.
      const calls = [p1, p1, p1, p2].map((port) => rejection(closing.power.getPowerState(ctxFor(a.driverInfo({ ipmi_port: port })))));
      expect(await waitForIpmitools(2)).to.have.length(2);
      const started = Date.now();
      await closing.runner.close();
      expect(Date.now() - started).to.be.below(3000);
      for (const e of await Promise.all(calls)) expect(e).to.be.instanceOf(Error);
      expect(await childIpmitools()).to.deep.equal([]);
      expect((await rejection(closing.power.getPowerState(ctxFor(a.driverInfo())))).message).to.match(/shutting down/);
    });

    it('refuses bad driver_info with clear messages, before any I/O', () => {
      const cases: Array<[Record<string, unknown>, RegExp]> = [
        [{}, /ipmi_address/],
        [{ ipmi_address: '10.0.0.1', ipmi_port: 'abc' }, /ipmi_port must be an integer between 1 and 65535/],
        [{ ipmi_address: '10.0.0.1', ipmi_protocol_version: '3.0' }, /Invalid IPMI protocol version value 3\.0.*1\.5/],
        [{ ipmi_address: '10.0.0.1', ipmi_priv_level: 'ROOT' }, /Invalid privilege level value: ROOT.*ADMINISTRATOR, CALLBACK, OPERATOR, USER/],
        [{ ipmi_address: '10.0.0.1', ipmi_cipher_suite: 'x' }, /ipmi_cipher_suite must be an integer/],
        [{ ipmi_address: '10.0.0.1', ipmi_protocol_version: '1.5', ipmi_cipher_suite: 3 }, /ipmi_cipher_suite can only be used with ipmi_protocol_version 2\.0/],
        [{ ipmi_address: '-oops' }, /ipmi_address must be an IP address or hostname/],
      ];
      for (const [info, message] of cases) {
        expect(() => d.power.validate(info), JSON.stringify(info)).to.throw(InvalidDriverInfo, message);
        expect(() => d.management.validate(info)).to.throw(InvalidDriverInfo, message);
      }
      expect(() => d.power.validate({ ipmi_address: 'bmc-1.example.com', ipmi_port: '6230', ipmi_priv_level: 'operator' })).to.not.throw();
    });
  });

  describe('process hygiene and spacing', () => {
    it('never puts the password on any process\'s argv, while calls run concurrently', async () => {
      const deadPorts = [await freeUdpPort(), await freeUdpPort()];
      const calls = Promise.allSettled([
        d.management.getSensorData(ctxFor(a.driverInfo())),
        d.management.getSensorData(ctxFor(b.driverInfo())),
        d.power.getPowerState(ctxFor(a.driverInfo())),
        d.management.getBootDevice(ctxFor(b.driverInfo())),
        ...deadPorts.map((port) => d.power.getPowerState(ctxFor(a.driverInfo({ ipmi_port: port })))),
      ]);
      let done = false;
      void calls.then(() => (done = true));
      const seen = new Set<number>();
      const leaks: string[] = [];
      let scans = 0;
      while (!done) {
        for (const [pid, argv] of allCommandLines()) {
          if (argv.includes(PASSWORD)) leaks.push(`${pid}: ${argv}`);
          if (/(^|\/)ipmitool /.test(argv)) {
            seen.add(pid);
            expect(argv).to.contain(' -E ').and.not.contain(' -P ');
          }
        }
        scans++;
        await new Promise((r) => setImmediate(r));
      }
      const results = await calls;
      expect(results.slice(0, 4).map((r) => r.status)).to.deep.equal(['fulfilled', 'fulfilled', 'fulfilled', 'fulfilled']);
      expect(leaks).to.deep.equal([]);
      expect(scans).to.be.greaterThan(1);
      expect(seen.size, 'ipmitool processes observed by the scan').to.be.at.least(2);
    });

    it('keeps min_command_interval between commands to one BMC while two BMCs proceed in parallel', async () => {
      const interval = 1500;
      const spaced = makeDriver({ minCommandIntervalMs: interval, workers: 2 });
      try {
        const t0 = performance.now();
        const doneAt = (bmc: SimBmc) => Array.from({ length: 3 }, () => spaced.power.getPowerState(ctxFor(bmc.driverInfo())).then(() => performance.now() - t0));
        const [ta, tb] = await Promise.all([Promise.all(doneAt(a)), Promise.all(doneAt(b))]);
        for (const times of [ta, tb]) {
          const sorted = [...times].sort((x, y) => x - y);
          // Each command starts at least `interval` after the previous one to that BMC ended.
          expect(sorted[1] - sorted[0]).to.be.at.least(interval - 20);
          expect(sorted[2] - sorted[1]).to.be.at.least(interval - 20);
        }
        // The other BMC did not wait: their first commands ended close together.
        expect(Math.abs(Math.min(...ta) - Math.min(...tb))).to.be.below(interval);

        // Same from the BMC's side: the chassis log of three boot device changes in a row.
        const start = (await a.chassisLog()).length;
        for (const dev of ['pxe', 'disk', 'pxe']) await spaced.management.setBootDevice(ctxFor(a.driverInfo({ ipmi_disable_boot_timeout: false })), dev, false);
        const sets = (await a.chassisLog()).slice(start).filter((e) => e.action.startsWith('set boot'));
        expect(sets).to.have.length(3);
        expect((sets[1].t - sets[0].t) * 1000).to.be.at.least(interval - 20);
        expect((sets[2].t - sets[1].t) * 1000).to.be.at.least(interval - 20);
      } finally {
        await spaced.runner.close();
      }
    });
  });
});
