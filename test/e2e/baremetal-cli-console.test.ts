/**
 * `baremetal node console enable | show | disable` (python-ironicclient) against a real
 * `galvanic all-in-one` with the fake console. Skipped without the CLI, except under CI.
 */
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { startGalvanicOnFreshDatabase, type GalvanicOnFreshDatabase } from '../helpers/app.js';
import { CLI, requireCli } from '../helpers/baremetal.js';
import { connectViewer, fakeConsoleProcesses } from '../helpers/console.js';
import { until } from '../helpers/until.js';

interface ConsoleShow {
  console_enabled: boolean;
  console_info: { type: string; url: string } | null;
}

describe('baremetal CLI: node console (e2e)', function () {
  this.timeout(120_000);
  let galvanic: GalvanicOnFreshDatabase | undefined;
  let uuid: string;

  before(async function () {
    requireCli(this, 'console CLI tests');
    galvanic = await startGalvanicOnFreshDatabase();
    const res = await fetch(`${galvanic.url}/v1/nodes`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-openstack-ironic-api-version': 'latest' },
      body: JSON.stringify({ name: 'cli-console', driver: 'fake-hardware', console_interface: 'fake' }),
    });
    expect(res.status).to.equal(201);
    uuid = ((await res.json()) as { uuid: string }).uuid;
  });
  after(async () => {
    await galvanic?.shutdown();
  });

  const baremetal = (...args: string[]): Promise<string> => new Promise((resolve, reject) => {
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('OS_')));
    execFile(CLI, ['--os-auth-type', 'none', '--os-endpoint', galvanic!.url, ...args], { env, timeout: 60_000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`baremetal ${args.join(' ')} failed: ${stderr}`));
      else resolve(stdout);
    });
  });
  const show = async () => JSON.parse(await baremetal('node', 'console', 'show', 'cli-console', '-f', 'json')) as ConsoleShow;

  it('enable, show (a working websocket URL), disable', async () => {
    expect(await show()).to.deep.include({ console_enabled: false, console_info: null });
    await baremetal('node', 'console', 'enable', 'cli-console');
    await until('console enabled', async () => (await show()).console_enabled, 15_000);
    const shown = await show();
    expect(shown.console_info!.type).to.equal('websocket');
    const v = connectViewer(shown.console_info!.url);
    await v.waitFor(`Fake serial console of node ${uuid}`);
    v.close();
    await baremetal('node', 'console', 'disable', 'cli-console');
    await until('console disabled', async () => !(await show()).console_enabled, 15_000);
    expect((await show()).console_info).to.equal(null);
    await until('console process gone', () => !fakeConsoleProcesses().has(uuid), 5000);
  });
});
