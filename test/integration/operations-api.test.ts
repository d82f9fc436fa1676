/**
 * Group operations through `app.inject()` with an in-process conductor driving fake-hardware:
 * the lifecycle and status, ordered steps per node, the 409 for a node in another operation
 * (and "queue": true), on_failure=abort, history entries and notifications naming the
 * operation; malformed requests (Ironic's error body, nothing written); and If-Match on
 * node PATCH under concurrent writers.
 */
import { expect } from 'chai';
import type { LightMyRequestResponse } from 'fastify';
import type { Knex } from 'knex';
import { setTimeout as sleep } from 'node:timers/promises';
import { buildTestApp, faultOf, readJsonLines, suiteApp, suiteRecordingApp, type TestApp } from '../helpers/app.js';

type Obj = { [key: string]: unknown };

interface OperationBody {
  uuid: string;
  state: string;
  counts: Record<string, number>;
  progress: { done: number; total: number; percent: number };
  node_count: number;
  round: number;
  abort_reason: string | null;
  started_at: string | null;
  finished_at: string | null;
  nodes?: Array<{ node_uuid: string; node_name: string | null; state: string; attempts: number; last_error: string | null; round: number }>;
  next?: string;
}

const LATEST = { 'x-openstack-ironic-api-version': 'latest' };

async function call(t: TestApp, method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, body?: unknown, headers: Record<string, string> = {}): Promise<LightMyRequestResponse> {
  return t.app.inject({ method, url, headers: { ...LATEST, ...headers }, ...(body === undefined ? {} : { payload: body as object }) });
}

function expectStatus(res: LightMyRequestResponse, status: number): void {
  expect(res.statusCode, res.body).to.equal(status);
}

async function createNodes(t: TestApp, prefix: string, count: number, driverInfo: (i: number) => Obj = () => ({})): Promise<string[]> {
  const out: string[] = [];
  for (let i = 0; i < count; i++) {
    const res = await call(t, 'POST', '/v1/nodes', { name: `${prefix}-${i}`, driver: 'fake-hardware', driver_info: { fake_delay_ms: 20, ...driverInfo(i) } });
    expectStatus(res, 201);
    out.push(res.json<{ uuid: string }>().uuid);
  }
  return out;
}

/** Polls the operation until it has ended. */
async function waitEnded(t: TestApp, uuid: string, query = '', timeoutMs = 30_000): Promise<OperationBody> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await call(t, 'GET', `/v1/operations/${uuid}${query}`);
    expectStatus(res, 200);
    const op = res.json<OperationBody>();
    if (op.finished_at !== null) return op;
    if (Date.now() > deadline) throw new Error(`operation ${uuid} still ${op.state}: ${res.body.slice(0, 500)}`);
    await sleep(50);
  }
}

describe('group operations API (with a conductor)', function () {
  const t = suiteRecordingApp('ops', {
    GALVANIC_OPERATIONS__PROGRESS_NOTIFICATION_INTERVAL: '0.5',
    GALVANIC_CONDUCTOR__SYNC_POWER_STATE_INTERVAL: '0',
  });

  it('runs the steps in order on every node, at most max_parallel at once, and reports the whole', async () => {
    const nodes = await createNodes(t, 'life', 6, (i) => (i === 4 ? { fake_fail_attempts: 1 } : {}));
    const res = await call(t, 'POST', '/v1/operations', {
      nodes: nodes.map((u, i) => (i % 2 ? `life-${i}` : u)),
      steps: [{ action: 'set_boot_device', args: { boot_device: 'pxe' } }, { action: 'power', args: { target: 'power on' } }],
      max_parallel: 2, retry: { max_attempts: 2, initial_delay: 0.1, max_delay: 0.1 }, description: 'pxe then on',
    });
    expectStatus(res, 201);
    expect(res.headers.location).to.match(/\/v1\/operations\/[0-9a-f-]{36}$/);
    const created = res.json<OperationBody>();
    expect(created.node_count).to.equal(6);
    expect(created.counts.pending + created.counts.running).to.equal(6);

    const op = await waitEnded(t, created.uuid);
    expect(op.state).to.equal('succeeded');
    expect(op.counts).to.deep.equal({ pending: 0, running: 0, succeeded: 6, failed: 0, cancelled: 0 });
    expect(op.progress).to.deep.equal({ done: 6, total: 6, percent: 100 });
    expect(op.nodes!.map((n) => n.node_uuid)).to.deep.equal(nodes);
    // Node 4's first attempt at each step failed once and was retried.
    expect(op.nodes!.map((n) => n.attempts)).to.deep.equal([2, 2, 2, 2, 4, 2]);
    // A success clears the error of the attempt before it.
    expect(op.nodes!.map((n) => n.last_error)).to.deep.equal([null, null, null, null, null, null]);

    const calls = (await readJsonLines<{ node: string; action: string; start: number; end: number; failed: string | null }>(t.recordFile))
      .filter((c) => nodes.includes(c.node));
    for (const node of nodes) {
      const mine = calls.filter((c) => c.node === node && !c.failed).map((c) => c.action);
      expect(mine, node).to.deep.equal(['set_boot_device', 'set_power_state']);
    }
    // Nodes active at once: from a node's first call to its last, at most 2 overlap.
    const spans = nodes.map((n) => {
      const mine = calls.filter((c) => c.node === n);
      return { start: Math.min(...mine.map((c) => c.start)), end: Math.max(...mine.map((c) => c.end)) };
    });
    for (const s of spans) expect(spans.filter((o) => o.start < s.start && o.end > s.start).length).to.be.at.most(1);

    const history = await call(t, 'GET', `/v1/nodes/${nodes[4]}/history?detail=true`);
    expectStatus(history, 200);
    const events = history.json<{ history: Array<{ operation: string | null; event: string }> }>().history;
    expect(events.length).to.be.at.least(2);
    for (const e of events) expect(e.operation, e.event).to.equal(created.uuid);

    const notes = (await readJsonLines<{ event_type: string; payload: { 'ironic_object.data': Obj } }>(t.notificationFile))
      .filter((n) => n.event_type.startsWith('baremetal.operation.') && n.payload['ironic_object.data'].uuid === created.uuid);
    const types = notes.map((n) => n.event_type);
    expect(types[0]).to.equal('baremetal.operation.start');
    expect(types.at(-1)).to.equal('baremetal.operation.end');
    expect(types.filter((x) => x === 'baremetal.operation.end')).to.have.length(1);
    expect(notes.at(-1)!.payload['ironic_object.data']).to.include({ state: 'succeeded' });

    const page1 = await call(t, 'GET', `/v1/operations/${created.uuid}?limit=4`);
    const body1 = page1.json<OperationBody>();
    expect(body1.nodes!.map((n) => n.node_uuid)).to.deep.equal(nodes.slice(0, 4));
    const page2 = await call(t, 'GET', body1.next!.replace(/^https?:\/\/[^/]+/, ''));
    expect(page2.json<OperationBody>().nodes!.map((n) => n.node_uuid)).to.deep.equal(nodes.slice(4));
    const listed = await call(t, 'GET', '/v1/operations?state=succeeded');
    expect(listed.json<{ operations: OperationBody[] }>().operations.map((o) => o.uuid)).to.include(created.uuid);
  });

  it('sends progress notifications while it runs, no closer together than the configured interval (0.5 s here)', async () => {
    // A node ends (and the operation is looked at) every ~50 ms: far more often than notified.
    const nodes = await createNodes(t, 'progress', 30, () => ({ fake_delay_ms: 50 }));
    const res = await call(t, 'POST', '/v1/operations', { nodes, steps: [{ action: 'power', args: { target: 'power on' } }], max_parallel: 1 });
    expectStatus(res, 201);
    const uuid = res.json<OperationBody>().uuid;
    await waitEnded(t, uuid);
    const notes = (await readJsonLines<{ event_type: string; timestamp: string; payload: { 'ironic_object.data': Obj } }>(t.notificationFile))
      .filter((n) => n.payload['ironic_object.data'].uuid === uuid);
    expect(notes[0].event_type).to.equal('baremetal.operation.start');
    expect(notes.at(-1)!.event_type).to.equal('baremetal.operation.end');
    const progress = notes.filter((n) => n.event_type === 'baremetal.operation.progress');
    const spanMs = Date.parse(String(notes.at(-1)!.payload['ironic_object.data'].finished_at)) - Date.parse(String(notes[0].payload['ironic_object.data'].started_at));
    expect(progress.length, `progress notifications over ${spanMs} ms`).to.be.at.least(1).and.at.most(Math.ceil(spanMs / 500) + 1);
    // Python's str(datetime) in UTC, as Ironic sends it.
    const times = progress.map((n) => Date.parse(`${n.timestamp.replace(' ', 'T').slice(0, 23)}Z`));
    // Due by the database's clock; sent after commit, so allow for skew in emission: beside
    // other test files one gap measured 342 ms. Unpaced, they would come every ~50 ms.
    for (let i = 1; i < times.length; i++) expect(times[i] - times[i - 1]).to.be.at.least(250);
    const data = progress[0].payload['ironic_object.data'] as { counts: Record<string, number>; progress: { total: number } };
    expect(data.progress.total).to.equal(30);
    expect(data.counts).to.have.keys('pending', 'running', 'succeeded', 'failed', 'cancelled');
  });

  it('refuses a node that another operation still works on with 409 naming it, unless "queue": true', async () => {
    const nodes = await createNodes(t, 'busy', 3, () => ({ fake_delay_ms: 300 }));
    const first = await call(t, 'POST', '/v1/operations', { nodes: [nodes[0], nodes[1]], steps: [{ action: 'power', args: { target: 'power on' } }] });
    expectStatus(first, 201);
    const firstId = first.json<OperationBody>().uuid;
    const before = await t.tdb.knex('intents').count<{ count: string }[]>('* as count');
    const clash = await call(t, 'POST', '/v1/operations', { nodes: [nodes[2], nodes[1]], steps: [{ action: 'power', args: { target: 'power off' } }] });
    expectStatus(clash, 409);
    expect(faultOf(clash.body).faultstring).to.include(firstId).and.include(nodes[1]);
    expect(await t.tdb.knex('intents').count<{ count: string }[]>('* as count')).to.deep.equal(before);

    const queued = await call(t, 'POST', '/v1/operations', { nodes: [nodes[2], nodes[1]], steps: [{ action: 'power', args: { target: 'power off' } }], queue: true });
    expectStatus(queued, 201);
    const second = await waitEnded(t, queued.json<OperationBody>().uuid);
    expect(second.state).to.equal('succeeded');
    const firstDone = await waitEnded(t, firstId);
    // Node 1 ran the first operation's step, then the second's.
    const calls = (await readJsonLines<{ node: string; args: unknown; start: number }>(t.recordFile)).filter((c) => c.node === nodes[1]);
    expect(calls.map((c) => c.args)).to.deep.equal(['power on', 'power off']);
    expect(firstDone.state).to.equal('succeeded');
  });

  it('stops the rest after a failure with on_failure=abort', async () => {
    const nodes = await createNodes(t, 'abort', 6, (i) => (i === 0 ? { fake_fail: 'permanent' } : {}));
    const res = await call(t, 'POST', '/v1/operations', { nodes, steps: [{ action: 'power', args: { target: 'power on' } }], max_parallel: 1, on_failure: 'abort' });
    expectStatus(res, 201);
    const op = await waitEnded(t, res.json<OperationBody>().uuid);
    expect(op.state).to.equal('failed');
    expect(op.abort_reason).to.include(nodes[0]);
    expect(op.counts).to.deep.equal({ pending: 0, running: 0, succeeded: 0, failed: 1, cancelled: 5 });
    const calls = (await readJsonLines<{ node: string }>(t.recordFile)).filter((c) => nodes.includes(c.node));
    expect(calls.map((c) => c.node)).to.deep.equal([nodes[0]]);
  });

  it('cancels and retries only the failed nodes, refusing both when there is nothing to do', async () => {
    const nodes = await createNodes(t, 'retry', 4, (i) => (i === 2 ? { fake_fail: 'permanent' } : {}));
    const res = await call(t, 'POST', '/v1/operations', { nodes, steps: [{ action: 'power', args: { target: 'power on' } }] });
    const opId = res.json<OperationBody>().uuid;
    const op = await waitEnded(t, opId);
    expect(op.state).to.equal('partially_failed');
    expect(op.nodes![2]).to.include({ state: 'failed' }).and.to.have.property('last_error').that.match(/refused/);
    expectStatus(await call(t, 'POST', `/v1/operations/${opId}/cancel`), 409);
    // Repair the node, then retry: one new round, for node 2 only.
    expectStatus(await call(t, 'PATCH', `/v1/nodes/${nodes[2]}`, [{ op: 'remove', path: '/driver_info/fake_fail' }]), 200);
    const retried = await call(t, 'POST', `/v1/operations/${opId}/retry`);
    expectStatus(retried, 200);
    expect(retried.json<OperationBody>()).to.include({ state: 'queued', round: 2 });
    const after = await waitEnded(t, opId);
    expect(after.state).to.equal('succeeded');
    expect(after.nodes!.map((n) => n.round)).to.deep.equal([1, 1, 2, 1]);
    const calls = (await readJsonLines<{ node: string }>(t.recordFile)).filter((c) => nodes.includes(c.node));
    expect(calls.map((c) => c.node).sort()).to.deep.equal([...nodes, nodes[2]].sort());
    expectStatus(await call(t, 'POST', `/v1/operations/${opId}/retry`), 409);
  });
});

describe('If-Match on node PATCH', function () {
  const t = suiteApp({ conductor: false });

  it('lets exactly one of two concurrent PATCHes with the same ETag through; the other gets 412', async () => {
    const created = await call(t, 'POST', '/v1/nodes', { name: 'etag-race', driver: 'fake-hardware' });
    expectStatus(created, 201);
    for (let round = 0; round < 20; round++) {
      const get = await call(t, 'GET', '/v1/nodes/etag-race');
      const etag = get.headers.etag as string;
      expect(etag).to.match(/^"\d+"$/);
      const results = await Promise.all(['a', 'b'].map((who) => call(t, 'PATCH', '/v1/nodes/etag-race',
        [{ op: 'replace', path: '/description', value: `${who}-${round}` }], { 'if-match': etag })));
      const statuses = results.map((r) => r.statusCode).sort();
      expect(statuses, results.map((r) => r.body).join('\n')).to.deep.equal([200, 412]);
      const winner = results.find((r) => r.statusCode === 200)!;
      const loser = results.find((r) => r.statusCode === 412)!;
      expect(faultOf(loser.body).faultstring).to.include('has changed');
      const now = await call(t, 'GET', '/v1/nodes/etag-race');
      expect(now.json<{ description: string }>().description).to.equal(winner.json<{ description: string }>().description);
      expect(now.headers.etag).to.equal(winner.headers.etag).and.not.equal(etag);
    }
  });
});

describe('malformed group operation requests', function () {
  let t: TestApp;
  let knex: Knex;

  before(async () => {
    // No conductor: only the requests under test touch the database.
    t = await buildTestApp({ GALVANIC_OPERATIONS__MAX_NODES: '3' }, { conductor: false });
    knex = t.tdb.knex;
    for (const name of ['m0', 'm1', 'm2', 'm3']) expectStatus(await call(t, 'POST', '/v1/nodes', { name, driver: 'fake-hardware', resource_class: 'big' }), 201);
  });

  after(async () => {
    await t?.close();
  });

  const step = [{ action: 'power', args: { target: 'power on' } }];
  const MISSING = '1d2c3b4a-0000-4000-8000-00000000beef';
  const CASES: Array<{ name: string; method: 'GET' | 'POST'; url: string; body?: unknown; status: number; message?: string }> = [
    { name: 'not an object', method: 'POST', url: '/v1/operations', body: [1], status: 400 },
    { name: 'neither nodes nor selector', method: 'POST', url: '/v1/operations', body: { steps: step }, status: 400, message: 'exactly one' },
    { name: 'both nodes and selector', method: 'POST', url: '/v1/operations', body: { nodes: ['m0'], selector: { owner: 'x' }, steps: step }, status: 400, message: 'exactly one' },
    { name: 'an empty node list', method: 'POST', url: '/v1/operations', body: { nodes: [], steps: step }, status: 400, message: 'nodes' },
    { name: 'more nodes than max_nodes', method: 'POST', url: '/v1/operations', body: { nodes: ['m0', 'm1', 'm2', 'm3'], steps: step }, status: 400, message: 'nodes' },
    { name: 'a node that is not a string', method: 'POST', url: '/v1/operations', body: { nodes: [5], steps: step }, status: 400, message: 'nodes' },
    { name: 'an unknown node', method: 'POST', url: '/v1/operations', body: { nodes: ['m0', MISSING], steps: step }, status: 404, message: MISSING },
    { name: 'a node named twice', method: 'POST', url: '/v1/operations', body: { nodes: ['m0', 'm0'], steps: step }, status: 400, message: 'more than once' },
    { name: 'an empty selector', method: 'POST', url: '/v1/operations', body: { selector: {}, steps: step }, status: 400, message: 'selector' },
    { name: 'an unknown selector key', method: 'POST', url: '/v1/operations', body: { selector: { colour: 'red' }, steps: step }, status: 400, message: 'colour' },
    { name: 'a selector matching nothing', method: 'POST', url: '/v1/operations', body: { selector: { owner: 'nobody' }, steps: step }, status: 400, message: 'no node' },
    { name: 'a selector matching too many', method: 'POST', url: '/v1/operations', body: { selector: { resource_class: 'big' }, steps: step }, status: 400, message: 'more than 3' },
    { name: 'selector maintenance not a boolean', method: 'POST', url: '/v1/operations', body: { selector: { maintenance: 'yes' }, steps: step }, status: 400, message: 'maintenance' },
    { name: 'no steps', method: 'POST', url: '/v1/operations', body: { nodes: ['m0'] }, status: 400, message: 'steps' },
    { name: 'an unknown step action', method: 'POST', url: '/v1/operations', body: { nodes: ['m0'], steps: [{ action: 'explode' }] }, status: 400, message: 'explode' },
    { name: 'a bad power target', method: 'POST', url: '/v1/operations', body: { nodes: ['m0'], steps: [{ action: 'power', args: { target: 'up' } }] }, status: 400, message: 'target' },
    { name: 'max_parallel 0', method: 'POST', url: '/v1/operations', body: { nodes: ['m0'], steps: step, max_parallel: 0 }, status: 400, message: 'max_parallel' },
    { name: 'max_parallel 2.5', method: 'POST', url: '/v1/operations', body: { nodes: ['m0'], steps: step, max_parallel: 2.5 }, status: 400, message: 'max_parallel' },
    { name: 'retry not an object', method: 'POST', url: '/v1/operations', body: { nodes: ['m0'], steps: step, retry: 3 }, status: 400, message: 'retry' },
    { name: 'retry.max_attempts 0', method: 'POST', url: '/v1/operations', body: { nodes: ['m0'], steps: step, retry: { max_attempts: 0 } }, status: 400, message: 'max_attempts' },
    { name: 'a negative initial_delay', method: 'POST', url: '/v1/operations', body: { nodes: ['m0'], steps: step, retry: { initial_delay: -1 } }, status: 400, message: 'initial_delay' },
    { name: 'max_delay below initial_delay', method: 'POST', url: '/v1/operations', body: { nodes: ['m0'], steps: step, retry: { initial_delay: 5, max_delay: 1 } }, status: 400, message: 'max_delay' },
    { name: 'an unknown retry key', method: 'POST', url: '/v1/operations', body: { nodes: ['m0'], steps: step, retry: { jitter: true } }, status: 400, message: 'jitter' },
    { name: 'on_failure "stop"', method: 'POST', url: '/v1/operations', body: { nodes: ['m0'], steps: step, on_failure: 'stop' }, status: 400, message: 'on_failure' },
    { name: 'a description of 256 characters', method: 'POST', url: '/v1/operations', body: { nodes: ['m0'], steps: step, description: 'd'.repeat(256) }, status: 400, message: 'description' },
    { name: 'queue "yes"', method: 'POST', url: '/v1/operations', body: { nodes: ['m0'], steps: step, queue: 'yes' }, status: 400, message: 'queue' },
    { name: 'an unknown field', method: 'POST', url: '/v1/operations', body: { nodes: ['m0'], steps: step, priority: 1 }, status: 400, message: 'priority' },
    { name: 'an unknown operation', method: 'GET', url: `/v1/operations/${MISSING}`, status: 404, message: MISSING },
    { name: 'an operation id that is not a UUID', method: 'GET', url: '/v1/operations/first', status: 404 },
    { name: 'list with a bad state', method: 'GET', url: '/v1/operations?state=done', status: 400, message: 'done' },
    { name: 'list with limit=0', method: 'GET', url: '/v1/operations?limit=0', status: 400 },
    { name: 'list with a marker that is not a UUID', method: 'GET', url: '/v1/operations?marker=x', status: 400, message: 'marker' },
    { name: 'list with an unknown parameter', method: 'GET', url: '/v1/operations?colour=red', status: 400, message: 'colour' },
    { name: 'cancel an unknown operation', method: 'POST', url: `/v1/operations/${MISSING}/cancel`, status: 404 },
    { name: 'retry an unknown operation', method: 'POST', url: `/v1/operations/${MISSING}/retry`, status: 404 },
  ];

  it(`answers each of ${CASES.length} malformed requests with a 4xx, Ironic's error body and no change`, async () => {
    const snapshot = async () => (await knex.raw(`select
      (select count(*) from operations)::int as ops, (select count(*) from operation_nodes)::int as op_nodes,
      (select count(*) from intents)::int as intents, (select coalesce(sum(version), 0) from nodes)::text as versions`)).rows[0] as Obj;
    const before = await snapshot();
    const problems: string[] = [];
    for (const c of CASES) {
      const res = await call(t, c.method, c.url, c.body);
      const where = `${c.name} (${c.method} ${c.url})`;
      if (res.statusCode !== c.status) problems.push(`${where}: status ${res.statusCode}, expected ${c.status}: ${res.body.slice(0, 300)}`);
      try {
        const fault = faultOf(res.body);
        if (fault.faultcode !== 'Client') problems.push(`${where}: faultcode ${fault.faultcode}`);
        if (c.message !== undefined && !fault.faultstring.includes(c.message)) problems.push(`${where}: faultstring ${JSON.stringify(fault.faultstring)} lacks ${JSON.stringify(c.message)}`);
      } catch (err) {
        problems.push(`${where}: not Ironic's error body (${(err as Error).message}): ${res.body.slice(0, 200)}`);
      }
      const after = await snapshot();
      if (JSON.stringify(after) !== JSON.stringify(before)) problems.push(`${where}: the database changed: ${JSON.stringify(before)} -> ${JSON.stringify(after)}`);
    }
    expect(problems, problems.join('\n')).to.deep.equal([]);
  });
});
