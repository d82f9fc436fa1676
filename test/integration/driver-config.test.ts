/**
 * Which hardware types and interfaces the config enables decides what the API accepts:
 * node create and PATCH resolve interfaces with Ironic's rules and say why one does not fit,
 * GET /v1/drivers lists the enabled types with their usable interfaces, node validate checks
 * driver_info, and a default that is not enabled (or a bad inspection hook list) stops the
 * process at start.
 */
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import type { LightMyRequestResponse } from 'fastify';
import { ConfigError } from '../../common/errors.js';
import { buildRegistry } from '../../drivers/build-registry.js';
import { ROOT, buildTestApp, faultOf, testConfig, type TestApp, suiteApp } from '../helpers/app.js';
import { AGENT_BOOT_PROPERTIES } from '../../drivers/agent-boot.js';

type Obj = Record<string, unknown>;

interface NodeBody extends Obj {
  uuid: string;
  driver: string;
  power_interface: string;
  management_interface: string;
  console_interface: string;
}

interface DriverBody extends Obj {
  name: string;
  hosts: string[];
}

const IFACE_FIELDS = ['power_interface', 'management_interface', 'console_interface'] as const;

function call(t: TestApp, method: 'GET' | 'POST' | 'PATCH', url: string, body?: unknown, version = 'latest'): Promise<LightMyRequestResponse> {
  return t.app.inject({
    method, url,
    headers: { 'x-openstack-ironic-api-version': version },
    ...(body === undefined ? {} : { payload: body as object }),
  });
}

/** Asserts a client error with Ironic's body; returns the faultstring. */
function fault(res: LightMyRequestResponse, status: number, ...parts: string[]): string {
  expect(res.statusCode, res.body).to.equal(status);
  const f = faultOf(res.body);
  expect(f.faultcode).to.equal('Client');
  for (const p of parts) expect(f.faultstring, f.faultstring).to.include(p);
  return f.faultstring;
}

async function create(t: TestApp, body: Obj): Promise<NodeBody> {
  const res = await call(t, 'POST', '/v1/nodes', body);
  expect(res.statusCode, res.body).to.equal(201);
  return res.json<NodeBody>();
}

/** PATCHes `url` with `ops`, expects 200: the node as it is now. */
async function patched(t: TestApp, url: string, ops: Obj[]): Promise<NodeBody> {
  const res = await call(t, 'PATCH', url, ops);
  expect(res.statusCode, res.body).to.equal(200);
  return res.json<NodeBody>();
}

function ifaces(n: NodeBody): Obj {
  return Object.fromEntries(IFACE_FIELDS.map((f) => [f, n[f]]));
}

async function nodeCount(t: TestApp): Promise<number> {
  const row = await t.tdb.knex('nodes').count({ n: '*' }).first();
  return Number(row?.n);
}

const REDFISH_INFO = { redfish_address: 'http://127.0.0.1:1', redfish_username: 'admin', redfish_password: 'password' };
const IPMI_INFO = { ipmi_address: '127.0.0.1', ipmi_port: 1623, ipmi_username: 'admin', ipmi_password: 'password' };

describe('driver configuration: enabled hardware types and interfaces', function () {
  this.timeout(60_000);

  describe('with only fake-hardware enabled', () => {
    const t = suiteApp({ env: { GALVANIC_DEFAULT__ENABLED_HARDWARE_TYPES: 'fake-hardware' }, conductor: false });

    it('refuses redfish and ipmi nodes with "No valid host was found" and creates nothing', async () => {
      fault(await call(t, 'POST', '/v1/nodes', { driver: 'redfish', driver_info: REDFISH_INFO }), 400, 'No valid host was found', 'driver redfish');
      fault(await call(t, 'POST', '/v1/nodes', { driver: 'ipmi', driver_info: IPMI_INFO }), 400, 'No valid host was found', 'driver ipmi');
      expect(await nodeCount(t)).to.equal(0);
      const fake = await create(t, { driver: 'fake-hardware' });
      expect(ifaces(fake)).to.deep.equal({ power_interface: 'fake', management_interface: 'fake', console_interface: 'fake' });
    });

    it('lists only fake-hardware; the disabled types are not found', async () => {
      const res = await call(t, 'GET', '/v1/drivers');
      expect(res.statusCode, res.body).to.equal(200);
      expect(res.json<{ drivers: DriverBody[] }>().drivers.map((d) => d.name)).to.deep.equal(['fake-hardware']);
      for (const url of ['/v1/drivers/redfish', '/v1/drivers/redfish/properties', '/v1/drivers/ipmi/properties']) {
        fault(await call(t, 'GET', url), 404, 'Could not find');
      }
    });

    it('refuses a PATCH to a disabled driver and leaves the node as it was', async () => {
      const node = await create(t, { driver: 'fake-hardware' });
      fault(await call(t, 'PATCH', `/v1/nodes/${node.uuid}?reset_interfaces=true`, [{ op: 'replace', path: '/driver', value: 'redfish' }]), 400, 'No valid host was found', 'driver redfish');
      const after = (await call(t, 'GET', `/v1/nodes/${node.uuid}`)).json<NodeBody>();
      expect(after.driver).to.equal('fake-hardware');
      expect(ifaces(after)).to.deep.equal(ifaces(node));
    });
  });

  describe('with the default config (fake-hardware, redfish, ipmi)', () => {
    const t = suiteApp({ conductor: false });

    it('GET /v1/drivers lists exactly the enabled types with their usable interfaces', async () => {
      const res = await call(t, 'GET', '/v1/drivers?detail=True');
      expect(res.statusCode, res.body).to.equal(200);
      const drivers = res.json<{ drivers: DriverBody[] }>().drivers;
      expect(drivers.map((d) => d.name)).to.have.members(['fake-hardware', 'redfish', 'ipmi']).and.have.lengthOf(3);
      const byName = new Map(drivers.map((d) => [d.name, d]));
      expect(byName.get('redfish')).to.deep.include({
        default_power_interface: 'redfish', enabled_power_interfaces: ['redfish'],
        default_management_interface: 'redfish', enabled_management_interfaces: ['redfish'],
        default_console_interface: 'no-console', enabled_console_interfaces: ['no-console'],
      });
      expect(byName.get('ipmi')).to.deep.include({
        default_power_interface: 'ipmitool', enabled_power_interfaces: ['ipmitool'],
        default_management_interface: 'ipmitool', enabled_management_interfaces: ['ipmitool'],
      });
      const one = await call(t, 'GET', '/v1/drivers/ipmi');
      expect(one.statusCode, one.body).to.equal(200);
      expect(one.json<DriverBody>()).to.deep.include({ name: 'ipmi', default_power_interface: 'ipmitool' });
    });

    it('/v1/drivers/{redfish,ipmi}/properties list Ironic\'s driver_info keys', async () => {
      const redfish = await call(t, 'GET', '/v1/drivers/redfish/properties');
      expect(redfish.statusCode, redfish.body).to.equal(200);
      const rprops = redfish.json<Record<string, string>>();
      expect(rprops).to.include.keys('redfish_address', 'redfish_system_id', 'redfish_username', 'redfish_password',
        'redfish_verify_ca', 'redfish_auth_type', 'redfish_timeout');
      expect(rprops.redfish_address).to.include('Required');
      const ipmi = await call(t, 'GET', '/v1/drivers/ipmi/properties');
      expect(ipmi.statusCode, ipmi.body).to.equal(200);
      const iprops = ipmi.json<Record<string, string>>();
      expect(iprops).to.include.keys('ipmi_address', 'ipmi_port', 'ipmi_username', 'ipmi_password', 'ipmi_protocol_version', 'ipmi_priv_level');
      expect(iprops.ipmi_address).to.include('Required');
      for (const [k, v] of Object.entries({ ...rprops, ...iprops })) expect(v, k).to.be.a('string').and.not.equal('');
      // The virtual-media boot's keys, as Ironic lists its boot interface's; no key of the other hardware type leaks in.
      expect(rprops).to.include.keys('deploy_kernel', 'deploy_ramdisk', 'deploy_iso', 'kernel_append_params', 'external_http_url');
      expect(Object.keys(rprops).filter((k) => !k.startsWith('redfish_') && !(k in AGENT_BOOT_PROPERTIES))).to.deep.equal([]);
      expect(Object.keys(iprops).filter((k) => !k.startsWith('ipmi_'))).to.deep.equal([]);
    });

    it('gives each hardware type its default interfaces', async () => {
      expect(ifaces(await create(t, { driver: 'redfish', driver_info: REDFISH_INFO })))
        .to.deep.equal({ power_interface: 'redfish', management_interface: 'redfish', console_interface: 'no-console' });
      expect(ifaces(await create(t, { driver: 'ipmi', driver_info: IPMI_INFO })))
        .to.deep.equal({ power_interface: 'ipmitool', management_interface: 'ipmitool', console_interface: 'no-console' });
      expect(ifaces(await create(t, { driver: 'fake-hardware', console_interface: 'no-console' })))
        .to.deep.equal({ power_interface: 'fake', management_interface: 'fake', console_interface: 'no-console' });
    });

    it('refuses an explicit interface the hardware type does not support, naming it and the allowed ones', async () => {
      const before = await nodeCount(t);
      fault(await call(t, 'POST', '/v1/nodes', { driver: 'redfish', power_interface: 'ipmitool' }), 400,
        'power interface "ipmitool"', 'hardware type "redfish"', 'are redfish');
      fault(await call(t, 'POST', '/v1/nodes', { driver: 'redfish', power_interface: 'fake' }), 400, '"fake"', '"redfish"');
      fault(await call(t, 'POST', '/v1/nodes', { driver: 'ipmi', management_interface: 'redfish' }), 400,
        'management interface "redfish"', 'hardware type "ipmi"', 'are ipmitool');
      fault(await call(t, 'POST', '/v1/nodes', { driver: 'fake-hardware', power_interface: 'redfish' }), 400, '"redfish"', '"fake-hardware"', 'are fake');
      fault(await call(t, 'POST', '/v1/nodes', { driver: 'redfish', console_interface: 'fake' }), 400, 'console interface "fake"', 'are no-console');
      fault(await call(t, 'POST', '/v1/nodes', { driver: 'redfish', power_interface: 'no-such-thing' }), 400, '"no-such-thing"');
      expect(await nodeCount(t)).to.equal(before);
      // And on PATCH of the interface alone.
      const node = await create(t, { driver: 'redfish', driver_info: REDFISH_INFO });
      fault(await call(t, 'PATCH', `/v1/nodes/${node.uuid}`, [{ op: 'replace', path: '/power_interface', value: 'ipmitool' }]), 400,
        'power interface "ipmitool"', 'hardware type "redfish"');
      await patched(t, `/v1/nodes/${node.uuid}`, [{ op: 'replace', path: '/power_interface', value: 'redfish' }]);
    });

    it('PATCH driver fake-hardware → redfish keeps the interfaces (refused when they do not fit) unless reset_interfaces', async () => {
      const node = await create(t, { driver: 'fake-hardware' });
      const url = `/v1/nodes/${node.uuid}`;
      const toRedfish = { op: 'replace', path: '/driver', value: 'redfish' };

      // Ironic: the fake interfaces stay, and redfish cannot use them.
      const msg = fault(await call(t, 'PATCH', url, [toRedfish]), 400, '"fake"', 'hardware type "redfish"', 'reset_interfaces');
      expect(msg).to.include('power_interface');
      fault(await call(t, 'PATCH', `${url}?reset_interfaces=false`, [toRedfish]), 400, 'hardware type "redfish"');
      const unchanged = (await call(t, 'GET', url)).json<NodeBody>();
      expect(unchanged.driver).to.equal('fake-hardware');
      expect(ifaces(unchanged)).to.deep.equal({ power_interface: 'fake', management_interface: 'fake', console_interface: 'fake' });

      // reset_interfaces only goes with a driver change, and needs 1.45.
      fault(await call(t, 'PATCH', `${url}?reset_interfaces=true`, [{ op: 'add', path: '/extra/a', value: 'b' }]), 400, 'reset_interfaces', 'driver');
      fault(await call(t, 'PATCH', `${url}?reset_interfaces=true`, [toRedfish], '1.44'), 406);

      const reset = await patched(t, `${url}?reset_interfaces=true`, [toRedfish, { op: 'add', path: '/driver_info', value: REDFISH_INFO }]);
      expect(reset.driver).to.equal('redfish');
      expect(ifaces(reset)).to.deep.equal({ power_interface: 'redfish', management_interface: 'redfish', console_interface: 'no-console' });

      // And back, with reset: fake-hardware's own defaults.
      const back = await patched(t, `${url}?reset_interfaces=True`, [{ op: 'replace', path: '/driver', value: 'fake-hardware' }]);
      expect(ifaces(back)).to.deep.equal({ power_interface: 'fake', management_interface: 'fake', console_interface: 'fake' });
    });

    it('PATCH driver with the new interfaces in the same request keeps the others', async () => {
      const node = await create(t, { driver: 'fake-hardware', console_interface: 'no-console' });
      const url = `/v1/nodes/${node.uuid}`;
      // As in Ironic, the fake interfaces fit no other type: without a reset the new driver
      // needs every one it cannot keep in the same request.
      fault(await call(t, 'PATCH', url, [
        { op: 'replace', path: '/driver', value: 'redfish' },
        { op: 'replace', path: '/power_interface', value: 'redfish' },
        { op: 'replace', path: '/management_interface', value: 'redfish' },
      ]), 400, 'bios interface "fake"', 'reset_interfaces');
      // firmware_interface (1.86) cannot even be named at this version: a reset is the way,
      // and an interface named in the same request still counts.
      const res = await patched(t, `${url}?reset_interfaces=true`, [
        { op: 'replace', path: '/driver', value: 'redfish' },
        { op: 'replace', path: '/console_interface', value: 'no-console' },
      ]);
      expect(ifaces(res)).to.deep.equal({ power_interface: 'redfish', management_interface: 'redfish', console_interface: 'no-console' });
      expect(res.boot_interface).to.equal('redfish-virtual-media');
      // Only management given: the kept redfish interfaces (boot first) cannot serve ipmi.
      fault(await call(t, 'PATCH', url, [
        { op: 'replace', path: '/driver', value: 'ipmi' },
        { op: 'replace', path: '/management_interface', value: 'ipmitool' },
      ]), 400, 'boot interface "redfish-virtual-media"', 'hardware type "ipmi"');
      // With reset, an explicit interface of the same request still counts.
      const reset = await patched(t, `${url}?reset_interfaces=true`, [
        { op: 'replace', path: '/driver', value: 'ipmi' },
        { op: 'replace', path: '/power_interface', value: 'ipmitool' },
      ]);
      expect(ifaces(reset)).to.deep.equal({ power_interface: 'ipmitool', management_interface: 'ipmitool', console_interface: 'no-console' });
      // Removing an interface resets it to the type's default.
      const removed = await patched(t, url, [{ op: 'remove', path: '/power_interface' }]);
      expect(removed.power_interface).to.equal('ipmitool');
    });

    it('validate shows power and management false naming the missing key, then true once driver_info is complete', async () => {
      const node = await create(t, { driver: 'redfish', driver_info: { redfish_username: 'admin', redfish_password: 'password' } });
      const url = `/v1/nodes/${node.uuid}`;
      type Validation = Record<string, { result: boolean | null; reason: string | null }>;
      let v = (await call(t, 'GET', `${url}/validate`)).json<Validation>();
      for (const kind of ['power', 'management']) {
        expect(v[kind].result, kind).to.equal(false);
        expect(v[kind].reason, kind).to.include('redfish_address');
      }
      expect(v.console).to.deep.equal({ result: false, reason: 'Driver redfish does not support console (disabled or not implemented).' });
      // Every no-* interface answers as Ironic's do, no-inspect included.
      const noInspect = await create(t, { driver: 'redfish', inspect_interface: 'no-inspect', driver_info: { redfish_address: 'https://10.0.0.1' } });
      const vi = (await call(t, 'GET', `/v1/nodes/${noInspect.uuid}/validate`)).json<Validation>();
      expect(vi.inspect).to.deep.equal({ result: false, reason: 'Driver redfish does not support inspect (disabled or not implemented).' });

      // A bad value names its key too.
      await call(t, 'PATCH', url, [{ op: 'add', path: '/driver_info/redfish_address', value: 'ftp://bmc' }]);
      v = (await call(t, 'GET', `${url}/validate`)).json<Validation>();
      expect(v.power.result).to.equal(false);
      expect(v.power.reason).to.include('redfish_address');

      await patched(t, url, [{ op: 'replace', path: '/driver_info/redfish_address', value: 'https://10.0.0.1' }]);
      v = (await call(t, 'GET', `${url}/validate`)).json<Validation>();
      expect(v.power).to.deep.equal({ result: true });
      expect(v.management).to.deep.equal({ result: true });

      const ipmi = await create(t, { driver: 'ipmi', driver_info: { ipmi_username: 'admin' } });
      v = (await call(t, 'GET', `/v1/nodes/${ipmi.uuid}/validate`)).json<Validation>();
      expect(v.power.result).to.equal(false);
      expect(v.power.reason).to.include('ipmi_address');
      await call(t, 'PATCH', `/v1/nodes/${ipmi.uuid}`, [{ op: 'add', path: '/driver_info/ipmi_address', value: '10.0.0.2' }]);
      v = (await call(t, 'GET', `/v1/nodes/${ipmi.uuid}/validate`)).json<Validation>();
      expect(v.power).to.deep.equal({ result: true });
      expect(v.management).to.deep.equal({ result: true });

      // The CLI sends `ipmi_protocol_version=2.0` and `ipmi_port=623` as JSON numbers.
      const numeric = await create(t, { driver: 'ipmi', driver_info: { ipmi_address: '10.0.0.3', ipmi_port: 623, ipmi_protocol_version: 2.0 } });
      v = (await call(t, 'GET', `/v1/nodes/${numeric.uuid}/validate`)).json<Validation>();
      expect(v.power).to.deep.equal({ result: true });
      const v15 = await create(t, { driver: 'ipmi', driver_info: { ipmi_address: '10.0.0.3', ipmi_protocol_version: 1.5 } });
      v = (await call(t, 'GET', `/v1/nodes/${v15.uuid}/validate`)).json<Validation>();
      expect(v.power).to.deep.equal({ result: true });
      const bad = await create(t, { driver: 'ipmi', driver_info: { ipmi_address: '10.0.0.3', ipmi_protocol_version: 3 } });
      v = (await call(t, 'GET', `/v1/nodes/${bad.uuid}/validate`)).json<Validation>();
      expect(v.power.result).to.equal(false);
      expect(v.power.reason).to.match(/Invalid IPMI protocol version value 3\b.*2\.0, 1\.5/);
    });
  });

  describe('with redfish enabled but only the fake power interface', () => {
    const t = suiteApp({ env: { GALVANIC_DEFAULT__ENABLED_POWER_INTERFACES: 'fake' }, conductor: false });

    it('refuses a redfish node: no power interface, naming the hardware type and the allowed values', async () => {
      fault(await call(t, 'POST', '/v1/nodes', { driver: 'redfish', driver_info: REDFISH_INFO }), 400,
        'power interface', 'hardware type "redfish"', 'supports redfish', 'enabled_power_interfaces is fake');
      fault(await call(t, 'POST', '/v1/nodes', { driver: 'redfish', power_interface: 'redfish' }), 400,
        'power interface "redfish"', 'hardware type "redfish"', 'enabled_power_interfaces is fake');
      fault(await call(t, 'POST', '/v1/nodes', { driver: 'ipmi', driver_info: IPMI_INFO }), 400, 'power interface', 'hardware type "ipmi"');
      expect(await nodeCount(t)).to.equal(0);
      expect((await create(t, { driver: 'fake-hardware' })).power_interface).to.equal('fake');
    });

    it('still lists the drivers, with no usable power interface for redfish', async () => {
      const res = await call(t, 'GET', '/v1/drivers?detail=True');
      expect(res.statusCode, res.body).to.equal(200);
      const byName = new Map(res.json<{ drivers: DriverBody[] }>().drivers.map((d) => [d.name, d]));
      expect(byName.get('redfish')).to.deep.include({ default_power_interface: null, enabled_power_interfaces: [], default_management_interface: 'redfish' });
      expect(byName.get('fake-hardware')).to.deep.include({ default_power_interface: 'fake', enabled_power_interfaces: ['fake'] });
    });
  });

  describe('with fake-hardware and redfish, consoles restricted to no-console', () => {
    let t: TestApp;
    before(async () => {
      t = await buildTestApp({
        GALVANIC_DEFAULT__ENABLED_HARDWARE_TYPES: 'fake-hardware,redfish',
        GALVANIC_DEFAULT__ENABLED_CONSOLE_INTERFACES: 'no-console',
      }, { conductor: false });
    });
    after(async () => {
      await t?.close();
    });

    it('resolves fake-hardware to no-console and refuses the disabled fake console', async () => {
      expect((await create(t, { driver: 'fake-hardware' })).console_interface).to.equal('no-console');
      fault(await call(t, 'POST', '/v1/nodes', { driver: 'fake-hardware', console_interface: 'fake' }), 400,
        'console interface "fake"', 'hardware type "fake-hardware"', 'are no-console');
      fault(await call(t, 'POST', '/v1/nodes', { driver: 'ipmi' }), 400, 'No valid host was found');
      const res = await call(t, 'GET', '/v1/drivers/fake-hardware');
      expect(res.statusCode, res.body).to.equal(200);
      expect(res.json<DriverBody>()).to.deep.include({ default_console_interface: 'no-console', enabled_console_interfaces: ['no-console'] });
      const list = (await call(t, 'GET', '/v1/drivers')).json<{ drivers: DriverBody[] }>().drivers.map((d) => d.name);
      expect(list).to.have.members(['fake-hardware', 'redfish']).and.have.lengthOf(2);
    });

    it('uses a configured default interface where the hardware type supports it', async () => {
      const t2 = await buildTestApp({ GALVANIC_DEFAULT__DEFAULT_CONSOLE_INTERFACE: 'no-console' }, { conductor: false });
      try {
        expect((await create(t2, { driver: 'fake-hardware' })).console_interface).to.equal('no-console');
        expect((await create(t2, { driver: 'fake-hardware', console_interface: 'fake' })).console_interface).to.equal('fake');
      } finally {
        await t2.close();
      }
    });
  });

  describe('at startup', () => {
    function registryError(env: Record<string, string>): ConfigError {
      let registry: ReturnType<typeof buildRegistry> | undefined;
      try {
        registry = buildRegistry(testConfig(env));
      } catch (err) {
        expect(err).to.be.instanceOf(ConfigError);
        return err as ConfigError;
      }
      void registry.close();
      throw new Error(`buildRegistry accepted ${JSON.stringify(env)}`);
    }

    it('a default interface that is not enabled is a config error', () => {
      const err = registryError({ GALVANIC_DEFAULT__ENABLED_POWER_INTERFACES: 'fake,redfish', GALVANIC_DEFAULT__DEFAULT_POWER_INTERFACE: 'ipmitool' });
      expect(err.message).to.include('[DEFAULT] default_power_interface').and.include('"ipmitool"').and.include('enabled_power_interfaces');
      const console = registryError({ GALVANIC_DEFAULT__DEFAULT_CONSOLE_INTERFACE: 'fake', GALVANIC_DEFAULT__ENABLED_CONSOLE_INTERFACES: 'no-console' });
      expect(console.message).to.include('[DEFAULT] default_console_interface');
    });

    it('an unknown hardware type or interface is a config error naming the option and the known values', () => {
      const hw = registryError({ GALVANIC_DEFAULT__ENABLED_HARDWARE_TYPES: 'fake-hardware,ilo' });
      expect(hw.message).to.include('[DEFAULT] enabled_hardware_types').and.include('"ilo"').and.include('redfish');
      const power = registryError({ GALVANIC_DEFAULT__ENABLED_POWER_INTERFACES: 'fake,ilo' });
      expect(power.message).to.include('[DEFAULT] enabled_power_interfaces').and.include('"ilo"').and.include('ipmitool');
    });

    it('galvanic refuses to start with such a config, before touching the database', async () => {
      const run = promisify(execFile);
      const err = await run(process.execPath, [path.join(ROOT, 'dist/cli/main.js'), 'api', '--config', path.join(ROOT, 'etc/galvanic.conf.sample')], {
        env: {
          ...process.env,
          GALVANIC_DATABASE__CONNECTION: 'postgres://nobody@127.0.0.1:1/none',
          GALVANIC_DEFAULT__ENABLED_POWER_INTERFACES: 'fake,redfish',
          GALVANIC_DEFAULT__DEFAULT_POWER_INTERFACE: 'ipmitool',
        },
        timeout: 60_000,
      }).then(() => null, (e: { code?: number; stderr?: string }) => e);
      expect(err, 'galvanic api started').to.not.equal(null);
      expect(err!.code).to.be.a('number').and.not.equal(0);
      expect(err!.stderr).to.include('configuration error').and.include('[DEFAULT] default_power_interface');
    });

    it('galvanic refuses a bad [inspector] hooks in one line naming the file and line, without a stack trace', async () => {
      const dir = mkdtempSync(path.join(os.tmpdir(), 'galvanic-hooks-'));
      try {
        const file = path.join(dir, 'galvanic.conf');
        writeFileSync(file, '[DEFAULT]\nhost = hooks-test\n\n[inspector]\nhooks = $default_hooks,bogus\n');
        const err = await promisify(execFile)(process.execPath, [path.join(ROOT, 'dist/cli/main.js'), 'api', '--config', file], {
          env: { ...process.env, GALVANIC_DATABASE__CONNECTION: 'postgres://nobody@127.0.0.1:1/none' },
          timeout: 60_000,
        }).then(() => null, (e: { code?: number; stderr?: string }) => e);
        expect(err, 'galvanic api started').to.not.equal(null);
        expect(err!.code).to.equal(1);
        expect(err!.stderr).to.equal(`galvanic: configuration error: ${file}:5: [inspector] hooks: The following hook(s) are missing or failed to load: bogus\n`);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });
});
