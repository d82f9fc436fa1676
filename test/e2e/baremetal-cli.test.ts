/**
 * End to end with the real OpenStack client: `baremetal` (python3-ironicclient, whose OSC
 * plugin caps at microversion 1.78) drives a real `galvanic all-in-one` process.
 *
 * The CLI is a Python program that takes about a second to start (about four with
 * http_basic, which loads openstacksdk), so the calls here are few and each `it` builds on
 * the previous ones. Without `baremetal` on PATH the file is skipped, except under CI=true
 * where that is a failure: CI must install python3-ironicclient (see .ci/run).
 */
import { expect } from 'chai';
import bcrypt from 'bcryptjs';
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { faultOf, startGalvanic, type RunningGalvanic } from '../helpers/app.js';
import { CLI, requireCli } from '../helpers/baremetal.js';
import { freshDatabase, type TestDatabase } from '../helpers/database.js';



interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** The user's OS_* variables (a cloud, a token) must not leak into the CLI's auth. */
function cliEnv(cacheDir: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('OS_')) env[k] = v;
  // ironicclient caches the negotiated microversion per host:port under the user cache dir.
  env.XDG_CACHE_HOME = cacheDir;
  return env;
}

function runCli(args: string[], env: NodeJS.ProcessEnv): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(CLI, args, { env, timeout: 150_000, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      let code = 0;
      if (err) code = typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : -1;
      resolve({ code, stdout: String(stdout), stderr: String(stderr) });
    });
  });
}

/** A CLI bound to one Galvanic with one set of auth options. */
class Baremetal {
  constructor(private readonly authArgs: string[], private readonly env: NodeJS.ProcessEnv) {}

  run(...args: string[]): Promise<CliResult> {
    return runCli([...this.authArgs, ...args], this.env);
  }

  /** Runs and expects exit 0; returns stdout. */
  async ok(...args: string[]): Promise<string> {
    const r = await this.run(...args);
    expect(r.code, `baremetal ${args.join(' ')} exited ${r.code}:\n${r.stderr}`).to.equal(0);
    return r.stdout;
  }

  /** Runs with `-f json` and parses the output. */
  async json<T = Record<string, unknown>>(...args: string[]): Promise<T> {
    const out = await this.ok(...args, '-f', 'json');
    try {
      return JSON.parse(out) as T;
    } catch {
      throw new Error(`baremetal ${args.join(' ')} -f json printed no JSON:\n${out}`);
    }
  }

  /** Runs and expects a non-zero exit; returns stderr. */
  async fails(...args: string[]): Promise<string> {
    const r = await this.run(...args);
    expect(r.code, `baremetal ${args.join(' ')} should have failed; stdout:\n${r.stdout}`).to.not.equal(0);
    return r.stderr;
  }
}

type Row = Record<string, unknown>;

describe('e2e: the baremetal CLI against galvanic all-in-one', function () {
  // About a second per CLI call on an idle machine; generous bounds for a loaded CI runner.
  this.timeout(120_000);
  let cacheDir: string | undefined;

  before(async function () {
    requireCli(this, 'baremetal CLI end-to-end tests');
    cacheDir = await fs.mkdtemp(path.join(os.tmpdir(), 'galvanic-cli-cache-'));
  });

  after(async () => {
    if (cacheDir) await fs.rm(cacheDir, { recursive: true, force: true });
  });

  describe('without auth (noauth)', function () {
    let tdb: TestDatabase | undefined;
    let galvanic: RunningGalvanic | undefined;
    let bm: Baremetal;
    let nodeUuid = '';
    let portUuid = '';
    const mac = '52:54:00:e2:e0:01';

    before(async function () {
      this.timeout(60_000);
      tdb = await freshDatabase();
      galvanic = await startGalvanic({ databaseUrl: tdb.url });
      bm = new Baremetal(['--os-auth-type', 'none', '--os-endpoint', galvanic.url], cliEnv(cacheDir!));
    });

    /** A direct API read, to check a CLI command's effect without paying for another CLI start. */
    async function apiGet<T = Row>(urlPath: string): Promise<T> {
      const res = await fetch(`${galvanic!.url}${urlPath}`, { headers: { 'X-OpenStack-Ironic-API-Version': '1.78' } });
      const body = await res.text();
      expect(res.status, `GET ${urlPath}: ${body}`).to.equal(200);
      return JSON.parse(body) as T;
    }

    let failed = false;
    afterEach(function () {
      if (this.currentTest?.state === 'failed') failed = true;
    });

    after(async function () {
      this.timeout(30_000);
      const code = await galvanic?.stop();
      if (galvanic && (failed || code !== 0)) process.stderr.write(`--- galvanic output (exit ${code}) ---\n${galvanic.output()}\n`);
      await tdb?.drop();
    });

    it('driver list shows fake-hardware with an active host', async () => {
      const drivers = await bm.json<Row[]>('driver', 'list');
      const fake = drivers.find((d) => d['Supported driver(s)'] === 'fake-hardware');
      expect(fake, JSON.stringify(drivers)).to.not.equal(undefined);
      expect(String(fake!['Active host(s)'])).to.not.equal('');
    });

    it('node create with --name, --driver and --driver-info', async () => {
      const node = await bm.json('node', 'create', '--name', 'e2e-node-1', '--driver', 'fake-hardware',
        '--driver-info', 'ipmi_address=192.0.2.10', '--driver-info', 'ipmi_username=admin');
      expect(node.name).to.equal('e2e-node-1');
      expect(node.driver).to.equal('fake-hardware');
      expect(node.driver_info).to.deep.equal({ ipmi_address: '192.0.2.10', ipmi_username: 'admin' });
      expect(node.provision_state).to.equal('enroll');
      expect(node.uuid).to.match(/^[0-9a-f-]{36}$/);
      nodeUuid = node.uuid as string;
    });

    it('node list shows the default columns', async () => {
      const rows = await bm.json<Row[]>('node', 'list');
      expect(rows).to.have.length(1);
      expect(rows[0]).to.deep.equal({
        UUID: nodeUuid, Name: 'e2e-node-1', 'Instance UUID': null, 'Power State': null,
        'Provisioning State': 'enroll', Maintenance: false,
      });
    });

    it('node list --long shows every field', async () => {
      const rows = await bm.json<Row[]>('node', 'list', '--long');
      expect(rows).to.have.length(1);
      expect(rows[0]).to.include({ UUID: nodeUuid, Name: 'e2e-node-1', Driver: 'fake-hardware', 'Provisioning State': 'enroll' });
      expect(rows[0]['Driver Info']).to.deep.equal({ ipmi_address: '192.0.2.10', ipmi_username: 'admin' });
      expect(rows[0]).to.have.property('Power Interface', 'fake');
      expect(rows[0]).to.have.property('Conductor Group', '');
    });

    it('node list --fields uuid name shows just those', async () => {
      const rows = await bm.json<Row[]>('node', 'list', '--fields', 'uuid', 'name');
      expect(rows).to.deep.equal([{ UUID: nodeUuid, Name: 'e2e-node-1' }]);
    });

    it('node show by UUID', async () => {
      const node = await bm.json('node', 'show', nodeUuid);
      expect(node).to.include({ uuid: nodeUuid, name: 'e2e-node-1', driver: 'fake-hardware', maintenance: false });
    });

    it('node show by name', async () => {
      const node = await bm.json('node', 'show', 'e2e-node-1', '--fields', 'uuid', 'name', 'provision_state');
      expect(node).to.deep.equal({ uuid: nodeUuid, name: 'e2e-node-1', provision_state: 'enroll' });
    });

    it('node set --name/--extra/--property/--driver-info/--retired/--automated-clean, with the password masked', async () => {
      // The CLI sends --retired and --automated-clean as the strings "True", which Ironic accepts.
      await bm.ok('node', 'set', 'e2e-node-1', '--name', 'e2e-node-a', '--extra', 'rack=r1', '--property', 'cpus=8',
        '--driver-info', 'ipmi_password=s3cret', '--retired', '--retired-reason', 'end of warranty', '--automated-clean');
      const node = await bm.json('node', 'show', nodeUuid);
      expect(node).to.include({ retired: true, retired_reason: 'end of warranty', automated_clean: true });
      expect(node.name).to.equal('e2e-node-a');
      expect(node.extra).to.deep.equal({ rack: 'r1' });
      // The CLI sends `cpus=8` as the JSON number 8, as with Ironic.
      expect(node.properties).to.deep.equal({ cpus: 8 });
      expect(node.driver_info).to.deep.equal({ ipmi_address: '192.0.2.10', ipmi_username: 'admin', ipmi_password: '******' });
    });

    it('node unset removes --extra and --property keys, --retired and --automated-clean', async () => {
      // Removing /retired (a non-nullable boolean) makes it false, as in Ironic.
      await bm.ok('node', 'unset', 'e2e-node-a', '--extra', 'rack', '--property', 'cpus', '--retired', '--retired-reason', '--automated-clean');
      const node = await bm.json('node', 'show', 'e2e-node-a', '--fields', 'extra', 'properties', 'driver_info', 'retired', 'retired_reason', 'automated_clean');
      expect(node.extra).to.deep.equal({});
      expect(node.properties).to.deep.equal({});
      expect(node).to.include({ retired: false, retired_reason: null, automated_clean: null });
      expect((node.driver_info as Row).ipmi_password).to.equal('******');
    });

    it('maintenance set --reason, then unset', async () => {
      await bm.ok('node', 'maintenance', 'set', 'e2e-node-a', '--reason', 'replacing a DIMM');
      let node = await bm.json('node', 'show', 'e2e-node-a', '--fields', 'maintenance', 'maintenance_reason');
      expect(node).to.include({ maintenance: true, maintenance_reason: 'replacing a DIMM' });
      await bm.ok('node', 'maintenance', 'unset', 'e2e-node-a');
      node = await apiGet(`/v1/nodes/${nodeUuid}?fields=maintenance,maintenance_reason`);
      expect(node).to.include({ maintenance: false, maintenance_reason: null });
    });

    it('node manage --wait, then node provide --wait, ends available', async function () {
      // provide --wait polls every 10 s (the CLI assumes cleaning takes a while).
      this.timeout(180_000);
      await bm.ok('node', 'manage', 'e2e-node-a', '--wait', '60');
      let node = await apiGet(`/v1/nodes/${nodeUuid}?fields=provision_state,power_state,last_error`);
      expect(node).to.include({ provision_state: 'manageable', last_error: null });
      expect(node.power_state).to.be.oneOf(['power on', 'power off']);
      await bm.ok('node', 'provide', 'e2e-node-a', '--wait', '60');
      node = await bm.json('node', 'show', 'e2e-node-a', '--fields', 'provision_state', 'target_provision_state', 'last_error');
      expect(node).to.deep.equal({ uuid: nodeUuid, provision_state: 'available', target_provision_state: null, last_error: null });
    });

    it('node history list has the manage and provide events', async () => {
      const events = await bm.json<Row[]>('node', 'history', 'list', 'e2e-node-a');
      expect(events.length, JSON.stringify(events)).to.be.at.least(1);
      for (const e of events) {
        expect(e.UUID).to.match(/^[0-9a-f-]{36}$/);
        expect(e.Severity).to.be.a('string');
      }
      const descriptions = events.map((e) => String(e['Description of the event']));
      expect(descriptions.some((d) => d.includes('manageable')), descriptions.join('\n')).to.equal(true);
      const one = await bm.json('node', 'history', 'get', 'e2e-node-a', events[0].UUID as string);
      expect(one).to.include({ uuid: events[0].UUID, event: events[0]['Description of the event'] });
      expect(one).to.have.property('event_type');
    });

    it('port create with --node (and --pxe-enabled false)', async () => {
      // This CLI (API 1.78) sends --node as node_uuid, so it must be the UUID; --pxe-enabled goes as the string "false".
      const port = await bm.json('port', 'create', mac, '--node', nodeUuid, '--pxe-enabled', 'false');
      expect(port).to.include({ address: mac, node_uuid: nodeUuid, pxe_enabled: false });
      portUuid = port.uuid as string;
      expect(portUuid).to.match(/^[0-9a-f-]{36}$/);
    });

    it('port list', async () => {
      expect(await bm.json<Row[]>('port', 'list')).to.deep.equal([{ UUID: portUuid, Address: mac }]);
    });

    it('port list --node', async () => {
      expect(await bm.json<Row[]>('port', 'list', '--node', 'e2e-node-a')).to.deep.equal([{ UUID: portUuid, Address: mac }]);
    });

    it('port show', async () => {
      const port = await bm.json('port', 'show', portUuid);
      expect(port).to.include({ uuid: portUuid, address: mac, node_uuid: nodeUuid });
      expect(port.extra).to.deep.equal({});
    });

    it('port create with a duplicate MAC fails: "already exists"', async function () {
      // Ironic answers 409 and the CLI retries a 409 five times, 2 s apart.
      const stderr = await bm.fails('port', 'create', mac.toUpperCase(), '--node', nodeUuid, '-f', 'json');
      expect(stderr).to.match(/A port with MAC address 52:54:00:e2:e0:01 already exists/);
      expect(stderr).to.include('HTTP 409');
    });

    it('port delete', async () => {
      expect(await bm.ok('port', 'delete', portUuid)).to.include(`Deleted port ${portUuid}`);
      expect((await apiGet<{ ports: Row[] }>('/v1/ports')).ports).to.deep.equal([]);
    });

    it('node show of a missing node fails: "could not be found"', async () => {
      const stderr = await bm.fails('node', 'show', 'no-such-node', '-f', 'json');
      expect(stderr).to.match(/Node no-such-node could not be found/);
      expect(stderr).to.include('HTTP 404');
    });

    it('node create with an unknown driver fails: "No valid host was found"', async () => {
      const stderr = await bm.fails('node', 'create', '--driver', 'no-such-driver', '-f', 'json');
      expect(stderr).to.match(/No valid host was found/);
      expect(stderr).to.include('no-such-driver');
      expect(stderr).to.include('HTTP 400');
      expect((await apiGet<{ nodes: Row[] }>('/v1/nodes?fields=uuid')).nodes).to.deep.equal([{ uuid: nodeUuid }]);
    });

    it('an invalid --fields value is refused (by the CLI, and by the API with 400)', async () => {
      // The CLI knows the field names and refuses before sending anything.
      const stderr = await bm.fails('node', 'list', '--fields', 'uuid', 'bogus', '-f', 'json');
      expect(stderr).to.match(/argument --fields: invalid choice: 'bogus'/);
      // The server refuses it too, with Ironic's error body.
      const headers = { 'X-OpenStack-Ironic-API-Version': '1.78' };
      for (const url of [`${galvanic!.url}/v1/nodes?fields=uuid,bogus`, `${galvanic!.url}/v1/nodes/${nodeUuid}?fields=bogus`]) {
        const res = await fetch(url, { headers });
        const body = await res.text();
        expect(res.status, `${url}: ${body}`).to.equal(400);
        const fault = faultOf(body);
        expect(fault.faultcode).to.equal('Client');
        expect(fault.faultstring).to.match(/Field\(s\) "bogus" are not valid/);
      }
    });

    it('node delete by name and by UUID', async () => {
      const second = await bm.json('node', 'create', '--name', 'e2e-node-2', '--driver', 'fake-hardware');
      expect(await bm.ok('node', 'delete', 'e2e-node-a')).to.include('Deleted node e2e-node-a');
      expect(await bm.ok('node', 'delete', second.uuid as string)).to.include(`Deleted node ${second.uuid as string}`);
      expect(await bm.json<Row[]>('node', 'list')).to.deep.equal([]);
    });
  });

  describe('with http_basic auth', function () {
    let tdb: TestDatabase | undefined;
    let galvanic: RunningGalvanic | undefined;
    let dir: string | undefined;
    const basic = (user: string, password: string) => ['--os-auth-type', 'http_basic', '--os-username', user, '--os-password', password];

    before(async function () {
      this.timeout(60_000);
      dir = await fs.mkdtemp(path.join(os.tmpdir(), 'galvanic-htpasswd-'));
      const file = path.join(dir, 'htpasswd');
      await fs.writeFile(file, `admin:${bcrypt.hashSync('secret', 10)}\n`);
      tdb = await freshDatabase();
      galvanic = await startGalvanic({
        databaseUrl: tdb.url,
        env: { GALVANIC_API__AUTH_STRATEGY: 'http_basic', GALVANIC_API__HTTP_BASIC_AUTH_USER_FILE: file },
      });
    });

    after(async function () {
      this.timeout(30_000);
      await galvanic?.stop();
      await tdb?.drop();
      if (dir) await fs.rm(dir, { recursive: true, force: true });
    });

    it('node list works with the right user and password', async () => {
      const bm = new Baremetal([...basic('admin', 'secret'), '--os-endpoint', galvanic!.url], cliEnv(cacheDir!));
      expect(await bm.json<Row[]>('node', 'list')).to.deep.equal([]);
    });

    it('node list fails without credentials', async () => {
      const bm = new Baremetal(['--os-auth-type', 'none', '--os-endpoint', galvanic!.url], cliEnv(cacheDir!));
      const stderr = await bm.fails('node', 'list', '-f', 'json');
      expect(stderr).to.include('HTTP 401');
      expect(stderr).to.match(/Authorization required/);
    });

    it('node list fails with a wrong password', async () => {
      const bm = new Baremetal([...basic('admin', 'wrong'), '--os-endpoint', galvanic!.url], cliEnv(cacheDir!));
      const stderr = await bm.fails('node', 'list', '-f', 'json');
      expect(stderr).to.include('HTTP 401');
      expect(stderr).to.match(/credentials were not accepted/);
    });
  });
});
