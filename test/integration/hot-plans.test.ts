/**
 * The plans of the hot statements, as Postgres runs them on a server that has JIT (Debian's and
 * most distributions' packages ship llvmjit; the embedded server does not): captured by
 * auto_explain (EXPLAIN ANALYZE, JSON) while the real code paths run against a fleet of 5,000
 * nodes with 50,000 finished and 2,600 open intents. No statement may JIT-compile (a claim took
 * 1-2 s of compilation for 5 ms of execution), none may be estimated above jit_above_cost (a
 * planner switch that leaves a disabled node in the plan costs 1e10), the intents table is
 * never read whole, and the indexes the statements' comments promise are the ones used.
 *
 * Twice: with statistics taken on the fleet as it is, and with statistics taken while no intent
 * was open (an autoanalyze after the queue drained), the case the claim's comments are about.
 */
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { expect } from 'chai';
import type { FastifyInstance } from 'fastify';
import type { Knex } from 'knex';
import type pg from 'pg';
import { pino } from 'pino';
import { buildApp } from '../../api/app.js';
import { HashRing } from '../../common/hash-ring.js';
import { SuccessRecorder } from '../../conductor/success-recorder.js';
import { TaskManager } from '../../conductor/task-manager.js';
import { buildRegistry } from '../../drivers/build-registry.js';
import { mintAgentToken } from '../../db/agent-tokens.js';
import { createKnex } from '../../db/connection.js';
import { claimIntents, type ClaimScope } from '../../db/intent-claims.js';
import { nodeMapper, nodesForPowerSync, nodesForSensorData } from '../../db/nodes.js';
import { lockAndWriteHeld } from '../../db/reservations.js';
import { nodesByPortAddresses } from '../../db/ports.js';
import { testConfig } from '../helpers/app.js';
import { freshDatabase, type TestDatabase } from '../helpers/database.js';

const NODES = 5000;
const FINISHED_PER_NODE = 10;
const HOST = 'hot-plans-conductor';
const SCOPE: ClaimScope = { conductorGroup: '', drivers: ['fake-hardware'] };

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Index Cond'?: string;
  'Recheck Cond'?: string;
  'Total Cost': number;
  Plans?: PlanNode[];
}

/** One statement's auto_explain output. */
interface Explained {
  'Query Text': string;
  Plan: PlanNode;
  JIT?: Record<string, unknown>;
}

function* walk(node: PlanNode): Generator<PlanNode> {
  yield node;
  for (const child of node.Plans ?? []) yield* walk(child);
}

function nodesOf(plans: readonly Explained[]): PlanNode[] {
  return plans.flatMap((p) => [...walk(p.Plan)]);
}

/** A plan in one line per node, for messages: what ran, on what, through which index. */
function outline(plans: readonly Explained[]): string {
  const lines: string[] = [];
  const add = (n: PlanNode, depth: number) => {
    lines.push(`${'  '.repeat(depth)}${n['Node Type']}${n['Relation Name'] ? ` on ${n['Relation Name']}` : ''}`
      + `${n['Index Name'] ? ` using ${n['Index Name']}` : ''}${n['Index Cond'] ? ` (${n['Index Cond']})` : ''}`);
    for (const c of n.Plans ?? []) add(c, depth + 1);
  };
  for (const e of plans) {
    lines.push(`-- ${label(e)}`);
    add(e.Plan, 1);
  }
  return lines.join('\n');
}

/** The first line of a statement that says what it is, for messages. */
function label(e: Explained): string {
  return (e['Query Text'] ?? '?').replace(/\s+/g, ' ').slice(0, 120);
}

/** Runs `work` in a transaction that is always rolled back. */
async function rolledBack(db: Knex, work: (trx: Knex.Transaction) => Promise<void>): Promise<void> {
  const trx = await db.transaction();
  try {
    await work(trx);
  } finally {
    await trx.rollback();
  }
}

/** Whether the server has a JIT provider: our sessions run with jit off, so ask with it on. */
async function jitAvailable(db: Knex): Promise<boolean> {
  return db.transaction(async (trx) => {
    await trx.raw('SET LOCAL jit = on');
    const { rows } = await trx.raw('SELECT pg_jit_available() AS available') as { rows: Array<{ available: boolean }> };
    return rows[0].available;
  });
}

/**
 * The fleet: nodes in the states the hot statements pick from, ten finished intents each, an
 * open queue on 2,000 of them (two deep on 500), 100 running at another conductor, 500 nodes
 * waiting for their agent, two ports each. `stats` says when the statistics are taken: of the
 * fleet as it is, before any intent is open, or never (a server with autovacuum off, or a
 * fleet enrolled since the last autoanalyze: the planner takes the nodes table for one row).
 */
async function fillFleet(db: Knex, stats: Statistics): Promise<void> {
  if (stats === 'never') {
    for (const table of ['nodes', 'intents', 'ports', 'agent_tokens']) await db.raw('ALTER TABLE ?? SET (autovacuum_enabled = false)', [table]);
  }
  for (let first = 0; first < NODES; first += 1000) {
    const rows = [];
    for (let i = first; i < Math.min(NODES, first + 1000); i++) {
      rows.push(nodeMapper.toRow({
        uuid: randomUUID(), name: `plan-node-${i}`, driver: 'fake-hardware', powerInterface: 'fake', managementInterface: 'fake',
        consoleInterface: 'no-console', provisionState: 'active', powerState: 'power on',
      }));
    }
    await db('nodes').insert(rows);
  }
  await db.raw(`UPDATE nodes SET provision_state = CASE WHEN id % 10 = 3 THEN 'deploy wait' WHEN id % 10 IN (4, 5) THEN 'available'
                                                          WHEN id % 10 = 6 THEN 'manageable' ELSE 'active' END,
                                 maintenance = (id % 97 = 0)`);
  await db.raw(
    `INSERT INTO intents (uuid, node_id, seq, kind, args, state, attempts, max_attempts, conductor, created_at, started_at, finished_at)
     SELECT gen_random_uuid(), n.id, s, 'power', '{"target": "power on"}', 'succeeded', 1, 5, 'gone',
            now() - interval '1 day' + s * interval '1 minute', now() - interval '1 day' + s * interval '1 minute',
            now() - interval '1 day' + s * interval '1 minute' + interval '1 second'
       FROM nodes n CROSS JOIN generate_series(1, ?) s`,
    [FINISHED_PER_NODE],
  );
  await db.raw(`INSERT INTO ports (uuid, address, node_id)
                 SELECT gen_random_uuid(), format('02:00:%s:%s:%s:%s', lpad(to_hex(p), 2, '0'), lpad(to_hex(id / 65536), 2, '0'),
                                               lpad(to_hex(id / 256 % 256), 2, '0'), lpad(to_hex(id % 256), 2, '0')), id
                   FROM nodes CROSS JOIN generate_series(1, 2) p`);
  if (stats === 'empty-queue') await db.raw('VACUUM ANALYZE');
  // Open queues: 2,000 nodes, 500 of them two deep; 100 running at a peer, their nodes reserved.
  await db.raw(
    `INSERT INTO intents (uuid, node_id, seq, kind, args, state, max_attempts, created_at)
     SELECT gen_random_uuid(), n.id, ? + s, 'power', '{"target": "power off"}', 'queued', 5, now() - interval '1 minute' + n.id * interval '1 ms'
       FROM nodes n CROSS JOIN generate_series(1, 2) s
      WHERE n.id % 10 IN (0, 1, 2, 7) AND NOT n.maintenance AND (s = 1 OR n.id % 10 = 0)`,
    [FINISHED_PER_NODE],
  );
  await db.raw(
    `UPDATE intents SET state = 'running', conductor = 'peer', started_at = now(), attempts = 1
      WHERE seq = ? AND node_id IN (SELECT id FROM nodes WHERE id % 50 = 2)`,
    [FINISHED_PER_NODE + 1],
  );
  await db.raw(`UPDATE nodes SET reservation = 'peer' WHERE id % 50 = 2 AND NOT maintenance`);
  if (stats === 'fleet') await db.raw('VACUUM ANALYZE');
}

type Statistics = 'fleet' | 'empty-queue' | 'never';
const STATISTICS: Record<Statistics, string> = { fleet: 'of the fleet', 'empty-queue': 'from an empty queue', never: 'never taken' };

for (const stats of ['fleet', 'empty-queue', 'never'] as const) {
  describe(`hot statements on a server with JIT: plans (statistics ${STATISTICS[stats]})`, function () {
    this.timeout(180_000);
    let tdb: TestDatabase;
    let db: Knex;
    let app: FastifyInstance;
    let jitAboveCost = 100_000;
    let captured: Explained[] = [];

    /** The plans of every statement `work` runs. */
    async function plansOf(work: () => Promise<unknown>): Promise<Explained[]> {
      captured = [];
      await work();
      const out = captured;
      captured = [];
      expect(out.length, 'statements explained').to.be.above(0);
      return out;
    }

    /** What every hot statement must be: compiled by no JIT, estimated below jit_above_cost, never reading intents whole. */
    function expectLean(plans: readonly Explained[]): void {
      for (const e of plans) {
        expect(e.JIT, `JIT compilation of: ${label(e)}`).to.equal(undefined);
        expect(e.Plan['Total Cost'], `estimated cost (jit_above_cost is ${jitAboveCost}) of: ${label(e)}`).to.be.below(jitAboveCost);
        for (const n of walk(e.Plan)) {
          expect(n['Node Type'] === 'Seq Scan' && n['Relation Name'] === 'intents', `a sequential scan of intents in: ${label(e)}`).to.equal(false);
        }
      }
    }

    /** No scan of `table` that reads it whole: each one is an index scan with a condition. */
    function expectKeyed(plans: readonly Explained[], table: string): void {
      for (const e of plans) {
        for (const n of walk(e.Plan)) {
          if (n['Relation Name'] !== table || !n['Node Type'].endsWith('Scan')) continue;
          expect(n['Index Cond'] ?? n['Recheck Cond'], `a read of every row of ${table} (${n['Node Type']}) in:\n${outline([e])}\n`).to.be.a('string');
        }
      }
    }

    /** A scan of `index` whose Index Cond mentions `column` (any scan of it without `column`). */
    function expectIndexed(plans: readonly Explained[], index: string, column?: string): void {
      const scans = nodesOf(plans).filter((n) => n['Index Name'] === index);
      expect(scans.map((n) => n['Index Cond'] ?? ''), `scans of ${index}${column ? ` with a condition on ${column}` : ''}, in:\n${outline(plans)}\n`).to.satisfy(
        (conds: string[]) => conds.some((c) => column === undefined || c.includes(column)),
      );
    }

    before(async function () {
      tdb = await freshDatabase();
      if (!(await jitAvailable(tdb.knex))) {
        await tdb.drop();
        const msg = 'this Postgres server has no JIT provider (llvmjit), so no plan can JIT-compile on it: '
          + 'set DATABASE_URL to a server that has one, such as Debian\'s postgresql package';
        if (process.env.CI === 'true') throw new Error(`${msg}; CI=true, so this is a failure, not a skip`);
        process.stderr.write(`  skipped: ${msg}\n`);
        this.skip();
      }
      jitAboveCost = Number((await tdb.knex.raw('SHOW jit_above_cost') as { rows: Array<{ jit_above_cost: string }> }).rows[0].jit_above_cost);
      await fillFleet(tdb.knex, stats);
      // Every new session of this database explains each statement it runs to its client.
      const name = path.basename(new URL(tdb.url).pathname);
      for (const [setting, value] of [
        ['session_preload_libraries', 'auto_explain'], ['auto_explain.log_min_duration', '0'], ['auto_explain.log_analyze', 'on'],
        ['auto_explain.log_format', 'json'], ['auto_explain.log_level', 'notice'], ['auto_explain.log_timing', 'off'],
      ]) {
        await tdb.knex.raw(`ALTER DATABASE ?? SET ${setting} = '${value}'`, [name]);
      }
      db = createKnex(tdb.url, { applicationName: 'galvanic-test-plans' });
      const pool = (db.client as { pool: { on(event: 'createSuccess', f: (id: number, conn: pg.Client) => void): void } }).pool;
      pool.on('createSuccess', (_id, conn) => conn.on('notice', (notice) => {
        const text = notice.message ?? '';
        const start = text.indexOf('{');
        if (text.startsWith('duration:') && start >= 0) captured.push(JSON.parse(text.slice(start)) as Explained);
      }));
      const config = testConfig();
      app = buildApp({ config, db, connectionString: tdb.url, registry: buildRegistry(config), log: pino({ level: 'silent' }) });
      await app.ready();
    });

    after(async () => {
      await app?.close();
      await db?.destroy();
      await tdb?.drop();
    });

    it('claims the whole share through the due index, and records the outcomes by key', async () => {
      const tasks = new TaskManager(db, HOST, pino({ level: 'silent' }), 60);
      let claimed: Awaited<ReturnType<TaskManager['claimIntents']>> = [];
      const claim = await plansOf(async () => {
        claimed = await tasks.claimIntents(200, SCOPE);
      });
      expect(claimed).to.have.length(200);
      expectLean(claim);
      expectKeyed(claim, 'nodes');
      expectIndexed(claim, 'intents_due_idx', 'COALESCE(not_before, created_at)');
      expectIndexed(claim, 'intents_unfinished_node_idx', 'node_id');

      const recorder = new SuccessRecorder(tasks, {});
      const outcome = await plansOf(() => Promise.all(claimed.map(({ intent, task }) => recorder.record({
        task, intent, changes: { powerState: 'power off' }, result: null,
        history: { nodeId: intent.nodeId, event: 'power off', eventType: 'power', severity: 'INFO', conductor: HOST, user: null },
      }))));
      expectLean(outcome);
      expectKeyed(outcome, 'nodes');
      expectIndexed(outcome, 'intents_pkey', 'id');
    });

    it('claims one of three conductors\' share through the due index', async () => {
      const ranges = new HashRing([HOST, 'peer-2', 'peer-3']).rangesOf(HOST);
      const plans = await plansOf(() => rolledBack(db, async (trx) => {
        expect((await claimIntents(trx, HOST, 200, { ...SCOPE, ranges })).length).to.be.above(0);
      }));
      expectLean(plans);
      expectKeyed(plans, 'nodes');
      expectIndexed(plans, 'intents_due_idx', 'COALESCE(not_before, created_at)');
    });

    it('claims woken nodes through their queues\' index', async () => {
      const { rows } = await db.raw(`SELECT n.uuid FROM nodes n WHERE n.reservation IS NULL
                                       AND EXISTS (SELECT 1 FROM intents i WHERE i.node_id = n.id AND i.state = 'queued') ORDER BY n.id DESC LIMIT 20`);
      const only = (rows as Array<{ uuid: string }>).map((r) => r.uuid);
      let claimed = 0;
      const plans = await plansOf(() => rolledBack(db, async (trx) => {
        claimed = (await claimIntents(trx, HOST, 200, SCOPE, undefined, only)).length;
      }));
      expect(claimed).to.equal(20);
      expectLean(plans);
      expectKeyed(plans, 'nodes');
      expectIndexed(plans, 'intents_unfinished_node_idx', 'node_id');
      expectIndexed(plans, 'nodes_uuid_unique', 'uuid');
    });

    it('records agents\' heartbeats through the nodes\' keys', async () => {
      const { rows } = await db.raw(`SELECT id, uuid FROM nodes WHERE provision_state = 'deploy wait' ORDER BY id LIMIT 20`);
      const nodes = rows as Array<{ id: number; uuid: string }>;
      const tokens = await Promise.all(nodes.map((n) => mintAgentToken(db, n.id)));
      const plans = await plansOf(() => Promise.all(nodes.map(async (n, i) => {
        const res = await app.inject({
          method: 'POST', url: `/v1/heartbeat/${n.uuid}`, headers: { 'x-openstack-ironic-api-version': 'latest' },
          payload: { callback_url: `http://192.0.2.${i + 1}:9999`, agent_version: '9.4.0', agent_token: tokens[i] },
        });
        expect(res.statusCode, res.body).to.equal(202);
      })));
      expectLean(plans);
      expectKeyed(plans, 'nodes');
      expectIndexed(plans, 'nodes_uuid_unique', 'uuid');
    });

    it('locks and writes a commit\'s nodes through their key, on its generic plan as on its first ones', async () => {
      const plans = await plansOf(() => rolledBack(db, async (trx) => {
        // One connection, more runs than the five custom plans Postgres makes before a generic one.
        for (let round = 0; round < 8; round++) {
          const { rows } = await trx.raw('UPDATE nodes SET reservation = ? WHERE id IN (SELECT id FROM nodes ORDER BY id DESC LIMIT 3 OFFSET ?) RETURNING *', [HOST, round * 3]);
          const items = (rows as Array<Record<string, unknown>>).map((r) => ({ before: nodeMapper.fromRow(r), changes: { powerState: 'power off' as const } }));
          const written = await lockAndWriteHeld(trx, HOST, items);
          expect(written.map((w) => w.written?.powerState)).to.deep.equal(['power off', 'power off', 'power off']);
        }
      }));
      const commits = plans.filter((e) => e['Query Text'].includes('WITH locked AS'));
      expect(commits).to.have.length(8);
      expectLean(commits);
      for (const e of commits) {
        const onNodes = [...walk(e.Plan)].filter((n) => n['Relation Name'] === 'nodes' && n['Node Type'].endsWith('Scan'));
        expect(onNodes.map((n) => n['Index Name']), `every read of nodes through its key, in:\n${outline([e])}\n`).to.satisfy(
          (indexes: Array<string | undefined>) => indexes.length > 0 && indexes.every((i) => i === 'nodes_pkey'),
        );
      }
    });

    it('looks an agent\'s node up by its MAC addresses through the ports\' and the nodes\' keys', async () => {
      const { rows } = await db.raw(`SELECT p.address FROM ports p JOIN nodes n ON n.id = p.node_id
                                       WHERE n.provision_state = 'deploy wait' ORDER BY n.id DESC, p.address LIMIT 2`);
      const addresses = (rows as Array<{ address: string }>).map((r) => r.address);
      let found: Awaited<ReturnType<typeof nodesByPortAddresses>> = [];
      const plans = await plansOf(async () => {
        found = await nodesByPortAddresses(db, addresses);
      });
      expect(found).to.have.length(1);
      expectLean(plans);
      expectKeyed(plans, 'nodes');
      expectKeyed(plans, 'ports');
    });

    it('picks the power sync\'s and the sensor task\'s nodes without reading intents whole', async () => {
      let sync = 0;
      const power = await plansOf(async () => {
        sync = (await nodesForPowerSync(db, '')).length;
      });
      expect(sync).to.be.above(1000);
      expectLean(power);
      expect(nodesOf(power).some((n) => n['Index Name'] === 'intents_unfinished_node_idx'), 'open intents read through their index').to.equal(true);

      let sensed = 0;
      const sensors = await plansOf(async () => {
        sensed = (await nodesForSensorData(db, '', { undeployed: false, maintenance: false })).length;
      });
      expect(sensed).to.be.above(1000);
      expectLean(sensors);
    });

    it('lists nodes in detail, a page walking the primary key', async () => {
      const plans = await plansOf(async () => {
        const res = await app.inject({ method: 'GET', url: '/v1/nodes?detail=true&limit=1000', headers: { 'x-openstack-ironic-api-version': 'latest' } });
        expect(res.statusCode, res.body).to.equal(200);
        expect((JSON.parse(res.body) as { nodes: unknown[] }).nodes).to.have.length(1000);
      });
      expectLean(plans);
      expectIndexed(plans, 'nodes_pkey');
    });
  });
}
