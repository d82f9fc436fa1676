/**
 * Which claims the runner makes: a step that goes back to the queue to wait for its agent
 * claims nothing when it ends, unless it was woken while it ran (then its node alone is
 * claimed, at once); wake-ups for nodes claim those nodes by name; a wake-up for any node, or
 * more woken nodes than a claim reads by name, claims the whole share.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import type { Knex } from 'knex';
import { pino } from 'pino';
import type { Action } from '../../conductor/actions/types.js';
import { IntentRunner } from '../../conductor/intent-runner.js';
import type { Task, TaskManager } from '../../conductor/task-manager.js';
import type { ClaimedIntent } from '../../db/intent-claims.js';
import type { Node } from '../../db/nodes.js';
import type { DriverRegistry } from '../../drivers/registry.js';
import type { Notifier } from '../../common/notifier.js';
import type { PgNotifyBatcher } from '../../db/notify.js';

interface Queued {
  uuid: string;
  kind: string;
  operation: string | null;
}

/**
 * A runner over a fake queue: each claim takes the queued intents (of the named nodes, when
 * the claim names them) and records what it named; requeued intents are reported due at once
 * when their node is in `wokenWhileRunning`.
 */
function fakeRunner(actions: Record<string, Action>) {
  const queue: Queued[] = [];
  const claims: Array<{ only?: string[] }> = [];
  const wokenWhileRunning = new Set<string>();
  const nodeIds = new Map<string, number>();
  const uuidOfIntent = new Map<number, string>();
  let id = 0;
  const nodeOf = (uuid: string) => {
    if (!nodeIds.has(uuid)) nodeIds.set(uuid, nodeIds.size + 1);
    return { id: nodeIds.get(uuid), uuid, driverInfo: {}, provisionState: 'available' } as unknown as Node;
  };
  const tasks = {
    async claimIntents(_limit: number, _scope: unknown, only?: readonly string[]) {
      claims.push({ only: only && [...only] });
      const taken = queue.filter((q) => !only || only.includes(q.uuid));
      for (const q of taken) queue.splice(queue.indexOf(q), 1);
      return taken.map((q) => {
        const node = nodeOf(q.uuid);
        const intent = {
          id: ++id, uuid: randomUUID(), nodeId: node.id, seq: 1, kind: q.kind, args: {}, attempts: 1, maxAttempts: 1, operation: q.operation, batch: null,
          stepIndex: null, requester: null, notBefore: null, createdAt: new Date(), queuedBehind: false, claimToken: 'token', result: null,
        } as unknown as ClaimedIntent;
        uuidOfIntent.set(intent.id, q.uuid);
        return { intent, task: { node } as unknown as Task };
      });
    },
    async commitAll(outcomes: Array<{ task: Task }>, more: (trx: Knex.Transaction, held: Array<{ index: number; node: Node }>) => Promise<void>) {
      // The requeue's statement answers which of its intents are due at once.
      const trx = {
        raw(sql: string, bindings: unknown[]) {
          const items = JSON.parse(bindings[0] as string) as Array<{ id: number }>;
          const answer = Promise.resolve(sql.includes('RETURNING intents.id')
            ? { rows: items.map((i) => ({ id: i.id, due: wokenWhileRunning.has(uuidOfIntent.get(i.id)!) })) }
            : { rows: [] });
          // A statement's options (a prepared statement's name) change nothing here.
          return Object.assign(answer, { options: () => answer });
        },
      } as unknown as Knex.Transaction;
      await more(trx, outcomes.map((o, index) => ({ index, node: o.task.node })));
      return outcomes.map((o) => o.task.node);
    },
  } as unknown as TaskManager;
  const runner = new IntentRunner(
    tasks, {} as DriverRegistry, actions, { emit: () => undefined } as unknown as Notifier, { notify: () => undefined } as unknown as PgNotifyBatcher,
    () => ({ conductorGroup: '', drivers: ['fake-hardware'] }), pino({ level: 'silent' }),
    { hostname: 'claims-host', workers: 1000, retryInitialDelayMs: 10, retryMaxDelayMs: 10, conductors: () => 1 },
  );
  return { runner, queue, claims, wokenWhileRunning };
}

/** An action that waits (as a step whose node waits for its agent): back to the queue for a minute. */
const waits: Action = { run: async () => ({ result: { waiting: 'wait call-back' }, requeueAt: new Date(Date.now() + 60_000) }) };
const quick: Action = { run: async () => ({ result: null }) };

/**
 * Waits until `n` claims were made (a loaded machine may take a while), then a little longer,
 * so that a claim too many is seen too.
 */
async function claimsAtLeast(claims: readonly unknown[], n: number): Promise<void> {
  for (const deadline = Date.now() + 5000; claims.length < n && Date.now() < deadline;) await sleep(5);
  await sleep(50);
}

describe('intent runner: which claims it makes', () => {
  it('claims nothing when a step goes back to the queue to wait, and its node alone, at once, when it was woken meanwhile', async () => {
    const f = fakeRunner({ waits, quick });
    const quiet = randomUUID();
    const woken = randomUUID();
    f.queue.push({ uuid: quiet, kind: 'waits', operation: 'op-1' }, { uuid: woken, kind: 'waits', operation: 'op-1' });
    f.wokenWhileRunning.add(woken);
    f.runner.newWork();
    await claimsAtLeast(f.claims, 2);
    // The first claim took both; the woken one's requeue made a claim of that node alone (which
    // found it again: the fake queue holds nothing more). The quiet one's end claimed nothing.
    expect(f.claims, 'claims').to.deep.equal([{ only: undefined }, { only: [woken] }]);
    await f.runner.drain(1000);
  });

  it('claims the woken nodes by name once the share is known to be taken', async () => {
    const f = fakeRunner({ waits, quick });
    f.runner.newWork();
    await sleep(20);
    const a = randomUUID();
    const b = randomUUID();
    f.queue.push({ uuid: a, kind: 'quick', operation: null }, { uuid: b, kind: 'quick', operation: null });
    f.runner.newWork({ nodeUuid: a, seq: 1 });
    f.runner.newWork({ nodeUuid: b, seq: 1 });
    await claimsAtLeast(f.claims, 2);
    expect(f.claims.slice(1), 'the claim after the wake-ups').to.deep.equal([{ only: [a, b] }]);
    await f.runner.drain(1000);
  });

  it('claims the whole share after a wake-up for any node, or for more nodes than a claim names', async () => {
    const f = fakeRunner({ waits, quick });
    f.runner.newWork();
    await sleep(20);
    f.runner.newWork();
    await claimsAtLeast(f.claims, 2);
    expect(f.claims, 'a wake-up for any node').to.deep.equal([{ only: undefined }, { only: undefined }]);
    for (let i = 0; i < 300; i++) f.runner.newWork({ nodeUuid: randomUUID(), seq: 1 });
    await claimsAtLeast(f.claims, 3);
    expect(f.claims.slice(2), '300 woken nodes').to.deep.equal([{ only: undefined }]);
    await f.runner.drain(1000);
  });
});
