import { createHash } from 'node:crypto';

/**
 * Points each conductor puts on the ring: enough that shares are within a few percent. A
 * host's share deviates by about 1/sqrt(replicas): 64 points left one of three hosts with
 * 25% instead of 33%; 512 keep them within ~4% (claimIntents' SQL filter is a binary search,
 * so the number of ranges costs next to nothing).
 */
const DEFAULT_REPLICAS = 512;

/** Most owners a ring remembers (see HashRing.owners): ~100 bytes each. */
const OWNER_CACHE_MAX = 100_000;

/**
 * A key's place on the ring. Postgres stores the same for each node (nodes.ring_hash), so SQL
 * can filter a conductor's share of the nodes.
 */
export function ringHash(key: string): number {
  // First 4 bytes of md5 as a signed 32-bit integer: Postgres computes the same with
  // ('x' || substr(md5(key), 1, 8))::bit(32)::int.
  return createHash('md5').update(key).digest().readInt32BE(0);
}

/** A half-open range (lo, hi] of hash values; `lo > hi` never occurs (wrap-around is split). */
export interface HashRange {
  lo: number;
  hi: number;
}

/**
 * A consistent hash ring over conductor hostnames. A key belongs to the first point at or
 * after its hash (wrapping). Adding or removing a conductor moves only ~1/N of the keys.
 */
export class HashRing {
  private readonly points: Array<{ hash: number; host: string }>;
  /**
   * Owners already looked up: every conductor asks for the owner of the node of each wake-up,
   * and the md5 per lookup was 3 % of a busy conductor's CPU. Cleared when it grows past
   * OWNER_CACHE_MAX keys (a fleet larger than that pays the md5 again for some).
   */
  private readonly owners = new Map<string, string>();
  private readonly ranges = new Map<string, readonly HashRange[]>();

  constructor(readonly hosts: readonly string[], replicas = DEFAULT_REPLICAS) {
    this.points = [];
    for (const host of hosts) {
      for (let i = 0; i < replicas; i++) this.points.push({ hash: ringHash(`${host}-${i}`), host });
    }
    this.points.sort((a, b) => a.hash - b.hash || a.host.localeCompare(b.host));
  }

  /** The host owning `key`, or undefined on an empty ring. */
  owner(key: string): string | undefined {
    if (this.points.length === 0) return undefined;
    const known = this.owners.get(key);
    if (known !== undefined) return known;
    if (this.owners.size >= OWNER_CACHE_MAX) this.owners.clear();
    const host = this.lookUp(ringHash(key));
    this.owners.set(key, host);
    return host;
  }

  private lookUp(h: number): string {
    let lo = 0;
    let hi = this.points.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.points[mid].hash < h) lo = mid + 1;
      else hi = mid;
    }
    return this.points[lo === this.points.length ? 0 : lo].host;
  }

  /** The hash ranges `host` owns, for filtering in SQL. */
  rangesOf(host: string): readonly HashRange[] {
    // The ring never changes: each conductor asks for its own ranges at every claim.
    const known = this.ranges.get(host);
    if (known) return known;
    const out: HashRange[] = [];
    const n = this.points.length;
    const MIN = -(2 ** 31);
    const MAX = 2 ** 31 - 1;
    for (let i = 0; i < n; i++) {
      if (this.points[i].host !== host) continue;
      const hi = this.points[i].hash;
      if (i === 0) {
        // Owns everything up to the first point, and everything after the last one.
        out.push({ lo: MIN - 1, hi });
        if (n > 0) out.push({ lo: this.points[n - 1].hash, hi: MAX });
      } else {
        out.push({ lo: this.points[i - 1].hash, hi });
      }
    }
    // Sorted, and neighbouring ranges (consecutive points of one host) made one: a third fewer
    // with three hosts, and the claim's filter takes them as arrays.
    const merged: HashRange[] = [];
    for (const r of out.filter((x) => x.lo < x.hi).sort((a, b) => a.lo - b.lo)) {
      const last = merged[merged.length - 1];
      if (last && last.hi === r.lo) last.hi = r.hi;
      else merged.push({ ...r });
    }
    this.ranges.set(host, merged);
    return merged;
  }
}

/**
 * The ring of `hosts` as every process builds it: each host once, sorted, so that the API and
 * every conductor of a group agree on the owner of each node and on `hosts` itself.
 */
export function ringOf(hosts: Iterable<string>): HashRing {
  return new HashRing([...new Set(hosts)].sort());
}
