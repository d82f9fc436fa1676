/**
 * Claim pacing: while claims find several intents each (work comes faster than one claim per
 * intent), a conductor lets work gather between claims, since each claim and outcome batch
 * costs about the same whatever its size; requests one after another, each claimed alone,
 * are claimed at once.
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import { pino } from 'pino';
import type { Action } from '../../conductor/actions/types.js';
import { IntentRunner } from '../../conductor/intent-runner.js';
import type { Task, TaskManager } from '../../conductor/task-manager.js';
import type { ClaimedIntent } from '../../db/intents.js';
import type { Node } from '../../db/nodes.js';
import type { DriverRegistry } from '../../drivers/registry.js';
import type { Notifier } from '../../common/notifier.js';
import type { PgNotifyBatcher } from '../../db/notify.js';

/**
 * A runner whose claims take an intent for each node woken since the previous claim (each
 * done at once, as a fake BMC's), with the start time and size of each claim.
 */
function pacedRunner(conductors = 1): { wake: () => void; claims: Array<{ at: number; size: number }>; runner: IntentRunner } {
  const claims: Array<{ at: number; size: number }> = [];
  let woken: string[] = [];
  let id = 0;
  const tasks = {
    async claimIntents() {
      const nodes = woken;
      woken = [];
      claims.push({ at: performance.now(), size: nodes.length });
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
    { hostname: 'pacing-host', workers: 1000, retryInitialDelayMs: 10, retryMaxDelayMs: 10, conductors: () => conductors },
  );
  const wake = () => {
    const nodeUuid = randomUUID();
    woken.push(nodeUuid);
    runner.newWork({ nodeUuid, seq: 1 });
  };
  return { wake, claims, runner };
}

/** One wake-up every `gapMs`, `count` of them: the delay from each to the claim that took it. */
async function trickle(p: ReturnType<typeof pacedRunner>, count: number, gapMs: number): Promise<number[]> {
  const delays: number[] = [];
  for (let i = 0; i < count; i++) {
    const before = p.claims.length;
    const at = performance.now();
    p.wake();
    await sleep(gapMs);
    expect(p.claims.length, `claims after wake-up ${i + 1}`).to.equal(before + 1);
    delays.push(p.claims[before].at - at);
  }
  return delays.sort((a, b) => a - b);
}

describe('intent runner: claim pacing', () => {
  it('claims a few times a second, not once per burst, under 1,000 wake-ups a second', async () => {
    const p = pacedRunner();
    // 5 new nodes every 5 ms for a second: each burst used to make a claim of its own (~200).
    const t0 = performance.now();
    while (performance.now() - t0 < 1000) {
      for (let i = 0; i < 5; i++) p.wake();
      await sleep(5);
    }
    await sleep(150);
    const intents = p.claims.reduce((n, c) => n + c.size, 0);
    expect(intents, 'every woken node claimed').to.be.above(500);
    // At ~48 a claim: ~20 claims; at most one claim per 100 ms: 10.
    expect(p.claims.filter((c) => c.size > 0).length, `claims for ${intents} wake-ups`).to.be.within(10, 60);
    await p.runner.drain(1000);
  });

  it('lets work gather longer with more conductors on the ring, each seeing a share of it', async () => {
    // One wake-up every 5 ms (at most 200 a second): 48 take 240 ms or more, past the 100 ms
    // bound of one conductor but within the 500 ms of five.
    const count = async (conductors: number) => {
      const p = pacedRunner(conductors);
      for (let i = 0; i < 8; i++) p.wake();
      const t0 = performance.now();
      while (performance.now() - t0 < 1500) {
        p.wake();
        await sleep(5);
      }
      await sleep(600);
      const claims = p.claims.filter((c) => c.size > 0);
      await p.runner.drain(1000);
      return { claims: claims.length, largest: Math.max(...claims.map((c) => c.size)) };
    };
    const one = await count(1);
    const five = await count(5);
    expect(one.claims, 'claims of one conductor').to.be.at.least(10);
    expect(five.claims, `claims of one of five (one conductor: ${one.claims})`).to.be.below(one.claims * 0.7);
    expect(five.largest, 'largest claim of one of five').to.be.above(one.largest);
  });

  it('stops pacing at light load once a wait gathers little, with several conductors', async () => {
    // 200 requests a second in all, one of three conductors seeing its share (67 a second):
    // a burst turns pacing on; the 300 ms wait that follows gathers about 20, which must not
    // keep it on (it did: each request then waited ~150 ms for its claim).
    const p = pacedRunner(3);
    for (let i = 0; i < 8; i++) p.wake();
    await sleep(5);
    const woken: number[] = [];
    for (let i = 0; i < 80; i++) {
      woken.push(performance.now());
      p.wake();
      await sleep(15);
    }
    await sleep(400);
    // Claims take the woken nodes in order: the n-th after the burst is in the claim whose
    // running total passes 8 + n.
    const delays: number[] = [];
    let taken = 0;
    for (const c of p.claims) {
      for (let k = 0; k < c.size; k++, taken++) if (taken >= 8) delays.push(c.at - woken[taken - 8]);
    }
    expect(delays, 'every wake-up claimed').to.have.length(80);
    delays.sort((a, b) => a - b);
    expect(delays[Math.floor(delays.length / 2)], `median wake-up → claim, ms (claims: ${p.claims.map((c) => c.size).join(' ')})`).to.be.below(5);
    await p.runner.drain(1000);
  });

  it('claims at once for requests one after another (125 a second)', async () => {
    const p = pacedRunner();
    const delays = await trickle(p, 60, 8);
    expect(delays[Math.floor(delays.length / 2)], 'median wake-up → claim, ms').to.be.below(5);
    await p.runner.drain(1000);
  });

  it('claims at once again once a burst has been taken', async () => {
    const p = pacedRunner();
    for (let i = 0; i < 20; i++) p.wake();
    await sleep(20);
    expect(p.claims.map((c) => c.size), 'the burst, claimed at once').to.deep.equal([20]);
    // The first wake-up after it may wait for more (at most 100 ms); the next ones do not.
    const delays = await trickle(p, 20, 120);
    expect(delays[Math.floor(delays.length / 2)], 'median wake-up → claim, ms').to.be.below(5);
    await p.runner.drain(1000);
  });
});
