/**
 * The conductor's own /metrics: periodic task runs, durations and overruns; the sensor task's
 * nodes and failures by kind; the bus driver's buffer; the intent queue depth; and Node's
 * default process metrics (event-loop lag, memory, CPU). Every value is read from the live
 * counters at scrape time, so nothing here is updated on the hot paths.
 */
import type { Knex } from 'knex';
import { Gauge, Registry } from 'prom-client';
import type { BusStats } from '../common/notifier-amqp.js';
import { countOpenIntents } from '../db/intents.js';
import type { PeriodicRunner } from './periodic.js';
import type { SensorStats } from './periodics/sensor-data.js';
import type { PowerSyncStats } from './periodics/power-sync.js';
import type { BmcBudgetStats } from '../drivers/bmc-budget.js';
import { collectProcessMetrics } from '../common/metrics-server.js';

export interface ConductorMetricsSources {
  hostname: string;
  periodic: PeriodicRunner;
  sensors: SensorStats | null;
  /** The power state sync's totals; null when it is disabled. */
  powerSync?: PowerSyncStats | null;
  /** The per-BMC budget shared by the drivers. */
  budget?: BmcBudgetStats;
  /** The amqp driver's counters, when that is the driver. */
  bus: (() => BusStats) | null;
  db: Knex;
}

/** A gauge whose values come from `read` at each scrape. */
function gaugeOf(registry: Registry, name: string, help: string, labelNames: string[], read: (g: Gauge) => void | Promise<void>): void {
  new Gauge({
    name, help, labelNames, registers: [registry],
    async collect() {
      this.reset();
      await read(this);
    },
  });
}

export function buildConductorMetrics(src: ConductorMetricsSources): Registry {
  const registry = new Registry();
  registry.setDefaultLabels({ conductor: src.hostname });
  collectProcessMetrics(registry);
  const tasks = () => [...src.periodic.stats.entries()];
  // Gauges, not counters, for totals kept elsewhere (as ironic-prometheus-exporter does).
  gaugeOf(registry, 'galvanic_periodic_task_runs', 'Iterations of a periodic task since start.', ['task'], (g) => {
    for (const [task, s] of tasks()) g.set({ task }, s.runs);
  });
  gaugeOf(registry, 'galvanic_periodic_task_overruns', 'Ticks of a periodic task skipped because its previous iteration was still running.', ['task'], (g) => {
    for (const [task, s] of tasks()) g.set({ task }, s.overruns);
  });
  gaugeOf(registry, 'galvanic_periodic_task_failures', 'Iterations of a periodic task that failed as a whole.', ['task'], (g) => {
    for (const [task, s] of tasks()) g.set({ task }, s.failures);
  });
  gaugeOf(registry, 'galvanic_periodic_task_last_duration_seconds', 'Duration of the last iteration of a periodic task.', ['task'], (g) => {
    for (const [task, s] of tasks()) g.set({ task }, s.lastDurationMs / 1000);
  });
  gaugeOf(registry, 'galvanic_periodic_task_last_nodes', 'Nodes the last iteration of a periodic task handled.', ['task'], (g) => {
    for (const [task, s] of tasks()) g.set({ task }, s.lastNodes);
  });
  const sensors = src.sensors;
  if (sensors) {
    gaugeOf(registry, 'galvanic_sensor_nodes_ok', 'Sensor reads sent since start.', [], (g) => g.set(sensors.ok));
    gaugeOf(registry, 'galvanic_sensor_failures', 'Failed sensor reads since start, by kind (the error code, or NODE_TIMEOUT).', ['kind'], (g) => {
      for (const [kind, n] of Object.entries(sensors.failures)) g.set({ kind }, n);
    });
    gaugeOf(registry, 'galvanic_sensor_iteration_overruns', 'Sensor iterations that ran longer than the interval.', [], (g) => g.set(sensors.overruns));
  }
  const power = src.powerSync;
  if (power) {
    gaugeOf(registry, 'galvanic_power_state_read_age_seconds', 'Seconds since the last successful power state read of this conductor\'s synced nodes (a node never read counts from the conductor\'s start), by quantile: 0.5, 0.99 and 1 (the oldest).', ['quantile'], (g) => {
      const a = power.readAges();
      g.set({ quantile: '0.5' }, a.p50);
      g.set({ quantile: '0.99' }, a.p99);
      g.set({ quantile: '1' }, a.max);
    });
    gaugeOf(registry, 'galvanic_power_sync_pass_overruns', 'Power state sync passes that ran longer than sync_power_state_interval.', [], (g) => g.set(power.overruns));
    gaugeOf(registry, 'galvanic_power_sync_reads_ok', 'Successful power state reads of the sync since start.', [], (g) => g.set(power.ok));
    gaugeOf(registry, 'galvanic_power_sync_failures', 'Failed power state reads of the sync since start, by kind (the error code, or NODE_TIMEOUT).', ['kind'], (g) => {
      for (const [kind, n] of Object.entries(power.failures)) g.set({ kind }, n);
    });
    gaugeOf(registry, 'galvanic_power_sync_corrections', 'Power states the sync corrected since start: recorded from the BMC, forced back to it, or given up on (maintenance).', ['action'], (g) => {
      g.set({ action: 'recorded' }, power.corrected);
      g.set({ action: 'forced' }, power.forced);
      g.set({ action: 'gave_up' }, power.gaveUp);
    });
  }
  const budget = src.budget;
  if (budget) {
    gaugeOf(registry, 'galvanic_bmc_budget_waits', 'Requests to a BMC that waited for its per_bmc_concurrency budget since start; `promoted`: an intent served before older periodic reads.', ['kind'], (g) => {
      g.set({ kind: 'waited' }, budget.waited);
      g.set({ kind: 'promoted' }, budget.promoted);
    });
    gaugeOf(registry, 'galvanic_bmc_budget_max_in_flight', 'The most requests in flight to one BMC at once since start (at most per_bmc_concurrency).', [], (g) => g.set(budget.maxInFlight));
  }
  const bus = src.bus;
  if (bus) {
    gaugeOf(registry, 'galvanic_notifications', 'Notifications of the amqp driver since start: accepted, confirmed by the broker, dropped (buffer full).', ['state'], (g) => {
      const s = bus();
      g.set({ state: 'accepted' }, s.accepted);
      g.set({ state: 'confirmed' }, s.confirmed);
      g.set({ state: 'dropped' }, s.dropped);
    });
    gaugeOf(registry, 'galvanic_notifications_buffered', 'Notifications waiting for the broker.', [], (g) => g.set(bus().buffered));
    gaugeOf(registry, 'galvanic_bus_connected', '1 while connected to the bus.', [], (g) => g.set(bus().connected ? 1 : 0));
  }
  gaugeOf(registry, 'galvanic_intents_open', 'Intents of all nodes queued or running (the whole database, not only this conductor).', ['state'], async (g) => {
    const n = await countOpenIntents(src.db);
    g.set({ state: 'queued' }, n.queued);
    g.set({ state: 'running' }, n.running);
  });
  return registry;
}
