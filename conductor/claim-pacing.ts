/**
 * Claim pacing. Every claim and every outcome batch costs about the same in round trips and
 * Postgres work whatever its size, and a conductor claims once per burst of wake-ups it sees:
 * with K conductors each burst is split K ways, so K conductors made K times the claims and
 * outcome batches of one, each a K-th the size, and the extra work slowed every conductor.
 * Once a claim has found CLAIM_PACE_TRIGGER intents or more (work comes faster than one claim
 * per intent), the next waits until about CLAIM_PACE_BATCH have gathered at the recent rate
 * of wake-ups for this conductor's share, never longer than CLAIM_PACE_MAX_MS per conductor
 * on the ring (up to CLAIM_PACE_MAX_CONDUCTORS of them) after the previous claim began: the
 * wait grows with K, since each conductor sees a K-th of the rate. A bound that stayed at
 * 100 ms whatever K cut five conductors' claims to half the size where the machine was slow
 * (24 intents a claim against 48 with one), and every claim and outcome batch costs its
 * round trips whatever its size. Requests one after another, each claimed alone, are never
 * held back.
 *
 * A claim that waited finds what the wait gathered, so its size alone is no sign of load: at
 * 200 requests a second in all, each of three conductors found 20 after its 300 ms wait,
 * paced the next claim again, and requests waited 67 ms (p50) to start instead of 5. Pacing
 * goes on when a claim that did not wait finds CLAIM_PACE_TRIGGER or more, and stays on while
 * claims that waited find CLAIM_PACE_SUSTAIN or more. A wait of 100 ms per conductor for a
 * K-th of the rate gathers 100 ms of all the work, so pacing holds from about 320 requests a
 * second in all, whatever K.
 *
 * CLAIM_PACE_BATCH is large enough that under heavy load the wait is mostly the bound: with 48,
 * 100,000 intents from 64 clients on two cores took ~2,150 claims and ~2,000 outcome batches
 * at any K, and three conductors ran at 0.89-0.92x of one, five at 0.84-0.85x (each extra
 * process makes every round trip dearer on a shared machine). With 192, one such run gave one
 * conductor 3,876/s (from ~3,600), three 0.95x and five 0.91x. The price is latency under
 * heavy load only: an intent may wait up to the bound to start. Light load is not paced.
 */
export const CLAIM_PACE_BATCH = 192;
export const CLAIM_PACE_TRIGGER = 4;
export const CLAIM_PACE_SUSTAIN = 32;
export const CLAIM_PACE_MAX_MS = 100;
export const CLAIM_PACE_MAX_CONDUCTORS = 5;
/** Time constant (ms) of the wake-up rate's moving average. */
const WAKE_RATE_TAU_MS = 200;

/** A monotonic clock in milliseconds (performance.now in production; a test's own otherwise). */
export interface Clock {
  now(): number;
}

/**
 * The pacing state of one intent runner: the recent rate of wake-ups for its share, when its
 * last claim began, and whether the next claim lets work gather first. It decides; the runner
 * waits and claims.
 */
export class ClaimPacing {
  /** Wake-ups per ms (exponential moving average), and when last updated. */
  private wakeRate = 0;
  private wakeRateAt = 0;
  private lastClaimAt = 0;
  private pacing = false;
  /** Whether the claim under way was waited for (see claimFound). */
  private paced = false;

  constructor(
    private readonly clock: Clock,
    /** Conductors on the hash ring, this one included. */
    private readonly conductors: () => number,
  ) {}

  /** Counts a wake-up (a new intent announced for this conductor's share). */
  countWake(): void {
    const now = this.clock.now();
    this.wakeRate = this.rateAt(now) + 1 / WAKE_RATE_TAU_MS;
    this.wakeRateAt = now;
  }

  /**
   * How long the next claim waits for more work to gather (0: claim at once). The claim that
   * follows counts as waited for when this is above 0.
   */
  nextClaimDelayMs(): number {
    const delay = this.delayMs();
    this.paced = delay > 0;
    return delay;
  }

  /** A claim statement begins: the next wait counts from here. */
  claimStarted(): void {
    this.lastClaimAt = this.clock.now();
  }

  /** What the claim found: `claimed` of the `want` it asked for. */
  claimFound(claimed: number, want: number): void {
    // A claim capped by free workers took all it could: no sign of less work.
    if (this.paced) this.pacing = claimed >= Math.min(CLAIM_PACE_SUSTAIN, want);
    else if (claimed > 0) this.pacing = claimed >= CLAIM_PACE_TRIGGER;
    this.paced = false;
  }

  private rateAt(now: number): number {
    return this.wakeRate * Math.exp((this.wakeRateAt - now) / WAKE_RATE_TAU_MS);
  }

  private delayMs(): number {
    if (!this.pacing) return 0;
    const now = this.clock.now();
    const rate = this.rateAt(now);
    const k = Math.min(Math.max(1, this.conductors()), CLAIM_PACE_MAX_CONDUCTORS);
    const maxMs = CLAIM_PACE_MAX_MS * k;
    const gap = rate > 0 ? Math.min(maxMs, CLAIM_PACE_BATCH / rate) : maxMs;
    return Math.max(0, this.lastClaimAt + gap - now);
  }
}
