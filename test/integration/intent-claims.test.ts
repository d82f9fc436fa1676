/**
 * Claims that find work, and cheap intent rows:
 *  - the claim says which claimed intents have another of their node queued behind them;
 *  - a claim after wake-ups reads the named nodes' heads alone;
 *  - a requeued step says whether it was woken while it ran (due at once);
 *  - starting an intent is a HOT update (no index entry written);
 *  - with polling out of the way (60 s), the runner still starts a node's next intent as soon
 *    as the one before it ends, whether the claim said it was queued behind (two steps of one
 *    request) or a wake-up came while the node was running (remembered until its end).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import type { Knex } from 'knex';
import type { LightMyRequestResponse } from 'fastify';
import { createKnex } from '../../db/connection.js';
import { enqueueIntents, finishSucceededIntents, requeueIntents, wakeWaitingSteps } from '../../db/intents.js';
import { claimIntents, type ClaimScope } from '../../db/intent-claims.js';
import { createNode } from '../../db/nodes.js';
import { mintAgentToken } from '../../db/agent-tokens.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { suiteDatabase } from '../helpers/database.js';

interface IntentBody {
  uuid: string;
  state: string;
  started_at: string | null;
  finished_at: string | null;
}

const SCOPE: ClaimScope = { conductorGroup: '', drivers: ['fake-hardware'] };
const POWER_ON = { kind: 'power', args: { target: 'power on' }, maxAttempts: 1 };

describe('intent claims', function () {
  this.timeout(60_000);

  describe('the claim statement', () => {
    const tdb = suiteDatabase();

    it('says which claimed intents have another intent of their node queued behind them', async () => {
      const two = await createNode(tdb.knex, { driver: 'fake-hardware', provisionState: 'enroll' });
      const one = await createNode(tdb.knex, { driver: 'fake-hardware', provisionState: 'enroll' });
      await tdb.knex.transaction((trx) => enqueueIntents(trx, two.id, [POWER_ON, { ...POWER_ON, args: { target: 'power off' } }]));
      await tdb.knex.transaction((trx) => enqueueIntents(trx, one.id, [POWER_ON]));
      const claimed = await claimIntents(tdb.knex, 'claims-host', 10, SCOPE);
      expect(claimed.map((c) => [c.nodeId, c.seq, c.queuedBehind])).to.deep.equal([[two.id, 1, true], [one.id, 1, false]]);
      await finishSucceededIntents(tdb.knex, claimed.map((c) => ({ id: c.id, result: null })));
      await tdb.knex('nodes').update({ reservation: null });
      const [last] = await claimIntents(tdb.knex, 'claims-host', 10, SCOPE);
      expect([last.nodeId, last.seq, last.queuedBehind]).to.deep.equal([two.id, 2, false]);
    });

    it('reads the claimed nodes\' agent tokens with them, in either shape', async () => {
      await tdb.knex('nodes').update({ reservation: 'elsewhere' });
      const withToken = await createNode(tdb.knex, { driver: 'fake-hardware', provisionState: 'deploy wait' });
      const without = await createNode(tdb.knex, { driver: 'fake-hardware', provisionState: 'deploy wait' });
      const token = await mintAgentToken(tdb.knex, withToken.id);
      for (const n of [withToken, without]) await tdb.knex.transaction((trx) => enqueueIntents(trx, n.id, [POWER_ON]));
      const tokens = new Map<number, string>();
      const claimed = await claimIntents(tdb.knex, 'token-host', 10, SCOPE, new Map(), undefined, tokens);
      expect(claimed.map((c) => c.nodeId).sort()).to.deep.equal([withToken.id, without.id].sort());
      expect([...tokens]).to.deep.equal([[withToken.id, token]]);

      await finishSucceededIntents(tdb.knex, claimed.map((c) => ({ id: c.id, result: null })));
      await tdb.knex('nodes').whereIn('id', [withToken.id, without.id]).update({ reservation: null });
      for (const n of [withToken, without]) await tdb.knex.transaction((trx) => enqueueIntents(trx, n.id, [POWER_ON]));
      const named = new Map<number, string>();
      const again = await claimIntents(tdb.knex, 'token-host', 10, SCOPE, new Map(), [withToken.uuid, without.uuid], named);
      expect(again).to.have.length(2);
      expect([...named]).to.deep.equal([[withToken.id, token]]);
      await finishSucceededIntents(tdb.knex, again.map((c) => ({ id: c.id, result: null })));
      await tdb.knex('nodes').update({ reservation: null });
    });

    it('claims the intents due longest first, and none not due yet', async () => {
      const fresh = await createNode(tdb.knex, { driver: 'fake-hardware', provisionState: 'enroll' });
      const woken = await createNode(tdb.knex, { driver: 'fake-hardware', provisionState: 'enroll' });
      const waiting = await createNode(tdb.knex, { driver: 'fake-hardware', provisionState: 'enroll' });
      for (const n of [fresh, woken, waiting]) await tdb.knex.transaction((trx) => enqueueIntents(trx, n.id, [POWER_ON]));
      // Created after `fresh`, but due since an hour ago (a retry's or a wake-up's not_before);
      // the third is not due for an hour.
      await tdb.knex('intents').where('node_id', woken.id).update({ not_before: tdb.knex.raw("now() - interval '1 hour'") });
      await tdb.knex('intents').where('node_id', waiting.id).update({ not_before: tdb.knex.raw("now() + interval '1 hour'") });
      const first = await claimIntents(tdb.knex, 'due-host', 1, SCOPE);
      expect(first.map((c) => c.nodeId), 'the one due longest').to.deep.equal([woken.id]);
      const rest = await claimIntents(tdb.knex, 'due-host', 10, SCOPE);
      expect(rest.map((c) => c.nodeId), 'then the rest that is due').to.deep.equal([fresh.id]);
      await finishSucceededIntents(tdb.knex, [...first, ...rest].map((c) => ({ id: c.id, result: null })));
      await tdb.knex.raw("UPDATE intents SET state = 'cancelled', finished_at = now() WHERE node_id = ?", [waiting.id]);
      await tdb.knex('nodes').update({ reservation: null });
    });

    it('claims, by name, only the heads of the named nodes that are due', async () => {
      const [two, due, late, other] = await Promise.all([0, 1, 2, 3].map(() => createNode(tdb.knex, { driver: 'fake-hardware', provisionState: 'enroll' })));
      await tdb.knex.transaction((trx) => enqueueIntents(trx, two.id, [POWER_ON, { ...POWER_ON, args: { target: 'power off' } }]));
      for (const n of [due, late, other]) await tdb.knex.transaction((trx) => enqueueIntents(trx, n.id, [POWER_ON]));
      await tdb.knex('intents').where('node_id', late.id).update({ not_before: tdb.knex.raw("now() + interval '1 hour'") });
      const named = [two.uuid, due.uuid, late.uuid];
      const first = await claimIntents(tdb.knex, 'only-host', 10, SCOPE, undefined, named);
      expect(first.map((c) => [c.nodeId, c.seq, c.queuedBehind]), 'the named heads that are due').to.have.deep.members([[two.id, 1, true], [due.id, 1, false]]);
      await tdb.knex('nodes').update({ reservation: null });
      // The head of `two` runs: its next intent is not a head yet.
      expect(await claimIntents(tdb.knex, 'only-host', 10, SCOPE, undefined, named), 'nothing behind a running head').to.deep.equal([]);
      const rest = await claimIntents(tdb.knex, 'only-host', 10, SCOPE);
      expect(rest.map((c) => c.nodeId), 'the node not named, claimed by the claim of the whole share').to.deep.equal([other.id]);
      await finishSucceededIntents(tdb.knex, [...first, ...rest].map((c) => ({ id: c.id, result: null })));
      await tdb.knex.raw("UPDATE intents SET state = 'cancelled', finished_at = now() WHERE finished_at IS NULL AND node_id = ANY(?)", [[two.id, late.id]]);
      await tdb.knex('nodes').update({ reservation: null });
    });

    it('requeues a waiting step and says which were woken while they ran (due at once)', async () => {
      const STEP = { kind: 'provision_step', args: {}, maxAttempts: 1 };
      const woken = await createNode(tdb.knex, { driver: 'fake-hardware', provisionState: 'enroll' });
      const quiet = await createNode(tdb.knex, { driver: 'fake-hardware', provisionState: 'enroll' });
      for (const n of [woken, quiet]) await tdb.knex.transaction((trx) => enqueueIntents(trx, n.id, [STEP]));
      const claimed = await claimIntents(tdb.knex, 'requeue-host', 10, SCOPE, undefined, [woken.uuid, quiet.uuid]);
      expect(claimed).to.have.length(2);
      const seqs = await tdb.knex.transaction((trx) => wakeWaitingSteps(trx, [woken.id]));
      expect([...seqs], 'the woken step\'s seq').to.deep.equal([[woken.id, 1]]);
      const bare = await createNode(tdb.knex, { driver: 'fake-hardware', provisionState: 'enroll' });
      expect((await tdb.knex.transaction((trx) => wakeWaitingSteps(trx, [bare.id]))).size, 'a node without a waiting step').to.equal(0);
      const later = new Date(Date.now() + 3_600_000);
      const due = await tdb.knex.transaction((trx) => requeueIntents(trx, claimed.map((c) => ({ id: c.id, notBefore: later }))));
      const byNode = new Map(claimed.map((c) => [c.nodeId, c.id]));
      expect([...due], 'due at once: the woken one alone').to.deep.equal([byNode.get(woken.id)]);
      await tdb.knex('nodes').update({ reservation: null });
      const again = await claimIntents(tdb.knex, 'requeue-host', 10, SCOPE, undefined, [woken.uuid, quiet.uuid]);
      expect(again.map((c) => c.nodeId), 'claimable again: the woken one alone').to.deep.equal([woken.id]);
      await finishSucceededIntents(tdb.knex, again.map((c) => ({ id: c.id, result: null })));
      await tdb.knex.raw("UPDATE intents SET state = 'cancelled', finished_at = now() WHERE finished_at IS NULL AND node_id = ?", [quiet.id]);
      await tdb.knex('nodes').update({ reservation: null });
    });

    it('starts an intent with a HOT update: its state changes but no index entry is written', async () => {
      // One connection, so that this backend's statistics are the ones flushed and read.
      const db: Knex = createKnex(tdb.url, { poolMax: 1 });
      try {
        const node = await createNode(db, { driver: 'fake-hardware', provisionState: 'enroll' });
        await db.transaction((trx) => enqueueIntents(trx, node.id, [POWER_ON]));
        const counts = async () => {
          await db.raw('SELECT pg_stat_force_next_flush()');
          const { rows } = await db.raw("SELECT n_tup_upd AS upd, n_tup_hot_upd AS hot FROM pg_stat_user_tables WHERE relname = 'intents'");
          return { upd: Number(rows[0].upd), hot: Number(rows[0].hot) };
        };
        const before = await counts();
        const claimed = await claimIntents(db, 'hot-host', 10, SCOPE);
        expect(claimed.map((c) => c.nodeId)).to.deep.equal([node.id]);
        const after = await counts();
        expect(after.upd - before.upd, 'updates').to.equal(1);
        expect(after.hot - before.hot, 'HOT updates').to.equal(1);
      } finally {
        await db.destroy();
      }
    });
  });

  describe('the claim statement, with statistics that say the queue is empty', () => {
    const tdb = suiteDatabase();

    /** Each plan the connection runs, as auto_explain reports it (JSON, with row counts), sent back as a notice. */
    async function explainingKnex(plans: unknown[]): Promise<Knex> {
      const db = createKnex(tdb.url, { poolMax: 1 });
      const conn = (await db.client.acquireConnection()) as { on(e: 'notice', f: (m: { message?: string }) => void): void; query(sql: string): Promise<unknown> };
      conn.on('notice', (m) => {
        const json = m.message?.indexOf('{') ?? -1;
        if (json >= 0) plans.push(JSON.parse(m.message!.slice(json)));
      });
      await conn.query("LOAD 'auto_explain'; SET auto_explain.log_min_duration = 0; SET auto_explain.log_analyze = on; "
        + 'SET auto_explain.log_timing = off; SET auto_explain.log_format = json; SET auto_explain.log_level = notice');
      await db.client.releaseConnection(conn);
      return db;
    }

    /** The plan nodes reading `relation`, anywhere in the tree. */
    function scansOf(plan: Record<string, unknown>, relation: string, out: Array<Record<string, unknown>> = []): Array<Record<string, unknown>> {
      if (plan['Relation Name'] === relation) out.push(plan);
      for (const child of (plan.Plans as Array<Record<string, unknown>> | undefined) ?? []) scansOf(child, relation, out);
      return out;
    }

    it('reads each candidate\'s queue through its index, not by scanning every open intent', async () => {
      // 300 nodes with 20 finished intents each, analysed: the statistics say no intent is
      // open, as they do after an autoanalyze ran while the queue was drained. Then 5 queued
      // intents a node, which the statistics do not know of. Planned on those statistics, the
      // claim scanned every open intent for each one it claimed: ~7,000 for each of 200 a claim,
      // 0.2-0.5 s a claim, in a benchmark run where an autoanalyze had come at such a moment.
      await tdb.knex.raw('ALTER TABLE intents SET (autovacuum_enabled = false)');
      const nodes = await Promise.all(Array.from({ length: 300 }, () => createNode(tdb.knex, { driver: 'fake-hardware', provisionState: 'enroll' })));
      await tdb.knex.raw(
        `INSERT INTO intents (uuid, node_id, seq, kind, args, state, max_attempts, started_at, finished_at)
         SELECT gen_random_uuid(), n, s, 'power', '{"target": "power on"}', 'succeeded', 1, now(), now()
           FROM unnest(?::int[]) n CROSS JOIN generate_series(1, 20) s`, [nodes.map((n) => n.id)]);
      await tdb.knex.raw('ANALYZE nodes, intents');
      await tdb.knex.raw(
        `INSERT INTO intents (uuid, node_id, seq, kind, args, state, max_attempts)
         SELECT gen_random_uuid(), n, s, 'power', '{"target": "power on"}', 'queued', 1
           FROM unnest(?::int[]) n CROSS JOIN generate_series(21, 25) s`, [nodes.map((n) => n.id)]);
      const plans: Array<{ Plan: Record<string, unknown> }> = [];
      const db = await explainingKnex(plans);
      try {
        const claimed = await claimIntents(db, 'stale-stats-host', 100, SCOPE);
        expect(claimed, 'claimed').to.have.length(100);
        expect(claimed.every((c) => c.seq === 21 && c.queuedBehind), 'each node\'s head, with more behind it').to.equal(true);
        await tdb.knex('nodes').update({ reservation: null });
        const only = await claimIntents(db, 'stale-stats-host', 100, SCOPE, undefined, nodes.slice(100, 200).map((n) => n.uuid));
        expect(only.map((c) => c.seq), 'the named nodes\' heads').to.deep.equal(new Array(100).fill(21));
        const claims = plans.filter((p) => scansOf(p.Plan, 'nodes').length > 0 && JSON.stringify(p.Plan).includes('LockRows'));
        expect(claims, 'plans of the two claims').to.have.length(2);
        for (const [i, { Plan: plan }] of claims.entries()) {
          const scans = scansOf(plan, 'intents').filter((s) => s['Node Type'] !== 'ModifyTable');
          for (const scan of scans) {
            // A scan run once per candidate must look its rows up in the index, not filter them all.
            const loops = Number(scan['Actual Loops'] ?? 1);
            if (loops > 1) expect(scan['Index Cond'], `claim ${i + 1}: ${scan['Node Type']} on ${scan['Index Name']}, ${loops} loops, filter ${scan.Filter}`).to.be.a('string');
          }
        }
      } finally {
        await db.destroy();
        await tdb.knex.raw('ALTER TABLE intents RESET (autovacuum_enabled)');
      }
    });
  });

  describe('the runner, with a 60 s poll', () => {
    let t: TestApp;
    let counter = 0;
    before(async () => {
      t = await buildTestApp({ GALVANIC_CONDUCTOR__POLL_INTERVAL: '60' });
      // The conductor's first pass at start; from here on only wake-ups and ends claim.
      await sleep(200);
    });
    after(async () => {
      await t?.close();
    });

    const call = (method: 'GET' | 'POST' | 'PUT', url: string, body?: object): Promise<LightMyRequestResponse> => t.app.inject({
      method, url, headers: { 'x-openstack-ironic-api-version': 'latest' }, ...(body === undefined ? {} : { payload: body }),
    });
    const createApiNode = async (delayMs: number): Promise<string> => {
      counter += 1;
      const res = await call('POST', '/v1/nodes', { name: `claims-node-${counter}`, driver: 'fake-hardware', driver_info: { fake_delay_ms: delayMs } });
      expect(res.statusCode, res.body).to.equal(201);
      return res.json<{ uuid: string }>().uuid;
    };
    const intentOf = async (uuid: string, waitS = 0): Promise<IntentBody> => {
      const res = await call('GET', `/v1/intents/${uuid}${waitS ? `?wait=${waitS}` : ''}`);
      expect(res.statusCode, res.body).to.equal(200);
      return res.json<IntentBody>();
    };
    const gapMs = (earlier: IntentBody, later: IntentBody) => Date.parse(later.started_at!) - Date.parse(earlier.finished_at!);

    it('starts the next step of a request as soon as the step before it ends (the claim said it was queued behind)', async () => {
      const node = await createApiNode(300);
      const res = await call('POST', `/v1/nodes/${node}/intents?wait=10`, {
        steps: [{ action: 'power', args: { target: 'power on' } }, { action: 'power', args: { target: 'power off' } }],
      });
      expect(res.statusCode, res.body).to.equal(200);
      const [first, second] = res.json<{ intents: IntentBody[] }>().intents;
      expect([first.state, second.state]).to.deep.equal(['succeeded', 'succeeded']);
      expect(gapMs(first, second)).to.be.below(1000);
    });

    it('starts an intent queued while its node runs another as soon as that one ends (the wake-up was remembered)', async () => {
      const node = await createApiNode(800);
      const a = await call('PUT', `/v1/nodes/${node}/states/power`, { target: 'power on' });
      expect(a.statusCode, a.body).to.equal(202);
      const first = new URL(a.headers.location as string).pathname.split('/').pop()!;
      const deadline = Date.now() + 5000;
      while ((await intentOf(first)).state !== 'running') {
        if (Date.now() > deadline) throw new Error('the first intent never started');
        await sleep(20);
      }
      const b = await call('PUT', `/v1/nodes/${node}/states/power`, { target: 'power off' });
      expect(b.statusCode, b.body).to.equal(202);
      const second = new URL(b.headers.location as string).pathname.split('/').pop()!;
      const done = await intentOf(second, 10);
      expect(done.state).to.equal('succeeded');
      expect(gapMs(await intentOf(first), done)).to.be.below(1000);
    });
  });
});
