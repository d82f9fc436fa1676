/**
 * What a conductor does with the intents it (or a dead peer) left running: repeatable ones go
 * back to the queue, the others fail, and their nodes are put right as a failure would.
 */
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { pino } from 'pino';
import { createNotifier } from '../../common/notifier.js';
import { ConductorService } from '../../conductor/service.js';
import { buildRegistry } from '../../drivers/build-registry.js';
import { registerConductor } from '../../db/conductors.js';
import { createKnex } from '../../db/connection.js';
import { finishSucceededIntents } from '../../db/intents.js';
import { recoverConductorLeftovers } from '../../db/intent-recovery.js';
import { createNode, getNode } from '../../db/nodes.js';
import { lockAndWriteHeld } from '../../db/reservations.js';
import { testConfig, suiteApp } from '../helpers/app.js';
import { suiteDatabase } from '../helpers/database.js';
import { until } from '../helpers/until.js';

describe('conductor recovery of intents left running', function () {
  this.timeout(60_000);
  // The API only: the conductor is started by the test, under the host name that left work behind.
  const t = suiteApp({ env: { GALVANIC_DEFAULT__HOST: 'gone-host' }, conductor: false });

  async function api(method: 'GET' | 'POST' | 'PUT', url: string, body?: unknown) {
    const res = await t.app.inject({ method, url, headers: { 'x-openstack-ironic-api-version': 'latest' }, ...(body === undefined ? {} : { payload: body as object }) });
    expect(res.statusCode, res.body).to.be.below(300);
    return res.body ? res.json<Record<string, unknown>>() : {};
  }

  it('fails a half-done provision transition and moves the node to its failure state, and requeues a power read', async () => {
    const manageNode = (await api('POST', '/v1/nodes', { driver: 'fake-hardware', name: 'half-verified' })).uuid as string;
    const readNode = (await api('POST', '/v1/nodes', { driver: 'fake-hardware', name: 'half-read' })).uuid as string;
    await api('PUT', `/v1/nodes/${manageNode}/states/provision`, { target: 'manage' });
    await api('PUT', `/v1/nodes/${readNode}/states/power`, { target: 'power on' });
    expect((await api('GET', `/v1/nodes/${manageNode}`)).provision_state).to.equal('verifying');

    // As if gone-host had claimed both intents and then died.
    const db = t.tdb.knex;
    await registerConductor(db, 'gone-host', '', ['fake-hardware']);
    for (const uuid of [manageNode, readNode]) {
      const node = await db('nodes').where({ uuid }).first('id');
      await db('intents').where({ node_id: node.id }).update({ state: 'running', conductor: 'gone-host', attempts: 1, started_at: db.fn.now() });
      await db('nodes').where({ id: node.id }).update({ reservation: 'gone-host' });
    }

    const log = pino({ level: 'silent' });
    const registry = buildRegistry(t.config);
    const notifier = createNotifier({ driver: 'noop', logFile: '', host: 'gone-host', service: 'galvanic-conductor', log });
    const conductor = new ConductorService({ config: t.config, db, connectionString: t.tdb.url, registry, notifier, log });
    await conductor.start();
    try {
      const deadline = Date.now() + 20_000;
      let power: Record<string, unknown> = {};
      while (Date.now() < deadline) {
        power = await api('GET', `/v1/nodes/${readNode}`);
        if (power.power_state === 'power on' && power.target_power_state === null) break;
        await sleep(100);
      }
      // The repeatable power change ran again and succeeded.
      expect(power).to.include({ power_state: 'power on', target_power_state: null, reservation: null });

      const node = await api('GET', `/v1/nodes/${manageNode}`);
      expect(node).to.include({ provision_state: 'enroll', target_provision_state: null, reservation: null });
      expect(node.last_error).to.be.a('string').and.include('Failed to verify node').and.include('stopped while running');
      const intents = (await api('GET', `/v1/nodes/${manageNode}/intents`)).intents as Array<Record<string, unknown>>;
      expect(intents.map((i) => i.state)).to.deep.equal(['failed']);
      const history = (await api('GET', `/v1/nodes/${manageNode}/history`)).history as Array<Record<string, unknown>>;
      expect(history.some((h) => h.severity === 'ERROR' && String(h.event).includes('stopped while running'))).to.equal(true);
      // The node is usable again: manage can be asked anew.
      await api('PUT', `/v1/nodes/${manageNode}/states/provision`, { target: 'manage' });
    } finally {
      await conductor.stop();
      await notifier.close();
      await registry.close();
    }
  });

  it('settles intents a live conductor recorded as running but lost track of (claim or outcome not completed)', async () => {
    const config = testConfig({ GALVANIC_DEFAULT__HOST: 'forgetful-host', GALVANIC_CONDUCTOR__ORPHANED_INTENT_TIMEOUT: '1', GALVANIC_CONDUCTOR__POLL_INTERVAL: '0.5' });
    const log = pino({ level: 'silent' });
    const registry = buildRegistry(config);
    const notifier = createNotifier({ driver: 'noop', logFile: '', host: 'forgetful-host', service: 'galvanic-conductor', log });
    const db = t.tdb.knex;
    const conductor = new ConductorService({ config, db, connectionString: t.tdb.url, registry, notifier, log });
    await conductor.start();
    try {
      const powerNode = (await api('POST', '/v1/nodes', { driver: 'fake-hardware', name: 'orphan-power' })).uuid as string;
      const manageNode = (await api('POST', '/v1/nodes', { driver: 'fake-hardware', name: 'orphan-manage' })).uuid as string;
      // A busy node: its intent is really running on the conductor and must be left alone.
      const busyNode = (await api('POST', '/v1/nodes', { driver: 'fake-hardware', name: 'orphan-busy', driver_info: { fake_delay_ms: 4000 } })).uuid as string;
      await api('PUT', `/v1/nodes/${busyNode}/states/power`, { target: 'power on' });
      // As if this live conductor had claimed these two and then failed to read or record them.
      for (const uuid of [powerNode, manageNode]) {
        const node = await db('nodes').where({ uuid }).first('id');
        await db('nodes').where({ id: node.id }).update({ reservation: 'forgetful-host' });
        await db('intents').insert({
          uuid: randomUUID(), node_id: node.id, seq: 1, kind: uuid === powerNode ? 'power' : 'provision',
          args: JSON.stringify(uuid === powerNode ? { target: 'power on' } : { verb: 'manage', target: 'manageable', onFail: 'enroll' }),
          state: 'running', conductor: 'forgetful-host', attempts: 1, max_attempts: 3, started_at: db.raw("now() - interval '10 seconds'"),
        });
        if (uuid === manageNode) await db('nodes').where({ id: node.id }).update({ provision_state: 'verifying', target_provision_state: 'manageable' });
      }
      const deadline = Date.now() + 20_000;
      let power: Record<string, unknown> = {};
      let manage: Record<string, unknown> = {};
      while (Date.now() < deadline) {
        power = await api('GET', `/v1/nodes/${powerNode}`);
        manage = await api('GET', `/v1/nodes/${manageNode}`);
        if (power.power_state === 'power on' && manage.provision_state === 'enroll') break;
        await sleep(100);
      }
      // The repeatable one ran again; the other failed and its node went back to enroll.
      expect(power).to.include({ power_state: 'power on', reservation: null });
      expect(manage).to.include({ provision_state: 'enroll', target_provision_state: null, reservation: null });
      const [intent] = (await api('GET', `/v1/nodes/${powerNode}/intents`)).intents as Array<Record<string, unknown>>;
      expect([intent.state, intent.attempts]).to.deep.equal(['succeeded', 2]);
      // The long-running intent the conductor does run was not touched by the sweep.
      const [busy] = (await api('GET', `/v1/nodes/${busyNode}/intents`)).intents as Array<Record<string, unknown>>;
      expect([busy.state, busy.attempts]).to.deep.equal(['running', 1]);
    } finally {
      await conductor.stop();
      await notifier.close();
      await registry.close();
    }
  });
});

describe('conductor recovery beside an outcome of the same intent', function () {
  this.timeout(30_000);
  const tdb = suiteDatabase();

  it('waits for an outcome that holds the node, and leaves the intent the outcome settled: no deadlock', async () => {
    // A conductor taken for dead while it records an outcome: its batch locks the node, then
    // writes the intent; the survivor's recovery of that conductor runs meanwhile.
    const db = tdb.knex;
    const node = await createNode(db, { driver: 'fake-hardware', provisionState: 'manageable' });
    await db('nodes').where({ id: node.id }).update({ reservation: 'slow-host' });
    const [intent] = await db('intents').insert({
      uuid: randomUUID(), node_id: node.id, seq: 1, kind: 'power', args: { target: 'power on' }, state: 'running',
      conductor: 'slow-host', attempts: 1, max_attempts: 3, started_at: db.fn.now(),
    }).returning('id') as Array<{ id: number }>;

    const outcome = await db.transaction();
    const recovering = createKnex(tdb.url, { applicationName: 'galvanic-test-recovery' });
    try {
      // The batch's first statement: the node locked and its release written (lockAndWriteHeld).
      const [held] = await lockAndWriteHeld(outcome, 'slow-host', [{ before: node, fence: { intentId: intent.id, attempts: 1 }, changes: { reservation: null } }]);
      expect(held.held).to.equal(true);
      expect(held.written?.reservation).to.equal(null);
      let settled = 0;
      const recovery = recoverConductorLeftovers(recovering, 'slow-host', () => true, async (trx, failed) => {
        settled++;
        await getNode(trx, String(failed.nodeId), { forUpdate: true });
      });
      await until('the recovery to wait on a lock', async () => {
        const { rows } = await db.raw(`SELECT count(*)::int AS n FROM pg_stat_activity
                                        WHERE datname = current_database() AND application_name = 'galvanic-test-recovery' AND wait_event_type = 'Lock'`);
        return (rows as Array<{ n: number }>)[0].n > 0;
      }, 10_000, 20);
      await finishSucceededIntents(outcome, [{ id: intent.id, result: { power_state: 'power on' } }]);
      await outcome.commit();
      const { requeued, failed } = await recovery;
      expect({ requeued: requeued.length, failed: failed.length, settled }, 'the recovery found the intent settled').to.deep.equal({ requeued: 0, failed: 0, settled: 0 });
      expect(await db('intents').where({ id: intent.id }).first('state')).to.deep.equal({ state: 'succeeded' });
      expect(await db('nodes').where({ id: node.id }).first('reservation')).to.deep.equal({ reservation: null });
    } finally {
      if (!outcome.isCompleted()) await outcome.rollback();
      await recovering.destroy();
    }
  });
});
