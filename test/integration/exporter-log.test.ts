/**
 * `[exporter] source = log`: the exporter follows the log notification driver's file (no
 * broker), written by the real log driver, through appends and a rotation.
 */
import { expect } from 'chai';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { ConfigError } from '../../common/errors.js';
import { createNotifier } from '../../common/notifier.js';
import { sensorEventType, sensorMessage } from '../../conductor/sensors/message.js';
import { Exporter, exporterOptions } from '../../exporter/service.js';
import { freePort } from '../helpers/net.js';
import { until } from '../helpers/until.js';
import { testConfig } from '../helpers/app.js';

const log = pino({ level: 'silent' });

function temperature(celsius: number) {
  return { Temperature: { 'CPU1@1': { identity: 'CPU1', physical_context: 'CPU', reading_celsius: celsius, sensor_number: 1, health: 'OK', state: 'enabled' } } };
}

async function metricsOf(url: string): Promise<string> {
  const res = await fetch(`${url}/metrics`);
  expect(res.status).to.equal(200);
  return res.text();
}

describe('exporter following the log notification file', function () {
  this.timeout(30_000);
  let dir: string;

  before(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'galvanic-exporter-log-'));
  });

  after(async () => {
    await fs.rm(dir, { recursive: true, force: true });
  });

  it('refuses source = log without a log_file, as the configuration loads', () => {
    expect(() => testConfig({ GALVANIC_EXPORTER__SOURCE: 'log' }))
      .to.throw(ConfigError, 'env GALVANIC_EXPORTER__SOURCE: [exporter] source: log follows [notifications] log_file, which is empty.');
  });

  it('exports what the log driver appends, from the end of the file on, and survives a rotation', async () => {
    const file = path.join(dir, 'notifications.jsonl');
    const node = { uuid: 'ac2a0000-0000-4000-8000-0000000000aa', name: 'logged', driver: 'redfish', instanceUuid: null };
    // Written before the exporter starts: not exported (it starts at the end, as tail -F).
    const before = createNotifier({ driver: 'log', logFile: file, host: 'h', service: 'galvanic-conductor', log });
    before.send(sensorEventType('redfish'), 'info', sensorMessage(node, temperature(11)));
    await before.close();

    const config = testConfig({
      GALVANIC_EXPORTER__SOURCE: 'log', GALVANIC_NOTIFICATIONS__LOG_FILE: file, GALVANIC_EXPORTER__PORT: String(await freePort()),
    });
    const exporter = new Exporter(exporterOptions(config), log);
    const { url } = await exporter.start();
    try {
      expect(await metricsOf(url)).to.not.include(node.uuid);

      const notifier = createNotifier({ driver: 'log', logFile: file, host: 'h', service: 'galvanic-conductor', log });
      notifier.send(sensorEventType('redfish'), 'info', sensorMessage(node, temperature(42)));
      await notifier.close();
      await until('the appended reading', async () => /baremetal_temp_cpu_celsius\{[^}]*node_name="logged"[^}]*\} 42/.test(await metricsOf(url)));

      // Rotation: the file is moved away and a new one written.
      await fs.rename(file, `${file}.1`);
      const rotated = createNotifier({ driver: 'log', logFile: file, host: 'h', service: 'galvanic-conductor', log });
      rotated.send(sensorEventType('redfish'), 'info', sensorMessage(node, temperature(43)));
      await rotated.close();
      await until('the reading after rotation', async () => /baremetal_temp_cpu_celsius\{[^}]*node_name="logged"[^}]*\} 43/.test(await metricsOf(url)));
      // A line that is not a notification is counted, not fatal.
      await fs.appendFile(file, 'not json\n');
      await until('the parse error', async () => /galvanic_exporter_parse_errors_total 1/.test(await metricsOf(url)));
      expect(await metricsOf(url)).to.match(/baremetal_temp_cpu_celsius\{[^}]*node_name="logged"[^}]*\} 43/);
    } finally {
      await exporter.stop();
    }
  });
});
