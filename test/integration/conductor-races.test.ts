/**
 * Concurrency claims of the conductor, shown by racing real processes against real Postgres:
 *  1. intents of a node run in the accepted (seq) order, never two at once, over 3 conductors;
 *  2. a conductor SIGKILLed mid-work is taken over: nothing lost, nothing run twice unless
 *     recorded as a retry, order kept;
 *  3. TaskManager.acquire: one winner per race, stale reservations cleared, live ones kept; and
 *     a conductor taken for dead while still working cannot settle or free what it lost;
 *  4. claimIntents with the hash ring: each node claimable by exactly one conductor, and the
 *     ring hash is the same in JS and in SQL.
 * The fake BMC's record file ([fake] record_file) is the ground truth of what ran, where and when.
 */
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Knex } from 'knex';
import { pino } from 'pino';
import { NodeLocked } from '../../common/errors.js';
import { safeToRepeat } from '../../common/intent-kinds.js';
import { HashRing, ringHash } from '../../common/hash-ring.js';
import { LockLost, TaskManager, type Task } from '../../conductor/task-manager.js';
import { registerConductor } from '../../db/conductors.js';
import { createKnex } from '../../db/connection.js';
import { enqueueIntents, finishIntent, getIntentById } from '../../db/intents.js';
import { claimIntents, type ClaimScope } from '../../db/intent-claims.js';
import { recoverConductorLeftovers } from '../../db/intent-recovery.js';
import { createNode } from '../../db/nodes.js';
import { readRecords, suiteCluster, type BmcRecord } from '../helpers/cluster.js';
import { freshDatabase, type TestDatabase } from '../helpers/database.js';

/** An intent as GET /v1/nodes/{n}/intents shows it. */
interface IntentView {
  uuid: string;
  node_uuid: string;
  seq: number;
  action: string;
  args: Record<string, unknown>;
  state: string;
  attempts: number;
  conductor: string | null;
  error: string | null;
}

interface Action {
  method: 'PUT';
  path: string;
  body: Record<string, unknown>;
}

const verbose = process.env.TEST_VERBOSE === '1';
const NODES = 200;
const ROUNDS = 5;
function note(msg: string): void {
  if (verbose) process.stderr.write(`      [conductor-races] ${msg}\n`);
}

/** Runs `fn` over `items` with at most `concurrency` calls in flight (the "clients"). */
async function pool<T>(concurrency: number, items: readonly T[], fn: (item: T, index: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      await fn(items[i], i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, worker));
}

async function http(base: string, method: string, url: string, body?: unknown): Promise<{ status: number; location: string | null; text: string }> {
  const res = await fetch(`${base}${url}`, {
    method,
    headers: { 'content-type': 'application/json', 'x-openstack-ironic-api-version': 'latest' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, location: res.headers.get('location'), text: await res.text() };
}

function shuffle<T>(a: T[]): T[] {
  for (let i = a.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [a[i], a[j]] = [a[j], a[i]];
  }
  return a;
}

function pick<T>(a: readonly T[]): T {
  return a[Math.floor(Math.random() * a.length)];
}

/** A random action asked of `node` without waiting for it. */
function randomAction(node: string, opts: { reboots: boolean }): Action {
  const powerTargets = opts.reboots ? ['power on', 'power off', 'rebooting'] : ['power on', 'power off'];
  if (Math.random() < 0.5) return { method: 'PUT', path: `/v1/nodes/${node}/states/power`, body: { target: pick(powerTargets) } };
  return { method: 'PUT', path: `/v1/nodes/${node}/management/boot_device?wait=0`, body: { boot_device: pick(['pxe', 'disk', 'cdrom']) } };
}

async function createNodes(base: string, count: number, delayMs: number): Promise<string[]> {
  const uuids: string[] = [];
  await pool(32, Array.from({ length: count }, (_, i) => i), async () => {
    const res = await http(base, 'POST', '/v1/nodes', { driver: 'fake-hardware', driver_info: { fake_delay_ms: delayMs } });
    expect(res.status, res.text).to.equal(201);
    uuids.push((JSON.parse(res.text) as { uuid: string }).uuid);
  });
  return uuids;
}

/** Sends one action and returns the UUID of the intent it was queued as (from Location). */
async function fire(base: string, a: Action): Promise<string> {
  const res = await http(base, a.method, a.path, a.body);
  expect(res.status, `${a.path} ${JSON.stringify(a.body)}: ${res.text}`).to.equal(202);
  const m = /\/v1\/intents\/([0-9a-f-]{36})$/.exec(res.location ?? '');
  expect(m, `Location of ${a.path}: ${res.location}`).to.not.equal(null);
  return m![1];
}

function intentOf(r: BmcRecord): string | undefined {
  return r.trace?.split('#')[0];
}

async function openCount(db: Knex): Promise<number> {
  const { rows } = await db.raw<{ rows: Array<{ n: number }> }>("SELECT count(*)::int AS n FROM intents WHERE state IN ('queued', 'running')");
  return rows[0].n;
}

/** Waits until no intent is queued or running; returns false at the deadline. */
async function waitAllFinal(db: Knex, deadline: number): Promise<boolean> {
  let lastNote = Date.now();
  for (;;) {
    if ((await openCount(db)) === 0) return true;
    if (Date.now() > deadline) return false;
    if (verbose && Date.now() - lastNote > 2000) {
      lastNote = Date.now();
      note(await openSummary(db));
    }
    await sleep(100);
  }
}

/** What is still open, for a failure message: counts by state, conductor and reservation. */
async function openSummary(db: Knex): Promise<string> {
  const { rows } = await db.raw<{ rows: Array<Record<string, unknown>> }>(
    `SELECT i.state, i.conductor, n.reservation, count(*)::int AS n, min(i.not_before) AS not_before
       FROM intents i JOIN nodes n ON n.id = i.node_id
      WHERE i.state IN ('queued', 'running')
      GROUP BY 1, 2, 3 ORDER BY 4 DESC LIMIT 20`,
  );
  const conductors = await db('conductors').select('hostname', 'online', db.raw('round(extract(epoch from now() - heartbeat_at)::numeric, 1) AS age'));
  return `open intents: ${JSON.stringify(rows)}; conductors: ${JSON.stringify(conductors)}`;
}

/** Every node's intents in seq order, read in one query (as GET /v1/nodes/{n}/intents shows them). */
async function intentsByNode(db: Knex): Promise<Map<string, IntentView[]>> {
  const rows = await db('intents as i').join('nodes as n', 'n.id', 'i.node_id')
    .select('i.uuid', 'n.uuid as node_uuid', 'i.seq', 'i.kind as action', 'i.args', 'i.state', 'i.attempts', 'i.conductor', 'i.error')
    .orderBy([{ column: 'n.uuid' }, { column: 'i.seq' }]) as IntentView[];
  const out = new Map<string, IntentView[]>();
  for (const r of rows) out.set(r.node_uuid, [...(out.get(r.node_uuid) ?? []), { ...r, seq: Number(r.seq) }]);
  return out;
}

/** The API shows a few nodes' queues as the database holds them. */
async function spotCheckApi(base: string, byNode: Map<string, IntentView[]>, nodes: readonly string[]): Promise<void> {
  for (const node of shuffle([...nodes]).slice(0, 3)) {
    const shown = (await nodeIntents(base, node)).map((i) => [i.uuid, i.seq, i.state, i.attempts]);
    expect(shown, `GET /v1/nodes/${node}/intents`).to.deep.equal((byNode.get(node) ?? []).map((i) => [i.uuid, i.seq, i.state, i.attempts]));
  }
}

/** Samples the conductors' heartbeat ages until stopped: a lapse past the timeout means a false death. */
function watchHeartbeats(db: Knex): { stop(): Promise<Record<string, number>> } {
  const worst: Record<string, number> = {};
  let on = true;
  const loop = (async () => {
    while (on) {
      const rows = await db('conductors').where('online', true)
        .select('hostname', db.raw('extract(epoch from now() - heartbeat_at)::float8 AS age')) as Array<{ hostname: string; age: number }>;
      for (const r of rows) worst[r.hostname] = Math.max(worst[r.hostname] ?? 0, Math.round(r.age * 10) / 10);
      await sleep(250);
    }
  })().catch(() => undefined); // a diagnostic only: it ends with the database (a failed test's)
  return {
    stop: async () => {
      on = false;
      await loop;
      return worst;
    },
  };
}

async function nodeIntents(base: string, node: string): Promise<IntentView[]> {
  const res = await http(base, 'GET', `/v1/nodes/${node}/intents?limit=1000`);
  expect(res.status, res.text).to.equal(200);
  return (JSON.parse(res.text) as { intents: IntentView[] }).intents;
}

/**
 * The per-node claims over the record file: the node's intents (ordered by seq) against
 * their BMC records. Returns the violations found, as readable lines.
 *  - `order`: the last record of each intent, ordered by start, is the seq order;
 *  - `exclusion`: no two records of the node overlap in time;
 *  - `runs`: an intent has at most `attempts` records, and more than one only if retried
 *    (`exact`: exactly `attempts` records, for runs where no conductor died).
 */
function checkNode(node: string, intents: IntentView[], records: BmcRecord[], opts: { exact: boolean }): string[] {
  const out: string[] = [];
  const bySeq = [...intents].sort((a, b) => a.seq - b.seq);
  const recs = [...records].sort((a, b) => a.start - b.start);
  const known = new Set(bySeq.map((i) => i.uuid));
  for (const r of recs) {
    if (!known.has(intentOf(r) ?? '')) out.push(`${node}: record with trace ${r.trace} is not one of the node's intents`);
    if (r.node !== node) out.push(`${node}: record of intent ${r.trace} names node ${r.node}`);
    if (r.failed !== null) out.push(`${node}: BMC call ${r.trace} failed: ${r.failed}`);
  }
  for (let i = 1; i < recs.length; i++) {
    if (recs[i].start < recs[i - 1].end) {
      out.push(`${node}: overlapping BMC calls ${recs[i - 1].trace} (pid ${recs[i - 1].pid}, ${recs[i - 1].start}-${recs[i - 1].end}) `
        + `and ${recs[i].trace} (pid ${recs[i].pid}, ${recs[i].start}-${recs[i].end})`);
    }
  }
  const count = new Map<string, number>();
  const last = new Map<string, BmcRecord>();
  for (const r of recs) {
    const id = intentOf(r)!;
    count.set(id, (count.get(id) ?? 0) + 1);
    last.set(id, r);
  }
  for (const i of bySeq) {
    const n = count.get(i.uuid) ?? 0;
    if (opts.exact ? n !== i.attempts : n > i.attempts) out.push(`${node}: intent ${i.uuid} (seq ${i.seq}) has ${n} BMC records for ${i.attempts} attempt(s)`);
    if (n > 1 && i.attempts <= 1) out.push(`${node}: intent ${i.uuid} ran ${n} times without being retried`);
    if (n === 0) out.push(`${node}: intent ${i.uuid} (seq ${i.seq}, ${i.state}) never reached the BMC`);
  }
  const ran = bySeq.map((i) => i.uuid);
  const recorded = [...last.values()].sort((a, b) => a.start - b.start).map((r) => intentOf(r)!);
  if (ran.join(',') !== recorded.join(',')) {
    const at = ran.findIndex((u, k) => recorded[k] !== u);
    out.push(`${node}: BMC order differs from seq order at position ${at}: expected ${ran[at]} (seq ${bySeq[at]?.seq}), got ${recorded[at]}`);
  }
  return out;
}

function expectNoViolations(violations: string[], what: string): void {
  expect(violations.length, `${what}: ${violations.length} violation(s), first ones:\n${violations.slice(0, 20).join('\n')}`).to.equal(0);
}

const CONDUCTOR_ENV = {
  GALVANIC_CONDUCTOR__HEARTBEAT_INTERVAL: '1',
  GALVANIC_CONDUCTOR__HEARTBEAT_TIMEOUT: '5',
  GALVANIC_CONDUCTOR__SYNC_POWER_STATE_INTERVAL: '0',
  GALVANIC_CONDUCTOR__POLL_INTERVAL: '1',
};

describe('conductor races (real processes, real Postgres)', function () {
  this.timeout(300_000);

  describe('ordering and exclusion: 200 nodes, 3 conductors, 5 rounds of 4,000 unawaited actions', () => {
    const c = suiteCluster('order', { conductors: 3, env: CONDUCTOR_ENV });

    it('runs every node\'s intents once each, in seq order, one at a time, spread over all conductors', async function () {
      // About a minute on a quiet 2-core machine; a machine shared with other heavy work can
      // fall to ~20 requests a second, and a timeout says nothing about the claims checked here.
      this.timeout(900_000);
      const { api, tdb, recordFile, conductors } = c();
      const nodes = await createNodes(api.url, NODES, 2);
      const pids = conductors.map((x) => x.pid).sort();
      let seen = 0;
      for (let round = 1; round <= ROUNDS; round++) {
        const t0 = Date.now();
        const heartbeats = watchHeartbeats(tdb.knex);
        // 20 random actions per node, shuffled together: ~32 clients interleave the nodes.
        const actions = shuffle(nodes.flatMap((n) => Array.from({ length: 20 }, () => ({ node: n, action: randomAction(n, { reboots: true }) }))));
        const accepted = new Map<string, string>();
        await pool(32, actions, async ({ node, action }) => {
          accepted.set(await fire(api.url, action), node);
        });
        const t1 = Date.now();
        const finished = await waitAllFinal(tdb.knex, Date.now() + 90_000);
        const t2 = Date.now();
        const worstHeartbeat = await heartbeats.stop();
        if (!finished) expect.fail(`round ${round}: intents still open after 90 s; ${await openSummary(tdb.knex)}`);

        // The record file only grows: this round's calls are the lines after the last round's.
        const records = await readRecords(recordFile);
        const fresh = records.slice(seen);
        seen = records.length;
        // Power sync is off: every BMC call was made for an intent.
        expect(records.filter((r) => r.trace === null), 'BMC calls made for no intent').to.deep.equal([]);
        const recordsByNode = new Map<string, BmcRecord[]>();
        for (const r of records) recordsByNode.set(r.node, [...(recordsByNode.get(r.node) ?? []), r]);

        const byNode = await intentsByNode(tdb.knex);
        await spotCheckApi(api.url, byNode, nodes);
        const violations: string[] = [];
        const nodeOf = new Map<string, string>();
        for (const node of nodes) {
          const intents = byNode.get(node) ?? [];
          // Everything accepted for the node is in its queue, and nothing else is.
          if (intents.length !== 20 * round) violations.push(`${node}: ${intents.length} intents after round ${round}, expected ${20 * round}`);
          for (const i of intents) {
            nodeOf.set(i.uuid, node);
            if (i.state !== 'succeeded') violations.push(`${node}: intent ${i.uuid} (seq ${i.seq}, ${i.action}) is ${i.state}: ${i.error}`);
          }
          violations.push(...checkNode(node, intents, recordsByNode.get(node) ?? [], { exact: true }));
        }
        for (const [uuid, node] of accepted) {
          if (nodeOf.get(uuid) !== node) violations.push(`intent ${uuid} was accepted for ${node} but is queued for ${nodeOf.get(uuid)}`);
        }
        expect(accepted.size, `round ${round}: accepted intents`).to.equal(NODES * 20);
        expectNoViolations(violations, `round ${round} (worst heartbeat ages, s: ${JSON.stringify(worstHeartbeat)})`);
        // (d) every conductor did some of this round's work.
        const perPid = new Map<number, number>();
        for (const r of fresh) perPid.set(r.pid, (perPid.get(r.pid) ?? 0) + 1);
        expect([...perPid.keys()].sort(), `round ${round}: pids in the record file`).to.deep.equal(pids);
        expect(fresh.length, `round ${round}: BMC calls`).to.equal(NODES * 20);
        note(`round ${round}: fired ${NODES * 20} in ${t1 - t0} ms, all final ${t2 - t1} ms later; calls per pid ${JSON.stringify(Object.fromEntries(perPid))}; `
          + `worst heartbeat ages ${JSON.stringify(worstHeartbeat)}`);
      }
    });

    it('wakes the conductor that owns a node at once: an intent on an idle cluster starts long before the 1 s poll would find it', async () => {
      const { api, tdb } = c();
      const nodes = await createNodes(api.url, 30, 0);
      const startedAfterMs = async (id: string): Promise<number | null> => {
        const row = await tdb.knex('intents').where('uuid', id).first(tdb.knex.raw('extract(epoch FROM started_at - created_at) * 1000 AS ms'));
        return row.ms === null ? null : Number(row.ms);
      };
      const waits: number[] = [];
      for (const node of nodes) {
        const id = await fire(api.url, { method: 'PUT', path: `/v1/nodes/${node}/states/power`, body: { target: 'power on' } });
        let ms = await startedAfterMs(id);
        for (let i = 0; ms === null && i < 100; i++) {
          await sleep(50);
          ms = await startedAfterMs(id);
        }
        expect(ms, `intent ${id} never started`).to.not.equal(null);
        waits.push(ms!);
      }
      // Woken by NOTIFY: milliseconds. Found by the poll of the owner (3 conductors, 1 s each): ~500 ms at the median.
      waits.sort((a, b) => a - b);
      expect(waits[Math.floor(waits.length / 2)], `accept→start of 30 intents, sorted: ${waits.map((w) => w.toFixed(0)).join(', ')} ms`).to.be.below(200);
    });
  });

  describe('takeover: a conductor SIGKILLed with work in flight', () => {
    const c = suiteCluster('takeover', { conductors: 3, env: CONDUCTOR_ENV });

    it('finishes every intent within heartbeat_timeout + 10 s, none run twice unless retried, order kept', async () => {
      const { api, tdb, recordFile, conductors } = c();
      const nodes = await createNodes(api.url, 100, 20);
      const heartbeats = watchHeartbeats(tdb.knex);
      // No reboots: a reboot running when its conductor dies is failed on purpose (running it
      // twice would reboot twice; see recoverConductorLeftovers), so it would not "succeed".
      // Queued fast enough to outrun the conductors: one request per node with its 10 steps
      // (POST /v1/nodes/{n}/intents), so that the kill finds work both running and queued.
      const batches = shuffle(nodes.map((n) => ({
        node: n,
        steps: Array.from({ length: 10 }, () => {
          const a = randomAction(n, { reboots: false });
          return a.path.includes('/states/power')
            ? { action: 'power', args: { target: a.body.target } }
            : { action: 'set_boot_device', args: { boot_device: a.body.boot_device } };
        }),
      })));
      await pool(32, batches, async ({ node, steps }) => {
        const res = await http(api.url, 'POST', `/v1/nodes/${node}/intents`, { steps });
        expect(res.status, res.text).to.be.oneOf([200, 202]);
        expect((JSON.parse(res.text) as { intents: unknown[] }).intents.length).to.equal(10);
      });
      // Kill once at most 400 intents are left (at once if fewer), so that what the bound below
      // measures is the takeover rather than how fast this machine gets through a long queue;
      // the victim is the conductor with the most work running at that moment.
      let host: string | undefined;
      for (let tries = 0; !host && tries < 6000; tries++) {
        const { rows } = await tdb.knex.raw<{ rows: Array<{ conductor: string | null; running: number | null; open: number }> }>(
          `SELECT busiest.conductor, busiest.running,
                  (SELECT count(*)::int FROM intents WHERE state IN ('queued', 'running')) AS open
             FROM (SELECT NULL) AS one
             LEFT JOIN (SELECT conductor, count(*)::int AS running FROM intents WHERE state = 'running'
                         GROUP BY conductor ORDER BY count(*) DESC LIMIT 1) AS busiest ON true`,
        );
        // Several running, not one: on a loaded machine a lone intent can end between this read and the kill.
        if (rows[0].open <= 400 && (rows[0].running ?? 0) >= 5) host = rows[0].conductor ?? undefined;
        if (!host) await sleep(5);
      }
      expect(host, 'a conductor with running intents').to.be.a('string');
      const victim = conductors.find((x) => x.host === host);
      if (!victim) expect.fail(`${host} is none of the conductors started`);
      const killedAt = Date.now();
      await victim.kill();
      const diedAt = Date.now();
      const { rows: [atKill] } = await tdb.knex.raw<{ rows: Array<{ running: number; queued: number; open: number }> }>(
        `SELECT count(*) FILTER (WHERE state = 'running' AND conductor = ?)::int AS running,
                count(*) FILTER (WHERE state = 'queued')::int AS queued,
                count(*) FILTER (WHERE state IN ('queued', 'running'))::int AS open
           FROM intents`, [host!],
      );
      const runningAtKill = atKill.running;
      const bound = 5_000 + 10_000;
      const finished = await waitAllFinal(tdb.knex, killedAt + bound + 1_000);
      const tookMs = Date.now() - killedAt;
      const worst = await heartbeats.stop();
      delete worst[victim.host];
      const context = `${runningAtKill} intents running on ${victim.host} at the kill (${atKill.open} open, ${atKill.queued} queued); `
        + `worst heartbeat ages of the others, s: ${JSON.stringify(worst)}`;
      if (!finished) expect.fail(`intents still open ${tookMs} ms after the kill; ${context}; ${await openSummary(tdb.knex)}`);
      expect(tookMs, `time from the kill until every intent ended; ${context}`).to.be.at.most(bound);
      note(`killed ${victim.host}: ${context}; all final ${tookMs} ms after the kill`);
      expect(runningAtKill, `intents left running by ${victim.host}`).to.be.greaterThan(0);
      expect(atKill.queued, 'intents queued at the kill').to.be.greaterThan(0);

      const records = await readRecords(recordFile);
      const recordsByNode = new Map<string, BmcRecord[]>();
      for (const r of records) recordsByNode.set(r.node, [...(recordsByNode.get(r.node) ?? []), r]);
      // The dead conductor did nothing after its death.
      const late = records.filter((r) => r.pid === victim.pid && r.end > diedAt);
      expect(late, 'BMC calls of the killed conductor after the kill').to.deep.equal([]);

      const violations: string[] = [];
      let retried = 0;
      let total = 0;
      const byNode = await intentsByNode(tdb.knex);
      await spotCheckApi(api.url, byNode, nodes);
      for (const node of nodes) {
        const intents = byNode.get(node) ?? [];
        total += intents.length;
        for (const i of intents) {
          if (i.state !== 'succeeded') violations.push(`${node}: intent ${i.uuid} (seq ${i.seq}, ${i.action}) is ${i.state}: ${i.error}`);
          if (i.attempts > 1) retried++;
        }
        violations.push(...checkNode(node, intents, recordsByNode.get(node) ?? [], { exact: false }));
      }
      expect(total, 'intents').to.equal(1000);
      expectNoViolations(violations, `takeover (${context})`);
      // What the dead conductor had running went back to the queue and ran again as a retry.
      expect(retried, 'intents retried after the takeover').to.be.at.least(runningAtKill);
      // The survivors did all the work after the kill.
      const after = new Set(records.filter((r) => r.start > diedAt).map((r) => r.pid));
      expect(after.size, 'conductors working after the kill').to.be.greaterThan(0);
      expect([...after], 'pids working after the kill').to.not.include(victim.pid);
    });
  });

  describe('TaskManager.acquire across two pools', () => {
    let tdb: TestDatabase;
    let dbA: Knex;
    let dbB: Knex;
    let a: TaskManager;
    let b: TaskManager;
    const log = pino({ level: 'silent' });

    before(async () => {
      tdb = await freshDatabase();
      dbA = createKnex(tdb.url, { poolMax: 4, applicationName: 'race-a' });
      dbB = createKnex(tdb.url, { poolMax: 4, applicationName: 'race-b' });
      // A generous heartbeat timeout: tm-a and tm-b must stay live however slow the machine.
      a = new TaskManager(dbA, 'tm-a', log, 600);
      b = new TaskManager(dbB, 'tm-b', log, 600);
      await registerConductor(tdb.knex, 'tm-a', '', ['fake-hardware']);
      await registerConductor(tdb.knex, 'tm-b', '', ['fake-hardware']);
    });

    after(async () => {
      await dbA?.destroy();
      await dbB?.destroy();
      await tdb?.drop();
    });

    async function newNode(reservation: string | null = null): Promise<number> {
      const node = await createNode(tdb.knex, { driver: 'fake-hardware', provisionState: 'enroll' });
      if (reservation !== null) await tdb.knex('nodes').where('id', node.id).update({ reservation });
      return node.id;
    }

    async function reservationOf(id: number): Promise<string | null> {
      return (await tdb.knex('nodes').where('id', id).first()).reservation as string | null;
    }

    /** Both managers race for the node; returns the winner's task and the loser's error. */
    async function race(id: number): Promise<{ task: Task; winner: string; loss: unknown }> {
      const [ra, rb] = await Promise.allSettled([
        a.acquire(id, { mode: 'exclusive', purpose: 'race' }),
        b.acquire(id, { mode: 'exclusive', purpose: 'race' }),
      ]);
      const won = [ra, rb].filter((r) => r.status === 'fulfilled');
      const lost = [ra, rb].filter((r): r is PromiseRejectedResult => r.status === 'rejected');
      expect(won.length, `winners for node ${id}: ${lost.map((l) => String(l.reason)).join('; ')}`).to.equal(1);
      const task = (won[0] as PromiseFulfilledResult<Task>).value;
      return { task, winner: ra.status === 'fulfilled' ? 'tm-a' : 'tm-b', loss: lost[0].reason };
    }

    it('gives a free node to exactly one of two racing conductors, 200 times; the loser gets NodeLocked', async () => {
      const id = await newNode();
      const wins = { 'tm-a': 0, 'tm-b': 0 } as Record<string, number>;
      for (let i = 0; i < 200; i++) {
        const { task, winner, loss } = await race(id);
        expect(loss).to.be.instanceOf(NodeLocked);
        expect(await reservationOf(id)).to.equal(winner);
        expect(task.exclusive).to.equal(true);
        wins[winner]++;
        await task.release();
        expect(await reservationOf(id)).to.equal(null);
      }
      note(`acquire wins: ${JSON.stringify(wins)}`);
    });

    it('clears a reservation whose holder\'s heartbeat is stale and takes it (also when both race for it)', async () => {
      await registerConductor(tdb.knex, 'tm-dead', '', ['fake-hardware']);
      await tdb.knex('conductors').where('hostname', 'tm-dead').update({ heartbeat_at: tdb.knex.raw("now() - interval '1 hour'") });
      const id = await newNode('tm-dead');
      const task = await a.acquire(id, { mode: 'exclusive', purpose: 'takeover' });
      expect(await reservationOf(id)).to.equal('tm-a');
      await task.release();
      for (let i = 0; i < 50; i++) {
        await tdb.knex('nodes').where('id', id).update({ reservation: 'tm-dead' });
        const { task: t, winner, loss } = await race(id);
        expect(loss).to.be.instanceOf(NodeLocked);
        expect(await reservationOf(id)).to.equal(winner);
        await t.release();
      }
    });

    it('leaves a reservation held by a live conductor alone', async () => {
      await registerConductor(tdb.knex, 'tm-live', '', ['fake-hardware']);
      const id = await newNode('tm-live');
      for (const tm of [a, b]) {
        let err: unknown;
        try {
          await tm.acquire(id, { mode: 'exclusive', purpose: 'steal' });
        } catch (e) {
          err = e;
        }
        expect(err).to.be.instanceOf(NodeLocked);
        expect((err as Error).message).to.include('tm-live');
        expect(await reservationOf(id)).to.equal('tm-live');
      }
    });

    it('fences a conductor declared dead mid-intent: its late outcome neither settles the retried intent nor frees the node', async () => {
      const id = await newNode();
      await tdb.knex.transaction((trx) => enqueueIntents(trx, id, [
        { kind: 'power', args: { target: 'power on' }, maxAttempts: 5 },
        { kind: 'power', args: { target: 'power off' }, maxAttempts: 5 },
      ]));
      const scope: ClaimScope = { conductorGroup: '', drivers: ['fake-hardware'] };
      const late = async (t: Task, intentId: number) => t.commit({ powerState: 'power on' }, async (trx) => {
        await finishIntent(trx, intentId, { state: 'succeeded' });
      });
      const rejected = async (p: Promise<unknown>) => {
        let err: unknown;
        await p.catch((e: unknown) => { err = e; });
        return err;
      };

      type Claimed = Awaited<ReturnType<TaskManager['claimIntents']>>[number];
      /**
       * `dead` is recovered and tm-b claims the intent again (attempt `attempt`); the late
       * outcome of `previous` must not land, and tm-b keeps the node.
       */
      const retriedByB = async (dead: string, previous: Claimed, attempt: number, what: string): Promise<Claimed> => {
        await recoverConductorLeftovers(tdb.knex, dead, safeToRepeat);
        const [retried] = await b.claimIntents(10, scope);
        expect([retried.intent.id, retried.intent.attempts]).to.deep.equal([previous.intent.id, attempt]);
        expect(await rejected(late(previous.task, previous.intent.id)), what).to.be.instanceOf(LockLost);
        await previous.task.release();
        expect(await reservationOf(id)).to.equal('tm-b');
        return retried;
      };

      // tm-a claims the first intent, then misses heartbeats: the survivors recover it and
      // tm-b retries the intent, while tm-a's BMC call is in fact still under way.
      const [first] = await a.claimIntents(10, scope);
      expect(first.intent.seq).to.equal(1);
      const second = await retriedByB('tm-a', first, 2, 'late commit of tm-a');
      let row = await getIntentById(tdb.knex, first.intent.id);
      expect([row.state, row.conductor, row.attempts]).to.deep.equal(['running', 'tm-b', 2]);
      expect(await claimIntents(tdb.knex, 'tm-c', 10, scope), 'the next intent is not claimable').to.deep.equal([]);

      // The same with one host: tm-b is recovered and claims the intent again itself (attempt 3).
      const third = await retriedByB('tm-b', second, 3, 'late commit of attempt 2');
      row = await getIntentById(tdb.knex, first.intent.id);
      expect([row.state, row.attempts]).to.deep.equal(['running', 3]);

      // The current attempt settles it normally, and the queue moves on.
      await late(third.task, third.intent.id);
      expect(await reservationOf(id)).to.equal(null);
      expect((await getIntentById(tdb.knex, first.intent.id)).state).to.equal('succeeded');
      const [next] = await a.claimIntents(10, scope);
      expect(next.intent.seq).to.equal(2);
      await late(next.task, next.intent.id);
    });

    it('commits a batch of outcomes whole, except a task whose lock was lost: that one is dropped and the others land', async () => {
      const ids = [await newNode(), await newNode(), await newNode()];
      for (const id of ids) {
        await tdb.knex.transaction((trx) => enqueueIntents(trx, id, [{ kind: 'power', args: { target: 'power on' }, maxAttempts: 5 }]));
      }
      const scope: ClaimScope = { conductorGroup: '', drivers: ['fake-hardware'] };
      const claimed = (await a.claimIntents(10, scope)).filter((c) => ids.includes(c.task.node.id));
      expect(claimed).to.have.length(3);
      // The middle one is taken for dead and recovered (requeued) while tm-a still works.
      const lost = claimed[1];
      await recoverConductorLeftovers(tdb.knex, 'tm-a', safeToRepeat, undefined, [lost.intent.id]);
      const versions = new Map(claimed.map((c) => [c.task.node.id, c.task.node.version]));

      const out = await a.commitAll(claimed.map((c) => ({ task: c.task, changes: { powerState: 'power on' } })), async (trx, held) => {
        for (const h of held) await finishIntent(trx, claimed[h.index].intent.id, { state: 'succeeded' });
      });
      expect(out[1]).to.be.instanceOf(LockLost);
      for (const k of [0, 2]) {
        const node = out[k] as Exclude<(typeof out)[number], LockLost>;
        expect([node.id, node.powerState, node.reservation, node.version]).to.deep.equal([claimed[k].task.node.id, 'power on', null, versions.get(node.id)! + 1]);
        expect((await getIntentById(tdb.knex, claimed[k].intent.id)).state).to.equal('succeeded');
      }
      // Nothing of the lost one was written: still queued for its retry, node unchanged and free.
      expect((await getIntentById(tdb.knex, lost.intent.id)).state).to.equal('queued');
      const [lostNode] = await tdb.knex('nodes').where('id', lost.task.node.id).select('power_state', 'reservation', 'version');
      expect([lostNode.power_state, lostNode.reservation, Number(lostNode.version)]).to.deep.equal([lost.task.node.powerState, null, lost.task.node.version]);
      await lost.task.release();
    });
  });

  describe('claimIntents with the hash ring', () => {
    let tdb: TestDatabase;
    const hosts = ['ring-a', 'ring-b', 'ring-c'];
    const ring = new HashRing(hosts);

    before(async () => {
      tdb = await freshDatabase();
      for (const h of hosts) await registerConductor(tdb.knex, h, '', ['fake-hardware']);
    });

    after(async () => {
      await tdb?.drop();
    });

    it('covers the whole hash space exactly once with the ranges of the hosts', () => {
      const ranges = hosts.flatMap((h) => ring.rangesOf(h)).sort((x, y) => x.lo - y.lo);
      expect(ranges[0].lo).to.equal(-(2 ** 31) - 1);
      expect(ranges[ranges.length - 1].hi).to.equal(2 ** 31 - 1);
      for (let i = 1; i < ranges.length; i++) expect(ranges[i].lo, `range ${i}`).to.equal(ranges[i - 1].hi);
    });

    it('lets every node be claimed by exactly one conductor: the ring owner', async () => {
      const db = tdb.knex;
      const nodes: Awaited<ReturnType<typeof createNode>>[] = [];
      await pool(8, Array.from({ length: 300 }, (_, i) => i), async () => {
        const n = await createNode(db, { driver: 'fake-hardware', provisionState: 'enroll' });
        await db.transaction((trx) => enqueueIntents(trx, n.id, [{ kind: 'power', args: { target: 'power on' }, maxAttempts: 1 }]));
        nodes.push(n);
      });
      const claimedBy = new Map<number, string[]>();
      for (const host of hosts) {
        const scope: ClaimScope = { conductorGroup: '', drivers: ['fake-hardware'], ranges: ring.rangesOf(host) };
        const claimed = await claimIntents(db, host, 1000, scope);
        for (const i of claimed) claimedBy.set(i.nodeId, [...(claimedBy.get(i.nodeId) ?? []), host]);
        // Put everything back so the next scope sees every node free.
        await db('intents').update({ state: 'queued', conductor: null, attempts: 0, started_at: null });
        await db('nodes').update({ reservation: null });
      }
      const wrong = nodes
        .filter((n) => (claimedBy.get(n.id) ?? []).join(',') !== ring.owner(n.uuid))
        .map((n) => `${n.uuid}: claimed by [${(claimedBy.get(n.id) ?? []).join(', ')}], ring owner ${ring.owner(n.uuid)}`);
      expect(wrong, 'nodes not claimed by exactly their ring owner').to.deep.equal([]);
      // Every host got a share (300 nodes, 3 hosts: an empty share would mean a broken ring).
      for (const h of hosts) expect([...claimedBy.values()].filter((v) => v[0] === h).length, h).to.be.greaterThan(0);
    });

    it('stores each node\'s ring_hash as ringHash computes it in JS, for 1,000 UUIDs', async () => {
      const uuids = Array.from({ length: 1000 }, () => randomUUID());
      await tdb.knex('nodes').insert(uuids.map((uuid) => ({ uuid, driver: 'fake-hardware', provision_state: 'enroll' })));
      const rows: Array<{ uuid: string; h: number }> = await tdb.knex('nodes').whereIn('uuid', uuids).select('uuid', 'ring_hash as h');
      expect(rows.length).to.equal(1000);
      const mismatches = rows.filter((r) => ringHash(r.uuid) !== r.h).map((r) => `${r.uuid}: js ${ringHash(r.uuid)} sql ${r.h}`);
      expect(mismatches).to.deep.equal([]);
      expect(rows.some((r) => r.h < 0) && rows.some((r) => r.h > 0), 'both signs occur').to.equal(true);
    });
  });
});
