/** A task's agent token, kept from its claim: shown masked wherever the task is serialized (logs). */
import { expect } from 'chai';
import { HeldToken } from '../../conductor/task-manager.js';

describe('HeldToken', () => {
  it('serializes as ****** while it holds a token, and not at all once emptied', () => {
    const held = new HeldToken();
    held.value = 'a'.repeat(43);
    expect(JSON.stringify({ agentToken: held })).to.equal('{"agentToken":"******"}');
    held.value = undefined;
    expect(JSON.stringify({ agentToken: held })).to.equal('{}');
  });
});
