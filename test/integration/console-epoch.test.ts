import { expect } from 'chai';
import { createNode, updateNode, type Node } from '../../db/nodes.js';
import { suiteDatabase } from '../helpers/database.js';

/** Which node changes bump access_epoch (what console tokens bind to), in db/nodes.ts updateNode. */
describe('node access epoch', () => {
  const tdb = suiteDatabase();
  let node: Node;
  beforeEach(async () => {
    node = await createNode(tdb.knex, { driver: 'fake-hardware', provisionState: 'enroll', consoleEnabled: true, owner: 'a' });
  });

  const epochAfter = async (changes: Parameters<typeof updateNode>[2], opts: Parameters<typeof updateNode>[3] = {}) => {
    const before = node.accessEpoch;
    node = await updateNode(tdb.knex, node.id, changes, opts);
    return node.accessEpoch - before;
  };

  it('bumps on owner and lessee changes, not on writing the same value', async () => {
    expect(await epochAfter({ owner: 'b' })).to.equal(1);
    expect(await epochAfter({ owner: 'b' })).to.equal(0);
    expect(await epochAfter({ lessee: 'x' })).to.equal(1);
    expect(await epochAfter({ owner: null })).to.equal(1);
  });

  it('bumps when the console is disabled, not when it is enabled', async () => {
    expect(await epochAfter({ consoleEnabled: false })).to.equal(1);
    expect(await epochAfter({ consoleEnabled: true })).to.equal(0);
  });

  it('bumps on entering maintenance unless told otherwise; leaving it does not', async () => {
    expect(await epochAfter({ maintenance: true })).to.equal(1);
    expect(await epochAfter({ maintenance: false })).to.equal(0);
    expect(await epochAfter({ maintenance: true }, { maintenanceBumpsAccess: false })).to.equal(0);
  });

  it('never bumps on power or provision changes, while version always moves', async () => {
    const v = node.version;
    expect(await epochAfter({ powerState: 'power on', targetPowerState: null })).to.equal(0);
    expect(await epochAfter({ provisionState: 'manageable', targetProvisionState: null })).to.equal(0);
    expect(await epochAfter({ extra: { a: 1 } })).to.equal(0);
    expect(node.version).to.equal(v + 3);
  });
});
