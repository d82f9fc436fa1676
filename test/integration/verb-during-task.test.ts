/**
 * A verb the API accepts while a conductor's task still holds the node (the intents design
 * never answers "node locked") is the node's newest state: the older task's outcome, committed
 * after it, must not put the node back. Metal3 met this: it aborts an inspection waiting for
 * its agent and inspects again at once; the abort's tear-down then committed `inspect failed`
 * over the new `inspecting`, and the new inspection failed ("No \"wait\" event from provision
 * state \"inspect failed\""). Here the API process accepts the verbs while this process holds
 * the node through TaskManager, as a conductor does.
 */
import { expect } from 'chai';
import { pino } from 'pino';
import { commitTasks, TaskManager } from '../../conductor/task-manager.js';
import { registerConductor } from '../../db/conductors.js';
import { createNode, getNodeById } from '../../db/nodes.js';
import { startGalvanic, type RunningGalvanic } from '../helpers/app.js';
import { freshDatabase, type TestDatabase } from '../helpers/database.js';

const HEADERS = { 'X-OpenStack-Ironic-API-Version': '1.80', 'content-type': 'application/json' };

describe('a verb accepted while a task holds the node (API process, real Postgres)', function () {
  this.timeout(120_000);
  let tdb: TestDatabase;
  let api: RunningGalvanic | undefined;

  before(async () => {
    tdb = await freshDatabase();
    await registerConductor(tdb.knex, 'holder', '', ['fake-hardware']);
    api = await startGalvanic({ databaseUrl: tdb.url, command: 'api', env: { GALVANIC_DEFAULT__LOG_LEVEL: 'warn' } });
  });
  after(async () => {
    await api?.stop();
    await tdb.drop();
  });

  async function provision(uuid: string, target: string): Promise<number> {
    const res = await fetch(`${api!.url}/v1/nodes/${uuid}/states/provision`, { method: 'PUT', headers: HEADERS, body: JSON.stringify({ target }) });
    await res.arrayBuffer();
    return res.status;
  }

  it('is not undone by the outcome of the task that held the node when it was accepted', async () => {
    const tm = new TaskManager(tdb.knex, 'holder', pino({ level: 'silent' }), 3600);
    const node = await createNode(tdb.knex, { driver: 'fake-hardware', provisionState: 'inspect wait', targetProvisionState: 'manageable', inspectInterface: 'fake', powerInterface: 'fake', managementInterface: 'fake', bootInterface: 'fake', deployInterface: 'fake' });
    expect(await provision(node.uuid, 'abort')).to.equal(202);
    // The abort's intent: its task holds the node while it tears the inspection's boot down.
    const task = await tm.acquire(node.id, { mode: 'exclusive', purpose: 'intent provision' });
    expect(task.node.provisionState).to.equal('inspect failed');
    // Meanwhile the client, having read "aborted" in last_error, inspects again.
    expect(await provision(node.uuid, 'inspect')).to.equal(202);
    const accepted = await getNodeById(tdb.knex, node.id);
    expect(accepted).to.include({ provisionState: 'inspecting', targetProvisionState: 'manageable', lastError: null });
    // The abort's outcome as the conductor commits it: its state, its end, its message.
    const after = await task.commit({ provisionState: 'inspect failed', targetProvisionState: null, lastError: 'Inspection was aborted by request.', powerState: 'power off', provisionUpdatedAt: new Date() });
    expect(after).to.include({ provisionState: 'inspecting', targetProvisionState: 'manageable', lastError: null, powerState: 'power off', reservation: null });
  });

  it('still lets a task move the node when no verb came in between', async () => {
    const tm = new TaskManager(tdb.knex, 'holder', pino({ level: 'silent' }), 3600);
    const node = await createNode(tdb.knex, { driver: 'fake-hardware', provisionState: 'inspecting', targetProvisionState: 'manageable', inspectInterface: 'fake', powerInterface: 'fake', managementInterface: 'fake', bootInterface: 'fake', deployInterface: 'fake' });
    const task = await tm.acquire(node.id, { mode: 'exclusive', purpose: 'intent provision' });
    await task.progress({ provisionState: 'inspect wait' });
    const after = await task.commit({ provisionState: 'manageable', targetProvisionState: null });
    expect(after).to.include({ provisionState: 'manageable', targetProvisionState: null });
  });

  it('keeps the verb when the task writes progress after it, alone or in a batch with a node nobody touched', async () => {
    const tm = new TaskManager(tdb.knex, 'holder', pino({ level: 'silent' }), 3600);
    const spec = { driver: 'fake-hardware', provisionState: 'inspect wait', targetProvisionState: 'manageable', inspectInterface: 'fake', powerInterface: 'fake', managementInterface: 'fake', bootInterface: 'fake', deployInterface: 'fake' } as const;
    const [alone, moved, still] = [await createNode(tdb.knex, spec), await createNode(tdb.knex, spec), await createNode(tdb.knex, spec)];
    for (const n of [alone, moved, still]) expect(await provision(n.uuid, 'abort')).to.equal(202);
    const [a, m, s] = [
      await tm.acquire(alone.id, { mode: 'exclusive', purpose: 'intent provision' }),
      await tm.acquire(moved.id, { mode: 'exclusive', purpose: 'intent provision' }),
      await tm.acquire(still.id, { mode: 'exclusive', purpose: 'intent provision' }),
    ];
    expect(await provision(alone.uuid, 'inspect')).to.equal(202);
    expect(await provision(moved.uuid, 'inspect')).to.equal(202);
    // Progress alone: the step it records, not the state the verb replaced.
    const written = await a.progress({ provisionState: 'inspect failed', driverInternalInfo: { step: 1 } });
    expect(written).to.include({ provisionState: 'inspecting', reservation: 'holder' });
    expect(written.driverInternalInfo).to.deep.equal({ step: 1 });
    // In one batch: the node the verb moved keeps it; the other takes the task's state.
    const [x, y] = await commitTasks(tdb.knex, 'holder', [
      { task: m, changes: { provisionState: 'inspect failed', driverInternalInfo: { step: 2 } } },
      { task: s, changes: { provisionState: 'inspect failed', driverInternalInfo: { step: 2 } } },
    ], undefined, {}, false);
    expect(x).to.include({ provisionState: 'inspecting', targetProvisionState: 'manageable', reservation: 'holder' });
    expect(y).to.include({ provisionState: 'inspect failed', reservation: 'holder' });
    const rows = await Promise.all([getNodeById(tdb.knex, moved.id), getNodeById(tdb.knex, still.id)]);
    expect(rows.map((n) => n.driverInternalInfo)).to.deep.equal([{ step: 2 }, { step: 2 }]);
    expect(rows.map((n) => [n.provisionState, n.reservation])).to.deep.equal([['inspecting', 'holder'], ['inspect failed', 'holder']]);
  });
});
