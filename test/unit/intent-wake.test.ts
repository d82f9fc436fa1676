/**
 * The payload of a wake-up for new intents: the node, and the newest intent's seq when known.
 */
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { intentWakePayload, parseIntentWake } from '../../db/intents.js';

describe('intent wake-up payloads', () => {
  it('carry the node and the seq of its newest intent, or the node alone', () => {
    const nodeUuid = randomUUID();
    expect(parseIntentWake(intentWakePayload({ nodeUuid, seq: 42 }))).to.deep.equal({ nodeUuid, seq: 42 });
    expect(parseIntentWake(intentWakePayload({ nodeUuid }))).to.deep.equal({ nodeUuid });
    expect(intentWakePayload({ nodeUuid })).to.equal(nodeUuid);
  });

  it('name no node when the payload is not one (every conductor looks), and no seq when it is not a number', () => {
    const nodeUuid = randomUUID();
    expect(parseIntentWake(undefined)).to.equal(undefined);
    expect(parseIntentWake('operation')).to.equal(undefined);
    expect(parseIntentWake('17')).to.equal(undefined);
    expect(parseIntentWake(`${nodeUuid}:x`)).to.deep.equal({ nodeUuid });
    expect(parseIntentWake(`${nodeUuid}:0`)).to.deep.equal({ nodeUuid });
  });
});
