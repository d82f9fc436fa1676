/**
 * The redfish driver against real vendors' payloads: every tree of ../shared/redfish-mockups,
 * served by `galvanic sim redfish --mockup DIR`. Each must yield power state, boot device,
 * supported boot devices and sensors without error; a few concrete values per vendor pin the
 * quirks down (see the mockups' README).
 */
import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { SensorData } from '../../drivers/interfaces.js';
import type { RedfishDriver } from '../../drivers/redfish/index.js';
import { ctxFor, makeDriver } from '../helpers/redfish.js';
import { MOCKUPS, mockupTrees } from '../helpers/mockups.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

interface Served {
  proc: ChildProcess;
  url: string;
}

async function serve(dir: string): Promise<Served> {
  const proc = spawn(process.execPath, [path.join(ROOT, 'dist/cli/main.js'), 'sim', 'redfish', '--count', '1', '--base-port', '0', '--mockup', dir], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  proc.stderr?.on('data', (c: Buffer) => (err += c.toString()));
  const line = await new Promise<string>((resolve, reject) => {
    let out = '';
    proc.stdout?.on('data', (c: Buffer) => {
      out += c.toString();
      if (out.includes('\n')) resolve(out.split('\n')[0]);
    });
    proc.once('exit', (code) => reject(new Error(`galvanic sim redfish --mockup ${dir} exited with ${code}: ${err}`)));
  });
  const { firstPort } = JSON.parse(line) as { firstPort: number };
  return { proc, url: `http://127.0.0.1:${firstPort}` };
}

async function stop(s: Served | undefined): Promise<void> {
  if (!s || s.proc.exitCode !== null) return;
  const exited = new Promise((r) => s.proc.once('exit', r));
  s.proc.kill('SIGTERM');
  await exited;
}

const count = (data: SensorData, kind: string) => Object.keys(data[kind] ?? {}).length;

/** Concrete expectations per known tree. */
const EXPECT: Record<string, (r: { power: string; boot: { bootDevice: string | null; persistent: boolean | null }; supported: string[]; sensors: SensorData }) => void> = {
  'dmtf-public-rackmount1': ({ power, boot, supported, sensors }) => {
    expect(power).to.equal('power on');
    // DMTF ships with a one-time PXE override already set.
    expect(boot).to.deep.equal({ bootDevice: 'pxe', persistent: false });
    expect(supported).to.have.members(['pxe', 'cdrom', 'usb', 'disk', 'bios']);
    expect(Object.keys(sensors.Temperature)).to.deep.equal(['0@1U', '1@1U', '2@1U']);
    // CPU2 Temp is Disabled and has no ReadingCelsius.
    expect(sensors.Temperature['1@1U']).to.include({ reading_celsius: null, state: 'disabled', health: null, sensor_number: 6 });
    expect(count(sensors, 'Fan')).to.equal(2);
    expect(sensors.Power['0:Power@1U']).to.deep.equal({ power_capacity_watts: 800, line_input_voltage: 120, last_power_output_watts: 325, serial_number: '1Z0000001', state: 'enabled', health: 'Warning' });
    expect(Object.keys(sensors.Drive)).to.include('SATA Bay 1:1@437XR1138R2');
    expect(sensors.Drive['SATA Bay 3:1@437XR1138R2']).to.include({ state: 'absent', model: null });
  },
  'hpe-dl325-gen10plus-ilo5': ({ power, boot, supported, sensors }) => {
    expect(power).to.equal('power on');
    expect(boot).to.deep.equal({ bootDevice: null, persistent: null });
    expect(supported).to.include.members(['pxe', 'disk', 'cdrom', 'bios', 'usb', 'uefi-http']);
    expect(count(sensors, 'Temperature')).to.equal(35);
    expect(count(sensors, 'Fan')).to.equal(8);
    expect(Object.values(sensors.Temperature).filter((t) => t.state === 'absent')).to.have.length(8);
    // HPE reports fans in percent, with "Thermal#Fans/0" fragment ids.
    expect(sensors.Fan['0@1']).to.include({ identity: '0', reading: 35, reading_units: 'Percent' });
    expect(count(sensors, 'Power')).to.equal(2);
    expect(sensors.Power['0:Power@1']).to.include({ last_power_output_watts: 51, serial_number: '5WBXK0FLLDIKPU' });
  },
  'intel-bmc': ({ power, supported, sensors }) => {
    expect(power).to.equal('power on');
    expect(supported).to.have.members(['pxe', 'disk', 'cdrom', 'bios', 'usb']);
    // System.Links.Chassis points at an error object; the sensors are on RackMount/Baseboard.
    const ids = [...Object.keys(sensors.Temperature), ...Object.keys(sensors.Fan), ...Object.keys(sensors.Power)];
    expect(ids.every((id) => id.endsWith('@Baseboard'))).to.equal(true);
    expect(count(sensors, 'Temperature')).to.equal(28);
    expect(count(sensors, 'Fan')).to.equal(6);
    expect(count(sensors, 'Power')).to.equal(2);
    expect(sensors.Temperature['0@Baseboard']).to.include({ reading_celsius: 22, sensor_number: 32, state: 'enabled' });
  },
  'openbmc-bmcweb': ({ power, boot, supported, sensors }) => {
    expect(power).to.equal('power off');
    expect(boot).to.deep.equal({ bootDevice: null, persistent: null });
    expect(supported).to.have.members(['pxe', 'disk', 'cdrom', 'bios', 'usb']);
    expect(sensors).to.deep.equal({ Temperature: {}, Fan: {}, Power: {}, Drive: {} });
  },
};

describe('redfish driver against recorded mockups', function () {
  this.timeout(60_000);
  const found = mockupTrees();
  const servers = new Map<string, Served>();

  before(async function () {
    if (!found.length) {
      const message = `no Redfish mockups at ${MOCKUPS} (CI puts shared/ beside the clone)`;
      if (process.env.CI === 'true') throw new Error(message);
      console.log(`      (skipped: ${message})`);
      this.skip();
    }
    // One simulator process per tree, started side by side.
    const started = await Promise.allSettled(found.map(async (name) => servers.set(name, await serve(path.join(MOCKUPS, name)))));
    const failed = started.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
  });
  after(async () => {
    await Promise.all([...servers.values()].map((s) => stop(s)));
  });

  it('finds the four trees it knows', function () {
    if (!found.length) this.skip();
    expect(found).to.include.members(Object.keys(EXPECT));
  });

  for (const name of found.length ? found : ['(none)']) {
    describe(name, () => {
      let served: Served | undefined;
      let driver: RedfishDriver | undefined;

      before(function () {
        if (!found.length) this.skip();
        served = servers.get(name);
        driver = makeDriver();
      });
      after(async () => {
        await driver?.close();
      });
      const useDriver = (): RedfishDriver => driver as RedfishDriver;

      it('reads power state, boot device, supported boot devices and sensors', async () => {
        const driver = useDriver();
        const ctx = ctxFor((served as Served).url);
        const power = await driver.power.getPowerState(ctx);
        const boot = await driver.management.getBootDevice(ctx);
        const supported = await driver.management.getSupportedBootDevices(ctx);
        const sensors = (await driver.management.getSensorDataAsync?.(ctx)) as SensorData;
        expect(power).to.be.oneOf(['power on', 'power off']);
        expect(sensors).to.have.keys(['Temperature', 'Fan', 'Power', 'Drive']);
        for (const group of Object.values(sensors)) {
          for (const [id, sensor] of Object.entries(group)) {
            expect(id).to.match(/@/);
            expect(sensor).to.have.property('state');
            expect(sensor).to.have.property('health');
          }
        }
        EXPECT[name]?.({ power, boot, supported, sensors });
      });

      it('powers the node off and on, and sets the boot device', async () => {
        const driver = useDriver();
        const ctx = ctxFor((served as Served).url);
        await driver.power.setPowerState(ctx, 'power off');
        expect(await driver.power.getPowerState(ctx)).to.equal('power off');
        await driver.power.setPowerState(ctx, 'power on');
        expect(await driver.power.getPowerState(ctx)).to.equal('power on');
        const supported = await driver.management.getSupportedBootDevices(ctx);
        if (supported.includes('pxe')) {
          await driver.management.setBootDevice(ctx, 'pxe', true);
          expect(await driver.management.getBootDevice(ctx)).to.deep.equal({ bootDevice: 'pxe', persistent: true });
        }
      });
    });
  }
});
