/**
 * The sensor data periodic task (DESIGN.md "Sensor data"). Each iteration reads this
 * conductor's share of the nodes in one query, reserving nothing (a shared read: a node held
 * by an exclusive task is read anyway), and splits them:
 *  - nodes whose management interface has getSensorDataAsync go to one asynchronous loop, up
 *    to `max_concurrency` in flight (the slowest of the last iteration first) and
 *    `per_bmc_concurrency` per BMC address;
 *  - the rest take the synchronous path: `workers` at a time, as Ironic's worker threads
 *    (the IPMI driver runs its ipmitool processes in its piscina pool).
 * Every node has its own `node_timeout`: past it the read is aborted (the driver closes its
 * sockets or kills its process), counted, and recorded in the node's history at most once
 * an hour. Each node's data is sent as soon as it is read, so nothing accumulates; the
 * notifier buffers, and collection never waits for the bus.
 */
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import { lazyChild } from '../../common/logger.js';
import type { Config } from '../../common/config.js';
import { GalvanicError } from '../../common/errors.js';
import type { Notifier } from '../../common/notifier.js';
import { recordHistory } from '../../db/node-history.js';
import { nodesForSensorData, type SensorNode } from '../../db/nodes.js';
import type { DriverContext, ManagementInterface, SensorData } from '../../drivers/interfaces.js';
import type { DriverRegistry } from '../../drivers/registry.js';
import { logIterationEnd, PendingOptions, type PeriodicTask } from '../periodic.js';
import { runKeyedBounded } from '../sensors/keyed-limiter.js';
import { filterDataTypes, sensorEventType, sensorMessage } from '../sensors/message.js';

export interface SensorTaskDeps {
  db: Knex;
  registry: DriverRegistry;
  notifier: Notifier;
  log: Logger;
  hostname: string;
  config: Readonly<Config>;
  owns(nodeUuid: string): boolean;
}

/** The failure kind of a read that outlived node_timeout. */
export const NODE_TIMEOUT = 'NODE_TIMEOUT';

/** One iteration, as logged and kept as `lastIteration`. */
export interface SensorIteration {
  nodes: number;
  async: number;
  sync: number;
  ok: number;
  failed: number;
  timedOut: number;
  /** Nodes whose management interface cannot read sensors. */
  unsupported: number;
  durationMs: number;
  /** Failed reads by kind: the driver error's code, or NODE_TIMEOUT. */
  failures: Record<string, number>;
}

/** Totals since the conductor started. */
export interface SensorStats {
  iterations: number;
  overruns: number;
  ok: number;
  timedOut: number;
  failures: Record<string, number>;
  lastIteration: SensorIteration | null;
}

const HISTORY_SPACING_MS = 3600_000;

/**
 * The slots of max_concurrency a node takes on its first read. That read logs in to its BMC and
 * discovers it (5-9 requests instead of 1-3), so it holds its slot several times as long; a
 * whole first iteration at the full bound, overlapping the power sync's first pass, was the
 * conductor's peak memory (10,000 BMCs, max_concurrency 2500, discovery in turn: 519 MiB RSS,
 * 478 MiB with first reads counted twice).
 */
const FIRST_READ_WEIGHT = 2;

/** Nodes sharing a BMC address share its limit; a node whose address we cannot tell is its own. */
export function bmcAddressOf(node: { uuid: string; driverInfo: Readonly<Record<string, unknown>> }): string {
  const i = node.driverInfo;
  if (typeof i.redfish_address === 'string') {
    try {
      return new URL(i.redfish_address.includes('://') ? i.redfish_address : `https://${i.redfish_address}`).host;
    } catch {
      return i.redfish_address;
    }
  }
  if (typeof i.ipmi_address === 'string') return `${i.ipmi_address}:${String(i.ipmi_port ?? 623)}`;
  return node.uuid;
}

class ReadTimedOut extends Error {}

/** The [sensor_data] options a running conductor takes on when its configuration is reloaded (SIGHUP). */
export const MUTABLE_SENSOR_OPTIONS = [
  'enable_async_collection', 'workers', 'max_concurrency', 'per_bmc_concurrency', 'node_timeout',
  'enable_for_undeployed_nodes', 'enable_for_nodes_in_maintenance', 'data_types',
] as const;

type SensorOptions = Config['sensor_data'];

export interface SensorDataTask extends PeriodicTask {
  stats: SensorStats;
  /**
   * Takes on the mutable options of `next` from the next iteration on (one in progress keeps
   * its options); returns the names of those that changed.
   */
  reconfigure(next: Readonly<SensorOptions>): Array<(typeof MUTABLE_SENSOR_OPTIONS)[number]>;
}

export function sensorDataTask(deps: SensorTaskDeps): SensorDataTask {
  let s: Readonly<SensorOptions> = deps.config.sensor_data;
  const pending = new PendingOptions<SensorOptions, (typeof MUTABLE_SENSOR_OPTIONS)[number]>(MUTABLE_SENSOR_OPTIONS);
  const log = deps.log.child({ task: 'send_sensor_data' });
  let timeoutMs = s.node_timeout * 1000;
  const stats: SensorStats = { iterations: 0, overruns: 0, ok: 0, timedOut: 0, failures: {}, lastIteration: null };
  /** When each node's last timeout went into its history. */
  const historyAt = new Map<string, number>();
  /**
   * How long each node's read took last time. The slowest start first: an iteration can end
   * no sooner than its slowest node's own request chain, so that chain should not also wait
   * for a slot behind thousands of fast nodes.
   */
  const lastReadMs = new Map<string, number>();

  async function recordTimeout(node: SensorNode): Promise<void> {
    const now = Date.now();
    const last = historyAt.get(node.uuid);
    if (last !== undefined && now - last < HISTORY_SPACING_MS) return;
    historyAt.set(node.uuid, now);
    await recordHistory(deps.db, {
      nodeId: node.id, severity: 'WARNING', eventType: 'sensor', conductor: deps.hostname,
      event: `Reading the sensor data of node ${node.uuid} took longer than ${s.node_timeout} s and was cancelled; such timeouts are recorded at most once an hour.`,
    }).catch((err: unknown) => log.warn({ err, node: node.uuid }, 'recording a sensor timeout in the node history failed'));
  }

  /** Reads one node and sends its notification; never throws. */
  async function readOne(node: SensorNode, read: (ctx: DriverContext) => Promise<SensorData>, it: SensorIteration, inFlight: Set<AbortController>, shutdown: AbortSignal): Promise<void> {
    if (shutdown.aborted) return;
    const controller = new AbortController();
    inFlight.add(controller);
    let timer: NodeJS.Timeout | undefined;
    // Rejects at the deadline even if the driver ignored the signal, so the slot is freed.
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const err = new ReadTimedOut(`sensor read of node ${node.uuid} exceeded ${s.node_timeout} s`);
        controller.abort(err);
        reject(err);
      }, timeoutMs);
    });
    const ctx: DriverContext = { nodeUuid: node.uuid, driverInfo: node.driverInfo, log: lazyChild(log, { node: node.uuid }), signal: controller.signal, trace: 'sensor data', priority: 'periodic' };
    const readStarted = Date.now();
    try {
      const data = await Promise.race([read(ctx), deadline]);
      deps.notifier.send(sensorEventType(node.driver), 'info', sensorMessage(node, filterDataTypes(data, s.data_types)));
      it.ok++;
    } catch (err) {
      if (shutdown.aborted) return;
      it.failed++;
      const kind = err instanceof ReadTimedOut ? NODE_TIMEOUT : err instanceof GalvanicError ? err.code : 'UNEXPECTED';
      it.failures[kind] = (it.failures[kind] ?? 0) + 1;
      if (kind === NODE_TIMEOUT) {
        it.timedOut++;
        await recordTimeout(node);
      }
      ctx.log.debug({ kind, err: (err as Error).message }, 'sensor read failed');
    } finally {
      clearTimeout(timer);
      inFlight.delete(controller);
      lastReadMs.set(node.uuid, Date.now() - readStarted);
    }
  }

  function readerOf(mgmt: ManagementInterface | undefined, asyncPath: boolean): ((ctx: DriverContext) => Promise<SensorData>) | null {
    if (!mgmt) return null;
    if (asyncPath && mgmt.getSensorDataAsync) return (ctx) => mgmt.getSensorDataAsync!(ctx);
    // Synchronous path: the synchronous read, or (collection forced synchronous) the asynchronous one awaited in a lane.
    if (mgmt.getSensorData) return (ctx) => mgmt.getSensorData!(ctx);
    if (mgmt.getSensorDataAsync) return (ctx) => mgmt.getSensorDataAsync!(ctx);
    return null;
  }

  async function run(signal: AbortSignal): Promise<{ nodes: number; errors: number }> {
    const started = Date.now();
    const reloaded = pending.take();
    if (reloaded) {
      s = reloaded;
      timeoutMs = s.node_timeout * 1000;
    }
    const all = (await nodesForSensorData(deps.db, deps.config.conductor.conductor_group, {
      undeployed: s.enable_for_undeployed_nodes, maintenance: s.enable_for_nodes_in_maintenance,
    })).filter((n) => deps.owns(n.uuid));
    const it: SensorIteration = { nodes: all.length, async: 0, sync: 0, ok: 0, failed: 0, timedOut: 0, unsupported: 0, durationMs: 0, failures: {} };
    const asyncJobs: Array<{ node: SensorNode; read: (ctx: DriverContext) => Promise<SensorData> }> = [];
    const syncJobs: typeof asyncJobs = [];
    for (const node of all) {
      const mgmt = deps.registry.management(node.managementInterface ?? '');
      const isAsync = s.enable_async_collection && mgmt?.getSensorDataAsync !== undefined;
      const read = readerOf(mgmt, isAsync);
      if (!read) {
        it.unsupported++;
        continue;
      }
      try {
        mgmt!.validate(node.driverInfo);
      } catch (err) {
        it.failed++;
        const kind = err instanceof GalvanicError ? err.code : 'UNEXPECTED';
        it.failures[kind] = (it.failures[kind] ?? 0) + 1;
        continue;
      }
      (isAsync ? asyncJobs : syncJobs).push({ node, read });
    }
    // Slowest last time first; nodes never read yet (unknown) before the known fast ones. The
    // synchronous lanes keep the nodes' order, as Ironic does: a lane reads one node after the
    // other, so the order changes its iteration's length by one node's read at most.
    const expected = (j: (typeof asyncJobs)[number]) => lastReadMs.get(j.node.uuid) ?? Number.MAX_SAFE_INTEGER;
    asyncJobs.sort((a, b) => expected(b) - expected(a));
    it.async = asyncJobs.length;
    it.sync = syncJobs.length;
    const keyOf = (j: (typeof asyncJobs)[number]) => bmcAddressOf(j.node);
    const weightOf = (j: (typeof asyncJobs)[number]) => (lastReadMs.has(j.node.uuid) ? 1 : FIRST_READ_WEIGHT);
    // One shutdown listener for the iteration, rather than one per node in flight.
    const inFlight = new Set<AbortController>();
    const onShutdown = () => {
      for (const c of inFlight) c.abort(signal.reason);
    };
    signal.addEventListener('abort', onShutdown, { once: true });
    await Promise.all([
      runKeyedBounded(asyncJobs, { limit: s.max_concurrency, perKey: s.per_bmc_concurrency, keyOf, weightOf, signal }, (j) => readOne(j.node, j.read, it, inFlight, signal)),
      runKeyedBounded(syncJobs, { limit: s.workers, perKey: s.per_bmc_concurrency, keyOf, signal }, (j) => readOne(j.node, j.read, it, inFlight, signal)),
    ]).finally(() => signal.removeEventListener('abort', onShutdown));
    it.durationMs = Date.now() - started;
    stats.iterations++;
    stats.ok += it.ok;
    stats.timedOut += it.timedOut;
    for (const [k, v] of Object.entries(it.failures)) stats.failures[k] = (stats.failures[k] ?? 0) + v;
    stats.lastIteration = it;
    for (const [uuid, at] of historyAt) if (started - at >= HISTORY_SPACING_MS) historyAt.delete(uuid);
    // Forget nodes that are no longer this conductor's (deleted, or moved on the ring).
    if (lastReadMs.size > all.length) {
      const current = new Set(all.map((n) => n.uuid));
      for (const uuid of lastReadMs.keys()) if (!current.has(uuid)) lastReadMs.delete(uuid);
    }
    logIterationEnd(log, signal, it, s.interval * 1000, stats, {
      cut: 'sensor data collection cut short by shutdown',
      overran: 'sensor data iteration overran its interval; the next one starts late',
      done: 'sensor data iteration',
    });
    return { nodes: it.nodes, errors: it.failed };
  }

  function reconfigure(next: Readonly<SensorOptions>): Array<(typeof MUTABLE_SENSOR_OPTIONS)[number]> {
    return pending.offer(s, next);
  }

  // At start too: a conductor that just took over nodes should not leave them unmonitored for an interval.
  return { name: 'send_sensor_data', spacingSeconds: s.interval, runAtStart: true, catchUp: true, stats, run, reconfigure };
}
