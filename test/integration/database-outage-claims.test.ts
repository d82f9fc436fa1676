/**
 * A claim that fails at COMMIT in a database restart may have committed or not, and the
 * conductor undoes it once the database is back. If it did not commit, the conductor may
 * meanwhile claim the same intent again, as the same attempt (the attempt the failed claim
 * counted was never written): the undo must leave that claim alone. Undoing it put the
 * intent back in the queue while it ran, and it ran twice at its BMC under one attempt
 * (bench/outage.ts, fast restarts: 8 requests in 40 rounds).
 */
import { expect } from 'chai';
import { enqueueIntents } from '../../db/intents.js';
import { claimIntents, unclaimIntents, type ClaimScope } from '../../db/intent-claims.js';
import { createNode } from '../../db/nodes.js';
import { freshDatabase, type TestDatabase } from '../helpers/database.js';

const SCOPE: ClaimScope = { conductorGroup: '', drivers: ['fake-hardware'] };
const HOST = 'undo-host';

describe('database outage: undoing an incomplete claim', function () {
  this.timeout(60_000);
  let tdb: TestDatabase;

  before(async () => {
    tdb = await freshDatabase();
  });

  after(async () => {
    await tdb?.drop();
  });

  async function queuedIntent(): Promise<{ nodeId: number; intentId: number }> {
    const node = await createNode(tdb.knex, { driver: 'fake-hardware', provisionState: 'enroll' });
    const [intent] = await tdb.knex.transaction((trx) => enqueueIntents(trx, node.id, [{ kind: 'power', args: { target: 'rebooting' }, maxAttempts: 1 }]));
    return { nodeId: node.id, intentId: intent.id };
  }

  async function rowOf(nodeId: number, intentId: number) {
    const intent = await tdb.knex('intents').where('id', intentId).first('state', 'attempts', 'conductor');
    const node = await tdb.knex('nodes').where('id', nodeId).first('reservation');
    return { ...intent, reservation: node.reservation };
  }

  it('leaves alone a later claim of the same intent, as the same attempt, when the incomplete claim did not commit', async () => {
    const { nodeId, intentId } = await queuedIntent();
    // The claim statement runs, then its transaction is lost (rolled back).
    const outer = await tdb.knex.transaction();
    const lost = await claimIntents(outer, HOST, 10, SCOPE);
    await outer.rollback();
    expect(lost.map((i) => [i.id, i.attempts])).to.deep.equal([[intentId, 1]]);
    // The database is back: the next claim of the same conductor takes the intent again and runs it.
    const again = await claimIntents(tdb.knex, HOST, 10, SCOPE);
    expect(again.map((i) => [i.id, i.attempts])).to.deep.equal([[intentId, 1]]);
    // Then the undo of the lost claim gets through.
    expect(await unclaimIntents(tdb.knex, HOST, lost), 'intents put back').to.equal(0);
    expect(await rowOf(nodeId, intentId)).to.deep.equal({ state: 'running', attempts: 1, conductor: HOST, reservation: HOST });
  });

  it('puts back an incomplete claim that did commit', async () => {
    const { nodeId, intentId } = await queuedIntent();
    const committed = (await claimIntents(tdb.knex, HOST, 10, SCOPE)).filter((i) => i.id === intentId);
    expect(committed).to.have.length(1);
    expect(await unclaimIntents(tdb.knex, HOST, committed), 'intents put back').to.equal(1);
    expect(await rowOf(nodeId, intentId)).to.deep.equal({ state: 'queued', attempts: 0, conductor: null, reservation: null });
  });
});
