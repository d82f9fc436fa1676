/**
 * Claim pacing: under a high rate of wake-ups a conductor lets work gather between claims
 * (each claim and outcome batch costs about the same whatever its size); at a low rate it
 * claims at once, so a lone request is not held back.
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import { pino } from 'pino';
import { IntentRunner } from '../../conductor/intent-runner.js';
import type { TaskManager } from '../../conductor/task-manager.js';
import type { DriverRegistry } from '../../drivers/registry.js';
import type { Notifier } from '../../common/notifier.js';
import type { PgNotifyBatcher } from '../../db/notify.js';
import { ringHashSql } from '../../common/hash-ring.js';

/** A runner whose claims find nothing, and the start time of each claim. */
function runnerCountingClaims(): { runner: IntentRunner; claimsAt: number[] } {
  const claimsAt: number[] = [];
  const tasks = {
    async claimIntents() {
      claimsAt.push(performance.now());
      return [];
    },
  } as unknown as TaskManager;
  const runner = new IntentRunner(
    tasks, {} as DriverRegistry, {}, { emit: () => undefined } as unknown as Notifier, { notify: () => undefined } as unknown as PgNotifyBatcher,
    () => ({ conductorGroup: '', drivers: ['fake-hardware'], hashSql: ringHashSql('n.uuid') }), pino({ level: 'silent' }),
    { hostname: 'pacing-host', workers: 100, retryInitialDelayMs: 10, retryMaxDelayMs: 10 },
  );
  return { runner, claimsAt };
}

describe('intent runner: claim pacing', () => {
  it('claims a few times a second, not once per burst, under 1,000 wake-ups a second', async () => {
    const { runner, claimsAt } = runnerCountingClaims();
    // 5 new nodes every 5 ms for a second: each burst used to make a claim of its own (200).
    const t0 = performance.now();
    while (performance.now() - t0 < 1000) {
      for (let i = 0; i < 5; i++) runner.newWork({ nodeUuid: randomUUID(), seq: 1 });
      await sleep(5);
    }
    await sleep(100);
    expect(claimsAt.length, 'claims for ~1,000 wake-ups').to.be.within(10, 60);
    await runner.drain(1000);
  });

  it('claims at once for a wake-up at a low rate', async () => {
    const { runner, claimsAt } = runnerCountingClaims();
    const delays: number[] = [];
    for (let i = 0; i < 20; i++) {
      const before = claimsAt.length;
      const at = performance.now();
      runner.newWork({ nodeUuid: randomUUID(), seq: 1 });
      await sleep(40);
      expect(claimsAt.length, `claims after wake-up ${i + 1}`).to.equal(before + 1);
      delays.push(claimsAt[before] - at);
    }
    delays.sort((a, b) => a - b);
    expect(delays[Math.floor(delays.length / 2)], 'median wake-up → claim, ms').to.be.below(5);
    await runner.drain(1000);
  });
});
