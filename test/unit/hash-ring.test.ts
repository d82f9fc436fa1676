/**
 * The consistent hash ring: deterministic owners, even spread, minimal movement when a host
 * leaves, and SQL ranges that partition the int32 hash space exactly.
 */
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { HashRing, ringHash, ringOf, type HashRange } from '../../common/hash-ring.js';

const HOSTS = ['conductor-a.example.org', 'conductor-b.example.org', 'conductor-c.example.org'];
const INT32_MIN = -(2 ** 31);
const INT32_MAX = 2 ** 31 - 1;

function keys(n: number): string[] {
  return Array.from({ length: n }, () => randomUUID());
}

const inRange = (h: number, r: HashRange) => h > r.lo && h <= r.hi;

describe('HashRing', () => {
  it('hashes like Postgres would: a signed 32-bit integer from md5', () => {
    // md5('') = d41d8cd9…: 0xd41d8cd9 as int32.
    expect(ringHash('')).to.equal(0xd41d8cd9 - 2 ** 32);
    for (const k of keys(100)) {
      const h = ringHash(k);
      expect(Number.isInteger(h)).to.equal(true);
      expect(h).to.be.within(INT32_MIN, INT32_MAX);
    }
  });

  it('gives each key one owner, the same whatever the order the hosts are listed in', () => {
    const a = new HashRing(HOSTS);
    const b = new HashRing([...HOSTS].reverse());
    const c = new HashRing(HOSTS);
    const bad = keys(2000).filter((k) => {
      const owner = a.owner(k);
      return !HOSTS.includes(owner!) || b.owner(k) !== owner || c.owner(k) !== owner || a.owner(k) !== owner;
    });
    expect(bad).to.deep.equal([]);
  });

  it('builds the ring of a host list the same way in every process: each host once, sorted', () => {
    const ring = ringOf([HOSTS[2], HOSTS[0], HOSTS[2], HOSTS[1]]);
    expect(ring.hosts).to.deep.equal(HOSTS);
    const k = randomUUID();
    expect(ring.owner(k)).to.equal(new HashRing(HOSTS).owner(k));
  });

  it('has no owner on an empty ring, and one host owns everything alone', () => {
    expect(new HashRing([]).owner('x')).to.equal(undefined);
    expect(new HashRing([]).rangesOf('x')).to.deep.equal([]);
    const alone = new HashRing(['solo']);
    for (const k of keys(100)) expect(alone.owner(k)).to.equal('solo');
    expect(alone.rangesOf('nobody')).to.deep.equal([]);
  });

  it('spreads 10,000 keys over 3 hosts within 15% of a third each', () => {
    const ring = new HashRing(HOSTS);
    const counts = new Map<string, number>(HOSTS.map((h) => [h, 0]));
    const n = 10_000;
    for (const k of keys(n)) counts.set(ring.owner(k)!, counts.get(ring.owner(k)!)! + 1);
    for (const [host, count] of counts) {
      expect(count, `${host} owns ${count}`).to.be.within((n / 3) * 0.85, (n / 3) * 1.15);
    }
  });

  it('moves only the keys of a host that leaves', () => {
    const before = new HashRing(HOSTS);
    const after = new HashRing(HOSTS.filter((h) => h !== HOSTS[1]));
    let moved = 0;
    const wrong: string[] = [];
    for (const k of keys(10_000)) {
      const was = before.owner(k)!;
      const now = after.owner(k)!;
      if (was === HOSTS[1]) moved++;
      else if (now !== was) wrong.push(`${k}: ${was} -> ${now}`);
      if (now === HOSTS[1]) wrong.push(`${k}: still on the removed host`);
    }
    expect(wrong).to.deep.equal([]);
    // About a third of the keys were on the host that left.
    expect(moved).to.be.within(2000, 4700);
  });

  it('moves only keys to a host that joins', () => {
    const before = new HashRing(HOSTS);
    const after = new HashRing([...HOSTS, 'conductor-d.example.org']);
    const wrong = keys(5000).filter((k) => {
      const now = after.owner(k)!;
      return now !== 'conductor-d.example.org' && now !== before.owner(k);
    });
    expect(wrong).to.deep.equal([]);
  });

  it('gives the hosts ranges that cover the int32 hash space exactly once', () => {
    const ring = new HashRing(HOSTS);
    const rangesByHost = new Map(HOSTS.map((host) => [host, ring.rangesOf(host)]));
    const all = HOSTS.flatMap((host) => rangesByHost.get(host)!.map((r) => ({ ...r, host })));
    for (const r of all) expect(r.lo).to.be.below(r.hi);
    all.sort((x, y) => x.lo - y.lo);
    // Half-open (lo, hi] ranges: from just below INT32_MIN to INT32_MAX, each starting where the last ended.
    expect(all[0].lo).to.equal(INT32_MIN - 1);
    expect(all[all.length - 1].hi).to.equal(INT32_MAX);
    for (let i = 1; i < all.length; i++) expect(all[i].lo, `range ${i}`).to.equal(all[i - 1].hi);

    // And each hash lands in the ranges of exactly one host: its owner.
    const wrong = keys(5000).flatMap((k) => {
      const h = ringHash(k);
      const holders = HOSTS.filter((host) => rangesByHost.get(host)!.some((r) => inRange(h, r)));
      return holders.length === 1 && holders[0] === ring.owner(k) ? [] : [`${k} (hash ${h}): in ranges of [${holders.join(', ')}], owner ${ring.owner(k)}`];
    });
    expect(wrong).to.deep.equal([]);
    // The extremes of the space belong to someone too.
    for (const h of [INT32_MIN, INT32_MAX, 0, -1]) {
      expect(all.filter((r) => inRange(h, r)), `hash ${h}`).to.have.length(1);
    }
    // Each host's ranges are sorted and none touches the next: neighbours were made one.
    for (const host of HOSTS) {
      const rs = rangesByHost.get(host)!;
      for (let i = 1; i < rs.length; i++) expect(rs[i].lo, `${host} range ${i}`).to.be.above(rs[i - 1].hi);
    }
    expect(ring.rangesOf(HOSTS[0]), 'the same ranges asked again').to.equal(rangesByHost.get(HOSTS[0]));
  });

  it('gives the same owner to a key asked again (remembered) as a fresh ring does', () => {
    const ring = new HashRing(HOSTS);
    const ks = keys(2000);
    const first = ks.map((k) => ring.owner(k));
    for (let round = 0; round < 2; round++) expect(ks.map((k) => ring.owner(k)), `round ${round}`).to.deep.equal(first);
    const fresh = new HashRing(HOSTS);
    expect(ks.map((k) => fresh.owner(k)), 'a fresh ring').to.deep.equal(first);
  });
});
