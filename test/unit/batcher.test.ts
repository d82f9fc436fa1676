/**
 * Group commit: what forms a batch. The items of one turn of the event loop share one, and
 * those submitted while it runs share the next.
 */
import { expect } from 'chai';
import { Batcher } from '../../common/batcher.js';

function recording(): { batcher: Batcher<number, number>; batches: number[][]; release: () => void } {
  const batches: number[][] = [];
  let gate: (() => void) | undefined;
  const batcher = new Batcher<number, number>(async (items) => {
    batches.push(items);
    // The first batch waits until released, so that later submissions queue behind it.
    if (batches.length === 1) await new Promise<void>((r) => { gate = r; });
    return items.map((i) => ({ value: i * 10 }));
  }, 100);
  return { batcher, batches, release: () => gate?.() };
}

describe('Batcher', () => {
  it('makes one batch of the items submitted in one turn, the first included', async () => {
    const { batcher, batches, release } = recording();
    const answers = [1, 2, 3, 4, 5].map((i) => batcher.submit(i));
    await new Promise((r) => setImmediate(r));
    release();
    expect(await Promise.all(answers)).to.deep.equal([10, 20, 30, 40, 50]);
    expect(batches).to.deep.equal([[1, 2, 3, 4, 5]]);
  });

  it('makes the next batch of the items submitted while one runs', async () => {
    const { batcher, batches, release } = recording();
    const first = batcher.submit(1);
    await new Promise((r) => setImmediate(r));
    const later = [2, 3].map((i) => batcher.submit(i));
    release();
    expect(await Promise.all([first, ...later])).to.deep.equal([10, 20, 30]);
    expect(batches).to.deep.equal([[1], [2, 3]]);
  });
});
