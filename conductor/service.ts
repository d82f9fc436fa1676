import { availableParallelism } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { Config } from '../common/config.js';
import type { Notifier } from '../common/notifier.js';
import { findDeadConductors, heartbeat, liveRing, markOffline, registerConductor } from '../db/conductors.js';
import { INTENT_CHANNEL, parseIntentWake, type IntentWake, type Intent } from '../db/intents.js';
import type { ClaimScope } from '../db/intent-claims.js';
import { longRunningIntentIds, recoverConductorLeftovers } from '../db/intent-recovery.js';
import { getNodeById, updateNode } from '../db/nodes.js';
import { assertSchemaCurrent } from '../db/migrate.js';
import { PgListener } from '../db/listener.js';
import { PgNotifyBatcher } from '../db/notify.js';
import type { DriverRegistry } from '../drivers/registry.js';
import { ACTIONS } from './actions/index.js';
import { safeToRepeat } from '../common/intent-kinds.js';
import type { HashRing } from '../common/hash-ring.js';
import { ConsoleManager } from './console/manager.js';
import { IntentRunner } from './intent-runner.js';
import { AgentClient } from '../drivers/agent/client.js';
import { agentTokenOf, wipeAgentToken } from '../db/agent-tokens.js';
import { portAddressesOfNode, portsOfNode } from '../db/ports.js';
import { bootPort } from '../drivers/dhcp.js';
import { failureChanges, settleFailure } from './intent-outcome.js';
import { Allocator } from './allocations.js';
import { ALLOCATION_CHANNEL } from '../db/allocations.js';
import { OperationAdvancer } from './operations.js';
import { PeriodicRunner, type IterationReport } from './periodic.js';
import { provisionChecksTask } from './periodics/provision-timeouts.js';
import { httpRootSweepTask } from './periodics/http-root-sweep.js';
import type { HttpRoot } from '../drivers/http-root.js';
import { isoToolPathsFromConfig } from '../drivers/image/iso-tools.js';
import { Semaphore } from '../drivers/redfish/semaphore.js';
import { TaskManager } from './task-manager.js';
import { powerSyncTask, type PowerSyncStats, type PowerSyncTask } from './periodics/power-sync.js';
import { sensorDataTask, type SensorDataTask, type SensorStats } from './periodics/sensor-data.js';
import { buildConductorMetrics } from './metrics.js';
import { AmqpNotifier } from '../common/notifier-amqp.js';
import { serveMetrics, type MetricsServer } from '../common/metrics-server.js';
import type { Registry } from 'prom-client';
import { KeptConfigdrives } from './configdrive.js';

/** The conductor's own periodics, started before the rest (see start()). */
const HEARTBEAT = 'conductor_heartbeat';
const POLL = 'poll_for_work';

export type ServiceState = 'starting' | 'running' | 'draining' | 'stopped';

export interface ConductorDeps {
  config: Readonly<Config>;
  db: Knex;
  /** For the LISTEN connection, which must not come from the pool. */
  connectionString: string;
  registry: DriverRegistry;
  notifier: Notifier;
  log: Logger;
  /** This conductor's HTTP root, swept of what its nodes no longer boot (cli starts it with the embedded server). */
  httpRoot?: HttpRoot;
}

/**
 * A conductor: registers and heartbeats, keeps the hash ring of its group, listens for new
 * intents and runs them, runs periodic tasks, recovers dead conductors' leftovers, and on
 * stop drains (bounded), hands back what it holds and goes offline.
 */
export class ConductorService {
  state: ServiceState = 'starting';
  readonly hostname: string;
  readonly tasks: TaskManager;
  readonly periodic: PeriodicRunner;
  readonly consoles: ConsoleManager;
  private readonly runner: IntentRunner;
  private readonly operations: OperationAdvancer;
  private readonly agentClient: AgentClient;
  private readonly allocator: Allocator;
  private readonly wake: PgNotifyBatcher;
  private readonly log: Logger;
  private listener?: PgListener;
  /** Since when every heartbeat has been recorded; undefined while they fail. */
  private healthySince?: number;
  /** When the heartbeat first failed in the current run of failures. */
  private heartbeatLost?: number;
  private ring?: HashRing;
  private readonly drivers: string[];
  /** The sensor task's totals; null when [sensor_data] send_sensor_data is off. */
  readonly sensorStats: SensorStats | null = null;
  /** The power state sync's totals; null when sync_power_state_interval is 0. */
  readonly powerSyncStats: PowerSyncStats | null = null;
  private metricsServer?: MetricsServer;
  private sensorTask?: SensorDataTask;
  private powerSyncTask?: PowerSyncTask;

  constructor(private readonly deps: ConductorDeps) {
    const c = deps.config.conductor;
    this.hostname = deps.config.DEFAULT.host;
    this.log = deps.log.child({ component: 'conductor', conductor: this.hostname });
    this.drivers = deps.registry.hardwareTypes().map((t) => t.name);
    this.tasks = new TaskManager(deps.db, this.hostname, this.log, c.heartbeat_timeout, () => this.mayJudgePeers());
    this.wake = new PgNotifyBatcher(deps.db, this.log);
    const operations = this.operations = new OperationAdvancer(deps.db, deps.notifier, this.wake, this.log, deps.config.operations.progress_notification_interval * 1000);
    const a = deps.config.agent;
    this.agentClient = new AgentClient({
      timeoutMs: a.command_timeout * 1000, maxAttempts: a.max_command_attempts, connectionsPerAgent: a.connections_per_agent,
    });
    this.runner = new IntentRunner(this.tasks, deps.registry, ACTIONS, deps.notifier, this.wake, () => this.claimScope(), this.log, {
      agent: {
        client: this.agentClient,
        tokenOf: (id) => agentTokenOf(deps.db, id),
        wipeToken: (id) => wipeAgentToken(deps.db, id),
        portsOf: (id) => portAddressesOfNode(deps.db, id),
        config: { agent: deps.config.agent, deploy: deps.config.deploy },
      },
      bootPortsOf: async (id) => (await portsOfNode(deps.db, id)).map(bootPort),
      configdrive: {
        useObjectStore: deps.config.deploy.configdrive_use_object_store,
        maxInlineSize: deps.config.deploy.configdrive_max_inline_size,
        httpRoot: deps.httpRoot ?? null,
        // The agent reaches the root at http_url; what the root hands BMCs may be external_http_url.
        ...(deps.config.deploy.http_url ? { agentBaseUrl: deps.config.deploy.http_url } : {}),
        tools: isoToolPathsFromConfig(deps.config),
        builds: new Semaphore(Math.max(1, availableParallelism())),
        kept: new KeptConfigdrives(),
      },
      hostname: this.hostname,
      workers: c.workers_pool_size,
      retryInitialDelayMs: c.intent_retry_initial_delay * 1000,
      retryMaxDelayMs: c.intent_retry_max_delay * 1000,
      beforeClaim: () => operations.advance(),
      conductors: () => this.ring?.hosts.length ?? 1,
      update: { maintenanceBumpsAccess: deps.config.console.maintenance_closes_console },
      conductor: deps.config.conductor,
    });
    this.allocator = new Allocator(deps.db, this.hostname, this.log);
    this.periodic = new PeriodicRunner(this.log);
    this.periodic.register({
      name: HEARTBEAT,
      spacingSeconds: c.heartbeat_interval,
      // A beat is never dropped: one that meets a slow predecessor goes out right after it.
      catchUp: true,
      // Only a stuck beat overruns, and beat() already bounds and logs what the database did.
      reportsOverruns: true,
      run: (signal) => this.beat(signal),
    });
    // The safety net for a lost NOTIFY and for retries whose not_before has passed.
    this.periodic.register({
      name: POLL,
      spacingSeconds: c.poll_interval,
      run: async () => {
        this.runner.pump();
        this.allocator.pump();
      },
    });
    this.periodic.register({
      name: 'recover_dead_conductors',
      spacingSeconds: Math.max(1, Math.min(c.heartbeat_interval, c.heartbeat_timeout / 2)),
      runAtStart: true,
      run: () => this.recoverDead(),
    });
    this.periodic.register({
      name: 'recover_orphaned_intents',
      spacingSeconds: Math.max(0.5, c.orphaned_intent_timeout / 2),
      run: () => this.recoverOrphans(),
    });
    this.periodic.register(provisionChecksTask({
      db: deps.db, config: deps.config, hostname: this.hostname, log: this.log, owns: (uuid) => this.owns(uuid),
      wake: (wake) => this.runner.newWork(wake),
    }));
    if (deps.httpRoot && deps.config.deploy.http_root_sweep_interval > 0) {
      this.periodic.register(httpRootSweepTask({ db: deps.db, httpRoot: deps.httpRoot, log: this.log, spacingSeconds: deps.config.deploy.http_root_sweep_interval }));
    }
    this.consoles = new ConsoleManager({
      config: deps.config, db: deps.db, connectionString: deps.connectionString, registry: deps.registry, log: this.log,
      hostname: this.hostname, drivers: this.drivers, owns: (uuid) => this.owns(uuid),
    });
    this.periodic.register({
      name: 'console_watchdog',
      spacingSeconds: deps.config.console.watchdog_interval,
      run: () => this.consoles.watchdog(),
    });
    if (c.sync_power_state_interval > 0) {
      const sync = powerSyncTask({
        db: deps.db, tasks: this.tasks, registry: deps.registry, notifier: deps.notifier, log: this.log,
        hostname: this.hostname, config: deps.config, owns: (uuid) => this.owns(uuid),
      });
      this.powerSyncStats = sync.stats;
      this.powerSyncTask = sync;
      this.periodic.register(sync);
    }
    if (deps.config.sensor_data.send_sensor_data) {
      const sensors = sensorDataTask({
        db: deps.db, registry: deps.registry, notifier: deps.notifier, log: this.log,
        hostname: this.hostname, config: deps.config, owns: (uuid) => this.owns(uuid),
      });
      this.sensorStats = sensors.stats;
      this.sensorTask = sensors;
      this.periodic.register(sensors);
    }
  }

  /**
   * This conductor's metrics, made only when they are served: the process metrics sample the
   * event loop on a timer, which a conductor without [conductor] metrics_port need not pay for.
   */
  private buildMetrics(): Registry {
    const notifier = this.deps.notifier;
    return buildConductorMetrics({
      hostname: this.hostname, periodic: this.periodic, sensors: this.sensorStats, db: this.deps.db,
      powerSync: this.powerSyncStats, budget: this.deps.registry.budget.stats,
      bus: notifier instanceof AmqpNotifier ? () => notifier.stats : null,
    });
  }

  /**
   * Takes on the options of a reloaded configuration that can change while running (the
   * mutable [sensor_data] options and the power sync's [conductor] ones, from the next
   * iteration on); the others need a restart.
   */
  reloadConfig(next: Readonly<Config>): void {
    const changed = this.sensorTask?.reconfigure(next.sensor_data) ?? [];
    const power = this.powerSyncTask?.reconfigure(next.conductor) ?? [];
    this.log.info({
      sensor_data: Object.fromEntries(changed.map((k) => [k, next.sensor_data[k]])), conductor: Object.fromEntries(power.map((k) => [k, next.conductor[k]])),
    }, changed.length || power.length ? 'configuration reloaded' : 'configuration reloaded: nothing that can change while running changed');
  }

  /**
   * Whether a wake-up (for a node, or undefined: for any) may concern this conductor.
   * With three conductors each would otherwise run a claim for every accepted request, two of
   * three finding nothing. A ring that is changing may say no to the new owner: the poll
   * (poll_interval) still finds the work.
   */
  private mayOwn(wake: IntentWake | undefined): boolean {
    if (!this.ring || this.ring.hosts.length <= 1 || !wake) return true;
    return this.ring.owner(wake.nodeUuid) === this.hostname;
  }

  /** This conductor's share of its group's nodes; undefined until the ring is known. */
  claimScope(): ClaimScope | undefined {
    if (!this.ring || this.state !== 'running') return undefined;
    const alone = this.ring.hosts.length === 1 && this.ring.hosts[0] === this.hostname;
    return {
      conductorGroup: this.deps.config.conductor.conductor_group,
      drivers: this.drivers,
      ranges: alone ? undefined : this.ring.rangesOf(this.hostname),
    };
  }

  /** True when the ring gives this node to this conductor. */
  owns(nodeUuid: string): boolean {
    return this.ring?.owner(nodeUuid) === this.hostname;
  }

  async start(): Promise<void> {
    const { db, config } = this.deps;
    const c = config.conductor;
    await assertSchemaCurrent(db);
    await registerConductor(db, this.hostname, c.conductor_group, this.drivers);
    this.healthySince = Date.now();
    // Whatever this host held before a restart is stale: settle it before taking new work.
    await this.recover(this.hostname);
    await this.refreshRing();

    this.listener = new PgListener({
      connectionString: this.deps.connectionString, applicationName: 'galvanic-conductor-listen',
      channels: [INTENT_CHANNEL, ALLOCATION_CHANNEL], log: this.log,
      onNotification: (channel, payload) => {
        // Any conductor may take any allocation: no ring check.
        if (channel === ALLOCATION_CHANNEL) this.allocator.pump();
        else {
          const wake = parseIntentWake(payload);
          if (this.mayOwn(wake)) this.runner.newWork(wake);
        }
      },
      // What was accepted while the connection was down was notified to nobody.
      onReconnect: () => {
        this.runner.pump();
        this.allocator.pump();
      },
    });
    await this.listener.start();

    // Before the consoles' start-up, which may take a while: peers must not take it for dead.
    this.periodic.start([HEARTBEAT, POLL]);
    if (c.metrics_port > 0) {
      this.metricsServer = await serveMetrics(this.buildMetrics(), c.metrics_host, c.metrics_port, this.log);
      this.log.info({ url: `${this.metricsServer.url}/metrics` }, 'conductor metrics listening');
    }
    this.state = 'running';
    // After the ring is known: it decides which consoles are this conductor's.
    await this.consoles.start();
    this.periodic.start();
    this.runner.pump();
    this.allocator.pump();
    this.log.info({ ring: this.ring?.hosts }, 'conductor started');
  }

  /**
   * Records this conductor's heartbeat, then refreshes the ring. The query has no timeout: a
   * beat stuck on a lost connection is waited for one interval at most, so that the next one
   * goes out on another connection instead of waiting behind it, and the beats go on through
   * a database outage.
   */
  private async beat(signal: AbortSignal): Promise<IterationReport> {
    let recorded = false;
    const beat = heartbeat(this.deps.db, this.hostname)
      .then(() => {
        recorded = true;
        if (this.healthySince === undefined) {
          this.healthySince = Date.now();
          if (this.heartbeatLost) this.log.info({ downMs: Date.now() - this.heartbeatLost }, 'heartbeat recorded again');
          this.heartbeatLost = undefined;
        }
        return this.refreshRing();
      })
      .catch((err) => {
        this.healthySince = undefined;
        if (this.heartbeatLost === undefined) {
          this.heartbeatLost = Date.now();
          this.log.error({ err }, 'heartbeat failed');
        } else {
          this.log.debug({ err: (err as Error).message }, 'heartbeat failed again');
        }
      });
    const bound = sleep(this.deps.config.conductor.heartbeat_interval * 1000, undefined, { signal, ref: false }).catch(() => undefined);
    await Promise.race([beat, bound]);
    return { errors: recorded ? 0 : 1 };
  }

  /**
   * Whether this conductor may take a peer's old heartbeat for its death. Not until its own
   * heartbeat has been recorded for a whole heartbeat_timeout: after a database outage every
   * heartbeat is old, and a live peer has had that long to record its own again. Without this,
   * the first conductor back would take over all the others' nodes and fail their intents.
   */
  mayJudgePeers(): boolean {
    return this.healthySince !== undefined && Date.now() - this.healthySince >= this.deps.config.conductor.heartbeat_timeout * 1000;
  }

  private async refreshRing(): Promise<void> {
    const c = this.deps.config.conductor;
    // A peer is not dropped from the ring on an old heartbeat this conductor may not judge yet.
    const kept = this.mayJudgePeers() ? [] : this.ring?.hosts ?? [];
    const ring = await liveRing(this.deps.db, c.conductor_group, c.heartbeat_timeout, [this.hostname, ...kept]);
    if (this.ring && this.ring.hosts.join(',') === ring.hosts.join(',')) return;
    this.ring = ring;
    this.log.info({ ring: ring.hosts }, 'hash ring changed');
    this.runner.pump();
    if (this.state === 'running') this.consoles.reconcileSoon();
  }

  private async recover(host: string): Promise<void> {
    const { requeued, failed } = await recoverConductorLeftovers(this.deps.db, host, safeToRepeat, (trx, intent) => this.settleFailed(trx, intent));
    if (requeued.length || failed.length) {
      this.log.warn({ from: host, requeued: requeued.length, failed: failed.length }, 'recovered intents of a stopped conductor');
    }
  }

  /**
   * A node whose intent failed because its conductor stopped mid-way gets what a failure of
   * that action gives it: a provision transition ends in its failure state rather than
   * staying in `verifying` (say) with nobody working on it; a power target is cleared.
   */
  private async settleFailed(trx: Knex.Transaction, intent: Intent): Promise<void> {
    const node = await getNodeById(trx, intent.nodeId);
    const error = new Error(intent.error ?? 'The conductor stopped while running this intent.');
    const after = await updateNode(trx, node.id, failureChanges(ACTIONS[intent.kind], { node, intent }, error, true));
    await settleFailure(trx, { intent, after, error, conductor: this.hostname, retry: false });
  }

  /**
   * Intents recorded as running here that this conductor is not running: their claim or their
   * outcome could not be completed (the database failed at that moment). Without this they
   * would block their nodes' queues until a restart.
   */
  private async recoverOrphans(): Promise<{ nodes: number }> {
    const timeout = this.deps.config.conductor.orphaned_intent_timeout;
    const ids = (await longRunningIntentIds(this.deps.db, this.hostname, timeout)).filter((id) => !this.runner.isRunning(id));
    if (ids.length === 0) return { nodes: 0 };
    const { requeued, failed } = await recoverConductorLeftovers(
      this.deps.db, this.hostname, safeToRepeat, (trx, intent) => this.settleFailed(trx, intent), ids,
    );
    this.log.warn({ requeued: requeued.length, failed: failed.length }, 'recovered intents this conductor had lost track of');
    this.runner.pump();
    return { nodes: ids.length };
  }

  private async recoverDead(): Promise<{ nodes: number }> {
    const c = this.deps.config.conductor;
    if (!this.mayJudgePeers()) return { nodes: 0 };
    const dead = (await findDeadConductors(this.deps.db, c.heartbeat_timeout)).filter((h) => h !== this.hostname);
    for (const host of dead) {
      await this.recover(host);
      await markOffline(this.deps.db, host);
    }
    if (dead.length) {
      await this.refreshRing();
      this.runner.pump();
    }
    return { nodes: dead.length };
  }

  async stop(): Promise<void> {
    if (this.state === 'stopped' || this.state === 'draining') return;
    this.state = 'draining';
    const timeoutMs = this.deps.config.conductor.graceful_shutdown_timeout * 1000;
    await this.periodic.stop(timeoutMs);
    await this.allocator.stop();
    await this.consoles.stop();
    await this.metricsServer?.close();
    await this.listener?.stop();
    const drained = await this.runner.drain(timeoutMs);
    this.operations.stop();
    if (!drained) this.log.warn({ running: this.runner.running }, 'shutdown timeout: intents still running are handed back');
    await this.recover(this.hostname);
    await this.agentClient.close();
    await this.wake.close();
    await markOffline(this.deps.db, this.hostname);
    this.state = 'stopped';
    this.log.info('conductor stopped');
  }
}
