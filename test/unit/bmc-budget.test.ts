/** BmcBudget: the per-BMC limit shared by every path, intents served before periodic reads. */
import { expect } from 'chai';
import { BmcBudget } from '../../drivers/bmc-budget.js';

describe('BmcBudget', () => {
  it('never has more than the limit in flight at one BMC, and BMCs do not wait for each other', async () => {
    const budget = new BmcBudget(2);
    const a1 = await budget.acquire('a');
    const a2 = await budget.acquire('a');
    let third = false;
    const a3 = budget.acquire('a').then((r) => { third = true; return r; });
    const b1 = await budget.acquire('b');
    await new Promise((r) => setImmediate(r));
    expect(third).to.equal(false);
    expect(budget.inFlight('a')).to.equal(2);
    a1();
    a1();
    (await a3)();
    expect(third).to.equal(true);
    a2();
    b1();
    expect(budget.inFlight('a')).to.equal(0);
    expect(budget.stats).to.include({ maxInFlight: 2, waited: 1 });
  });

  it('serves a waiting intent before periodic reads that waited longer', async () => {
    const budget = new BmcBudget(1);
    const order: string[] = [];
    const held = await budget.acquire('bmc', 'periodic');
    const waiters = [
      budget.acquire('bmc', 'periodic').then((r) => { order.push('periodic 1'); r(); }),
      budget.acquire('bmc', 'periodic').then((r) => { order.push('periodic 2'); r(); }),
      budget.acquire('bmc', 'intent').then((r) => { order.push('intent'); r(); }),
    ];
    // A new periodic read does not jump the queue either.
    held();
    await Promise.all(waiters);
    expect(order).to.deep.equal(['intent', 'periodic 1', 'periodic 2']);
    expect(budget.stats.promoted).to.equal(1);
  });

  it('drops a waiter whose signal aborts', async () => {
    const budget = new BmcBudget(1);
    const held = await budget.acquire('bmc');
    const ctl = new AbortController();
    const gone = budget.acquire('bmc', 'intent', ctl.signal);
    ctl.abort(new Error('gave up'));
    const err = await gone.then(() => null, (e: Error) => e);
    expect(err?.message).to.equal('gave up');
    const next = budget.acquire('bmc', 'periodic');
    held();
    (await next)();
    expect(budget.inFlight('bmc')).to.equal(0);
  });
});
