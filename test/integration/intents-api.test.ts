/**
 * Actions on nodes as intents, through `app.inject()` with an in-process conductor driving
 * fake-hardware: waiting for outcomes, ordered steps, idempotency keys, cancellation,
 * retries with backoff, maintenance and provision through the queue, and the Ironic
 * notifications written around power changes.
 */
import { expect } from 'chai';
import type { LightMyRequestResponse } from 'fastify';
import { backoffMs } from '../../common/backoff.js';
import { INTENT_CHANNEL } from '../../db/intents.js';
import type { FakeBmcRecord as BmcCall } from '../../drivers/fake/fake.js';
import { faultOf, readJsonLines, suiteRecordingApp, type TestApp } from '../helpers/app.js';
import { until } from '../helpers/until.js';

type Obj = { [key: string]: unknown };

interface IntentBody extends Obj {
  uuid: string;
  node_uuid: string;
  seq: number;
  action: string;
  state: string;
  attempts: number;
  max_attempts: number;
  error: string | null;
  result: Obj | null;
  batch: string | null;
  step_index: number | null;
  started_at: string | null;
  finished_at: string | null;
}

interface NodeBody extends Obj {
  uuid: string;
  power_state: string | null;
  target_power_state: string | null;
  provision_state: string;
  target_provision_state: string | null;
  maintenance: boolean;
  maintenance_reason: string | null;
  last_error: string | null;
}

/** One line of the log notifier's file. */
interface NotificationLine {
  message_id: string;
  publisher_id: string;
  event_type: string;
  priority: string;
  timestamp: string;
  payload: Record<string, unknown> & { 'ironic_object.data': Obj };
}

type Method = 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE';

interface CallOptions {
  body?: unknown;
  headers?: Record<string, string>;
}

const MAX_ATTEMPTS = 3;
const RETRY_INITIAL_S = 0.2;
const RETRY_MAX_S = 60;

function call(t: TestApp, method: Method, url: string, opts: CallOptions = {}): Promise<LightMyRequestResponse> {
  const headers = { 'x-openstack-ironic-api-version': 'latest', ...opts.headers };
  return t.app.inject({ method, url, headers, ...(opts.body === undefined ? {} : { payload: opts.body as object }) });
}

function expectStatus(res: LightMyRequestResponse, status: number): void {
  expect(res.statusCode, `${res.statusCode} ${res.body}`).to.equal(status);
}

/** The path of an absolute Location header, for inject. */
function pathOf(location: string | string[] | number | undefined): string {
  expect(location, 'Location header').to.be.a('string');
  return new URL(location as string).pathname;
}

describe('intents API (with a conductor)', function () {
  const t = suiteRecordingApp('intents', {
    GALVANIC_CONDUCTOR__INTENT_MAX_ATTEMPTS: String(MAX_ATTEMPTS),
    GALVANIC_CONDUCTOR__INTENT_RETRY_INITIAL_DELAY: String(RETRY_INITIAL_S),
    GALVANIC_CONDUCTOR__INTENT_RETRY_MAX_DELAY: String(RETRY_MAX_S),
  });
  let counter = 0;

  async function createNode(driverInfo: Obj = {}): Promise<string> {
    counter += 1;
    const res = await call(t, 'POST', '/v1/nodes', { body: { name: `intent-node-${counter}`, driver: 'fake-hardware', driver_info: driverInfo } });
    expectStatus(res, 201);
    return res.json<{ uuid: string }>().uuid;
  }

  async function getNode(uuid: string): Promise<NodeBody> {
    const res = await call(t, 'GET', `/v1/nodes/${uuid}`);
    expectStatus(res, 200);
    return res.json<NodeBody>();
  }

  async function nodeIntents(uuid: string): Promise<IntentBody[]> {
    const res = await call(t, 'GET', `/v1/nodes/${uuid}/intents`);
    expectStatus(res, 200);
    return res.json<{ intents: IntentBody[] }>().intents;
  }

  /** Waits (server side) for an intent to end and returns it. */
  async function waitIntent(uuid: string, seconds = 20): Promise<IntentBody> {
    const res = await call(t, 'GET', `/v1/intents/${uuid}?wait=${seconds}`);
    expectStatus(res, 200);
    const intent = res.json<IntentBody>();
    expect(['succeeded', 'failed', 'skipped', 'cancelled'], `intent ${uuid} still ${intent.state}`).to.include(intent.state);
    return intent;
  }

  async function bmcCalls(node: string): Promise<BmcCall[]> {
    return (await readJsonLines<BmcCall>(t.recordFile)).filter((c) => c.node === node);
  }

  async function notificationsOf(node: string): Promise<NotificationLine[]> {
    return (await readJsonLines<NotificationLine>(t.notificationFile)).filter((n) => n.payload['ironic_object.data'].uuid === node);
  }

  describe('waiting for the outcome', () => {
    it('answers 200 with the finished intent for ?wait=30, and the node shows the new power state', async () => {
      const uuid = await createNode();
      const res = await call(t, 'PUT', `/v1/nodes/${uuid}/states/power?wait=30`, { body: { target: 'power on' } });
      expectStatus(res, 200);
      const intent = res.json<IntentBody>();
      expect(intent).to.include({ node_uuid: uuid, action: 'power', state: 'succeeded', attempts: 1 });
      expect(intent.result).to.deep.equal({ power_state: 'power on' });
      expect(intent.finished_at).to.be.a('string');
      expect(pathOf(res.headers.location)).to.equal(`/v1/intents/${intent.uuid}`);
      const node = await getNode(uuid);
      expect(node.power_state).to.equal('power on');
      expect(node.target_power_state).to.equal(null);
    });

    it('honours "Prefer: wait=5" the same way', async () => {
      const uuid = await createNode({ fake_power_state: 'power on' });
      const res = await call(t, 'PUT', `/v1/nodes/${uuid}/states/power`, { body: { target: 'power off' }, headers: { prefer: 'wait=5' } });
      expectStatus(res, 200);
      const intent = res.json<IntentBody>();
      expect(intent).to.include({ state: 'succeeded', action: 'power' });
      expect(intent.result).to.deep.equal({ power_state: 'power off' });
      const node = await getNode(uuid);
      expect(node.power_state).to.equal('power off');
      expect(node.target_power_state).to.equal(null);
    });

    it('answers 202 with the unfinished intent when the wait expires', async () => {
      const uuid = await createNode({ fake_delay_ms: 3000 });
      const started = Date.now();
      const res = await call(t, 'PUT', `/v1/nodes/${uuid}/states/power?wait=1`, { body: { target: 'power on' } });
      const elapsed = Date.now() - started;
      expectStatus(res, 202);
      expect(elapsed).to.be.at.least(900).and.below(2900);
      const intent = res.json<IntentBody>();
      expect(['queued', 'running']).to.include(intent.state);
      expect(pathOf(res.headers.location)).to.equal(`/v1/intents/${intent.uuid}`);
      expect((await getNode(uuid)).target_power_state).to.equal('power on');
      expect(await waitIntent(intent.uuid)).to.include({ state: 'succeeded' });
      const node = await getNode(uuid);
      expect(node.power_state).to.equal('power on');
      expect(node.target_power_state).to.equal(null);
    });

    it('answers 202 without a body and with Location when no wait is asked for', async () => {
      const uuid = await createNode();
      const res = await call(t, 'PUT', `/v1/nodes/${uuid}/states/power`, { body: { target: 'power on' } });
      expectStatus(res, 202);
      expect(res.body).to.equal('');
      expect(await waitIntent(pathOf(res.headers.location).split('/').pop()!)).to.include({ state: 'succeeded' });
    });

    it('refuses a malformed wait', async () => {
      const uuid = await createNode();
      const res = await call(t, 'PUT', `/v1/nodes/${uuid}/states/power?wait=soon`, { body: { target: 'power on' } });
      expectStatus(res, 400);
      expect(faultOf(res.body).faultstring).to.include('wait');
      expect(await nodeIntents(uuid)).to.have.length(0);
    });
  });

  describe('boot device', () => {
    it('sets the boot device synchronously (204), then reads it and the supported devices back', async () => {
      const uuid = await createNode();
      const set = await call(t, 'PUT', `/v1/nodes/${uuid}/management/boot_device`, { body: { boot_device: 'pxe' } });
      expectStatus(set, 204);
      expect(set.body).to.equal('');
      const get = await call(t, 'GET', `/v1/nodes/${uuid}/management/boot_device`);
      expectStatus(get, 200);
      expect(get.json()).to.deep.equal({ boot_device: 'pxe', persistent: false });
      const supported = await call(t, 'GET', `/v1/nodes/${uuid}/management/boot_device/supported`);
      expectStatus(supported, 200);
      expect(supported.json<{ supported_boot_devices: string[] }>().supported_boot_devices).to.include.members(['pxe', 'disk', 'cdrom']);
    });

    it('answers a boot device the hardware does not support with 400 and the valid ones', async () => {
      const uuid = await createNode();
      const res = await call(t, 'PUT', `/v1/nodes/${uuid}/management/boot_device`, { body: { boot_device: 'floppy' } });
      expectStatus(res, 400);
      expect(faultOf(res.body).faultstring).to.include('floppy').and.include('pxe');
    });
  });

  describe('steps', () => {
    it('runs the steps of one request in order', async () => {
      const uuid = await createNode();
      const res = await call(t, 'POST', `/v1/nodes/${uuid}/intents?wait=30`, {
        body: { steps: [{ action: 'set_boot_device', args: { boot_device: 'pxe' } }, { action: 'power', args: { target: 'power on' } }] },
      });
      expectStatus(res, 200);
      const [first, second] = res.json<{ intents: IntentBody[] }>().intents;
      expect(first).to.include({ action: 'set_boot_device', state: 'succeeded', step_index: 0 });
      expect(second).to.include({ action: 'power', state: 'succeeded', step_index: 1 });
      expect(first.batch).to.be.a('string').and.equal(second.batch);
      expect(second.seq).to.equal(first.seq + 1);
      expect(Date.parse(second.started_at!)).to.be.at.least(Date.parse(first.finished_at!));
      const calls = (await bmcCalls(uuid)).filter((c) => c.action.startsWith('set_'));
      expect(calls.map((c) => c.action)).to.deep.equal(['set_boot_device', 'set_power_state']);
      expect(calls[1].start).to.be.at.least(calls[0].end);
      expect(calls[0].trace).to.equal(`${first.uuid}#1`);
      expect(calls[1].trace).to.equal(`${second.uuid}#1`);
      const node = await getNode(uuid);
      expect(node.power_state).to.equal('power on');
      expect(node.target_power_state).to.equal(null);
    });

    it('skips the later steps when a step fails', async () => {
      // A BMC that refuses everything: a boot device the API could refuse would never reach it.
      const uuid = await createNode({ fake_fail: 'permanent' });
      const res = await call(t, 'POST', `/v1/nodes/${uuid}/intents?wait=30`, {
        body: { steps: [{ action: 'set_boot_device', args: { boot_device: 'pxe' } }, { action: 'power', args: { target: 'power on' } }] },
      });
      expectStatus(res, 200);
      const [first, second] = res.json<{ intents: IntentBody[] }>().intents;
      expect(first).to.include({ state: 'failed', attempts: 1 });
      expect(first.error).to.include('refused the request');
      expect(second.state).to.equal('skipped');
      expect(second.started_at).to.equal(null);
      expect((await bmcCalls(uuid)).filter((c) => c.action === 'set_power_state')).to.have.length(0);
      const node = await getNode(uuid);
      expect(node.power_state).to.equal(null);
      // Nothing will change the power any more: the node must not claim a pending target.
      expect(node.target_power_state).to.equal(null);
      expect(node.last_error).to.include('refused the request');
    });

    for (const [what, steps] of [
      ['an unknown action', [{ action: 'self_destruct' }]],
      ['bad power arguments', [{ action: 'power', args: { target: 'sideways' } }]],
      ['a boot device step without a device', [{ action: 'set_boot_device', args: {} }]],
      ['an unknown step attribute', [{ action: 'get_power_state', when: 'now' }]],
      ['a bad step after a good one', [{ action: 'power', args: { target: 'power on' } }, { action: 'maintenance', args: { maintenance: 'yes' } }]],
      ['no steps', []],
    ] as Array<[string, unknown[]]>) {
      it(`refuses ${what} with 400 and queues nothing`, async () => {
        const uuid = await createNode();
        const res = await call(t, 'POST', `/v1/nodes/${uuid}/intents`, { body: { steps } });
        expectStatus(res, 400);
        expect(faultOf(res.body).faultcode).to.equal('Client');
        expect(await nodeIntents(uuid)).to.have.length(0);
        const node = await getNode(uuid);
        expect(node.target_power_state).to.equal(null);
      });
    }
  });

  describe('concurrent acceptance', () => {
    it('accepts concurrent requests for several nodes each as if alone: refused ones write nothing, accepted ones queue in order', async () => {
      // Slow enough that a's first intent is still running at the end of the test.
      const a = await createNode({ fake_delay_ms: 3000 });
      const b = await createNode({ fake_delay_ms: 50 });
      const bName = (await getNode(b) as Obj).name as string;
      const c = await createNode();
      await t.tdb.knex('nodes').where('uuid', c).update({ provision_state: 'cleaning' });
      const targets = ['power on', 'power off'];
      const requests: Array<Promise<[string, string, LightMyRequestResponse]>> = [];
      for (let i = 0; i < 12; i++) {
        for (const ident of [a, bName, c, 'no-such-node']) {
          const target = targets[(i + ident.length) % 2];
          requests.push(call(t, 'PUT', `/v1/nodes/${ident}/states/power`, { body: { target } }).then((r) => [ident, target, r]));
        }
      }
      const results = await Promise.all(requests);
      for (const [ident, , res] of results) {
        if (ident === c) expectStatus(res, 400);
        else if (ident === 'no-such-node') expectStatus(res, 404);
        else expectStatus(res, 202);
      }
      expect(await nodeIntents(c)).to.have.length(0);
      expect((await getNode(c)).target_power_state).to.equal(null);
      for (const [uuid, ident] of [[a, a], [b, bName]]) {
        const accepted = results.filter(([i]) => i === ident);
        const rows = await t.tdb.knex('intents').join('nodes', 'nodes.id', 'intents.node_id').where('nodes.uuid', uuid)
          .orderBy('seq').select('intents.uuid', 'intents.seq', 'intents.args', 'intents.created_at');
        // One intent per accepted request, each where its Location says, numbered without gaps.
        expect(rows.map((r) => Number(r.seq))).to.deep.equal(accepted.map((_, k) => k + 1));
        expect(new Set(accepted.map(([, , r]) => pathOf(r.headers.location)))).to.deep.equal(new Set(rows.map((r) => `/v1/intents/${r.uuid}`)));
        const byUuid = new Map(rows.map((r) => [r.uuid as string, (r.args as { target: string }).target]));
        for (const [, target, r] of accepted) expect(byUuid.get(pathOf(r.headers.location).split('/').pop()!)).to.equal(target);
        // Requests that shared a transaction share its start time: the requests were accepted together.
        expect(new Set(rows.map((r) => (r.created_at as Date).getTime())).size).to.be.below(rows.length);
      }
      // While a's first intent runs, its target is that of its last queued intent.
      const lastOfA = (await nodeIntents(a)).at(-1)!;
      expect((await getNode(a)).target_power_state).to.equal((lastOfA.args as { target: string }).target);
    });
  });

  describe('idempotency keys', () => {
    it('turns a repeated request with one key into one intent with one Location', async () => {
      const uuid = await createNode({ fake_delay_ms: 200 });
      const headers = { 'idempotency-key': `power-on-${uuid}` };
      const a = await call(t, 'PUT', `/v1/nodes/${uuid}/states/power`, { body: { target: 'power on' }, headers });
      const b = await call(t, 'PUT', `/v1/nodes/${uuid}/states/power`, { body: { target: 'power on' }, headers });
      expectStatus(a, 202);
      expectStatus(b, 202);
      expect(b.headers.location).to.equal(a.headers.location);
      expect(await nodeIntents(uuid)).to.have.length(1);
      // A repeat after the end still finds the same intent, finished.
      await waitIntent(pathOf(a.headers.location).split('/').pop()!);
      const c = await call(t, 'PUT', `/v1/nodes/${uuid}/states/power?wait=5`, { body: { target: 'power on' }, headers });
      expectStatus(c, 200);
      expect(c.headers.location).to.equal(a.headers.location);
      expect(await nodeIntents(uuid)).to.have.length(1);
    });

    it('creates one intent for 10 concurrent requests with one key', async () => {
      const uuid = await createNode({ fake_delay_ms: 100 });
      const headers = { 'idempotency-key': 'concurrent' };
      const results = await Promise.all(Array.from({ length: 10 }, () =>
        call(t, 'PUT', `/v1/nodes/${uuid}/states/power`, { body: { target: 'power on' }, headers })));
      for (const r of results) expectStatus(r, 202);
      expect(new Set(results.map((r) => r.headers.location)).size).to.equal(1);
      const intents = await nodeIntents(uuid);
      expect(intents).to.have.length(1);
      expect(pathOf(results[0].headers.location)).to.equal(`/v1/intents/${intents[0].uuid}`);
      await waitIntent(intents[0].uuid);
      expect((await bmcCalls(uuid)).filter((c) => c.action === 'set_power_state')).to.have.length(1);
    });

    it('returns the whole batch of a repeated multi-step request', async () => {
      const uuid = await createNode();
      const body = { steps: [{ action: 'set_boot_device', args: { boot_device: 'pxe' } }, { action: 'power', args: { target: 'power on' } }] };
      const headers = { 'idempotency-key': 'batch-1' };
      const a = await call(t, 'POST', `/v1/nodes/${uuid}/intents?wait=30`, { body, headers });
      const b = await call(t, 'POST', `/v1/nodes/${uuid}/intents?wait=30`, { body, headers });
      expectStatus(a, 200);
      expectStatus(b, 200);
      expect(b.headers.location).to.equal(a.headers.location);
      const uuidsOf = (r: LightMyRequestResponse) => r.json<{ intents: IntentBody[] }>().intents.map((i) => i.uuid);
      expect(uuidsOf(b)).to.deep.equal(uuidsOf(a));
      expect(await nodeIntents(uuid)).to.have.length(2);
    });

    it('queues one provision intent for a provision request repeated with one key, at once or later', async () => {
      const uuid = await createNode({ fake_delay_ms: 300 });
      const headers = { 'idempotency-key': `manage-${uuid}` };
      const concurrent = await Promise.all(Array.from({ length: 5 }, () =>
        call(t, 'PUT', `/v1/nodes/${uuid}/states/provision`, { body: { target: 'manage' }, headers })));
      for (const r of concurrent) expectStatus(r, 202);
      // After the first was accepted the node is in verifying, where "manage" is refused: a
      // repeat is answered from the first request, not checked again.
      expectStatus(await call(t, 'PUT', `/v1/nodes/${uuid}/states/provision`, { body: { target: 'manage' }, headers }), 202);
      const intents = await nodeIntents(uuid);
      expect(intents.map((i) => i.action)).to.deep.equal(['provision']);
      await waitIntent(intents[0].uuid);
      expect((await getNode(uuid)).provision_state).to.equal('manageable');
      expectStatus(await call(t, 'PUT', `/v1/nodes/${uuid}/states/provision`, { body: { target: 'manage' }, headers }), 202);
      expect(await nodeIntents(uuid)).to.have.length(1);
    });
  });

  describe('provision requests one after another', () => {
    it('leaves the node where a later request moved it: a manage from available queued behind work does not undo an inspect accepted after it', async () => {
      const uuid = await createNode({ fake_delay_ms: 400 });
      await t.tdb.knex('nodes').where('uuid', uuid).update({ provision_state: 'available', target_provision_state: null });
      // A slow power intent holds the queue while both provision requests are accepted.
      const slow = await call(t, 'PUT', `/v1/nodes/${uuid}/states/power`, { body: { target: 'power on' } });
      expectStatus(slow, 202);
      const manage = await call(t, 'PUT', `/v1/nodes/${uuid}/states/provision`, { body: { target: 'manage' } });
      expectStatus(manage, 202);
      expect((await getNode(uuid)).provision_state, 'manage from available, made at once').to.equal('manageable');
      const inspect = await call(t, 'PUT', `/v1/nodes/${uuid}/states/provision`, { body: { target: 'inspect' } });
      expectStatus(inspect, 202);
      const [, manageIntent, inspectIntent] = await nodeIntents(uuid);
      // The inspection waits (held) so that the node is seen between the two.
      await t.tdb.knex('intents').where('uuid', inspectIntent.uuid).update({ held: true });
      expect((await waitIntent(manageIntent.uuid)).state).to.equal('succeeded');
      const between = await getNode(uuid);
      expect([between.provision_state, between.target_provision_state], 'after the manage intent ran').to.deep.equal(['inspecting', 'manageable']);
      await t.tdb.knex('intents').where('uuid', inspectIntent.uuid).update({ held: false });
      await t.tdb.knex.raw('SELECT pg_notify(?, ?)', [INTENT_CHANNEL, '']);
      expect((await waitIntent(inspectIntent.uuid)).state).to.equal('succeeded');
      expect((await getNode(uuid)).provision_state).to.equal('manageable');
    });
  });

  describe('cancellation', () => {
    it('cancels an intent still queued behind a slow one, and refuses to cancel a finished one', async () => {
      const uuid = await createNode({ fake_delay_ms: 1500 });
      const slow = await call(t, 'PUT', `/v1/nodes/${uuid}/states/power`, { body: { target: 'power on' } });
      const queued = await call(t, 'PUT', `/v1/nodes/${uuid}/states/power`, { body: { target: 'power off' } });
      expectStatus(slow, 202);
      expectStatus(queued, 202);
      const slowId = pathOf(slow.headers.location).split('/').pop()!;
      const queuedId = pathOf(queued.headers.location).split('/').pop()!;

      const del = await call(t, 'DELETE', `/v1/intents/${queuedId}`);
      expectStatus(del, 200);
      expect(del.json<IntentBody>()).to.include({ uuid: queuedId, state: 'cancelled' });

      expect(await waitIntent(slowId)).to.include({ state: 'succeeded' });
      expect((await waitIntent(queuedId)).state).to.equal('cancelled');
      const sets = (await bmcCalls(uuid)).filter((c) => c.action === 'set_power_state');
      expect(sets.map((c) => c.args)).to.deep.equal(['power on']);
      const node = await getNode(uuid);
      expect(node.power_state).to.equal('power on');
      expect(node.target_power_state).to.equal(null);

      const again = await call(t, 'DELETE', `/v1/intents/${slowId}`);
      expectStatus(again, 409);
      expect(faultOf(again.body).faultstring).to.include('succeeded');
      expectStatus(await call(t, 'DELETE', `/v1/intents/${queuedId}`), 409);
    });

    it('clears target_power_state when the only pending power intent is cancelled', async () => {
      const uuid = await createNode({ fake_delay_ms: 1000 });
      const boot = await call(t, 'PUT', `/v1/nodes/${uuid}/management/boot_device?wait=0`, { body: { boot_device: 'pxe' } });
      expectStatus(boot, 202);
      const power = await call(t, 'PUT', `/v1/nodes/${uuid}/states/power`, { body: { target: 'power on' } });
      expectStatus(power, 202);
      expect((await getNode(uuid)).target_power_state).to.equal('power on');
      expectStatus(await call(t, 'DELETE', `/v1/intents/${pathOf(power.headers.location).split('/').pop()!}`), 200);
      expect((await getNode(uuid)).target_power_state).to.equal(null);
      expect(await waitIntent(pathOf(boot.headers.location).split('/').pop()!)).to.include({ state: 'succeeded' });
      expect((await bmcCalls(uuid)).filter((c) => c.action === 'set_power_state')).to.have.length(0);
    });

    it('answers 404 for an unknown intent', async () => {
      expectStatus(await call(t, 'GET', '/v1/intents/1b4e28ba-2fa1-11d2-883f-0016d3cca427'), 404);
      expectStatus(await call(t, 'DELETE', '/v1/intents/not-a-uuid'), 404);
    });
  });

  describe('failures and retries', () => {
    it('retries a transient failure with backoff, then fails it after max attempts', async () => {
      const uuid = await createNode({ fake_fail: 'transient' });
      const res = await call(t, 'PUT', `/v1/nodes/${uuid}/states/power?wait=30`, { body: { target: 'power on' } });
      expect(res.statusCode, res.body).to.be.at.least(400);
      expect(faultOf(res.body).faultstring).to.include('timed out');
      const intent = await waitIntent(pathOf(res.headers.location).split('/').pop()!);
      expect(intent).to.include({ state: 'failed', attempts: MAX_ATTEMPTS, max_attempts: MAX_ATTEMPTS });
      expect(intent.error).to.include('timed out');

      const calls = (await bmcCalls(uuid)).filter((c) => c.action === 'set_power_state');
      expect(calls.map((c) => c.trace)).to.deep.equal([1, 2, 3].map((n) => `${intent.uuid}#${n}`));
      for (const c of calls) expect(c.failed).to.be.a('string');
      for (let k = 1; k < calls.length; k++) {
        const gap = calls[k].start - calls[k - 1].end;
        // backoffMs draws from [ceiling/2, ceiling]: half the ceiling is its floor.
        const ceiling = Math.min(RETRY_MAX_S * 1000, RETRY_INITIAL_S * 1000 * 2 ** (k - 1));
        expect(gap, `gap before attempt ${k + 1}`).to.be.at.least(ceiling / 2 - 5);
      }

      const node = await getNode(uuid);
      expect(node.last_error).to.be.a('string').and.include('timed out');
      expect(node.target_power_state).to.equal(null);
      expect(node.power_state).to.equal(null);

      const history = await call(t, 'GET', `/v1/nodes/${uuid}/history`);
      expectStatus(history, 200);
      const errors = history.json<{ history: Array<{ severity: string; event: string }> }>().history.filter((h) => h.severity === 'ERROR');
      expect(errors).to.have.length(MAX_ATTEMPTS);
      expect(errors.map((e) => e.event).join('\n')).to.include(`Attempt 1 of ${MAX_ATTEMPTS}`).and.include(`Attempt 2 of ${MAX_ATTEMPTS}`);
    });

    it('fails a permanent failure after one attempt, and clears last_error on the next power request', async () => {
      const uuid = await createNode({ fake_fail: 'permanent', fake_delay_ms: 500 });
      const res = await call(t, 'PUT', `/v1/nodes/${uuid}/states/power?wait=30`, { body: { target: 'power on' } });
      expectStatus(res, 500);
      const intent = await waitIntent(pathOf(res.headers.location).split('/').pop()!);
      expect(intent).to.include({ state: 'failed', attempts: 1 });
      // The conductor records the error's code; the API shows the status it maps to beside it.
      expect(intent.result).to.deep.equal({ error_code: 'BMC_UNREACHABLE', http_status: 500 });
      expect(intent.error).to.include('refused');
      expect((await bmcCalls(uuid)).filter((c) => c.action === 'set_power_state')).to.have.length(1);
      const failed = await getNode(uuid);
      expect(failed.last_error).to.be.a('string').and.include('refused');

      const next = await call(t, 'PUT', `/v1/nodes/${uuid}/states/power`, { body: { target: 'power on' } });
      expectStatus(next, 202);
      const pending = await getNode(uuid);
      expect(pending.last_error).to.equal(null);
      expect(pending.target_power_state).to.equal('power on');
      await waitIntent(pathOf(next.headers.location).split('/').pop()!);
    });

    it('writes a power_set.error notification for a failed power change', async () => {
      const uuid = await createNode({ fake_fail: 'permanent' });
      await call(t, 'PUT', `/v1/nodes/${uuid}/states/power?wait=30`, { body: { target: 'power off' } });
      const error = await until('power_set.error', async () =>
        (await notificationsOf(uuid)).find((n) => n.event_type === 'baremetal.node.power_set.error'), 15_000);
      expect(error.priority).to.equal('ERROR');
      expect(error.payload['ironic_object.name']).to.equal('NodeSetPowerStatePayload');
      expect(error.payload['ironic_object.data']).to.include({ uuid, to_power: 'power off', target_power_state: null });
      expect(error.payload['ironic_object.data'].last_error).to.be.a('string').and.include('refused');
      expect((await notificationsOf(uuid)).map((n) => n.event_type)).to.not.include('baremetal.node.power_set.end');
    });
  });

  describe('maintenance and provisioning', () => {
    it('sets and unsets maintenance through the queue', async () => {
      const uuid = await createNode({ fake_delay_ms: 500 });
      const power = await call(t, 'PUT', `/v1/nodes/${uuid}/states/power`, { body: { target: 'power on' } });
      expectStatus(power, 202);
      const on = await call(t, 'PUT', `/v1/nodes/${uuid}/maintenance`, { body: { reason: 'disk swap' } });
      expectStatus(on, 202);
      let node = await getNode(uuid);
      expect(node).to.include({ maintenance: true, maintenance_reason: 'disk swap', power_state: 'power on' });

      const off = await call(t, 'DELETE', `/v1/nodes/${uuid}/maintenance`);
      expectStatus(off, 202);
      node = await getNode(uuid);
      expect(node).to.include({ maintenance: false, maintenance_reason: null });

      const intents = await nodeIntents(uuid);
      expect(intents.map((i) => [i.action, i.state])).to.deep.equal([['power', 'succeeded'], ['maintenance', 'succeeded'], ['maintenance', 'succeeded']]);
      // Queued behind the slow power change, not beside it.
      expect(Date.parse(intents[1].started_at!)).to.be.at.least(Date.parse(intents[0].finished_at!));
    });

    it('takes a node from enroll through manage and provide to available', async () => {
      const uuid = await createNode();
      expectStatus(await call(t, 'PUT', `/v1/nodes/${uuid}/states/provision`, { body: { target: 'manage' } }), 202);
      const managed = await until('manageable', async () => {
        const n = await getNode(uuid);
        return n.provision_state === 'manageable' && n.target_provision_state === null ? n : undefined;
      }, 15_000);
      // Verification read the power state from the BMC.
      expect(managed.power_state).to.equal('power off');
      expectStatus(await call(t, 'PUT', `/v1/nodes/${uuid}/states/provision`, { body: { target: 'provide' } }), 202);
      const available = await until('available', async () => {
        const n = await getNode(uuid);
        return n.provision_state === 'available' && n.target_provision_state === null ? n : undefined;
      }, 15_000);
      expect(available.last_error).to.equal(null);
    });

    it('shows the node states', async () => {
      const uuid = await createNode();
      expectStatus(await call(t, 'PUT', `/v1/nodes/${uuid}/states/power?wait=30`, { body: { target: 'power on' } }), 200);
      const res = await call(t, 'GET', `/v1/nodes/${uuid}/states`);
      expectStatus(res, 200);
      expect(res.json()).to.include({
        power_state: 'power on', target_power_state: null, provision_state: 'enroll', target_provision_state: null,
        last_error: null, console_enabled: false,
      });
      expect(res.json()).to.have.property('provision_updated_at');
    });
  });

  describe('notifications', () => {
    it('writes power_set.start and .end in Ironic\'s envelope', async () => {
      const uuid = await createNode();
      expectStatus(await call(t, 'PUT', `/v1/nodes/${uuid}/states/power?wait=30`, { body: { target: 'power on' } }), 200);
      const end = await until('power_set.end', async () =>
        (await notificationsOf(uuid)).find((n) => n.event_type === 'baremetal.node.power_set.end'), 15_000);
      const mine = (await notificationsOf(uuid)).map((n) => n.event_type);
      expect(mine.indexOf('baremetal.node.power_set.start'), 'power_set.start before .end')
        .to.be.at.least(0).and.below(mine.indexOf('baremetal.node.power_set.end'));
      const start = (await notificationsOf(uuid)).find((n) => n.event_type === 'baremetal.node.power_set.start');
      for (const n of [start!, end]) {
        expect(n).to.have.all.keys('message_id', 'publisher_id', 'event_type', 'priority', 'timestamp', 'payload');
        expect(n.priority).to.equal('INFO');
        expect(n.publisher_id).to.equal(`galvanic-conductor.${t.config.DEFAULT.host}`);
        expect(n.message_id).to.match(/^[0-9a-f-]{36}$/);
        // Python's str(datetime.utcnow()).
        expect(n.timestamp).to.match(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}$/);
        expect(n.payload).to.have.all.keys('ironic_object.namespace', 'ironic_object.name', 'ironic_object.version', 'ironic_object.data');
        expect(n.payload['ironic_object.namespace']).to.equal('ironic');
        expect(n.payload['ironic_object.name']).to.equal('NodeSetPowerStatePayload');
        expect(n.payload['ironic_object.version']).to.match(/^\d+\.\d+$/);
        expect(n.payload['ironic_object.data']).to.include({ uuid, to_power: 'power on' });
        expect(JSON.stringify(n)).to.not.include('fake_');
      }
      expect(start!.payload['ironic_object.data']).to.include({ power_state: null, target_power_state: 'power on' });
      expect(end.payload['ironic_object.data']).to.include({ power_state: 'power on', target_power_state: null });
    });
  });

  it('computes backoff within its bounds (sanity check of the figures used above)', () => {
    for (let k = 1; k <= 3; k++) {
      const ceiling = RETRY_INITIAL_S * 1000 * 2 ** (k - 1);
      const d = backoffMs(k, RETRY_INITIAL_S * 1000, RETRY_MAX_S * 1000);
      expect(d).to.be.at.least(ceiling / 2).and.at.most(ceiling);
    }
  });
});
