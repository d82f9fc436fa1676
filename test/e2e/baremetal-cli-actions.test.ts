/**
 * The real `baremetal` CLI (python-ironicclient) against a real `galvanic all-in-one`:
 * power, reboot, boot device and the manage/provide verbs, as an operator types them.
 * Skipped when the CLI is not installed, except under CI where it must be.
 */
import { expect } from 'chai';
import { execFile, spawnSync } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { startGalvanic, type RunningGalvanic } from '../helpers/app.js';
import { freshDatabase, type TestDatabase } from '../helpers/database.js';

interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

function cliInstalled(): boolean {
  const r = spawnSync('baremetal', ['--version'], { encoding: 'utf8' });
  return r.error === undefined && r.status === 0;
}

/** The environment without the caller's OpenStack settings, so only our flags count. */
function cleanEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('OS_')));
}

describe('baremetal CLI: node actions (e2e)', function () {
  this.timeout(300_000);
  let tdb: TestDatabase | undefined;
  let galvanic: RunningGalvanic | undefined;
  let nodeUuid: string;
  let calls = 0;

  before(async function () {
    if (!cliInstalled()) {
      if (process.env.CI === 'true') throw new Error('the baremetal CLI (python3-ironicclient) is required under CI but is not installed');
      console.log('    (skipped: the `baremetal` CLI is not installed; apt-get install python3-ironicclient)');
      this.skip();
    }
    tdb = await freshDatabase();
    galvanic = await startGalvanic({ databaseUrl: tdb.url });
    // Enrolled over HTTP: the CLI calls below are the ones under test.
    const res = await fetch(`${galvanic.url}/v1/nodes`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-openstack-ironic-api-version': 'latest' },
      body: JSON.stringify({ name: 'cli-actions', driver: 'fake-hardware', driver_info: { fake_delay_ms: 50 } }),
    });
    expect(res.status, await res.clone().text()).to.equal(201);
    nodeUuid = ((await res.json()) as { uuid: string }).uuid;
  });

  after(async () => {
    if (galvanic) {
      const code = await galvanic.stop();
      expect(code, galvanic.output()).to.equal(0);
    }
    await tdb?.drop();
  });

  function baremetal(...args: string[]): Promise<CliResult> {
    calls += 1;
    const argv = ['--os-auth-type', 'none', '--os-endpoint', galvanic!.url, ...args];
    return new Promise((resolve) => {
      execFile('baremetal', argv, { env: cleanEnv(), timeout: 120_000 }, (err, stdout, stderr) => {
        const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : 1) : 0;
        resolve({ code, stdout, stderr });
      });
    });
  }

  async function ok(...args: string[]): Promise<string> {
    const r = await baremetal(...args);
    expect(r.code, `baremetal ${args.join(' ')}\nstdout: ${r.stdout}\nstderr: ${r.stderr}\n${galvanic!.output().slice(-3000)}`).to.equal(0);
    return r.stdout;
  }

  async function okJson<T>(...args: string[]): Promise<T> {
    const out = await ok(...args, '-f', 'json');
    return JSON.parse(out) as T;
  }

  /** Waits over plain HTTP (not counted as a CLI call) until no `target` change is pending. */
  async function settled(target: 'target_power_state' | 'target_provision_state'): Promise<void> {
    const deadline = Date.now() + 30_000;
    for (;;) {
      const res = await fetch(`${galvanic!.url}/v1/nodes/${nodeUuid}`, { headers: { 'x-openstack-ironic-api-version': 'latest' } });
      const node = (await res.json()) as Record<string, unknown>;
      if (node[target] === null) return;
      if (Date.now() > deadline) throw new Error(`${target} still set: ${JSON.stringify(node)}`);
      await sleep(100);
    }
  }

  async function powerState(): Promise<string | null> {
    await settled('target_power_state');
    return (await okJson<{ power_state: string | null }>('node', 'show', nodeUuid, '--fields', 'power_state')).power_state;
  }

  it('powers a node on and off, and reboots it', async () => {
    await ok('node', 'power', 'on', nodeUuid);
    expect(await powerState()).to.equal('power on');
    await ok('node', 'power', 'off', nodeUuid);
    expect(await powerState()).to.equal('power off');
    await ok('node', 'reboot', nodeUuid);
    expect(await powerState()).to.equal('power on');
  });

  it('sets the boot device and shows it, and the supported ones', async () => {
    await ok('node', 'boot', 'device', 'set', nodeUuid, 'pxe');
    const shown = await okJson<{ boot_device: string; persistent: boolean }>('node', 'boot', 'device', 'show', nodeUuid);
    expect(shown).to.deep.equal({ boot_device: 'pxe', persistent: false });
    const supported = await okJson<{ supported_boot_devices: string | string[] }>('node', 'boot', 'device', 'show', '--supported', nodeUuid);
    // The CLI prints the list joined with ", " (older clients) or as a JSON list.
    const list = Array.isArray(supported.supported_boot_devices) ? supported.supported_boot_devices : supported.supported_boot_devices.split(/,\s*/);
    expect(list).to.include.members(['pxe', 'disk']);
  });

  // `provide --wait` polls every 10 s; baremetal-cli.test.ts has it, so here it is waited for over HTTP.
  it('manages (with --wait) and provides a node to available', async () => {
    await ok('node', 'manage', '--wait', '60', nodeUuid);
    await ok('node', 'provide', nodeUuid);
    await settled('target_provision_state');
    const node = await okJson<{ provision_state: string; target_provision_state: string | null; last_error: string | null }>(
      'node', 'show', nodeUuid, '--fields', 'provision_state', 'target_provision_state', 'last_error',
    );
    expect(node).to.deep.include({ provision_state: 'available', target_provision_state: null, last_error: null });
    expect(calls, 'CLI calls made').to.be.at.most(15);
  });
});
