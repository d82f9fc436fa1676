/**
 * The power-state sync periodic task, built from its parts in-process against a real
 * database and fake-hardware, with one iteration run at a time.
 */
import { expect } from 'chai';
import type { Knex } from 'knex';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { createNotifier, type Notification, type Notifier } from '../../common/notifier.js';
import type { Config } from '../../common/config.js';
import type { PeriodicTask } from '../../conductor/periodic.js';
import { TaskManager } from '../../conductor/task-manager.js';
import { powerSyncTask } from '../../conductor/periodics/power-sync.js';
import { createKnex } from '../../db/connection.js';
import { enqueueIntents } from '../../db/intents.js';
import { listHistory } from '../../db/node-history.js';
import { createNode, getNodeById, updateNode, type Node } from '../../db/nodes.js';
import { buildRegistry } from '../../drivers/build-registry.js';
import type { DriverRegistry } from '../../drivers/registry.js';
import { testConfig } from '../helpers/app.js';
import { freshDatabase, type TestDatabase } from '../helpers/database.js';

const HOST = 'test-host';
const MAX_RETRIES = 3;

interface Rig {
  db: Knex;
  config: Readonly<Config>;
  registry: DriverRegistry;
  notifier: Notifier;
  task: PeriodicTask;
  /** Flushes and reads the notifications written so far. */
  notifications(): Promise<Notification[]>;
}

describe('power state sync', function () {
  let tdb: TestDatabase;
  let db: Knex;
  let dir: string;
  let notifier: Notifier | undefined;
  const log = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });

  beforeEach(async () => {
    // A database per test: the task looks at every node of the group.
    tdb = await freshDatabase();
    db = createKnex(tdb.url, { applicationName: 'galvanic-test-power-sync' });
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'galvanic-power-sync-'));
  });

  afterEach(async () => {
    await notifier?.close();
    notifier = undefined;
    await db?.destroy();
    await tdb?.drop();
    if (dir) await fs.rm(dir, { recursive: true, force: true });
  });

  function rig(env: Record<string, string> = {}): Rig {
    const config = testConfig({ GALVANIC_DEFAULT__HOST: HOST, GALVANIC_CONDUCTOR__POWER_STATE_SYNC_MAX_RETRIES: String(MAX_RETRIES), ...env });
    const registry = buildRegistry(config);
    const file = path.join(dir, 'notifications.jsonl');
    const n = createNotifier({ driver: 'log', logFile: file, host: HOST, service: 'galvanic-conductor', log });
    notifier = n;
    const tasks = new TaskManager(db, HOST, log, config.conductor.heartbeat_timeout);
    const task = powerSyncTask({ db, tasks, registry, notifier: n, log, hostname: HOST, config, owns: () => true });
    return {
      db, config, registry, notifier: n, task,
      notifications: async () => {
        await n.close();
        notifier = undefined;
        const text = await fs.readFile(file, 'utf8').catch(() => '');
        return text.split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as Notification);
      },
    };
  }

  let counter = 0;
  async function makeNode(powerState: string | null, driverInfo: Record<string, unknown>): Promise<Node> {
    counter += 1;
    return createNode(db, {
      name: `sync-${counter}`, driver: 'fake-hardware', provisionState: 'manageable',
      powerInterface: 'fake', managementInterface: 'fake', consoleInterface: 'no-console',
      powerState, driverInfo,
    });
  }

  const runOnce = (r: Rig) => r.task.run(new AbortController().signal);

  async function readBmc(r: Rig, node: Node): Promise<string> {
    return r.registry.power('fake')!.getPowerState({ nodeUuid: node.uuid, driverInfo: node.driverInfo, log });
  }

  it('records the BMC power state when the database disagrees, with history and a notification', async () => {
    const r = rig();
    const node = await makeNode('power off', { fake_power_state: 'power on' });
    const agreeing = await makeNode('power off', {});
    const report = await runOnce(r);
    expect(report).to.deep.include({ nodes: 2, errors: 0 });

    const after = await getNodeById(db, node.id);
    expect(after.powerState).to.equal('power on');
    expect(after.reservation).to.equal(null);
    expect(after.version).to.be.above(node.version);
    const history = await listHistory(db, node.id, 100);
    expect(history).to.have.length(1);
    expect(history[0]).to.include({ severity: 'WARNING', eventType: 'power', conductor: HOST });
    expect(history[0].event).to.include('power off').and.include('power on');

    expect((await getNodeById(db, agreeing.id)).version).to.equal(agreeing.version);
    expect(await listHistory(db, agreeing.id, 100)).to.have.length(0);

    const notes = await r.notifications();
    expect(notes).to.have.length(1);
    const [n] = notes;
    expect(n).to.include({ event_type: 'baremetal.node.power_state_corrected.success', priority: 'INFO', publisher_id: `galvanic-conductor.${HOST}` });
    expect(n.payload['ironic_object.name']).to.equal('NodeCorrectedPowerStatePayload');
    expect(n.payload['ironic_object.data']).to.include({ uuid: node.uuid, from_power: 'power off', power_state: 'power on' });

    // Nothing left to correct on the next iteration.
    const again = await runOnce(rig());
    expect(again).to.deep.include({ nodes: 2, errors: 0 });
    expect(await listHistory(db, node.id, 100)).to.have.length(1);
  });

  it('leaves enrolled nodes alone, as Ironic\'s SYNC_EXCLUDED_STATES: no read, no correction, no maintenance', async () => {
    const r = rig();
    counter += 1;
    const enrolled = await createNode(db, {
      name: `sync-${counter}`, driver: 'fake-hardware', provisionState: 'enroll',
      powerInterface: 'fake', managementInterface: 'fake', consoleInterface: 'no-console',
      powerState: null, driverInfo: { fake_fail: 'permanent' },
    });
    // More iterations than power_state_sync_max_retries: an unreachable BMC would end in maintenance.
    for (let i = 0; i <= MAX_RETRIES; i++) await runOnce(r);
    const after = await getNodeById(db, enrolled.id);
    expect(after).to.include({ maintenance: false, fault: null, powerState: null, version: enrolled.version });
    expect(await listHistory(db, enrolled.id, 100)).to.have.length(0);
  });

  it('sets the BMC back to the database state with force_power_state_during_sync', async () => {
    const r = rig({ GALVANIC_CONDUCTOR__FORCE_POWER_STATE_DURING_SYNC: 'true' });
    const node = await makeNode('power off', { fake_power_state: 'power on' });
    expect(await readBmc(r, node)).to.equal('power on');
    const report = await runOnce(r);
    expect(report).to.deep.include({ nodes: 1, errors: 0 });

    const after = await getNodeById(db, node.id);
    expect(after.powerState).to.equal('power off');
    expect(after.reservation).to.equal(null);
    expect(await readBmc(r, node)).to.equal('power off');
    // A second iteration finds them in agreement: nothing recorded as corrected.
    await runOnce(r);
    expect((await getNodeById(db, node.id)).powerState).to.equal('power off');
    expect((await r.notifications()).map((x) => x.event_type)).to.not.include('baremetal.node.power_state_corrected.success');
  });

  it('gives up forcing after max retries when the BMC does not keep the state', async () => {
    const r = rig({ GALVANIC_CONDUCTOR__FORCE_POWER_STATE_DURING_SYNC: 'true' });
    const node = await makeNode('power off', { fake_power_state: 'power on' });
    // A BMC that acknowledges the change and ignores it.
    const power = r.registry.power('fake')!;
    let sets = 0;
    power.setPowerState = async () => { sets++; };
    for (let i = 1; i <= MAX_RETRIES; i++) {
      await runOnce(r);
      const n = await getNodeById(db, node.id);
      expect(n.maintenance, `after ${i} forced change(s)`).to.equal(false);
      expect(n.powerState).to.equal('power off');
    }
    expect(sets).to.equal(MAX_RETRIES);
    expect(await runOnce(r)).to.deep.include({ nodes: 1, errors: 1 });
    expect(sets).to.equal(MAX_RETRIES);
    const after = await getNodeById(db, node.id);
    expect(after).to.include({ maintenance: true, fault: 'power failure', powerState: 'power on', reservation: null });
    expect(after.lastError).to.be.a('string').and.include('max retries exceeded');
    expect((await listHistory(db, node.id, 100)).filter((h) => h.severity === 'ERROR')).to.have.length(1);
  });

  it('skips a node with an intent queued, and one reserved', async () => {
    const r = rig();
    const queued = await makeNode('power off', { fake_power_state: 'power on' });
    const reserved = await makeNode('power off', { fake_power_state: 'power on' });
    await db.transaction((trx) => enqueueIntents(trx, queued.id, [{ kind: 'power', args: { target: 'power off' }, maxAttempts: 1 }]));
    await db('nodes').where('id', reserved.id).update({ reservation: 'another-host' });

    const report = await runOnce(r);
    expect(report).to.deep.include({ nodes: 0, errors: 0 });
    expect((await getNodeById(db, queued.id)).powerState).to.equal('power off');
    expect((await getNodeById(db, reserved.id)).powerState).to.equal('power off');
    expect(await listHistory(db, queued.id, 100)).to.have.length(0);
    expect(await r.notifications()).to.have.length(0);
  });

  it('puts a node whose power state cannot be read into maintenance after max retries', async () => {
    const r = rig();
    const node = await makeNode('power on', { fake_fail: 'transient' });
    // Ironic's count: the sync after power_state_sync_max_retries failed ones gives up.
    for (let i = 1; i <= MAX_RETRIES; i++) {
      expect(await runOnce(r)).to.deep.include({ nodes: 1, errors: 1 });
      const n = await getNodeById(db, node.id);
      expect(n.maintenance, `after ${i} failed read(s)`).to.equal(false);
      expect(n.powerState).to.equal('power on');
    }
    expect(await runOnce(r)).to.deep.include({ nodes: 1, errors: 1 });
    const after = await getNodeById(db, node.id);
    expect(after.maintenance).to.equal(true);
    expect(after.fault).to.equal('power failure');
    expect(after.lastError).to.be.a('string').and.include('max retries exceeded').and.include('timed out');
    expect(after.maintenanceReason).to.be.a('string').and.not.equal('');
    expect(after.powerState).to.equal(null);
    expect(after.reservation).to.equal(null);
    const history = await listHistory(db, node.id, 100);
    expect(history.filter((h) => h.severity === 'ERROR')).to.have.length(1);
  });

  it('starts counting again after a successful read', async () => {
    const r = rig();
    const node = await makeNode('power off', { fake_fail: 'transient' });
    for (let i = 1; i < MAX_RETRIES; i++) await runOnce(r);
    // The BMC answers once: the failure count starts over.
    await db('nodes').where('id', node.id).update({ driver_info: JSON.stringify({}) });
    expect(await runOnce(r)).to.deep.include({ errors: 0 });
    await db('nodes').where('id', node.id).update({ driver_info: JSON.stringify({ fake_fail: 'transient' }) });
    for (let i = 1; i < MAX_RETRIES; i++) await runOnce(r);
    expect((await getNodeById(db, node.id)).maintenance).to.equal(false);
  });

  /** Makes the fake BMC's reads run `between` after answering: what happens between the read and the lock. */
  function betweenReadAndLock(r: Rig, between: () => Promise<void>): void {
    const power = r.registry.power('fake')!;
    const read = power.getPowerState.bind(power);
    let once = false;
    power.getPowerState = async (ctx) => {
      const state = await read(ctx);
      if (!once) {
        once = true;
        await between();
      }
      return state;
    };
  }

  it('re-reads a node under the lock: a power state changed since the read is not forced over', async () => {
    const r = rig({ GALVANIC_CONDUCTOR__FORCE_POWER_STATE_DURING_SYNC: 'true' });
    const node = await makeNode('power off', { fake_power_state: 'power on' });
    // An intent powered the node on and recorded it after the sync read the node, before it locked it.
    betweenReadAndLock(r, async () => { await updateNode(db, node.id, { powerState: 'power on' }); });
    await runOnce(r);
    expect(await readBmc(r, node), 'the BMC was forced to the stale recorded state').to.equal('power on');
    const after = await getNodeById(db, node.id);
    expect(after).to.include({ powerState: 'power on', reservation: null });
    expect(await listHistory(db, node.id, 100)).to.have.length(0);
  });

  it('re-reads a node under the lock: one put in maintenance since the read is not corrected', async () => {
    const r = rig();
    const node = await makeNode('power off', { fake_power_state: 'power on' });
    betweenReadAndLock(r, async () => { await updateNode(db, node.id, { maintenance: true, maintenanceReason: 'operator' }); });
    await runOnce(r);
    const after = await getNodeById(db, node.id);
    expect(after, 'a node in maintenance had its power state corrected').to.include({ powerState: 'power off', maintenance: true, reservation: null });
    expect(await listHistory(db, node.id, 100)).to.have.length(0);
    expect(await r.notifications()).to.have.length(0);
  });

  it('releases the lock when giving up fails on a database error, and gives up at a later pass', async () => {
    const r = rig();
    const node = await makeNode('power on', { fake_fail: 'transient' });
    // A real database error in the give-up's transaction: its history event is refused.
    await db.raw("ALTER TABLE node_history ADD CONSTRAINT test_no_errors CHECK (severity <> 'ERROR')");
    for (let i = 0; i <= MAX_RETRIES; i++) await runOnce(r);
    let after = await getNodeById(db, node.id);
    expect(after.reservation, 'the give-up left its reservation behind').to.equal(null);
    expect(after.maintenance).to.equal(false);
    await db.raw('ALTER TABLE node_history DROP CONSTRAINT test_no_errors');
    await runOnce(r);
    after = await getNodeById(db, node.id);
    expect(after).to.include({ maintenance: true, fault: 'power failure', reservation: null });
  });
});
