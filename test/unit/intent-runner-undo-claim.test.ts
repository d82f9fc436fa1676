/**
 * A claim that failed at COMMIT is undone once the database answers; if it did not commit,
 * the runner may claim and start the same intent again before the undo gets through. When
 * the undo then ends, the intent must still count as running here: the orphan sweep settles
 * a long-running intent of this conductor that the runner does not say it runs.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import { pino } from 'pino';
import { ClaimIncomplete, type ClaimedIntent } from '../../db/intent-claims.js';
import type { Node } from '../../db/nodes.js';
import type { Action } from '../../conductor/actions/types.js';
import { IntentRunner } from '../../conductor/intent-runner.js';
import type { Task, TaskManager } from '../../conductor/task-manager.js';
import type { DriverRegistry } from '../../drivers/registry.js';
import type { Notifier } from '../../common/notifier.js';
import type { PgNotifyBatcher } from '../../db/notify.js';

function deferred<T>(): { promise: Promise<T>; resolve: (v: T) => void } {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => { resolve = r; });
  return { promise, resolve };
}

describe('intent runner: undoing an incomplete claim', () => {
  it('still counts an intent claimed again meanwhile as running once the undo ends', async () => {
    const node = { id: 7, uuid: '11111111-2222-4333-8444-555555555555', driverInfo: {} } as unknown as Node;
    const intent = {
      id: 42, uuid: '66666666-7777-4888-8999-000000000000', nodeId: node.id, seq: 1, kind: 'slow', args: {}, attempts: 1, maxAttempts: 1,
      operation: null, batch: null, stepIndex: null, requester: null, notBefore: null, createdAt: new Date(), queuedBehind: false,
      claimToken: '2026-01-01 00:00:00.000001+00',
    } as unknown as ClaimedIntent;
    const task = { node } as unknown as Task;
    const undo = deferred<number>();
    const actionGate = deferred<void>();
    let claims = 0;
    const tasks = {
      async claimIntents() {
        claims++;
        if (claims === 1) throw new ClaimIncomplete([intent], new Error('COMMIT; - Connection terminated unexpectedly'));
        if (claims === 2) return [{ intent, task }];
        return [];
      },
      unclaim: () => undo.promise,
      async commitAll(outcomes: unknown[]) {
        return outcomes.map(() => node);
      },
    } as unknown as TaskManager;
    const slow: Action = {
      async run() {
        await actionGate.promise;
        return { result: null };
      },
    };
    const runner = new IntentRunner(
      tasks, {} as DriverRegistry, { slow }, { emit: () => undefined } as unknown as Notifier, { notify: () => undefined } as unknown as PgNotifyBatcher,
      () => ({ conductorGroup: '', drivers: ['fake-hardware'] }), pino({ level: 'silent' }),
      { hostname: 'undo-host', workers: 4, retryInitialDelayMs: 10, retryMaxDelayMs: 10 },
    );
    runner.newWork();
    await sleep(20);
    expect(claims, 'the first claim').to.equal(1);
    expect(runner.isRunning(intent.id), 'while its undo is pending').to.equal(true);
    // The database is back: a wake-up claims the intent again and starts it.
    runner.newWork();
    await sleep(20);
    expect(claims, 'the claim again').to.equal(2);
    // The undo gets through and finds nothing of its claim to put back.
    undo.resolve(0);
    await sleep(20);
    expect(runner.isRunning(intent.id), 'running again after the undo ended').to.equal(true);
    actionGate.resolve();
    await sleep(20);
    expect(runner.isRunning(intent.id), 'after its outcome is recorded').to.equal(false);
    expect(runner.running).to.equal(0);
  });
});
