/**
 * Provision verbs as steps of group operations, through `app.inject()` with an in-process
 * conductor: manage → provide → deploy → undeploy over fake-hardware nodes (instance_info for
 * all and per node, configdrive), a node done only once it is active, max_parallel counting a
 * node until then, transient BMC failures retried on the operation's policy and a permanent one
 * ending in `deploy failed`; requests refused as PUT …/states/provision refuses them, with
 * nothing written; and a ramdisk deploy against the Redfish simulator.
 */
import { expect } from 'chai';
import type { LightMyRequestResponse } from 'fastify';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { startRedfishSim, type RedfishSim } from '../../sim/redfish/index.js';
import { ROOT, buildTestApp, faultOf, startGalvanic, type RunningGalvanic, type TestApp, suiteApp } from '../helpers/app.js';
import { freshDatabase, type TestDatabase } from '../helpers/database.js';

type Obj = { [key: string]: unknown };

interface OperationBody {
  uuid: string;
  state: string;
  steps: Array<{ action: string; args: Obj }>;
  counts: Record<string, number>;
  finished_at: string | null;
  nodes?: Array<{ node_uuid: string; node_name: string | null; state: string; attempts: number; last_error: string | null }>;
}

interface NodeBody {
  uuid: string;
  name: string;
  provision_state: string;
  target_provision_state: string | null;
  instance_info: Obj;
  last_error: string | null;
  power_state: string | null;
}

const LATEST = { 'x-openstack-ironic-api-version': 'latest' };
const ISO = 'http://images.example/live.iso';

async function call(t: TestApp, method: 'GET' | 'POST' | 'PATCH', url: string, body?: unknown, headers: Record<string, string> = LATEST): Promise<LightMyRequestResponse> {
  return t.app.inject({ method, url, headers, ...(body === undefined ? {} : { payload: body as object }) });
}

function expectStatus(res: LightMyRequestResponse, status: number): void {
  expect(res.statusCode, res.body).to.equal(status);
}

async function createNodes(t: TestApp, prefix: string, count: number, extra: (i: number) => Obj = () => ({})): Promise<string[]> {
  const out: string[] = [];
  for (let i = 0; i < count; i++) {
    const res = await call(t, 'POST', '/v1/nodes', { name: `${prefix}-${i}`, driver: 'fake-hardware', deploy_interface: 'ramdisk', driver_info: { fake_delay_ms: 20 }, ...extra(i) });
    expectStatus(res, 201);
    out.push(res.json<{ uuid: string }>().uuid);
  }
  return out;
}

async function getNode(t: TestApp, ident: string): Promise<NodeBody> {
  const res = await call(t, 'GET', `/v1/nodes/${ident}`);
  expectStatus(res, 200);
  return res.json<NodeBody>();
}

async function startOperation(t: TestApp, body: Obj): Promise<OperationBody> {
  const res = await call(t, 'POST', '/v1/operations', body);
  expectStatus(res, 201);
  return res.json<OperationBody>();
}

async function waitEnded(t: TestApp, uuid: string, onPoll?: (op: OperationBody) => Promise<void>, timeoutMs = 30_000): Promise<OperationBody> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await call(t, 'GET', `/v1/operations/${uuid}`);
    expectStatus(res, 200);
    const op = res.json<OperationBody>();
    if (op.finished_at !== null) return op;
    if (onPoll) await onPoll(op);
    if (Date.now() > deadline) throw new Error(`operation ${uuid} still ${op.state}: ${res.body.slice(0, 500)}`);
    await sleep(25);
  }
}

async function runOperation(t: TestApp, body: Obj): Promise<OperationBody> {
  return waitEnded(t, (await startOperation(t, body)).uuid);
}

/** Brings new nodes to `available` through one operation. */
async function makeAvailable(t: TestApp, nodes: string[]): Promise<void> {
  const op = await runOperation(t, { nodes, steps: [{ action: 'manage' }, { action: 'provide' }] });
  expect(op.state, JSON.stringify(op)).to.equal('succeeded');
}

describe('group operations: provision steps', function () {
  const t = suiteApp({ env: { GALVANIC_CONDUCTOR__SYNC_POWER_STATE_INTERVAL: '0' } });

  it('manages, provides, deploys (instance_info for all, per node, configdrive) and undeploys a group', async () => {
    const nodes = await createNodes(t, 'life', 3);
    const op1 = await runOperation(t, { nodes, steps: [{ action: 'manage' }, { action: 'provide' }] });
    expect(op1.state).to.equal('succeeded');
    expect(op1.steps.map((s) => s.action)).to.deep.equal(['manage', 'provide']);
    for (const n of nodes) expect((await getNode(t, n)).provision_state).to.equal('available');

    const other = 'http://images.example/other.iso';
    const deploy = await runOperation(t, {
      nodes,
      steps: [{ action: 'deploy', args: { instance_info: { boot_iso: ISO }, node_instance_info: { 'life-2': { boot_iso: other } }, configdrive: 'http://cd.example/cd.iso' } }],
    });
    expect(deploy.state, JSON.stringify(deploy)).to.equal('succeeded');
    expect(deploy.counts).to.include({ succeeded: 3, failed: 0, running: 0, pending: 0 });
    for (const [i, n] of nodes.entries()) {
      const node = await getNode(t, n);
      expect(node.provision_state).to.equal('active');
      expect(node.target_provision_state).to.equal(null);
      expect(node.power_state).to.equal('power on');
      // The API masks configdrive, as Ironic does: read what was stored.
      expect(node.instance_info).to.include({ boot_iso: i === 2 ? other : ISO, configdrive: '******' });
      const row = await t.tdb.knex('nodes').where('uuid', n).first('instance_info');
      expect(row.instance_info).to.include({ configdrive: 'http://cd.example/cd.iso' });
    }

    const undeploy = await runOperation(t, { nodes, steps: [{ action: 'undeploy' }] });
    expect(undeploy.state).to.equal('succeeded');
    for (const n of nodes) {
      const node = await getNode(t, n);
      expect(node.provision_state).to.equal('available');
      expect(node.instance_info).to.deep.equal({});
    }
  });

  it('counts a node as running until it is active, and admits no more than max_parallel meanwhile', async () => {
    const nodes = await createNodes(t, 'slow', 4, () => ({ driver_info: { fake_delay_ms: 150 } }));
    await makeAvailable(t, nodes);
    const op = await startOperation(t, { nodes, max_parallel: 2, steps: [{ action: 'deploy', args: { instance_info: { boot_iso: ISO } } }] });
    let mostDeploying = 0;
    let sawRunningWhileDeploying = false;
    const ended = await waitEnded(t, op.uuid, async (o) => {
      const states = await Promise.all(nodes.map(async (n) => (await getNode(t, n)).provision_state));
      const deploying = states.filter((s) => s === 'deploying').length;
      mostDeploying = Math.max(mostDeploying, deploying);
      // Nodes waiting for admission are left as they were.
      expect(states.filter((s) => s === 'available').length).to.be.at.least(nodes.length - 2 - states.filter((s) => s === 'active').length);
      if (deploying > 0 && o.counts.running >= deploying) sawRunningWhileDeploying = true;
      expect(o.counts.running).to.be.at.most(2);
      expect(o.counts.succeeded).to.be.at.most(states.filter((s) => s === 'active').length);
    });
    expect(ended.state).to.equal('succeeded');
    expect(mostDeploying).to.be.within(1, 2);
    expect(sawRunningWhileDeploying).to.equal(true);
  });

  it('retries a transient BMC failure on the operation\'s policy; a permanent one ends the node in deploy failed', async () => {
    const [flaky, broken] = await createNodes(t, 'fail', 2);
    await makeAvailable(t, [flaky, broken]);
    const patch = (n: string, info: Obj) => call(t, 'PATCH', `/v1/nodes/${n}`, Object.entries(info).map(([k, v]) => ({ op: 'add', path: `/driver_info/${k}`, value: v })));
    expectStatus(await patch(flaky, { fake_fail_attempts: 2 }), 200);
    expectStatus(await patch(broken, { fake_fail: 'permanent' }), 200);
    const op = await runOperation(t, {
      nodes: [flaky, broken], retry: { max_attempts: 3, initial_delay: 0.05, max_delay: 0.1 },
      steps: [{ action: 'deploy', args: { instance_info: { boot_iso: ISO } } }],
    });
    expect(op.state).to.equal('partially_failed');
    const rows = new Map(op.nodes!.map((n) => [n.node_uuid, n]));
    expect(rows.get(flaky)).to.include({ state: 'succeeded', attempts: 3 });
    expect(rows.get(broken)!.state).to.equal('failed');
    expect((await getNode(t, flaky)).provision_state).to.equal('active');
    const b = await getNode(t, broken);
    expect(b.provision_state).to.equal('deploy failed');
    expect(b.target_provision_state).to.equal(null);
    expect(b.last_error).to.match(/^Failed to deploy node /);
  });

  it('refuses what PUT …/states/provision refuses, for any node, and writes nothing', async () => {
    const [ready, enrolled, held] = await createNodes(t, 'refuse', 3);
    await makeAvailable(t, [ready, held]);
    const before = await getNode(t, ready);
    const countOps = async () => (await call(t, 'GET', '/v1/operations?limit=1000')).json<{ operations: unknown[] }>().operations.length;
    const opsBefore = await countOps();
    const deploy = (nodes: string[], args: Obj = { instance_info: { boot_iso: ISO } }, headers = LATEST) =>
      call(t, 'POST', '/v1/operations', { nodes, steps: [{ action: 'deploy', args }] }, headers);

    let res = await deploy([ready, enrolled]);
    expectStatus(res, 400);
    expect(faultOf(res.body).faultstring).to.equal(`The requested action "deploy" can not be performed on node "${enrolled}" while it is in state "enroll".`);

    res = await deploy([ready], {});
    expectStatus(res, 400);
    expect(faultOf(res.body).faultstring).to.match(/boot_iso/);

    res = await deploy([ready], { instance_info: { boot_iso: ISO }, node_instance_info: { 'refuse-1': { boot_iso: ISO } } });
    expectStatus(res, 400);
    expect(faultOf(res.body).faultstring).to.include('refuse-1');

    res = await deploy([ready], { instance_info: { boot_iso: ISO }, image: 'x' });
    expectStatus(res, 400);
    res = await call(t, 'POST', '/v1/operations', { nodes: [ready], steps: [{ action: 'provide', args: { configdrive: 'x' } }] });
    expectStatus(res, 400);

    // The deploy verb exists from 1.73, as in PUT …/states/provision.
    res = await deploy([ready], { instance_info: { boot_iso: ISO } }, { 'x-openstack-ironic-api-version': '1.72' });
    expectStatus(res, 406);

    expectStatus(await t.app.inject({ method: 'PUT', url: `/v1/nodes/${held}/maintenance`, headers: LATEST, payload: { reason: 'test' } }), 202);
    res = await deploy([ready, held]);
    expectStatus(res, 400);
    expect(faultOf(res.body).faultstring).to.equal(`The provisioning operation can't be performed on node ${held} because it's in maintenance mode.`);

    // A later step is checked from where the earlier one leaves the node: deploy then inspect is refused.
    res = await call(t, 'POST', '/v1/operations', { nodes: [ready], steps: [{ action: 'deploy', args: { instance_info: { boot_iso: ISO } } }, { action: 'inspect' }] });
    expectStatus(res, 400);
    expect(faultOf(res.body).faultstring).to.include('while it is in state "active"');

    expect(await countOps()).to.equal(opsBefore);
    const after = await getNode(t, ready);
    expect(after.instance_info).to.deep.equal(before.instance_info);
    expect(after.provision_state).to.equal('available');
  });

  it('fails the step, leaving the node as it is, when the node moved on before its turn', async () => {
    const [a, b] = await createNodes(t, 'moved', 2, () => ({ driver_info: { fake_delay_ms: 100 } }));
    await makeAvailable(t, [a, b]);
    const op = await startOperation(t, { nodes: [a, b], max_parallel: 1, steps: [{ action: 'deploy', args: { instance_info: { boot_iso: ISO } } }] });
    // b waits for admission; meanwhile it is put back to manageable.
    expectStatus(await t.app.inject({ method: 'PUT', url: `/v1/nodes/${b}/states/provision`, headers: LATEST, payload: { target: 'manage' } }), 202);
    const ended = await waitEnded(t, op.uuid);
    expect(ended.state).to.equal('partially_failed');
    const row = ended.nodes!.find((n) => n.node_uuid === b)!;
    expect(row.state).to.equal('failed');
    expect(row.last_error).to.include('while it is in state "manageable"');
    expect((await getNode(t, b)).provision_state).to.equal('manageable');
    expect((await getNode(t, a)).provision_state).to.equal('active');
  });
});

describe('group operations: a ramdisk deploy against the Redfish simulator', function () {
  let t: TestApp;
  let sim: RedfishSim;

  before(async () => {
    sim = await startRedfishSim({ count: 2, latencyMs: [5, 20], bootMs: [300, 500] });
    t = await buildTestApp({ GALVANIC_CONDUCTOR__SYNC_POWER_STATE_INTERVAL: '0' });
  });

  after(async () => {
    await t?.close();
    await sim?.stop();
  });

  it('boots every node from the ISO and counts it done once it is active', async () => {
    const nodes: string[] = [];
    for (const [i, { url }] of sim.bmcs.entries()) {
      const res = await call(t, 'POST', '/v1/nodes', {
        name: `rf-${i}`, driver: 'redfish', deploy_interface: 'ramdisk', boot_interface: 'redfish-virtual-media',
        driver_info: { redfish_address: url, redfish_username: 'admin', redfish_password: 'password' },
      });
      expectStatus(res, 201);
      nodes.push(res.json<{ uuid: string }>().uuid);
    }
    await makeAvailable(t, nodes);
    const op = await runOperation(t, { nodes, steps: [{ action: 'deploy', args: { instance_info: { boot_iso: ISO } } }] });
    expect(op.state, JSON.stringify(op.nodes)).to.equal('succeeded');
    for (const [i, n] of nodes.entries()) {
      expect((await getNode(t, n)).provision_state).to.equal('active');
      const events = (await (await fetch(`${sim.bmcs[i].url}/_sim/events`)).json()) as { events: Array<{ type: string; image?: string }> };
      const types = events.events.map((e) => e.type);
      expect(types).to.include('insert');
      const booted = events.events.filter((e) => e.type === 'boot-finished');
      expect(booted.at(-1)?.image ?? null).to.equal(ISO);
    }
  });
});

describe('galvanic op create with provision verbs (CLI over HTTP)', function () {
  this.timeout(120_000);
  let tdb: TestDatabase;
  let g: RunningGalvanic;

  before(async () => {
    tdb = await freshDatabase();
    g = await startGalvanic({ databaseUrl: tdb.url, env: { GALVANIC_CONDUCTOR__SYNC_POWER_STATE_INTERVAL: '0', GALVANIC_DEFAULT__LOG_LEVEL: 'warn' } });
    for (let i = 0; i < 2; i++) {
      const res = await fetch(`${g.url}/v1/nodes`, {
        method: 'POST', headers: { 'content-type': 'application/json', ...LATEST },
        body: JSON.stringify({ name: `cli-prov-${i}`, driver: 'fake-hardware', deploy_interface: 'ramdisk', driver_info: { fake_delay_ms: 10 } }),
      });
      expect(res.status).to.equal(201);
    }
  });

  after(async () => {
    await g?.stop();
    await tdb?.drop();
  });

  const op = async (...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> => {
    try {
      const { stdout, stderr } = await promisify(execFile)(process.execPath, [path.join(ROOT, 'dist/cli/main.js'), 'op', ...args], { env: { ...process.env, GALVANIC_URL: g.url } });
      return { code: 0, stdout, stderr };
    } catch (err) {
      return err as { code: number; stdout: string; stderr: string };
    }
  };
  const states = async () => {
    const res = await fetch(`${g.url}/v1/nodes?fields=name,provision_state`, { headers: LATEST });
    return ((await res.json()) as { nodes: Array<{ provision_state: string }> }).nodes.map((n) => n.provision_state);
  };

  it('--manage --provide, then --deploy ISO --configdrive, then --undeploy, each waited for', async () => {
    const nodes = 'cli-prov-0,cli-prov-1';
    let r = await op('create', '--nodes', nodes, '--manage', '--provide', '--wait');
    expect(r.code, r.stdout + r.stderr).to.equal(0);
    expect(await states()).to.deep.equal(['available', 'available']);
    r = await op('create', '--nodes', nodes, '--deploy', ISO, '--configdrive', 'http://cd.example/cd.iso', '--wait', '--json');
    expect(r.code, r.stdout + r.stderr).to.equal(0);
    // Progress lines first, then the operation's JSON.
    expect((JSON.parse(r.stdout.slice(r.stdout.indexOf('\n{') + 1)) as OperationBody).steps).to.deep.equal([{ action: 'deploy', args: {} }]);
    expect(await states()).to.deep.equal(['active', 'active']);
    const stored = await tdb.knex('nodes').orderBy('name').pluck('instance_info');
    expect(stored[0]).to.deep.equal({ boot_iso: ISO, configdrive: 'http://cd.example/cd.iso' });
    r = await op('create', '--nodes', nodes, '--undeploy', '--wait');
    expect(r.code, r.stdout + r.stderr).to.equal(0);
    expect(await states()).to.deep.equal(['available', 'available']);
    r = await op('create', '--nodes', nodes, '--configdrive', 'x');
    expect(r.code).to.equal(2);
  });
});
