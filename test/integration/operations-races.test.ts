/**
 * Group operations against real processes and real Postgres: an API process and two
 * conductor processes sharing the fake BMC's record file ([fake] record_file), the ground
 * truth of what ran, where and when.
 *  1. 1,000 nodes, 10% flaky (their first 2 attempts fail), 2% broken, max_parallel 50:
 *     partially_failed with exact counts, exact attempts, backoff respected and never more
 *     than 50 nodes active at the BMCs; then retry-failed runs the 20 failed nodes only;
 *  2. a conductor SIGKILLed mid-operation: the other finishes it with exact counts;
 *  3. cancel mid-way: no node starts after the cancel returns;
 *  4. on_failure=abort: a failure committed between the pass's look for one and its admission
 *     admits nobody.
 */
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { nodeMapper } from '../../db/nodes.js';
import { admitNodes } from '../../db/operation-nodes.js';
import { getOperation as readOperation } from '../../db/operations.js';
import { readRecords, suiteCluster, type BmcRecord, type Cluster } from '../helpers/cluster.js';

interface NodeRow {
  node_uuid: string;
  state: string;
  attempts: number;
  last_error: string | null;
  round: number;
}

interface OperationBody {
  uuid: string;
  state: string;
  counts: Record<string, number>;
  progress: { done: number; total: number; percent: number };
  finished_at: string | null;
  nodes: NodeRow[];
  next?: string;
}

type Kind = 'ok' | 'flaky' | 'broken';

const verbose = process.env.TEST_VERBOSE === '1';
function note(msg: string): void {
  if (verbose) process.stderr.write(`      [operations-races] ${msg}\n`);
}

const CONDUCTOR_ENV = {
  GALVANIC_CONDUCTOR__HEARTBEAT_INTERVAL: '1',
  GALVANIC_CONDUCTOR__HEARTBEAT_TIMEOUT: '4',
  GALVANIC_CONDUCTOR__SYNC_POWER_STATE_INTERVAL: '0',
  GALVANIC_CONDUCTOR__POLL_INTERVAL: '1',
};
const twoConductors = (prefix: string) => suiteCluster(prefix, { conductors: 2, env: CONDUCTOR_ENV });

const RETRY = { max_attempts: 3, initial_delay: 0.2, max_delay: 1 };

/** Creates `count` fake nodes in one statement: every 10th flaky, every 50th broken. */
async function seedNodes(c: Cluster, count: number, delayMs: number): Promise<Map<string, Kind>> {
  const kinds = new Map<string, Kind>();
  const rows = Array.from({ length: count }, (_, i) => {
    const uuid = randomUUID();
    const kind: Kind = i % 50 === 7 ? 'broken' : i % 10 === 3 ? 'flaky' : 'ok';
    kinds.set(uuid, kind);
    const driverInfo: Record<string, unknown> = { fake_delay_ms: delayMs };
    if (kind === 'flaky') driverInfo.fake_fail_attempts = 2;
    if (kind === 'broken') driverInfo.fake_fail = 'permanent';
    return nodeMapper.toRow({
      uuid, name: `op-node-${i}`, driver: 'fake-hardware', powerInterface: 'fake', managementInterface: 'fake',
      consoleInterface: 'no-console', driverInfo, provisionState: 'manageable',
    });
  });
  await c.tdb.knex.batchInsert('nodes', rows, 500);
  return kinds;
}

async function http(c: Cluster, method: string, url: string, body?: unknown): Promise<{ status: number; text: string }> {
  const res = await fetch(`${c.api.url}${url}`, {
    method,
    headers: { 'content-type': 'application/json', 'x-openstack-ironic-api-version': 'latest' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, text: await res.text() };
}

/** The operation with all its node rows (following `next`). */
async function getOperation(c: Cluster, uuid: string): Promise<OperationBody> {
  const first = await http(c, 'GET', `/v1/operations/${uuid}`);
  expect(first.status, first.text).to.equal(200);
  const op = JSON.parse(first.text) as OperationBody;
  let next = op.next;
  while (next) {
    const page = await http(c, 'GET', next.replace(/^https?:\/\/[^/]+/, ''));
    const body = JSON.parse(page.text) as OperationBody;
    op.nodes.push(...body.nodes);
    next = body.next;
  }
  return op;
}

/** For a failure message: the operation's intents that are open or failed, and the conductors' complaints. */
async function diagnose(c: Cluster, uuid: string): Promise<string> {
  const intents = await c.tdb.knex('intents as i').join('nodes as n', 'n.id', 'i.node_id').where('i.operation', uuid)
    .whereIn('i.state', ['queued', 'running', 'failed']).select('n.uuid', 'n.reservation', 'i.state', 'i.held', 'i.attempts', 'i.conductor', 'i.error', 'i.not_before').limit(30);
  const complaints = c.conductors.flatMap((x) => x.output().split('\n').filter((l) => /"level":"(warn|error|fatal)"/.test(l)).slice(-15));
  return `${JSON.stringify(intents, null, 1)}\n${complaints.join('\n')}`;
}

async function waitEnded(c: Cluster, uuid: string, onPoll: (op: OperationBody) => void = () => undefined, timeoutMs = 60_000): Promise<OperationBody> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await http(c, 'GET', `/v1/operations/${uuid}?limit=1`);
    const op = JSON.parse(res.text) as OperationBody;
    onPoll(op);
    if (op.finished_at !== null) return getOperation(c, uuid);
    if (Date.now() > deadline) throw new Error(`operation ${uuid} still ${op.state} after ${timeoutMs} ms: ${JSON.stringify(op.counts)}\n${await diagnose(c, uuid)}`);
    await sleep(100);
  }
}

async function waitDone(c: Cluster, uuid: string, done: number): Promise<void> {
  for (;;) {
    const op = JSON.parse((await http(c, 'GET', `/v1/operations/${uuid}?limit=1`)).text) as OperationBody;
    if (op.progress.done >= done) return;
    if (op.finished_at !== null) throw new Error(`operation ended before ${done} nodes were done`);
    await sleep(50);
  }
}

async function startOperation(c: Cluster, nodes: string[], maxParallel: number): Promise<string> {
  const res = await http(c, 'POST', '/v1/operations', {
    nodes, steps: [{ action: 'power', args: { target: 'power on' } }], max_parallel: maxParallel, retry: RETRY, description: 'power on the fleet',
  });
  expect(res.status, res.text).to.equal(201);
  return (JSON.parse(res.text) as { uuid: string }).uuid;
}

/** An operation over `count` new nodes (steps of 100 ms), once `done` of them are done. */
async function operationUnderWay(c: Cluster, count: number, maxParallel: number, done: number): Promise<{ kinds: Map<string, Kind>; opId: string }> {
  const kinds = await seedNodes(c, count, 100);
  const opId = await startOperation(c, [...kinds.keys()], maxParallel);
  await waitDone(c, opId, done);
  return { kinds, opId };
}

/** The most nodes active at once at the BMCs: a node is active from its first call's start to its last call's end. */
function maxActive(records: BmcRecord[]): number {
  const spans = new Map<string, { start: number; end: number }>();
  for (const r of records) {
    const s = spans.get(r.node);
    if (!s) spans.set(r.node, { start: r.start, end: r.end });
    else spans.set(r.node, { start: Math.min(s.start, r.start), end: Math.max(s.end, r.end) });
  }
  const events = [...spans.values()].flatMap((s) => [{ t: s.start, d: 1 }, { t: s.end, d: -1 }]);
  // Ends before starts at the same instant: a slot handed over is not two nodes at once.
  events.sort((a, b) => a.t - b.t || a.d - b.d);
  let now = 0;
  let max = 0;
  for (const e of events) {
    now += e.d;
    max = Math.max(max, now);
  }
  return max;
}

function expectedAttempts(kind: Kind): number {
  return kind === 'flaky' ? 3 : 1;
}

describe('group operations (real processes, real Postgres)', function () {
  this.timeout(300_000);

  describe('1,000 nodes, 10% flaky, 2% broken, max_parallel 50, two conductors', () => {
    const c = twoConductors('ops');
    let kinds: Map<string, Kind>;
    let opId: string;

    before(async () => {
      kinds = await seedNodes(c(), 1000, 100);
    });

    it('ends partially_failed: 980 succeeded, 20 failed with their errors, exact attempts, backoff kept, ≤ 50 active', async () => {
      const started = Date.now();
      opId = await startOperation(c(), [...kinds.keys()], 50);
      // Nodes admitted and not done, as the API counts them: the limit must bind.
      let mostRunning = 0;
      const op = await waitEnded(c(), opId, (o) => { mostRunning = Math.max(mostRunning, o.counts.running); });
      note(`operation ended in ${Date.now() - started} ms: ${JSON.stringify(op.counts)}`);
      expect(op.state).to.equal('partially_failed');
      expect(op.counts).to.deep.equal({ pending: 0, running: 0, succeeded: 980, failed: 20, cancelled: 0 });
      expect(op.nodes).to.have.length(1000);
      const problems: string[] = [];
      for (const n of op.nodes) {
        const kind = kinds.get(n.node_uuid)!;
        if (n.state !== (kind === 'broken' ? 'failed' : 'succeeded')) problems.push(`${n.node_uuid} (${kind}): ${n.state}`);
        if (n.attempts !== expectedAttempts(kind)) problems.push(`${n.node_uuid} (${kind}): ${n.attempts} attempts`);
        if (kind === 'broken' && !/refused the request/.test(n.last_error ?? '')) problems.push(`${n.node_uuid}: last_error ${n.last_error}`);
      }

      const records = (await readRecords(c().recordFile)).filter((r) => kinds.has(r.node));
      const byNode = new Map<string, BmcRecord[]>();
      for (const r of records) byNode.set(r.node, [...(byNode.get(r.node) ?? []), r]);
      let minGap1 = Infinity;
      let minGap2 = Infinity;
      for (const [node, kind] of kinds) {
        const calls = (byNode.get(node) ?? []).sort((a, b) => a.start - b.start);
        if (calls.length !== expectedAttempts(kind)) problems.push(`${node} (${kind}): ${calls.length} BMC calls`);
        if (kind === 'flaky' && calls.length === 3) {
          // Backoff with half jitter: at least half of min(max_delay, initial_delay * 2^(n-1)).
          minGap1 = Math.min(minGap1, calls[1].start - calls[0].end);
          minGap2 = Math.min(minGap2, calls[2].start - calls[1].end);
        }
      }
      note(`smallest gaps between attempts: 1→2 ${minGap1.toFixed(1)} ms, 2→3 ${minGap2.toFixed(1)} ms`);
      expect(problems, problems.slice(0, 20).join('\n')).to.deep.equal([]);
      expect(minGap1).to.be.at.least(100 - 2);
      expect(minGap2).to.be.at.least(200 - 2);

      const peak = maxActive(records);
      note(`at most ${peak} nodes active at once at the BMCs, ${mostRunning} running in the API's counts`);
      expect(peak).to.be.at.most(50);
      // The limit was the bound, not a lack of work or of workers.
      expect(mostRunning).to.equal(50);
      expect(new Set(records.map((r) => r.pid)).size, 'both conductors worked').to.equal(2);
    });

    it('retry-failed runs the 20 failed nodes again, and only them', async () => {
      const failed = [...kinds].filter(([, k]) => k === 'broken').map(([u]) => u);
      await c().tdb.knex('nodes').whereIn('uuid', failed).update({ driver_info: JSON.stringify({ fake_delay_ms: 30 }) });
      const before = (await readRecords(c().recordFile)).length;
      const res = await http(c(), 'POST', `/v1/operations/${opId}/retry`);
      expect(res.status, res.text).to.equal(200);
      const op = await waitEnded(c(), opId);
      expect(op.state).to.equal('succeeded');
      expect(op.counts).to.deep.equal({ pending: 0, running: 0, succeeded: 1000, failed: 0, cancelled: 0 });
      const again = (await readRecords(c().recordFile)).slice(before);
      expect(again.map((r) => r.node).sort()).to.deep.equal([...failed].sort());
      expect(op.nodes.filter((n) => n.round === 2).map((n) => n.node_uuid).sort()).to.deep.equal([...failed].sort());
    });
  });

  describe('a conductor SIGKILLed mid-operation', () => {
    const c = twoConductors('opkill');

    it('is taken over: the other conductor finishes the operation with exact counts', async () => {
      const { kinds, opId } = await operationUnderWay(c(), 300, 50, 90);
      const victim = c().conductors[0];
      await victim.kill();
      const killedAt = Date.now();
      const op = await waitEnded(c(), opId);
      note(`finished ${Date.now() - killedAt} ms after the kill: ${JSON.stringify(op.counts)}`);
      expect(op.counts, await diagnose(c(), opId)).to.deep.equal({ pending: 0, running: 0, succeeded: 294, failed: 6, cancelled: 0 });
      expect(op.state).to.equal('partially_failed');
      const records = (await readRecords(c().recordFile)).filter((r) => kinds.has(r.node));
      const problems: string[] = [];
      for (const n of op.nodes) {
        const kind = kinds.get(n.node_uuid)!;
        if (n.state !== (kind === 'broken' ? 'failed' : 'succeeded')) problems.push(`${n.node_uuid} (${kind}): ${n.state}`);
        const ok = records.filter((r) => r.node === n.node_uuid && r.failed === null);
        // A success recorded at the BMC but not in the database (the kill came between) runs again.
        if (ok.length > 1 && !ok.some((r) => r.pid === victim.pid)) problems.push(`${n.node_uuid}: ran ${ok.length} times, none on the killed conductor`);
      }
      expect(problems, problems.slice(0, 20).join('\n')).to.deep.equal([]);
      expect(records.some((r) => r.pid === victim.pid && r.start < killedAt)).to.equal(true);
      const survivor = records.filter((r) => r.pid === c().conductors[1].pid && r.start > killedAt);
      expect(survivor.length, 'the survivor worked after the kill').to.be.greaterThan(0);
      expect(maxActive(records)).to.be.at.most(50);
    });
  });

  describe('cancel mid-way', () => {
    const c = twoConductors('opcancel');

    it('starts no node (and no retry) after the cancel returns; running steps finish; the rest are cancelled', async () => {
      const { kinds, opId } = await operationUnderWay(c(), 400, 20, 60);
      const res = await http(c(), 'POST', `/v1/operations/${opId}/cancel`);
      const returned = Date.now();
      expect(res.status, res.text).to.equal(200);
      expect((JSON.parse(res.text) as { state: string }).state).to.equal('cancelled');
      const op = await waitEnded(c(), opId);
      expect(op.state).to.equal('cancelled');
      expect(op.counts.pending + op.counts.running).to.equal(0);
      expect(op.counts.cancelled).to.be.greaterThan(200);

      const intents: Array<{ uuid: string; attempts: number; started_at: Date | null }> = await c().tdb.knex('intents').where('operation', opId).select('uuid', 'attempts', 'started_at');
      const byUuid = new Map(intents.map((i) => [i.uuid, i]));
      const records = (await readRecords(c().recordFile)).filter((r) => kinds.has(r.node));
      const late = records.filter((r) => r.start > returned);
      note(`${late.length} BMC calls began after the cancel returned (claimed before it)`);
      const problems: string[] = [];
      for (const r of late) {
        const [uuid, attempt] = r.trace!.split('#');
        const intent = byUuid.get(uuid)!;
        // The call served the last attempt of its intent, claimed before the cancel returned.
        if (Number(attempt) !== intent.attempts) problems.push(`${r.node}: attempt ${attempt} after the cancel, intent at ${intent.attempts}`);
        if (!(intent.started_at && intent.started_at.getTime() <= returned)) problems.push(`${r.node}: attempt ${attempt} claimed at ${intent.started_at?.toISOString()}, after the cancel`);
      }
      expect(problems, problems.slice(0, 20).join('\n')).to.deep.equal([]);
      expect(late.length).to.be.at.most(20);
      // Nodes that never reached a BMC ended cancelled.
      const touched = new Set(records.map((r) => r.node));
      for (const n of op.nodes) if (!touched.has(n.node_uuid)) expect(n.state, n.node_uuid).to.equal('cancelled');
    });
  });

  describe('on_failure=abort and a failure committed during the pass', () => {
    // No conductor: the test plays the pass's part, so the interleaving is exact.
    const c = suiteCluster('opabort', { conductors: 0, env: CONDUCTOR_ENV });

    it('admits no further node once a node of the operation has failed, whichever pass looked first', async () => {
      const kinds = await seedNodes(c(), 3, 0);
      const res = await http(c(), 'POST', '/v1/operations', {
        nodes: [...kinds.keys()], steps: [{ action: 'power', args: { target: 'power on' } }], max_parallel: 1, on_failure: 'abort',
      });
      expect(res.status, res.text).to.equal(201);
      const opUuid = (JSON.parse(res.text) as { uuid: string }).uuid;
      const knex = c().tdb.knex;
      const op = await readOperation(knex, opUuid);
      // The first node was admitted and has just failed: its round is over, so it is no longer
      // active, and the pass that looked for failures before this commit saw none.
      const first = await knex('operation_nodes').where({ operation_id: op.id, position: 1 }).first();
      await knex('operation_nodes').where({ operation_id: op.id, position: 1 }).update({ admitted_at: knex.fn.now() });
      await knex('intents').where({ batch: first.batch }).update({ held: false, state: 'failed', finished_at: knex.fn.now(), error: 'broken' });
      const admitted = await knex.transaction((trx) => admitNodes(trx, op));
      expect(admitted, 'nodes admitted after the failure').to.deep.equal([]);
      const waiting = await knex('operation_nodes').where({ operation_id: op.id }).whereNull('admitted_at').count({ n: '*' });
      expect(Number(waiting[0].n)).to.equal(2);
    });
  });
});
