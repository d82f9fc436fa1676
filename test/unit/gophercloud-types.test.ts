/**
 * The Go-type checker the BMO flow test holds every answer to: it must report what Go's
 * encoding/json refuses (and only that), or the flow test would pass on bodies gophercloud
 * cannot read.
 */
import { expect } from 'chai';
import { BIOS_LIST, INVENTORY, NODE, VMEDIA_LIST, goDecodeErrors } from '../helpers/gophercloud.js';

describe('goDecodeErrors: what gophercloud\'s Go structs can decode', () => {
  it('accepts null anywhere and ignores fields the struct does not declare', () => {
    expect(goDecodeErrors({ uuid: null, driver_info: null, traits: null, created_at: null, automated_clean: null, nope: [1, { a: 2 }] }, NODE)).to.deep.equal([]);
  });

  it('refuses a JSON type where Go declares another, naming the field', () => {
    expect(goDecodeErrors({ power_state: 1 }, NODE)).to.deep.equal(['$.power_state: cannot unmarshal 1 into string']);
    expect(goDecodeErrors({ instance_info: 'x' }, NODE)).to.have.length(1);
    expect(goDecodeErrors({ maintenance: 'false' }, NODE)).to.have.length(1);
    expect(goDecodeErrors({ traits: 'CUSTOM_A' }, NODE)).to.have.length(1);
    expect(goDecodeErrors({ links: [{ href: 5, rel: 'self' }] }, NODE)).to.deep.equal(['$.links[0].href: cannot unmarshal 5 into string']);
    // encoding/json finds a field whatever the key's case.
    expect(goDecodeErrors({ Power_State: 1 }, NODE)).to.deep.equal(['$.Power_State: cannot unmarshal 1 into string']);
  });

  it('wants integers for Go ints and RFC 3339 with a zone for time.Time', () => {
    expect(goDecodeErrors({ bios: [{ name: 'A', value: '1', lower_bound: 1.5 }] }, BIOS_LIST)).to.have.length(1);
    expect(goDecodeErrors({ bios: [{ name: 'A', value: 1 }] }, BIOS_LIST), 'a BIOS value is a string').to.have.length(1);
    expect(goDecodeErrors({ inventory: { memory: { physical_mb: 1024.5 } } }, INVENTORY)).to.have.length(1);
    expect(goDecodeErrors({ inventory: { cpu: { frequency: 3400 } } }, INVENTORY), 'cpu.frequency is a string').to.have.length(1);
    expect(goDecodeErrors({ created_at: '2026-01-02T03:04:05.123+00:00', updated_at: '2026-01-02T03:04:05Z' }, NODE)).to.deep.equal([]);
    expect(goDecodeErrors({ created_at: '2026-01-02T03:04:05.123456' }, NODE), 'no zone').to.have.length(1);
    expect(goDecodeErrors({ created_at: '2026-01-02 03:04:05+00:00' }, NODE), 'a space for T').to.have.length(1);
  });

  it('checks list bodies element by element', () => {
    expect(goDecodeErrors([{ image: 'x', inserted: true, media_types: ['CD'] }], VMEDIA_LIST)).to.deep.equal([]);
    expect(goDecodeErrors({ media: [] }, VMEDIA_LIST)).to.have.length(1);
    expect(goDecodeErrors([{ inserted: 'yes' }], VMEDIA_LIST)).to.deep.equal(['$[0].inserted: cannot unmarshal "yes" into bool']);
  });
});
