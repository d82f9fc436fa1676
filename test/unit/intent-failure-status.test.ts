/**
 * The HTTP status of a failed intent: the conductor records its error's code, and the API maps
 * the code with the status of the error class that code names. Rows of earlier versions also
 * carry the status they decided, which is kept.
 */
import { expect } from 'chai';
import * as catalogue from '../../common/errors.js';
import { statusOfCode } from '../../api/error-handler.js';
import { failureStatus } from '../../api/intents.js';

describe('failed intents: HTTP status from the recorded error code', () => {
  it('answers each code with the status of its class', () => {
    expect(statusOfCode(new catalogue.InvalidParameterValue('x').code)).to.equal(400);
    expect(statusOfCode(new catalogue.InvalidDriverInfo('x').code)).to.equal(400);
    expect(statusOfCode(new catalogue.NodeNotFound('x').code)).to.equal(404);
    expect(statusOfCode(new catalogue.PowerOffDisabled('power off').code)).to.equal(409);
    expect(statusOfCode(new catalogue.NodeProtected('x').code)).to.equal(403);
    expect(statusOfCode(new catalogue.BmcRejected('x').code)).to.equal(500);
    expect(statusOfCode('NOT_A_CODE_OF_THIS_VERSION')).to.equal(500);
  });

  it('gives every code of the catalogue one status, whichever class carries it', () => {
    const seen = new Map<string, number>();
    for (const value of Object.values(catalogue)) {
      if (typeof value !== 'function' || !(value.prototype instanceof catalogue.GalvanicError) || value === catalogue.ConfigError) continue;
      const err = new (value as new (arg: string) => catalogue.GalvanicError)('');
      if (err.code === undefined) continue;
      expect(seen.get(err.code) ?? err.httpStatus, `${value.name} (${err.code})`).to.equal(err.httpStatus);
      seen.set(err.code, err.httpStatus);
      expect(statusOfCode(err.code), `${value.name} (${err.code})`).to.equal(err.httpStatus);
    }
    expect(seen.size).to.be.above(50);
  });

  it('maps the code a conductor records', () => {
    expect(failureStatus({ error_code: 'INVALID_STATE' })).to.equal(409);
    expect(failureStatus({ error_code: 'INTERNAL' })).to.equal(500);
    expect(failureStatus(null)).to.equal(500);
  });

  it('keeps the status an earlier version recorded beside the code', () => {
    // PatchError was recorded as SCHEMA_BEHIND: its 400 must not turn into SchemaBehind's 500.
    expect(failureStatus({ error_code: 'SCHEMA_BEHIND', http_status: 400 })).to.equal(400);
    expect(failureStatus({ error_code: 'INVALID_PARAMETER_VALUE', http_status: 400 })).to.equal(400);
  });
});
