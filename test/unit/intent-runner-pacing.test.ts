/**
 * Claim pacing: while claims find several intents each (work comes faster than one claim per
 * intent), a conductor lets work gather between claims, since each claim and outcome batch
 * costs about the same whatever its size; requests one after another, each claimed alone,
 * are claimed at once. Time is the tests' own: nothing here sleeps.
 */
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { pino } from 'pino';
import type { Action } from '../../conductor/actions/types.js';
import { ClaimPacing } from '../../conductor/claim-pacing.js';
import { IntentRunner } from '../../conductor/intent-runner.js';
import type { Task, TaskManager } from '../../conductor/task-manager.js';
import type { ClaimedIntent } from '../../db/intent-claims.js';
import type { Node } from '../../db/nodes.js';
import type { DriverRegistry } from '../../drivers/registry.js';
import type { Notifier } from '../../common/notifier.js';
import type { PgNotifyBatcher } from '../../db/notify.js';

/** The most a claim asks for in these tests (free workers, up to the runner's batch). */
const WANT = 1000;

/**
 * One conductor's claims in virtual time, as the intent runner makes them: a wake-up with no
 * pass pending starts one after the pacing's delay, the pass claims every node woken so far,
 * and the fake BMC ends each intent at once.
 */
class PacedClaims {
  now = 0;
  readonly claims: Array<{ at: number; size: number }> = [];
  readonly pacing: ClaimPacing;
  private woken = 0;
  private passAt?: number;

  constructor(conductors = 1) {
    this.pacing = new ClaimPacing({ now: () => this.now }, () => conductors);
  }

  wake(count = 1): void {
    for (let i = 0; i < count; i++) {
      this.pacing.countWake();
      this.woken++;
      this.passAt ??= this.now + this.pacing.nextClaimDelayMs();
    }
  }

  /** Lets `ms` pass, making the claims that fall due meanwhile. */
  advance(ms: number): void {
    const end = this.now + ms;
    while (this.passAt !== undefined && this.passAt <= end) {
      this.now = this.passAt;
      this.passAt = undefined;
      this.pacing.claimStarted();
      this.claims.push({ at: this.now, size: this.woken });
      this.pacing.claimFound(this.woken, WANT);
      this.woken = 0;
    }
    this.now = end;
  }

  /** Claims that found work. */
  get found(): Array<{ at: number; size: number }> {
    return this.claims.filter((c) => c.size > 0);
  }
}

/** One wake-up every `gapMs`, `count` of them: the delay from each to the claim that took it. */
function trickle(p: PacedClaims, count: number, gapMs: number): number[] {
  const delays: number[] = [];
  for (let i = 0; i < count; i++) {
    const before = p.claims.length;
    const at = p.now;
    p.wake();
    p.advance(gapMs);
    expect(p.claims.length, `claims after wake-up ${i + 1}`).to.equal(before + 1);
    delays.push(p.claims[before].at - at);
  }
  return delays.sort((a, b) => a - b);
}

const median = (sorted: number[]) => sorted[Math.floor(sorted.length / 2)];

describe('intent runner: claim pacing', () => {
  it('claims a few times a second, not once per burst, under 1,000 wake-ups a second', () => {
    const p = new PacedClaims();
    // 5 new nodes every 5 ms for a second: each burst used to make a claim of its own (200).
    for (let t = 0; t < 1000; t += 5) {
      p.wake(5);
      p.advance(5);
    }
    p.advance(150);
    const intents = p.claims.reduce((n, c) => n + c.size, 0);
    expect(intents, 'every woken node claimed').to.equal(1000);
    // At most one claim per 100 ms once pacing is on: about 10, and the burst that turned it on.
    expect(p.found.length, `claims for ${intents} wake-ups`).to.be.within(10, 15);
    const gaps = p.found.slice(2).map((c, i) => c.at - p.found[i + 1].at);
    expect(Math.min(...gaps), 'shortest gap between paced claims, ms').to.be.at.least(95);
  });

  it('lets work gather longer with more conductors on the ring, each seeing a share of it', () => {
    // One wake-up every 5 ms (200 a second): 192 take 960 ms, past the 100 ms bound of one
    // conductor but within the 500 ms of five.
    const count = (conductors: number) => {
      const p = new PacedClaims(conductors);
      p.wake(8);
      for (let t = 0; t < 1500; t += 5) {
        p.wake();
        p.advance(5);
      }
      p.advance(600);
      return { claims: p.found.length, largest: Math.max(...p.found.map((c) => c.size)) };
    };
    const one = count(1);
    const five = count(5);
    expect(one.claims, 'claims of one conductor').to.be.at.least(10);
    expect(five.claims, `claims of one of five (one conductor: ${one.claims})`).to.be.below(one.claims * 0.7);
    expect(five.largest, 'largest claim of one of five').to.be.above(one.largest);
  });

  it('waits at most 100 ms per conductor on the ring, counted from the previous claim, up to five', () => {
    const waitAfterBurst = (conductors: number) => {
      const p = new PacedClaims(conductors);
      p.wake(20);
      p.advance(0);
      p.advance(10);
      return p.pacing.nextClaimDelayMs();
    };
    expect(waitAfterBurst(1)).to.be.closeTo(90, 1e-9);
    expect(waitAfterBurst(3)).to.be.closeTo(290, 1e-9);
    expect(waitAfterBurst(5)).to.be.closeTo(490, 1e-9);
    expect(waitAfterBurst(8), 'more than five count as five').to.be.closeTo(490, 1e-9);
  });

  it('waits about as long as 192 intents take to gather, when that is within the bound', () => {
    // Two wake-ups a millisecond for one of five conductors (bound 500 ms): 192 gather in ~96 ms.
    const p = new PacedClaims(5);
    for (let t = 0; t < 3000; t += 2) {
      p.wake(4);
      p.advance(2);
    }
    const steady = p.found.filter((c) => c.at > 1500);
    const gaps = steady.slice(1).map((c, i) => c.at - steady[i].at);
    expect(Math.min(...gaps), 'shortest gap, ms').to.be.at.least(90);
    expect(Math.max(...gaps), 'longest gap, ms').to.be.at.most(100);
    for (const c of steady) expect(c.size, 'a claim at the steady rate').to.be.within(180, 200);
  });

  it('goes on pacing after a waited-for claim that took as many as the free workers allowed', () => {
    let now = 0;
    const pacing = new ClaimPacing({ now: () => now }, () => 1);
    for (let i = 0; i < 20; i++) pacing.countWake();
    expect(pacing.nextClaimDelayMs(), 'light load: at once').to.equal(0);
    pacing.claimStarted();
    pacing.claimFound(20, WANT);
    now = 10;
    pacing.countWake();
    expect(pacing.nextClaimDelayMs(), 'after a burst: a wait').to.be.above(0);
    now = 100;
    pacing.claimStarted();
    // Ten free workers: ten is all it could take, however much work waits.
    pacing.claimFound(10, 10);
    now = 110;
    expect(pacing.nextClaimDelayMs(), 'still paced').to.be.above(0);
  });

  it('stops pacing at light load once a wait gathers little, with several conductors', () => {
    // 200 requests a second in all, one of three conductors seeing its share (67 a second):
    // a burst turns pacing on; the 300 ms wait that follows gathers about 20, which must not
    // keep it on (it did: each request then waited ~150 ms for its claim).
    const p = new PacedClaims(3);
    p.wake(8);
    p.advance(5);
    const woken: number[] = [];
    for (let i = 0; i < 80; i++) {
      woken.push(p.now);
      p.wake();
      p.advance(15);
    }
    p.advance(400);
    // Claims take the woken nodes in order: the n-th after the burst is in the claim whose
    // running total passes 8 + n.
    const delays: number[] = [];
    let taken = 0;
    for (const c of p.claims) {
      for (let k = 0; k < c.size; k++, taken++) if (taken >= 8) delays.push(c.at - woken[taken - 8]);
    }
    expect(delays, 'every wake-up claimed').to.have.length(80);
    delays.sort((a, b) => a - b);
    expect(median(delays), `median wake-up → claim, ms (claims: ${p.claims.map((c) => c.size).join(' ')})`).to.equal(0);
    expect(p.found.length, 'claims after the burst').to.be.above(60);
  });

  it('claims at once for requests one after another (125 a second)', () => {
    const p = new PacedClaims();
    expect(trickle(p, 60, 8).at(-1), 'longest wake-up → claim, ms').to.equal(0);
  });

  it('claims at once again once a burst has been taken', () => {
    const p = new PacedClaims();
    p.wake(20);
    p.advance(20);
    expect(p.claims.map((c) => c.size), 'the burst, claimed at once').to.deep.equal([20]);
    // The first wake-up after it may wait for more (at most 100 ms); the next ones do not.
    const delays = trickle(p, 20, 120);
    expect(delays.at(-1), 'the first, held back').to.be.within(1, 100);
    expect(delays.at(-2), 'the others, claimed at once').to.equal(0);
  });
});

/**
 * A runner whose claims take an intent for each node woken since the previous claim (each
 * done at once, as a fake BMC's), on a clock the test sets.
 */
function pacedRunner(): { wake: (count: number) => void; claims: number[]; clock: { now: number }; runner: IntentRunner } {
  const claims: number[] = [];
  const clock = { now: 0 };
  let woken: string[] = [];
  let id = 0;
  const tasks = {
    async claimIntents() {
      const nodes = woken;
      woken = [];
      claims.push(nodes.length);
      return nodes.map((uuid) => {
        const node = { id: ++id, uuid, driverInfo: {} } as unknown as Node;
        const intent = {
          id, uuid: randomUUID(), nodeId: node.id, seq: 1, kind: 'quick', args: {}, attempts: 1, maxAttempts: 1, operation: null, batch: null,
          stepIndex: null, requester: null, notBefore: null, createdAt: new Date(), queuedBehind: false, claimToken: 'token',
        } as unknown as ClaimedIntent;
        return { intent, task: { node } as unknown as Task };
      });
    },
    async commitAll(outcomes: unknown[]) {
      return outcomes.map(() => ({}));
    },
  } as unknown as TaskManager;
  const quick: Action = { run: async () => ({ result: null }) };
  const runner = new IntentRunner(
    tasks, {} as DriverRegistry, { quick }, { emit: () => undefined } as unknown as Notifier, { notify: () => undefined } as unknown as PgNotifyBatcher,
    () => ({ conductorGroup: '', drivers: ['fake-hardware'] }), pino({ level: 'silent' }),
    { hostname: 'pacing-host', workers: 1000, retryInitialDelayMs: 10, retryMaxDelayMs: 10, clock: { now: () => clock.now } },
  );
  const wake = (count: number) => {
    for (let i = 0; i < count; i++) {
      const nodeUuid = randomUUID();
      woken.push(nodeUuid);
      runner.newWork({ nodeUuid, seq: 1 });
    }
  };
  return { wake, claims, clock, runner };
}

/** A few turns of the event loop: enough for a claim started at once to be made. */
async function turns(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
}

describe('intent runner: claims as its pacing says', () => {
  it('holds back the claim after a burst until the pacing\'s wait has passed on its clock', async () => {
    const p = pacedRunner();
    p.wake(20);
    await turns();
    expect(p.claims, 'the burst, claimed at once').to.deep.equal([20]);
    // Pacing is on, and the clock has not moved since that claim: the next waits ~100 ms.
    p.wake(1);
    await turns();
    expect(p.claims, 'a wake-up right after the burst, held back').to.deep.equal([20]);
    await p.runner.drain(1000);
  });

  it('claims at once when the clock says the wait is over', async () => {
    const p = pacedRunner();
    p.wake(20);
    await turns();
    expect(p.claims).to.deep.equal([20]);
    p.clock.now += 1000;
    p.wake(1);
    await turns();
    expect(p.claims, 'a wake-up a second after the burst').to.deep.equal([20, 1]);
    await p.runner.drain(1000);
  });
});
