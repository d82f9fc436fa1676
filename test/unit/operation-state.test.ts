import { expect } from 'chai';
import { finalState, operationStopped } from '../../conductor/operation-progress.js';
import { progressOf, type OperationCounts } from '../../db/operation-nodes.js';
import type { Operation } from '../../db/operations.js';

const counts = (c: Partial<OperationCounts>): OperationCounts => ({ pending: 0, running: 0, succeeded: 0, failed: 0, cancelled: 0, ...c });
const op = (o: Partial<Operation>): Operation => ({ state: 'running', abortReason: null, ...o }) as Operation;

describe('operation end state and progress', () => {
  it('ends succeeded only when every node succeeded', () => {
    expect(finalState(op({}), counts({ succeeded: 3 }))).to.equal('succeeded');
    expect(finalState(op({}), counts({ succeeded: 2, failed: 1 }))).to.equal('partially_failed');
    expect(finalState(op({}), counts({ failed: 3 }))).to.equal('failed');
  });

  it('ends failed when aborted, and cancelled when cancelled, whatever the counts', () => {
    expect(finalState(op({ abortReason: 'node x failed' }), counts({ succeeded: 5, failed: 1, cancelled: 4 }))).to.equal('failed');
    expect(finalState(op({ state: 'cancelled' }), counts({ succeeded: 5 }))).to.equal('cancelled');
  });

  it('is stopped once cancelled or aborted, and only then', () => {
    expect(operationStopped(op({}))).to.equal(false);
    expect(operationStopped(op({ state: 'queued' }))).to.equal(false);
    expect(operationStopped(op({ state: 'cancelled' }))).to.equal(true);
    expect(operationStopped(op({ abortReason: 'node x failed' }))).to.equal(true);
  });

  it('counts succeeded, failed and cancelled nodes as done, rounding the percentage down', () => {
    expect(progressOf(counts({ succeeded: 1, failed: 1, cancelled: 0, running: 3, pending: 1 }))).to.deep.equal({ done: 2, total: 6, percent: 33 });
    expect(progressOf(counts({ succeeded: 999, running: 1 })).percent).to.equal(99);
    expect(progressOf(counts({}))).to.deep.equal({ done: 0, total: 0, percent: 100 });
  });
});
