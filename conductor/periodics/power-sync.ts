/**
 * Keeps `power_state` true to the hardware, as Ironic's _sync_power_states and
 * do_sync_power_state do, as a fleet loop like the sensor task (DESIGN.md "Sensor data"):
 *  - one query reads this conductor's candidates with what the sync needs of them (Ironic's
 *    filters: not in maintenance, not in SYNC_EXCLUDED_STATES, not reserved, no power change
 *    or intent under way, no firmware update);
 *  - nodes whose power interface reads on the event loop (redfish) are all read at once, up to
 *    `sync_power_state_max_concurrency` and `per_bmc_concurrency` per BMC address; the others
 *    (ipmi) take `sync_power_state_workers` lanes, as Ironic's worker threads;
 *  - each read has its own `sync_power_state_node_timeout`: a hung BMC delays only its node;
 *  - a node whose state disagrees is locked, re-read and checked again (Ironic's upgrade_lock
 *    and "repeat all checks"), in batches: one statement takes the locks of a batch, one
 *    transaction writes its corrections, each node still under its fence (commitTasks); every
 *    lock taken is released in `finally`.
 * On a mismatch the BMC's state is recorded, or with force_power_state_during_sync the
 * database's state is pushed back to the BMC. Failures count as Ironic's power_state_sync_count:
 * the sync after power_state_sync_max_retries failed ones in a row puts the node in maintenance
 * with fault "power failure". Reads wait for the BMC's budget behind operators' intents.
 */
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import { lazyChild } from '../../common/logger.js';
import type { Config } from '../../common/config.js';
import { GalvanicError } from '../../common/errors.js';
import type { Notifier } from '../../common/notifier.js';
import { Batcher, type BatchOutcome } from '../../common/batcher.js';
import { recordHistories } from '../../db/node-history.js';
import { nodesForPowerSync, type Node, type NodeChanges, type PowerSyncNode } from '../../db/nodes.js';
import type { DriverContext, PowerInterface, PowerStateValue, PowerTarget } from '../../drivers/interfaces.js';
import type { DriverRegistry } from '../../drivers/registry.js';
import { nodePayload } from '../node-payload.js';
import { nodePowerAction } from '../node-power.js';
import { logIterationEnd, PendingOptions, type PeriodicTask } from '../periodic.js';
import type { Task, TaskManager } from '../task-manager.js';
import { runKeyedBounded } from '../sensors/keyed-limiter.js';
import { bmcAddressOf } from './sensor-data.js';
import { SYNC_EXCLUDED_STATES } from '../../common/states.js';

export interface PowerSyncDeps {
  db: Knex;
  tasks: TaskManager;
  registry: DriverRegistry;
  notifier: Notifier;
  log: Logger;
  hostname: string;
  config: Readonly<Config>;
  owns(nodeUuid: string): boolean;
}

/** The failure kind of a read that outlived sync_power_state_node_timeout. */
export const NODE_TIMEOUT = 'NODE_TIMEOUT';

/** One pass, as logged and kept as `lastPass`. */
export interface PowerSyncPass {
  nodes: number;
  async: number;
  sync: number;
  ok: number;
  failed: number;
  timedOut: number;
  /** States recorded from the BMC. */
  corrected: number;
  /** States pushed back to the BMC (force_power_state_during_sync). */
  forced: number;
  /** Nodes put in maintenance: max retries exceeded. */
  gaveUp: number;
  /** Mismatches left alone once locked and re-read (changed meanwhile), or not lockable. */
  skipped: number;
  /** Nodes the pass ends in error: failed reads, given up after mismatches, forced changes that failed. */
  errors: number;
  durationMs: number;
  failures: Record<string, number>;
}

/** Totals since start (reads counted as they end), and the staleness of this conductor's power states. */
export interface PowerSyncStats {
  passes: number;
  overruns: number;
  ok: number;
  timedOut: number;
  corrected: number;
  forced: number;
  gaveUp: number;
  failures: Record<string, number>;
  lastPass: PowerSyncPass | null;
  /**
   * Seconds since the last successful power read of each node of the last pass, as quantiles
   * (a node never read counts from when the task started).
   */
  readAges(now?: number): { nodes: number; p50: number; p99: number; max: number };
}

/** The [conductor] options of the sync a running conductor takes on when its configuration is reloaded (SIGHUP). */
export const MUTABLE_POWER_SYNC_OPTIONS = [
  'sync_power_state_async', 'sync_power_state_workers', 'sync_power_state_max_concurrency', 'sync_power_state_node_timeout',
  'force_power_state_during_sync', 'power_state_sync_max_retries',
] as const;

type ConductorOptions = Config['conductor'];

export interface PowerSyncTask extends PeriodicTask {
  stats: PowerSyncStats;
  /** Takes on the mutable options of `next` from the next pass on; returns the names of those that changed. */
  reconfigure(next: Readonly<ConductorOptions>): Array<(typeof MUTABLE_POWER_SYNC_OPTIONS)[number]>;
}

class ReadTimedOut extends Error {}

/** A driver that answered ERROR: a failed read, as Ironic's PowerStateFailure. */
class PowerStateFailure extends Error {}

/** What a read found that needs the node's lock. */
type Finding =
  | { kind: 'mismatch'; node: PowerSyncNode; power: PowerInterface; actual: PowerStateValue; count: number }
  | { kind: 'unreadable'; node: PowerSyncNode; error: Error; count: number };

interface Job {
  node: PowerSyncNode;
  power: PowerInterface;
  read: (ctx: DriverContext) => Promise<PowerStateValue>;
}

/** Corrections locked and written together. */
const BATCH = 200;

function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)];
}

/** Ironic's handle_sync_power_state_max_retries_exceeded message; `actual` null prints as None. */
function maxRetriesMessage(node: Node, actual: string | null, error?: Error): string {
  const a = actual ?? 'None';
  const msg = `During sync_power_state, max retries exceeded for node ${node.uuid}, node state ${a} does not match expected state '${node.powerState ?? 'None'}'. Updating DB state to '${a}' Switching node to maintenance mode.`;
  return error ? `${msg} Error: ${error.message}` : msg;
}

export function powerSyncTask(deps: PowerSyncDeps): PowerSyncTask {
  let c: Readonly<ConductorOptions> = deps.config.conductor;
  const pending = new PendingOptions<ConductorOptions, (typeof MUTABLE_POWER_SYNC_OPTIONS)[number]>(MUTABLE_POWER_SYNC_OPTIONS);
  const log = deps.log.child({ task: 'sync_power_states' });
  let timeoutMs = c.sync_power_state_node_timeout * 1000;
  const startedAt = Date.now();
  /** Ironic's power_state_sync_count: failed syncs in a row per node; absent at 0. */
  const failures = new Map<string, number>();
  /** How long each node's read took last time: the slowest start first, as in the sensor task. */
  const lastReadMs = new Map<string, number>();
  /** When each node's power state was last read successfully. */
  const lastOkAt = new Map<string, number>();
  /** Nodes of the last pass, for the staleness quantiles. */
  let current: readonly string[] = [];
  /** Locks whose release failed (the database was away): released at the next pass. */
  const unreleased = new Set<Task>();

  const stats: PowerSyncStats = {
    passes: 0, overruns: 0, ok: 0, timedOut: 0, corrected: 0, forced: 0, gaveUp: 0, failures: {}, lastPass: null,
    readAges(now = Date.now()) {
      const ages = current.map((uuid) => (now - (lastOkAt.get(uuid) ?? startedAt)) / 1000).sort((a, b) => a - b);
      return { nodes: ages.length, p50: quantile(ages, 0.5), p99: quantile(ages, 0.99), max: ages.length ? ages[ages.length - 1] : 0 };
    },
  };

  async function release(task: Task): Promise<void> {
    try {
      await task.release();
      unreleased.delete(task);
    } catch (err) {
      unreleased.add(task);
      log.error({ err, node: task.node.uuid }, 'releasing a node after the power state sync failed; retried at the next pass');
    }
  }

  /** Reads one node; a finding that needs the lock goes to `settle`. Never throws. */
  async function readOne(job: Job, pass: PowerSyncPass, inFlight: Set<AbortController>, shutdown: AbortSignal, settle: (f: Finding) => void): Promise<void> {
    if (shutdown.aborted) return;
    const { node, power } = job;
    const nodeLog = lazyChild(log, { node: node.uuid });
    const fail = (error: Error, kind: string) => {
      const count = (failures.get(node.uuid) ?? 0) + 1;
      failures.set(node.uuid, count);
      pass.failed++;
      pass.errors++;
      pass.failures[kind] = (pass.failures[kind] ?? 0) + 1;
      if (count > c.power_state_sync_max_retries) settle({ kind: 'unreadable', node, error, count });
      else nodeLog.warn({ attempt: count, retries: c.power_state_sync_max_retries, err: error.message }, 'During sync_power_state, could not get the power state');
    };
    try {
      power.validate(node.driverInfo);
    } catch (err) {
      // Ironic: a node with no known state whose driver_info does not validate is not synced.
      if (node.powerState === null) return;
      return fail(err as Error, err instanceof GalvanicError ? err.code : 'UNEXPECTED');
    }
    const controller = new AbortController();
    inFlight.add(controller);
    let timer: NodeJS.Timeout | undefined;
    // Rejects at the deadline even if the driver ignored the signal, so the slot is freed.
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const err = new ReadTimedOut(`power state read of node ${node.uuid} exceeded ${c.sync_power_state_node_timeout} s`);
        controller.abort(err);
        reject(err);
      }, timeoutMs);
    });
    const ctx: DriverContext = { nodeUuid: node.uuid, driverInfo: node.driverInfo, log: nodeLog, signal: controller.signal, trace: 'power state sync', priority: 'periodic' };
    const readStarted = Date.now();
    let actual: PowerStateValue;
    try {
      actual = await Promise.race([job.read(ctx), deadline]);
      if (actual === 'error') throw new PowerStateFailure('Power driver returned ERROR state while trying to sync power state.');
    } catch (err) {
      if (shutdown.aborted) return;
      const kind = err instanceof ReadTimedOut ? NODE_TIMEOUT : err instanceof GalvanicError ? err.code : err instanceof PowerStateFailure ? 'POWER_STATE_ERROR' : 'UNEXPECTED';
      if (kind === NODE_TIMEOUT) pass.timedOut++;
      return fail(err as Error, kind);
    } finally {
      clearTimeout(timer);
      inFlight.delete(controller);
      lastReadMs.set(node.uuid, Date.now() - readStarted);
    }
    pass.ok++;
    stats.ok++;
    lastOkAt.set(node.uuid, Date.now());
    if (actual === node.powerState) {
      failures.delete(node.uuid);
      return;
    }
    settle({ kind: 'mismatch', node, power, actual, count: (failures.get(node.uuid) ?? 0) + 1 });
  }

  type Action =
    | { do: 'none'; reset: boolean }
    | { do: 'record' }
    | { do: 'give-up'; actual: string | null; error?: Error }
    | { do: 'force'; target: PowerTarget };

  /** Ironic's checks, repeated on the node as re-read under its exclusive lock. */
  function decide(f: Finding, node: Node): Action {
    if (SYNC_EXCLUDED_STATES.includes(node.provisionState) || node.targetPowerState !== null) return { do: 'none', reset: f.kind === 'mismatch' };
    if (f.kind === 'unreadable') return { do: 'give-up', actual: null, error: f.error };
    // Changed meanwhile to what the BMC says, or put in maintenance: nothing to do.
    if (node.powerState === f.actual || node.maintenance) return { do: 'none', reset: true };
    if (node.powerState === null) return { do: 'record' };
    if (f.count > c.power_state_sync_max_retries) return { do: 'give-up', actual: f.actual };
    // A node that must never be powered off is not forced either way (Ironic's do_sync_power_state).
    if (c.force_power_state_during_sync && !node.disablePowerOff) return { do: 'force', target: node.powerState as PowerTarget };
    return { do: 'record' };
  }

  /** Pushes the database's state back to the BMC, under the node's lock; releases it. */
  async function force(f: Extract<Finding, { kind: 'mismatch' }>, task: Task, target: PowerTarget, pass: PowerSyncPass, shutdown: AbortSignal): Promise<void> {
    const nodeLog = lazyChild(log, { node: task.node.uuid });
    try {
      nodeLog.warn({ actual: f.actual, state: target }, 'During sync_power_state, the node state does not match the expected state: changing the hardware state');
      const driver: DriverContext = { nodeUuid: task.node.uuid, driverInfo: task.node.driverInfo, log: nodeLog, signal: shutdown, trace: 'power state sync', priority: 'periodic' };
      await nodePowerAction({ task, power: f.power, driver }, target);
      pass.forced++;
      stats.forced++;
    } catch (err) {
      pass.errors++;
      nodeLog.error({ err: (err as Error).message, attempt: f.count, retries: c.power_state_sync_max_retries }, 'During sync_power_state, changing the hardware power state failed');
    } finally {
      await release(task);
    }
  }

  /**
   * Locks a batch of findings' nodes in one statement, decides on each as re-read, writes the
   * records and give-ups in one transaction, and hands forced changes on; every lock it took
   * and did not hand on is released, whatever fails.
   */
  async function settleBatch(batch: Finding[], pass: PowerSyncPass, forces: Array<Promise<void>>, shutdown: AbortSignal): Promise<Array<BatchOutcome<void>>> {
    const tasks = await deps.tasks.acquireIdle(batch.map((f) => f.node.id), 'power state sync');
    const byId = new Map(tasks.map((t) => [t.node.id, t]));
    const handedOn = new Set<Task>();
    try {
      const writes: Array<{ f: Finding; task: Task; changes: NodeChanges; from: string | null; event: string; severity: 'WARNING' | 'ERROR' }> = [];
      const toForce: Array<{ f: Extract<Finding, { kind: 'mismatch' }>; task: Task; target: PowerTarget }> = [];
      for (const f of batch) {
        const task = byId.get(f.node.id);
        // Taken meanwhile (an intent, an operator): Ironic's NodeLocked, skipped; the count stays.
        if (!task) {
          pass.skipped++;
          continue;
        }
        const node = task.node;
        const action = decide(f, node);
        switch (action.do) {
          case 'none':
            pass.skipped++;
            if (action.reset) failures.delete(node.uuid);
            break;
          case 'record': {
            const actual = (f as Extract<Finding, { kind: 'mismatch' }>).actual;
            if (node.powerState === null) failures.delete(node.uuid);
            else failures.set(node.uuid, f.count);
            writes.push({ f, task, changes: { powerState: actual }, from: node.powerState, severity: 'WARNING',
              event: `Power state of node ${node.uuid} corrected from ${node.powerState ?? 'None'} to ${actual} (read from the BMC).` });
            break;
          }
          case 'give-up': {
            const message = maxRetriesMessage(node, action.actual, action.error);
            const changes: NodeChanges = { powerState: action.actual, lastError: message };
            // Only a node not already in maintenance gets it, and the fault (an operator's maintenance stays theirs).
            if (!node.maintenance) Object.assign(changes, { maintenance: true, fault: 'power failure', maintenanceReason: message });
            writes.push({ f, task, changes, from: node.powerState, severity: 'ERROR', event: message });
            break;
          }
          case 'force':
            failures.set(node.uuid, f.count);
            toForce.push({ f: f as Extract<Finding, { kind: 'mismatch' }>, task, target: action.target });
            break;
        }
      }
      if (writes.length) {
        const out = await deps.tasks.commitAll(writes.map((w) => ({ task: w.task, changes: w.changes })), async (trx, held) => {
          await recordHistories(trx, held.map(({ index }) => ({
            nodeId: writes[index].task.node.id, severity: writes[index].severity, eventType: 'power', event: writes[index].event, conductor: deps.hostname,
          })));
        }, { maintenanceBumpsAccess: deps.config.console.maintenance_closes_console });
        out.forEach((r, i) => {
          const w = writes[i];
          if (!(r instanceof Error)) {
            if (w.severity === 'ERROR') {
              pass.gaveUp++;
              stats.gaveUp++;
              if (w.f.kind === 'mismatch') pass.errors++;
              failures.delete(w.task.node.uuid);
              log.error({ node: r.uuid }, w.event);
            } else {
              pass.corrected++;
              stats.corrected++;
              log.warn({ node: r.uuid, from: w.from, to: r.powerState }, 'During sync_power_state, the node state did not match the expected state: updated the recorded state');
            }
            if (w.from !== r.powerState) {
              deps.notifier.emit('baremetal.node.power_state_corrected.success', 'info', 'NodeCorrectedPowerStatePayload', nodePayload(r, { from_power: w.from }));
            }
          } else {
            pass.skipped++;
          }
        });
      }
      for (const x of toForce) {
        handedOn.add(x.task);
        forces.push(force(x.f, x.task, x.target, pass, shutdown));
      }
      return batch.map(() => ({ value: undefined }));
    } finally {
      await Promise.all(tasks.filter((t) => !handedOn.has(t)).map((t) => release(t)));
    }
  }

  function readerOf(power: PowerInterface, asyncPath: boolean): (ctx: DriverContext) => Promise<PowerStateValue> {
    if (asyncPath && power.getPowerStateAsync) return (ctx) => power.getPowerStateAsync!(ctx);
    return (ctx) => power.getPowerState(ctx);
  }

  async function run(signal: AbortSignal): Promise<{ nodes: number; errors: number }> {
    const started = Date.now();
    const reloaded = pending.take();
    if (reloaded) {
      c = reloaded;
      timeoutMs = c.sync_power_state_node_timeout * 1000;
    }
    for (const task of [...unreleased]) await release(task);
    const candidates = (await nodesForPowerSync(deps.db, c.conductor_group)).filter((n) => deps.owns(n.uuid));
    const pass: PowerSyncPass = {
      nodes: candidates.length, async: 0, sync: 0, ok: 0, failed: 0, timedOut: 0, corrected: 0, forced: 0, gaveUp: 0, skipped: 0, errors: 0, durationMs: 0, failures: {},
    };
    const asyncJobs: Job[] = [];
    const syncJobs: Job[] = [];
    for (const node of candidates) {
      const power = deps.registry.power(node.powerInterface ?? '');
      if (!power) continue;
      const isAsync = c.sync_power_state_async && power.getPowerStateAsync !== undefined;
      (isAsync ? asyncJobs : syncJobs).push({ node, power, read: readerOf(power, isAsync) });
    }
    // Ironic's order: the nodes failing most first, to fail them fast; then the slowest last
    // time (unknown first): the pass can end no sooner than its slowest node's own chain.
    const failing = (j: Job) => failures.get(j.node.uuid) ?? 0;
    const expected = (j: Job) => lastReadMs.get(j.node.uuid) ?? Number.MAX_SAFE_INTEGER;
    const order = (a: Job, b: Job) => failing(b) - failing(a) || expected(b) - expected(a);
    asyncJobs.sort(order);
    syncJobs.sort((a, b) => failing(b) - failing(a));
    pass.async = asyncJobs.length;
    pass.sync = syncJobs.length;
    const keyOf = (j: Job) => bmcAddressOf(j.node);
    const inFlight = new Set<AbortController>();
    const onShutdown = () => {
      for (const ctl of inFlight) ctl.abort(signal.reason);
    };
    signal.addEventListener('abort', onShutdown, { once: true });
    // Corrections are locked and written in batches while the reads go on.
    const forces: Array<Promise<void>> = [];
    const settler = new Batcher<Finding, void>((batch) => settleBatch(batch, pass, forces, signal), BATCH);
    const settling: Array<Promise<void>> = [];
    const settle = (f: Finding) => {
      if (signal.aborted) return;
      settling.push(settler.submit(f).catch((err: unknown) => {
        pass.skipped++;
        log.error({ err, node: f.node.uuid }, 'power state sync: the correction could not be written');
      }));
    };
    try {
      await Promise.all([
        runKeyedBounded(asyncJobs, { limit: c.sync_power_state_max_concurrency, perKey: c.per_bmc_concurrency, keyOf, signal }, (j) => readOne(j, pass, inFlight, signal, settle)),
        runKeyedBounded(syncJobs, { limit: c.sync_power_state_workers, perKey: c.per_bmc_concurrency, keyOf, signal }, (j) => readOne(j, pass, inFlight, signal, settle)),
      ]);
      await Promise.all(settling);
      await Promise.all(forces);
    } finally {
      signal.removeEventListener('abort', onShutdown);
    }
    pass.durationMs = Date.now() - started;
    stats.passes++;
    stats.timedOut += pass.timedOut;
    for (const [k, v] of Object.entries(pass.failures)) stats.failures[k] = (stats.failures[k] ?? 0) + v;
    stats.lastPass = pass;
    current = candidates.map((n) => n.uuid);
    // Forget nodes no longer synced here (deleted, moved on the ring, in maintenance, enrolled).
    if (lastReadMs.size > candidates.length || failures.size > candidates.length || lastOkAt.size > candidates.length) {
      const now = new Set(current);
      for (const m of [lastReadMs, failures, lastOkAt]) for (const uuid of m.keys()) if (!now.has(uuid)) m.delete(uuid);
    }
    logIterationEnd(log, signal, pass, c.sync_power_state_interval * 1000, stats, {
      cut: 'power state sync cut short by shutdown',
      overran: 'power state sync pass overran its interval; the next one starts when it ends',
      done: 'power state sync pass',
    });
    return { nodes: pass.nodes, errors: pass.errors };
  }

  function reconfigure(next: Readonly<ConductorOptions>): Array<(typeof MUTABLE_POWER_SYNC_OPTIONS)[number]> {
    return pending.offer(c, next);
  }

  return { name: 'sync_power_states', spacingSeconds: c.sync_power_state_interval, catchUp: true, reportsOverruns: true, stats, run, reconfigure };
}
