/**
 * The conductor's check of provision states: a node that waits longer than its [conductor]
 * timeout, or that is left in a transitional state with nobody working on it, is failed with a
 * clear last_error and history; nodes that are waiting within their time, or being worked on,
 * are left alone, and so are waiting nodes in maintenance (their run is paused), as in Ironic.
 * A wait times out whatever is queued for its node; an intent running on it holds the deadline
 * off, and in a working state a queued one does too.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import { suiteApp } from '../helpers/app.js';

describe('conductor: provision state timeouts and orphaned transitions', function () {
  this.timeout(60_000);
  const t = suiteApp({
    env: {
      GALVANIC_CONDUCTOR__CHECK_PROVISION_STATE_INTERVAL: '1',
      GALVANIC_CONDUCTOR__DEPLOY_CALLBACK_TIMEOUT: '5',
      GALVANIC_CONDUCTOR__CLEAN_CALLBACK_TIMEOUT: '5',
      GALVANIC_CONDUCTOR__INSPECT_WAIT_TIMEOUT: '5',
      GALVANIC_CONDUCTOR__HEARTBEAT_TIMEOUT: '5',
      GALVANIC_CONDUCTOR__ORPHANED_INTENT_TIMEOUT: '5',
      GALVANIC_CONDUCTOR__SYNC_POWER_STATE_INTERVAL: '0',
    },
  });

  /**
   * A node put in `state` `secondsAgo`; with `intent`, an open intent of it, written first (the
   * check runs every second): queued for much later, or running under another conductor.
   */
  async function node(name: string, state: string, secondsAgo: number, extra: Record<string, unknown> = {}, intent?: 'queued' | 'running'): Promise<string> {
    const res = await t.app.inject({ method: 'POST', url: '/v1/nodes', headers: { 'x-openstack-ironic-api-version': 'latest' }, payload: { driver: 'fake-hardware', name } });
    expect(res.statusCode, res.body).to.equal(201);
    const { uuid, id } = await t.tdb.knex('nodes').where({ uuid: res.json<{ uuid: string }>().uuid }).first('uuid', 'id');
    if (intent) {
      await t.tdb.knex('intents').insert({
        uuid: randomUUID(), node_id: id, seq: 1, kind: 'power', args: { target: 'power on' }, max_attempts: 1,
        ...(intent === 'running' ? { state: 'running', conductor: 'elsewhere', started_at: new Date(), attempts: 1 } : { state: 'queued', not_before: new Date(Date.now() + 3_600_000) }),
      });
    }
    await t.tdb.knex('nodes').where({ uuid }).update({
      provision_state: state, target_provision_state: 'active', provision_updated_at: new Date(Date.now() - secondsAgo * 1000), ...extra,
    });
    return uuid;
  }

  async function state(uuid: string) {
    return t.tdb.knex('nodes').where({ uuid }).first('provision_state', 'target_provision_state', 'last_error', 'id');
  }

  it('fails nodes past their wait timeout and orphaned transitions, and nothing else', async () => {
    const deployWait = await node('deploy-wait-late', 'wait call-back', 60);
    const cleanWait = await node('clean-wait-late', 'clean wait', 60);
    const inspectWait = await node('inspect-wait-late', 'inspect wait', 60);
    const orphan = await node('deploying-orphan', 'deploying', 60);
    const recent = await node('deploy-wait-recent', 'wait call-back', 0);
    const held = await node('deploying-held', 'deploying', 60, { reservation: 'some-conductor' });
    const stable = await node('active-old', 'active', 600, { target_provision_state: null });
    const pausedClean = await node('clean-wait-maintenance', 'clean wait', 60, { maintenance: true });
    const pausedDeploy = await node('deploy-wait-maintenance', 'wait call-back', 60, { maintenance: true });
    const orphanInMaintenance = await node('deploying-orphan-maintenance', 'deploying', 60, { maintenance: true });

    const deadline = Date.now() + 15_000;
    // Failed in one pass, in the order of their ids: the last one created is the last one failed.
    while (Date.now() < deadline && (await state(orphanInMaintenance)).provision_state === 'deploying') await sleep(200);

    const dw = await state(deployWait);
    expect(dw.provision_state).to.equal('deploy failed');
    expect(dw.target_provision_state).to.equal(null);
    expect(dw.last_error).to.equal(`Timeout reached while waiting for callback for node ${deployWait}`);
    expect((await state(cleanWait)).provision_state).to.equal('clean failed');
    expect((await state(inspectWait)).provision_state).to.equal('inspect failed');
    const o = await state(orphan);
    expect(o.provision_state).to.equal('deploy failed');
    expect(o.last_error).to.include('no conductor working on it');
    const history = await t.tdb.knex('node_history').where({ node_id: o.id }).select('severity', 'event');
    expect(history.map((h) => h.severity)).to.include('ERROR');

    expect((await state(recent)).provision_state).to.equal('wait call-back');
    expect((await state(held)).provision_state).to.equal('deploying');
    expect((await state(stable)).provision_state).to.equal('active');
    expect((await state(pausedClean)).provision_state).to.equal('clean wait');
    expect((await state(pausedDeploy)).provision_state).to.equal('wait call-back');
    expect((await state(orphanInMaintenance)).provision_state).to.equal('deploy failed');
  });

  it('times out a wait whatever is queued for its node, but not while an intent of it runs', async () => {
    const queued = await node('deploy-wait-queued', 'wait call-back', 60, {}, 'queued');
    const running = await node('deploy-wait-running', 'wait call-back', 60, {}, 'running');
    const working = await node('deploying-queued', 'deploying', 60, {}, 'queued');

    const deadline = Date.now() + 15_000;
    while (Date.now() < deadline && (await state(queued)).provision_state === 'wait call-back') await sleep(200);
    const q = await state(queued);
    expect(q.provision_state).to.equal('deploy failed');
    expect(q.last_error).to.equal(`Timeout reached while waiting for callback for node ${queued}`);
    // Two more passes of the check (every second): nothing else moves.
    await sleep(2_500);
    expect((await state(running)).provision_state).to.equal('wait call-back');
    expect((await state(working)).provision_state).to.equal('deploying');
  });
});
