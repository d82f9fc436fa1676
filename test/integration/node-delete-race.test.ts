/**
 * DELETE /v1/nodes/{node} against reservations taken at the same moment: the API process
 * deletes while this process takes and drops the nodes' reservations through TaskManager, as a
 * conductor does, as fast as it can. A trigger records every node row deleted while reserved:
 * the delete must be conditional on the reservation in its own statement (a check in the route
 * followed by an unconditional delete loses that race within a few rounds).
 */
import { expect } from 'chai';
import { setTimeout as sleep } from 'node:timers/promises';
import { pino } from 'pino';
import { NodeLocked, NodeNotFound } from '../../common/errors.js';
import { TaskManager } from '../../conductor/task-manager.js';
import { registerConductor } from '../../db/conductors.js';
import { createNode } from '../../db/nodes.js';
import { startGalvanic, type RunningGalvanic } from '../helpers/app.js';
import { freshDatabase, type TestDatabase } from '../helpers/database.js';

const ROUNDS = 10;
const NODES_PER_ROUND = 30;

describe('node delete racing reservations (API process, real Postgres)', function () {
  this.timeout(300_000);
  let tdb: TestDatabase;
  let api: RunningGalvanic | undefined;

  before(async () => {
    tdb = await freshDatabase();
    await tdb.knex.raw(`
      CREATE TABLE deleted_reserved (node_id int, reservation text);
      CREATE FUNCTION note_reserved_delete() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF OLD.reservation IS NOT NULL THEN INSERT INTO deleted_reserved VALUES (OLD.id, OLD.reservation); END IF;
        RETURN OLD;
      END $$;
      CREATE TRIGGER note_reserved_delete BEFORE DELETE ON nodes FOR EACH ROW EXECUTE FUNCTION note_reserved_delete();`);
    await registerConductor(tdb.knex, 'race-holder', '', ['fake-hardware']);
    // One attempt, no wait: a held node answers 409 at once and the client asks again.
    api = await startGalvanic({
      databaseUrl: tdb.url, command: 'api',
      env: { GALVANIC_DEFAULT__LOG_LEVEL: 'warn', GALVANIC_CONDUCTOR__NODE_LOCKED_RETRY_ATTEMPTS: '1', GALVANIC_CONDUCTOR__NODE_LOCKED_RETRY_INTERVAL: '0' },
    });
  });
  after(async () => {
    await api?.stop();
    await tdb.drop();
  });

  it('never removes a node while a task holds its reservation', async () => {
    const tm = new TaskManager(tdb.knex, 'race-holder', pino({ level: 'silent' }), 3600);
    let held = 0;
    let refused = 0;
    // Takes and drops the node's reservation until the node is gone.
    const holder = async (id: number) => {
      for (;;) {
        try {
          const task = await tm.acquire(id, { mode: 'exclusive', purpose: 'race' });
          held++;
          await sleep(Math.random() * 2);
          await task.release();
        } catch (err) {
          if (err instanceof NodeNotFound) return;
          if (!(err instanceof NodeLocked)) throw err;
        }
        await sleep(Math.random());
      }
    };
    const deleter = async (uuid: string) => {
      for (;;) {
        const res = await fetch(`${api!.url}/v1/nodes/${uuid}`, { method: 'DELETE', headers: { 'X-OpenStack-Ironic-API-Version': '1.78' } });
        await res.arrayBuffer();
        if (res.status === 204 || res.status === 404) return;
        expect(res.status).to.equal(409);
        refused++;
      }
    };
    for (let round = 0; round < ROUNDS; round++) {
      const nodes = await Promise.all(Array.from({ length: NODES_PER_ROUND }, () => createNode(tdb.knex, { driver: 'fake-hardware', provisionState: 'enroll' })));
      await Promise.all(nodes.flatMap((n) => [holder(n.id), deleter(n.uuid)]));
      const { rows } = await tdb.knex.raw('SELECT node_id, reservation FROM deleted_reserved');
      expect(rows, `round ${round + 1}: nodes deleted while reserved`).to.deep.equal([]);
    }
    const left = await tdb.knex('nodes').count<Array<{ count: string }>>('* as count');
    expect(Number(left[0].count)).to.equal(0);
    // The race was real: the deletes met held nodes, and the holders held them many times.
    expect(refused, 'deletes refused as locked').to.be.greaterThan(0);
    expect(held).to.be.greaterThan(ROUNDS * NODES_PER_ROUND);
  });
});
