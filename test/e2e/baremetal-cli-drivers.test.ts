/**
 * The real `baremetal` CLI against a real `galvanic all-in-one` driving real BMCs: a node
 * with `--driver redfish` on the Redfish simulator (in-process) and one with `--driver ipmi`
 * on an ipmi_sim BMC. Each is enrolled, shown with its password masked, managed (verifying
 * reads the power state from the BMC), powered off and on, and given a boot device; every
 * step is also checked on the BMC's side.
 *
 * Without `baremetal` on PATH the file is skipped, and without ipmi_sim/ipmitool the ipmi
 * part is; under CI=true either is a failure. Each CLI call costs a Python start (a second
 * or more), so the calls are few (10 per node) and the waiting is done over plain HTTP.
 */
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { startRedfishSim, type RedfishSim } from '../../sim/redfish/index.js';
import { startGalvanicOnFreshDatabase, type GalvanicOnFreshDatabase } from '../helpers/app.js';
import { CLI, requireCli } from '../helpers/baremetal.js';
import { requireIpmiSim, SimBmc } from '../helpers/ipmi-sim.js';
import { resourceRequests, simControl, simStats } from '../helpers/redfish.js';
import { until } from '../helpers/until.js';

const SYSTEM = '/redfish/v1/Systems/System.Embedded.1';

type Row = Record<string, unknown>;


/** What the flow needs to know of, and do to, one BMC. */
interface Bmc {
  driver: 'redfish' | 'ipmi';
  name: string;
  /** --driver-info key=value pairs. */
  driverInfo: Record<string, string>;
  passwordKey: string;
  interfaces: Record<string, string>;
  /** Flips the power behind the conductor's back (someone pressed the button). */
  setPower(on: boolean): Promise<void>;
  power(): Promise<'power on' | 'power off'>;
  bootDevice(): Promise<string>;
  /** Starts a new window of the BMC's request/action log. */
  mark(): Promise<void>;
  /** What the BMC saw since `mark`, one string each. */
  seen(): Promise<string[]>;
}

describe('e2e: the baremetal CLI with --driver redfish and --driver ipmi', function () {
  this.timeout(300_000);
  let galvanic: GalvanicOnFreshDatabase | undefined;
  // The BMCs outlive galvanic, so that its last power sync never meets a vanished one.
  let redfishSim: RedfishSim | undefined;
  let ipmiSim: SimBmc | undefined;
  let cacheDir: string | undefined;
  let calls = 0;
  let failed = false;

  before(async function () {
    requireCli(this, 'baremetal CLI driver tests');
    cacheDir = await fs.mkdtemp(path.join(os.tmpdir(), 'galvanic-cli-cache-'));
    // The defaults enable fake-hardware, redfish and ipmi.
    galvanic = await startGalvanicOnFreshDatabase();
  });

  afterEach(function () {
    if (this.currentTest?.state === 'failed') failed = true;
  });

  after(async function () {
    this.timeout(60_000);
    const code = await galvanic?.shutdown();
    if (galvanic && (failed || code !== 0)) process.stderr.write(`--- galvanic output (exit ${code}) ---\n${galvanic.output().slice(-20_000)}\n`);
    await redfishSim?.stop();
    await ipmiSim?.stop();
    if (cacheDir) await fs.rm(cacheDir, { recursive: true, force: true });
    if (galvanic) expect(code, 'galvanic exit code').to.equal(0);
    if (calls > 0) expect(calls, 'CLI calls made').to.be.at.most(25);
  });

  interface CliResult {
    code: number;
    stdout: string;
    stderr: string;
  }

  function baremetal(...args: string[]): Promise<CliResult> {
    calls += 1;
    const env: NodeJS.ProcessEnv = {};
    // The user's OS_* settings must not leak into the CLI's auth.
    for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('OS_')) env[k] = v;
    // ironicclient caches the negotiated microversion per host:port under the cache dir.
    env.XDG_CACHE_HOME = cacheDir;
    const argv = ['--os-auth-type', 'none', '--os-endpoint', galvanic!.url, ...args];
    return new Promise((resolve) => {
      execFile(CLI, argv, { env, timeout: 150_000, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
        const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : -1) : 0;
        resolve({ code, stdout: String(stdout), stderr: String(stderr) });
      });
    });
  }

  async function ok(...args: string[]): Promise<string> {
    const r = await baremetal(...args);
    expect(r.code, `baremetal ${args.join(' ')} exited ${r.code}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`).to.equal(0);
    return r.stdout;
  }

  async function json<T = Row>(...args: string[]): Promise<T> {
    const out = await ok(...args, '-f', 'json');
    try {
      return JSON.parse(out) as T;
    } catch {
      throw new Error(`baremetal ${args.join(' ')} -f json printed no JSON:\n${out}`);
    }
  }

  async function apiNode(ident: string): Promise<Row> {
    const res = await fetch(`${galvanic!.url}/v1/nodes/${ident}`, { headers: { 'X-OpenStack-Ironic-API-Version': '1.78' } });
    const body = await res.text();
    expect(res.status, body).to.equal(200);
    return JSON.parse(body) as Row;
  }

  /** Polls over HTTP (not a CLI call) until `done` holds for the node, within `ms`. */
  function untilNode(ident: string, what: string, done: (n: Row) => boolean, ms = 90_000): Promise<Row> {
    let last: Row | undefined;
    return until(() => `node ${ident}: ${what}: ${JSON.stringify(last)}`, async () => {
      last = await apiNode(ident);
      return done(last) && last;
    }, ms, 200);
  }

  /** The same steps for both drivers; `bmc()` is ready when the first `it` runs. */
  function cliFlow(bmc: () => Bmc): void {
    let uuid = '';

    it('node create --driver … --driver-info, then node show masks the password', async () => {
      const b = bmc();
      const infoArgs = Object.entries(b.driverInfo).flatMap(([k, v]) => ['--driver-info', `${k}=${v}`]);
      const created = await json('node', 'create', '--driver', b.driver, '--name', b.name, ...infoArgs);
      expect(created).to.include({ driver: b.driver, name: b.name, provision_state: 'enroll', ...b.interfaces });
      uuid = created.uuid as string;
      const shown = await json('node', 'show', b.name);
      expect(shown).to.include({ uuid, driver: b.driver, ...b.interfaces });
      const info = shown.driver_info as Record<string, unknown>;
      expect(info[b.passwordKey]).to.equal('******');
      // Everything else comes back as given (the CLI sends "623" and "2.0" as JSON numbers).
      for (const [k, v] of Object.entries(b.driverInfo)) {
        if (k !== b.passwordKey) expect(info[k] === v || Number(info[k]) === Number(v), `${k}: ${JSON.stringify(info[k])}`).to.equal(true);
      }
      expect(JSON.stringify(shown)).to.not.include(b.driverInfo[b.passwordKey]);
    });

    it('node validate passes power and management', async () => {
      const rows = await json<Array<{ Interface: string; Result: boolean | null; Reason: string | null }>>('node', 'validate', uuid);
      const by = new Map(rows.map((r) => [r.Interface, r]));
      expect(by.get('power'), JSON.stringify(rows)).to.include({ Result: true });
      expect(by.get('management'), JSON.stringify(rows)).to.include({ Result: true });
    });

    it('node manage --wait 60 → manageable, with the power state read from the BMC', async () => {
      const b = bmc();
      // On behind the conductor's back: verifying must find it so.
      await b.setPower(true);
      await b.mark();
      await ok('node', 'manage', '--wait', '60', uuid);
      const n = await apiNode(uuid);
      expect(n, JSON.stringify(n)).to.include({ provision_state: 'manageable', target_provision_state: null, last_error: null, power_state: 'power on' });
      if (b.driver === 'redfish') expect(await b.seen()).to.include(`GET ${SYSTEM}`);
    });

    for (const [verb, state] of [['off', 'power off'], ['on', 'power on']] as const) {
      it(`node power ${verb} → ${state}, at the BMC too`, async () => {
        const b = bmc();
        await b.mark();
        await ok('node', 'power', verb, uuid);
        await untilNode(uuid, state, (n) => n.target_power_state === null && (n.power_state === state || n.last_error !== null));
        const shown = await json('node', 'show', uuid, '--fields', 'power_state', 'target_power_state', 'last_error');
        expect(shown).to.deep.include({ power_state: state, target_power_state: null, last_error: null });
        expect(await b.power()).to.equal(state);
        const seen = await b.seen();
        if (b.driver === 'redfish') expect(seen).to.include(`POST ${SYSTEM}/Actions/ComputerSystem.Reset`);
        else expect(seen).to.include(`set power ${state === 'power on' ? 1 : 0}`);
      });
    }

    it('node boot device set pxe, then show → pxe, at the BMC too', async () => {
      const b = bmc();
      await b.mark();
      await ok('node', 'boot', 'device', 'set', uuid, 'pxe');
      expect(await b.bootDevice()).to.equal('pxe');
      const shown = await json<{ boot_device: string; persistent: boolean | null }>('node', 'boot', 'device', 'show', uuid);
      expect(shown).to.deep.equal({ boot_device: 'pxe', persistent: false });
      const seen = await b.seen();
      if (b.driver === 'redfish') expect(seen).to.include(`PATCH ${SYSTEM}`);
      else expect(seen).to.include('set boot pxe');
    });
  }

  describe('--driver redfish against the Redfish simulator', function () {
    let sim: RedfishSim;
    let url = '';
    let bmc: Bmc | undefined;

    before(async () => {
      redfishSim = sim = await startRedfishSim({ count: 1, username: 'operator', password: 'Rf-s3cret-9f2c' });
      url = sim.bmcs[0].url;
      await simControl(url, 'state', { power: 'Off', boot: { BootSourceOverrideTarget: 'None', BootSourceOverrideEnabled: 'Disabled' } });
      const system = async () => {
        const st = (await simControl(url, 'state')) as { systems: Record<string, { power: string; boot: { BootSourceOverrideTarget: string; BootSourceOverrideEnabled: string } }> };
        return Object.values(st.systems)[0];
      };
      bmc = {
        driver: 'redfish',
        name: 'cli-redfish',
        driverInfo: { redfish_address: url, redfish_username: 'operator', redfish_password: 'Rf-s3cret-9f2c' },
        passwordKey: 'redfish_password',
        interfaces: { power_interface: 'redfish', management_interface: 'redfish', console_interface: 'no-console' },
        setPower: async (on) => void (await simControl(url, 'state', { power: on ? 'On' : 'Off' })),
        power: async () => ((await system()).power === 'On' ? 'power on' : 'power off'),
        bootDevice: async () => {
          const boot = (await system()).boot;
          // A one-time override, as `boot device set` without --persistent asks.
          expect(boot.BootSourceOverrideEnabled).to.equal('Once');
          return boot.BootSourceOverrideTarget.toLowerCase();
        },
        mark: async () => void (await simControl(url, 'reset')),
        seen: async () => resourceRequests(await simStats(url)),
      };
    });

    cliFlow(() => bmc!);

    it('the BMC saw one session at most, within its limit', async () => {
      const stats = await simStats(url);
      expect(stats.sessionsOpen).to.be.at.most(1);
      expect(stats.maxConcurrent).to.be.at.most(4);
    });
  });

  describe('--driver ipmi against ipmi_sim', function () {
    let bmc: Bmc | undefined;
    let since = 0;

    before(async function () {
      requireIpmiSim(this);
      const s = ipmiSim = await SimBmc.start(0, { power: 0, password: 'Ipmi-s3cret-7d1e' });
      const info = s.driverInfo({ ipmi_protocol_version: '2.0' });
      bmc = {
        driver: 'ipmi',
        name: 'cli-ipmi',
        // lanplus (protocol 2.0); cipher suite 3 because ipmi_sim cannot list its cipher suites.
        driverInfo: Object.fromEntries(Object.entries(info).map(([k, v]) => [k, String(v)])),
        passwordKey: 'ipmi_password',
        interfaces: { power_interface: 'ipmitool', management_interface: 'ipmitool', console_interface: 'no-console' },
        setPower: (on) => s.setPower(on ? 1 : 0),
        power: async () => ((await s.power()) === 1 ? 'power on' : 'power off'),
        bootDevice: () => s.bootDevice(),
        mark: async () => {
          since = Date.now() / 1000;
        },
        seen: async () => (await s.chassisLog()).filter((e) => e.t >= since).map((e) => e.action),
      };
    });

    cliFlow(() => bmc!);
  });
});
