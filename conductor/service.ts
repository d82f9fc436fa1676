import type { Knex } from 'knex';
import pg from 'pg';
import type { Logger } from 'pino';
import type { Config } from '../common/config.js';
import { heartbeat, markOffline, registerConductor } from '../db/conductors.js';
import { INTENT_CHANNEL, requeueRunningOf } from '../db/intents.js';
import { assertSchemaCurrent } from '../db/migrate.js';
import type { DriverRegistry } from '../drivers/registry.js';
import { provisionAction } from './actions/provision.js';
import type { Action } from './actions/types.js';
import { IntentRunner } from './intent-runner.js';

export type ServiceState = 'starting' | 'running' | 'draining' | 'stopped';

export interface ConductorDeps {
  config: Readonly<Config>;
  db: Knex;
  /** For the LISTEN connection, which must not come from the pool. */
  connectionString: string;
  registry: DriverRegistry;
  log: Logger;
}

/** Actions by intent kind. */
export const ACTIONS: Record<string, Action> = {
  provision: provisionAction,
};

/**
 * A conductor: registers and heartbeats, listens for new intents, runs them through the
 * IntentRunner, and on stop drains (bounded), releases what it holds and goes offline.
 */
export class ConductorService {
  state: ServiceState = 'starting';
  readonly hostname: string;
  private readonly runner: IntentRunner;
  private readonly log: Logger;
  private listener?: pg.Client;
  private timers: NodeJS.Timeout[] = [];

  constructor(private readonly deps: ConductorDeps) {
    this.hostname = deps.config.DEFAULT.host;
    this.log = deps.log.child({ component: 'conductor', conductor: this.hostname });
    const c = deps.config.conductor;
    this.runner = new IntentRunner(deps.db, deps.registry, ACTIONS, this.log, {
      hostname: this.hostname,
      workers: c.workers_pool_size,
      retryInitialDelayMs: c.intent_retry_initial_delay * 1000,
      retryMaxDelayMs: c.intent_retry_max_delay * 1000,
    });
  }

  async start(): Promise<void> {
    const { db, config, registry } = this.deps;
    await assertSchemaCurrent(db);
    await registerConductor(db, this.hostname, config.conductor.conductor_group, registry.hardwareTypes().map((t) => t.name));
    // Whatever this host held before a restart is stale: hand it back to the queue.
    const requeued = await requeueRunningOf(db, this.hostname);
    if (requeued) this.log.warn({ requeued }, 'requeued intents left running by a previous run of this conductor');

    this.listener = new pg.Client({ connectionString: this.deps.connectionString, application_name: 'galvanic-conductor-listen' });
    this.listener.on('error', (err) => this.log.error({ err }, 'LISTEN connection failed; relying on polling'));
    await this.listener.connect();
    this.listener.on('notification', () => this.runner.pump());
    await this.listener.query(`LISTEN ${INTENT_CHANNEL}`);

    const c = config.conductor;
    this.timers.push(setInterval(() => {
      heartbeat(db, this.hostname).catch((err) => this.log.error({ err }, 'heartbeat failed'));
    }, c.heartbeat_interval * 1000));
    // The safety net for a lost NOTIFY and for retries whose not_before has passed.
    this.timers.push(setInterval(() => this.runner.pump(), c.poll_interval * 1000));
    this.state = 'running';
    this.runner.pump();
    this.log.info('conductor started');
  }

  async stop(): Promise<void> {
    if (this.state === 'stopped' || this.state === 'draining') return;
    this.state = 'draining';
    for (const t of this.timers) clearInterval(t);
    this.timers = [];
    await this.listener?.end().catch(() => undefined);
    const drained = await this.runner.drain(this.deps.config.conductor.graceful_shutdown_timeout * 1000);
    if (!drained) this.log.warn({ running: this.runner.running }, 'shutdown timeout: intents still running are requeued');
    await requeueRunningOf(this.deps.db, this.hostname);
    await markOffline(this.deps.db, this.hostname);
    this.state = 'stopped';
    this.log.info('conductor stopped');
  }
}
