import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import { backoffMs } from '../common/backoff.js';
import { lazyChild } from '../common/logger.js';
import { DriverError, GalvanicError, UnknownIntentKind, UnsupportedDriverExtension } from '../common/errors.js';
import type { Notifier } from '../common/notifier.js';
import { retryPolicyOf } from '../db/operations.js';
import { operationStopped } from './operation-progress.js';
import { INTENT_DONE_CHANNEL, finishIntent, skipRestOfBatch, type Intent, type IntentWake } from '../db/intents.js';
import { ClaimIncomplete, type ClaimedIntent, type ClaimScope } from '../db/intent-claims.js';
import { isDatabaseUnavailable } from '../db/transaction.js';
import type { PgNotifyBatcher } from '../db/notify.js';
import type { AccessOptions } from '../db/nodes.js';
import type { DriverRegistry } from '../drivers/registry.js';
import type { BootPort, DriverContext, NodeAccess } from '../drivers/interfaces.js';
import type { Action, ActionContext, ActionResult } from './actions/types.js';
import { nodePayload } from './node-payload.js';
import { LockLost, type Task, type TaskManager } from './task-manager.js';
import { SuccessRecorder } from './success-recorder.js';
import type { AgentServices } from './actions/types.js';
import type { ConfigdriveServices } from './configdrive.js';
import { failureChanges, settleFailure } from './intent-outcome.js';
import { ClaimPacing, type Clock } from './claim-pacing.js';
import type { ProvisionOptions } from '../drivers/provision-checks.js';
import { SCHEMA } from '../common/config-schema.js';

const DEFAULT_CONDUCTOR_OPTIONS: ProvisionOptions = {
  allow_provisioning_in_maintenance: SCHEMA.conductor.allow_provisioning_in_maintenance.default,
};

export interface RunnerOptions {
  hostname: string;
  workers: number;
  retryInitialDelayMs: number;
  retryMaxDelayMs: number;
  /** Runs before each claim pass (group operations admit their next nodes there). */
  beforeClaim?: () => Promise<void>;
  /** How node updates treat access (see AccessOptions.maintenanceBumpsAccess). */
  update?: AccessOptions;
  /** What actions use to talk to agents. */
  agent?: AgentServices;
  /** A node's ports as network boot sees them (the drivers' NodeAccess.ports). */
  bootPortsOf?: (nodeId: number) => Promise<BootPort[]>;
  /** What deploys use to build and keep config drives. */
  configdrive?: ConfigdriveServices;
  /** The `[conductor]` options actions read (their defaults when absent). */
  conductor?: ProvisionOptions;
  /** Conductors on the hash ring, this one included (1 when absent): claim pacing waits longer with more. */
  conductors?: () => number;
  /** The clock claim pacing reads (performance.now when absent). */
  clock?: Clock;
}

/** What the task's drivers may read of its node beyond driver_info, and write back. */
function nodeAccess(task: Task, registry: DriverRegistry, portsOf: RunnerOptions['bootPortsOf'], driver: () => DriverContext): NodeAccess {
  return {
    get node() {
      return task.node;
    },
    ports: () => (portsOf ? portsOf(task.node.id) : Promise.resolve([])),
    saveInternalInfo: async (patch) => void (await task.saveInternalInfo(patch)),
    // Ironic's conductor utils node_set_boot_device.
    async setBootDevice(device, persistent, bootMode) {
      const node = task.node;
      const m = registry.impl('management', node.managementInterface);
      if (!m) throw new UnsupportedDriverExtension(`Management interface ${node.managementInterface} is not enabled on this conductor.`);
      m.validate(node.driverInfo);
      let p = persistent;
      if (node.provisionState !== 'adopting') {
        const force = node.driverInfo.force_persistent_boot_device;
        if (force === 'Always' || force === true || force === 'true' || force === 'True') p = true;
        else if (force === 'Never') p = false;
      }
      await m.setBootDevice(driver(), device, p, bootMode ? { bootMode } : {});
    },
  };
}

function isTransient(err: unknown): boolean {
  return err instanceof DriverError && err.transient;
}

/**
 * Most intents claimed in one statement. Each batch starts its intents at once, and their
 * first writes queue in the pool ahead of the next claim: with batches of 200, 500 nodes a
 * conductor admitted together started over seconds. One statement for 1,000 costs ~20 ms.
 */
const CLAIM_BATCH = 1000;

/**
 * Most woken nodes a claim reads by name (TaskManager.claimIntents `only`); more make a claim
 * of the whole share, whose walk in due order then finds work at once.
 */
const CLAIM_ONLY_MAX = 256;

/** Delays between attempts to record an outcome when the database fails with a statement error. */
const COMMIT_RETRY_DELAYS_MS = [200, 1000, 3000];

/** Backoff between attempts to record an outcome while the database cannot be reached. */
const OUTAGE_RETRY_INITIAL_MS = 200;
const OUTAGE_RETRY_MAX_MS = 1000;

/**
 * Runs an outcome's transaction, again after a database error (a transaction either commits
 * whole or not at all, so running it again is safe). While the database cannot be reached
 * (restart, failover, outage) the outcome is kept and tried again for as long as it takes:
 * the work was done and only its record is missing. This holds at most one outcome per
 * running intent (workers_pool_size bounds them), and the node stays reserved meanwhile.
 * Whether the node is still this conductor's is decided by the commit itself: once the
 * survivors have taken the node over (this conductor's heartbeat too old), it throws
 * LockLost, which is final, and their rules apply.
 */
async function withCommitRetries<T>(log: Logger, commit: () => Promise<T>): Promise<T> {
  let outage = 0;
  for (let attempt = 0; ; ) {
    try {
      const out = await commit();
      if (outage > 0) log.info({ attempts: outage + attempt + 1 }, 'intent outcome recorded after the database came back');
      return out;
    } catch (err) {
      if (err instanceof LockLost) throw err;
      if (isDatabaseUnavailable(err)) {
        outage++;
        if (outage === 1) log.warn({ err: (err as Error).message }, 'the database is unavailable; the intent outcome is kept and recorded when it is back');
        await new Promise((r) => setTimeout(r, backoffMs(outage, OUTAGE_RETRY_INITIAL_MS, OUTAGE_RETRY_MAX_MS)));
        continue;
      }
      if (attempt >= COMMIT_RETRY_DELAYS_MS.length) throw err;
      log.warn({ err: (err as Error).message, attempt: attempt + 1 }, 'recording an intent outcome failed; trying again');
      await new Promise((r) => setTimeout(r, COMMIT_RETRY_DELAYS_MS[attempt]));
      attempt++;
    }
  }
}

/**
 * How a run ended: back in the queue (a step waiting for its agent), the same but already due
 * again (woken while it ran), or anything else (its outcome recorded, retried or lost).
 */
type IntentEnd = 'requeued' | 'due again' | 'ended';

/**
 * Claims runnable intents (one per node at a time, in sequence order) and runs them, up to
 * `workers` at once. The claim reserves the node; the outcome, the node's changes and the
 * release are written in one transaction after the BMC work, never across it.
 */
export class IntentRunner {
  private inflight = 0;
  /** Intents this runner is executing: a `running` intent of this host not in here is orphaned. */
  private readonly active = new Set<number>();
  /** Intents of an incomplete claim being undone (undoClaim); one may be running again meanwhile. */
  private readonly undoing = new Set<number>();
  private pumping = false;
  private again = false;
  /**
   * The nodes running here, by UUID: the `seq` of the intent running, and `more` once another
   * intent of the node is known to be queued (the claim said so, or a wake-up for a later
   * intent came while it ran), so its end claims again.
   */
  private readonly activeNodes = new Map<string, { seq: number; more: boolean }>();
  /** Nodes not running here woken since the last claim began; those it misses keep `backlog`. */
  private wokenBeforeClaim = new Set<string>();
  /**
   * Set while a claim statement runs: the nodes woken then, each with the newest `seq` announced
   * (Infinity: not known). The claim may take such a node with that intent or an older one.
   */
  private wokenDuringClaim?: Map<string, number>;
  /** This conductor's share may hold runnable intents no claim took yet: an end claims again. */
  private backlog = true;
  /** The next claim must look at the whole share, not only at the woken nodes (see schedule). */
  private wholeShare = true;
  private stopped = false;
  private readonly idle = new Set<() => void>();
  private readonly successes: SuccessRecorder;
  private readonly pacing: ClaimPacing;
  /** The look at a requeued intent when it falls due, by intent id, until a claim takes it again. */
  private readonly rechecks = new Map<number, NodeJS.Timeout>();

  constructor(
    private readonly tasks: TaskManager,
    private readonly registry: DriverRegistry,
    private readonly actions: Readonly<Record<string, Action | undefined>>,
    private readonly notifier: Notifier,
    /** Wakes API requests waiting on an intent, after its outcome is committed. */
    private readonly wake: PgNotifyBatcher,
    private readonly scope: () => ClaimScope | undefined,
    private readonly log: Logger,
    private readonly opts: RunnerOptions,
  ) {
    this.successes = new SuccessRecorder(tasks, opts.update ?? {});
    this.pacing = new ClaimPacing(opts.clock ?? performance, () => opts.conductors?.() ?? 1);
  }

  get running(): number {
    return this.inflight;
  }

  /**
   * A wake-up: the node (undefined = any node) has a new intent. For a node running here it is
   * remembered (its end claims again) unless it announces the running intent or an earlier
   * one; otherwise it claims, as pump does. A wake-up announces each intent once, and it
   * comes after the claim that may already have taken the intent: a claim for each would
   * find nothing as often as not.
   */
  newWork(wake?: IntentWake): void {
    this.pacing.countWake();
    if (wake === undefined) {
      this.backlog = true;
      this.pump();
      return;
    }
    const uuid = wake.nodeUuid;
    const seq = wake.seq ?? Infinity;
    const running = this.activeNodes.get(uuid);
    if (running) {
      if (seq > running.seq) running.more = true;
      return;
    }
    if (this.wokenDuringClaim) {
      // The claim under way settles it: claimed with this intent, or looked for again after it.
      this.wokenDuringClaim.set(uuid, Math.max(this.wokenDuringClaim.get(uuid) ?? 0, seq));
      return;
    }
    this.wokenBeforeClaim.add(uuid);
    // A pass already started looks at wokenBeforeClaim when its claim begins.
    if (!this.pumping) this.schedule();
  }

  /**
   * Looks for work at the end of this turn of the event loop: the calls of one turn (a batch
   * of outcomes committed together, a burst of notifications) make one claim, and calls made
   * while a claim is under way coalesce into one more pass.
   */
  pump(): void {
    this.wholeShare = true;
    this.schedule();
  }

  /** A pass (see pump) that may look only at the woken nodes, when nothing else asked for one. */
  private schedule(): void {
    if (this.stopped) return;
    if (this.pumping) {
      this.again = true;
      return;
    }
    this.pumping = true;
    const delay = this.pacing.nextClaimDelayMs();
    const turn = new Promise<void>((resolve) => {
      if (delay > 0) setTimeout(resolve, delay).unref();
      else setImmediate(resolve);
    });
    void turn.then(() => this.claimLoop()).finally(() => {
      this.pumping = false;
      if (this.again) {
        this.again = false;
        this.schedule();
      }
    });
  }

  private async claimLoop(): Promise<void> {
    let advanced = false;
    while (!this.stopped) {
      const scope = this.scope();
      const want = Math.min(this.opts.workers - this.inflight, CLAIM_BATCH);
      if (!scope || want <= 0) {
        // Every worker busy: the woken nodes are looked for when one is free.
        if (this.wokenBeforeClaim.size > 0) this.backlog = true;
        return;
      }
      // Once per pass, not per batch: what it admits changes only when work ends, and every
      // end pumps again. Per batch, it held the operation's row lock (which the conductors
      // take in turn) five times over while 1,000 admitted nodes waited to be claimed.
      if (this.opts.beforeClaim && !advanced) {
        advanced = true;
        const t0 = Date.now();
        try {
          await this.opts.beforeClaim();
          this.log.debug({ ms: Date.now() - t0 }, 'group operations advanced');
        } catch (err) {
          this.log.error({ err }, 'advancing group operations failed');
        }
      }
      const before = this.wokenBeforeClaim;
      // Only wake-ups asked for this pass, and they named their nodes: the claim reads those
      // nodes' queues alone. Anything else (an end with work behind it, a timer, the poll, a
      // wake-up for any node) looks at the whole share.
      const only = !this.wholeShare && !this.backlog && before.size > 0 && before.size <= CLAIM_ONLY_MAX ? [...before] : undefined;
      if (!only) this.wholeShare = false;
      const during = new Map<string, number>();
      this.wokenBeforeClaim = new Set();
      this.wokenDuringClaim = during;
      let claimed: Array<{ intent: ClaimedIntent; task: Task }>;
      try {
        const t0 = Date.now();
        this.pacing.claimStarted();
        claimed = await this.tasks.claimIntents(want, scope, only);
        this.log.debug({ ms: Date.now() - t0, want, claimed: claimed.length, only: only?.length }, 'claimed intents');
        this.pacing.claimFound(claimed.length, want);
      } catch (err) {
        if (err instanceof ClaimIncomplete) this.undoClaim(err.claimed);
        this.wholeShare = true;
        if (isDatabaseUnavailable(err)) this.log.warn({ err: (err as Error).message }, 'claiming intents failed: the database is unavailable');
        else this.log.error({ err }, 'claiming intents failed');
        // The next wake-up (LISTEN reconnect, poll) tries again.
        this.backlog = true;
        for (const uuid of during.keys()) this.wokenBeforeClaim.add(uuid);
        return;
      } finally {
        this.wokenDuringClaim = undefined;
      }
      for (const { intent, task } of claimed) {
        clearTimeout(this.rechecks.get(intent.id));
        this.rechecks.delete(intent.id);
        const uuid = task.node.uuid;
        // Woken during the claim for a later intent: it may have come after the claim's snapshot.
        const entry = { seq: intent.seq, more: intent.queuedBehind || (during.get(uuid) ?? 0) > intent.seq };
        during.delete(uuid);
        before.delete(uuid);
        this.wokenBeforeClaim.delete(uuid);
        this.activeNodes.set(uuid, entry);
        this.inflight++;
        this.active.add(intent.id);
        const ended = (end: IntentEnd) => {
          this.active.delete(intent.id);
          if (this.activeNodes.get(uuid) === entry) this.activeNodes.delete(uuid);
          this.inflight--;
          if (this.inflight === 0) for (const resolve of [...this.idle]) resolve();
          // Claim again only where there is work to find: the node's next intent, the intent
          // itself when it went back to the queue woken meanwhile, more of the share than the
          // last claim could take, or a group operation's next nodes (admitted in the claim
          // pass) once this node's round has ended. A step back in the queue to wait for its
          // agent ends no round: in a deploy of 1,000 nodes through the agent, 2,306 of 2,941
          // claims found nothing, most of them after such ends or after wake-ups for a step
          // already running. Anything else arrives with a wake-up.
          if (this.backlog || (intent.operation !== null && end === 'ended')) this.pump();
          else if (entry.more || end === 'due again') {
            // The node is known to have work: a claim of it alone.
            this.wokenBeforeClaim.add(uuid);
            this.schedule();
          }
        };
        void this.execute(intent, task).then(ended, () => ended('ended'));
      }
      // Woken during the claim and not taken: their intents may have come after its snapshot.
      for (const uuid of during.keys()) this.wokenBeforeClaim.add(uuid);
      if (claimed.length < want) {
        // A woken node this claim missed is reserved (another task holds it), held or not due:
        // look again at the next end rather than wait for the poll.
        this.backlog = before.size > 0;
        if (during.size > 0) this.again = true;
        return;
      }
      this.backlog = true;
    }
  }

  /**
   * Puts back intents whose claim may have committed without this runner starting them, at
   * once and again until the database answers: left alone they would hold their nodes until
   * the orphan sweep settled them as if this conductor had died. Counted as running meanwhile,
   * so the sweep leaves them to this. A claim that did not commit leaves them claimable, and a
   * later claim here may run them before the undo gets through: the undo leaves that claim alone.
   */
  private undoClaim(claimed: readonly ClaimedIntent[]): void {
    for (const i of claimed) this.undoing.add(i.id);
    void (async () => {
      for (let attempt = 1; ; attempt++) {
        try {
          const n = await this.tasks.unclaim(claimed);
          this.log.warn({ intents: claimed.length, requeued: n }, 'claim did not complete; its intents are back in the queue');
          break;
        } catch (err) {
          if (!isDatabaseUnavailable(err) && attempt >= COMMIT_RETRY_DELAYS_MS.length) {
            this.log.error({ err }, 'undoing an incomplete claim failed; its intents are left to the orphan sweep');
            break;
          }
          await new Promise((r) => setTimeout(r, backoffMs(attempt, OUTAGE_RETRY_INITIAL_MS, OUTAGE_RETRY_MAX_MS)));
        }
      }
      for (const i of claimed) this.undoing.delete(i.id);
      this.pump();
    })();
  }

  /** Whether this runner is executing the intent right now. */
  isRunning(intentId: number): boolean {
    return this.active.has(intentId) || this.undoing.has(intentId);
  }

  /** Stops claiming and waits (bounded) for running intents to end. */
  async drain(timeoutMs: number): Promise<boolean> {
    this.stopped = true;
    if (this.inflight === 0) return true;
    return new Promise<boolean>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.idle.delete(done);
        resolve(true);
      };
      const timer = setTimeout(() => {
        this.idle.delete(done);
        resolve(false);
      }, timeoutMs);
      this.idle.add(done);
    });
  }

  /** Runs the intent and records its outcome. */
  private async execute(intent: Intent, task: Task): Promise<IntentEnd> {
    const log = lazyChild(this.log, { intent: intent.uuid, node: task.node.uuid, kind: intent.kind, attempt: intent.attempts });
    const host = this.opts.hostname;
    const node = task.node;
    const action = this.actions[intent.kind];
    const ctx: ActionContext = {
      task, intent, registry: this.registry, log, agent: this.opts.agent, configdrive: this.opts.configdrive,
      conductor: this.opts.conductor ?? DEFAULT_CONDUCTOR_OPTIONS,
      // The node as the task last wrote it: long actions record progress (the step running now).
      get node() {
        return task.node;
      },
      driver: { nodeUuid: node.uuid, driverInfo: node.driverInfo, log, trace: `${intent.uuid}#${intent.attempts}`, attempt: intent.attempts },
    };
    ctx.driver.access = nodeAccess(task, this.registry, this.opts.bootPortsOf, () => ctx.driver);
    // How long it waited once due: a wake-up that reaches no claim shows here.
    log.debug({ dueMs: Date.now() - (intent.notBefore ?? intent.createdAt).getTime() }, 'intent started');
    const note = action?.notification;
    try {
      if (note) this.notifier.emit(`${note.prefix}.start`, 'info', note.payloadName, nodePayload(node, note.extra(ctx)));
      let res: ActionResult | undefined;
      let failure: unknown;
      try {
        if (!action) throw new UnknownIntentKind(`Unknown intent kind ${intent.kind}`);
        res = await action.run(ctx);
      } catch (err) {
        failure = err;
      }
      // The BMC work is done: its outcome is recorded as such. A database error while recording
      // is retried, never mistaken for a failure of the action.
      if (res !== undefined) {
        const done = res;
        const history = done.history && { nodeId: node.id, conductor: host, user: intent.requester, operation: intent.operation, ...done.history };
        const { node: updated, dueAgain } = await withCommitRetries(log, () => this.successes.record({
          task, intent, changes: done.changes ?? {}, result: done.result, history, write: done.write, requeueAt: done.requeueAt,
        }));
        if (done.requeueAt) {
          if (dueAgain) return 'due again';
          // Looked at again when it falls due, if no event wakes it before (its next claim
          // drops this: 1,000 steps waiting for their agents left 3,000 claims for nothing).
          clearTimeout(this.rechecks.get(intent.id));
          this.rechecks.set(intent.id, setTimeout(() => {
            this.rechecks.delete(intent.id);
            this.pump();
          }, Math.max(0, done.requeueAt.getTime() - Date.now()) + 5).unref());
          return 'requeued';
        }
        this.wake.notify(INTENT_DONE_CHANNEL, intent.uuid);
        if (note) this.notifier.emit(`${note.prefix}.end`, 'info', note.payloadName, nodePayload(updated, note.extra(ctx)));
      } else {
        const err = failure;
        const error = err as Error;
        const retryable = isTransient(err) && intent.attempts < intent.maxAttempts;
        let retry = retryable;
        let retryDelay = 0;
        const changes = failureChanges(action, ctx, error, !retry);
        const updated = await withCommitRetries(log, () => task.commit(changes, async (trx, after) => {
          retry = retryable;
          // An intent of a group operation retries on the operation's policy, unless it was stopped.
          const policy = retry && intent.operation ? await retryPolicyOf(trx, intent.operation) : undefined;
          if (policy && operationStopped(policy)) {
            retry = false;
            await finishIntent(trx, intent.id, { state: 'cancelled', error: `${error.message} (not retried: operation ${intent.operation} was stopped)` });
          } else if (retry) {
            retryDelay = backoffMs(intent.attempts, policy?.initialDelayMs ?? this.opts.retryInitialDelayMs, policy?.maxDelayMs ?? this.opts.retryMaxDelayMs);
            await finishIntent(trx, intent.id, { state: 'queued', error: error.message, notBefore: new Date(Date.now() + retryDelay) });
          } else {
            // What failed, not what HTTP makes of it: the API maps the code (api/error-handler.ts).
            const failed = { error_code: err instanceof GalvanicError ? err.code : 'INTERNAL' };
            await finishIntent(trx, intent.id, { state: 'failed', error: error.message, result: failed });
            if (intent.batch !== null && intent.stepIndex !== null) await skipRestOfBatch(trx, intent.batch, intent.stepIndex);
          }
          await settleFailure(trx, { intent, after, error, conductor: host, retry });
        }));
        if (!retry) this.wake.notify(INTENT_DONE_CHANNEL, intent.uuid);
        // Look again when the retry falls due rather than at the next poll.
        else setTimeout(() => this.pump(), retryDelay + 5).unref();
        if (note && !retry) this.notifier.emit(`${note.prefix}.error`, 'error', note.payloadName, nodePayload(updated, note.extra(ctx)));
        log.warn({ err: error.message, retry }, 'intent failed');
      }
    } catch (err) {
      if (err instanceof LockLost) {
        log.warn({ err: err.message }, 'intent outcome dropped: the node is no longer this task\'s');
        return 'ended';
      }
      // Recording the outcome failed for good (database away?). The intent stays `running`
      // under this conductor and its node stays reserved, so nothing else acts on a node whose
      // state is unknown; the orphan sweep (or recovery at restart, or the survivors if this
      // conductor dies) settles it.
      log.error({ err }, 'recording an intent outcome failed; the intent is left to recovery');
    }
    return 'ended';
  }
}
