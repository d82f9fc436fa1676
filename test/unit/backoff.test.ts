/** The intent runner's retry delay: exponential, capped, half fixed and half random. */
import { expect } from 'chai';
import { backoffMs } from '../../common/backoff.js';

describe('backoffMs', () => {
  it('stays within [ceiling/2, ceiling] with ceiling = initial * 2^(attempt-1)', () => {
    const initial = 200;
    for (let attempt = 1; attempt <= 8; attempt++) {
      const ceiling = initial * 2 ** (attempt - 1);
      for (let i = 0; i < 500; i++) {
        const d = backoffMs(attempt, initial, 1_000_000);
        expect(d, `attempt ${attempt}`).to.be.at.least(ceiling / 2).and.at.most(ceiling);
      }
    }
  });

  it('never exceeds the maximum, however many attempts', () => {
    for (const attempt of [10, 20, 50, 1000]) {
      for (let i = 0; i < 200; i++) {
        const d = backoffMs(attempt, 1000, 60_000);
        expect(d).to.be.at.least(30_000).and.at.most(60_000);
        expect(Number.isFinite(d)).to.equal(true);
      }
    }
  });

  it('treats attempt 0 (or less) like the first attempt', () => {
    for (const attempt of [0, -3]) {
      for (let i = 0; i < 100; i++) expect(backoffMs(attempt, 100, 10_000)).to.be.within(50, 100);
    }
  });

  it('is 0 when the initial delay is 0', () => {
    expect(backoffMs(3, 0, 60_000)).to.equal(0);
  });

  it('spreads retries over the whole jitter window', () => {
    const samples = Array.from({ length: 2000 }, () => backoffMs(1, 1000, 60_000));
    expect(Math.min(...samples)).to.be.below(600);
    expect(Math.max(...samples)).to.be.above(900);
    expect(new Set(samples).size).to.be.above(1000);
  });

  it('never retries sooner than the previous attempt\'s longest delay', () => {
    // ceiling(k)/2 = ceiling(k-1): the delays of successive attempts do not overlap.
    for (let attempt = 2; attempt <= 6; attempt++) {
      const previousCeiling = 100 * 2 ** (attempt - 2);
      for (let i = 0; i < 200; i++) expect(backoffMs(attempt, 100, 60_000)).to.be.at.least(previousCeiling);
    }
  });
});
