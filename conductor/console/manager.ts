import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { Config } from '../../common/config.js';
import { CONSOLE_CHANNEL, consoleSecret, deleteExpiredTokens } from '../../db/console.js';
import { PgListener } from '../../db/listener.js';
import type { DriverRegistry } from '../../drivers/registry.js';
import { AccessGuard } from './access-guard.js';
import { ConsoleEndpoint, type ConsoleStats } from './endpoint.js';
import { ConsoleReconciler, type StrayReport } from './reconciler.js';

/** How often live sessions are checked against the database (covers a lost NOTIFY) and for idleness. */
const EPOCH_POLL_MS = 400;

export interface ConsoleManagerDeps {
  config: Readonly<Config>;
  db: Knex;
  connectionString: string;
  registry: DriverRegistry;
  log: Logger;
  hostname: string;
  drivers: string[];
  /** True when the hash ring gives this node to this conductor. */
  owns(nodeUuid: string): boolean;
}

/**
 * The consoles of the nodes this conductor owns: at most one process per node (also held in
 * `console_processes`, whose primary key makes it one per node across conductors), viewer
 * sessions on an internal websocket endpoint that API servers relay to, and the rule that a
 * session lives only while its token's access epoch is the node's. The parts: the
 * reconciler (processes and their records), the access guard (sessions) and the endpoint.
 */
export class ConsoleManager {
  private readonly log: Logger;
  private readonly reconciler: ConsoleReconciler;
  private readonly guard: AccessGuard;
  private readonly endpoint: ConsoleEndpoint;
  private listener?: PgListener;
  private pollTimer?: NodeJS.Timeout;
  private secret = '';
  private address = '';
  private reconciling?: Promise<void>;
  private again = false;

  constructor(private readonly deps: ConsoleManagerDeps) {
    this.log = deps.log.child({ subsystem: 'console' });
    this.reconciler = new ConsoleReconciler({ ...deps, log: this.log }, () => this.address);
    this.guard = new AccessGuard({ config: deps.config, db: deps.db, log: this.log }, this.reconciler.consoles);
    this.endpoint = new ConsoleEndpoint({
      hostname: deps.hostname,
      secret: () => this.secret,
      stats: () => this.stats(),
      onViewer: (ws, nodeId, token) => void this.guard.attach(ws, nodeId, token),
    });
  }

  /** Reaps what a previous run of this host left, opens the endpoint, and starts reconciling. */
  async start(): Promise<void> {
    const { db, config } = this.deps;
    this.secret = await consoleSecret(db);
    await this.reconciler.reapRecorded();
    this.address = await this.endpoint.listen(config.console.internal_host, config.console.internal_port);

    this.listener = new PgListener({
      connectionString: this.deps.connectionString, applicationName: 'galvanic-console-listen', channels: [CONSOLE_CHANNEL], log: this.log,
      onNotification: (_channel, payload) => {
        const id = Number(payload);
        if (Number.isInteger(id)) this.guard.markDirty(id);
        void this.guard.checkSessions();
        this.reconcileSoon();
      },
      // Access changes notified while the connection was down: check every session.
      onReconnect: () => {
        void this.guard.checkSessions(true);
        this.reconcileSoon();
      },
    });
    await this.listener.start();
    this.pollTimer = setInterval(() => void this.guard.checkSessions(true), EPOCH_POLL_MS);
    await this.reconcile();
    this.log.info({ endpoint: this.address }, 'console endpoint listening');
  }

  /** Counts for /metrics and tests. */
  stats(): ConsoleStats {
    let sessions = 0;
    let writers = 0;
    let processes = 0;
    for (const e of this.reconciler.consoles.values()) {
      sessions += [...e.sessions].filter((s) => s.live).length;
      if (e.writer) writers++;
      if (e.proc.pid !== undefined) processes++;
    }
    return { processes, sessions, writers, strays: this.reconciler.straysFound };
  }

  /** Asks for a reconciliation; calls made while one runs coalesce into one more. */
  reconcileSoon(): void {
    if (this.reconciler.isStopped) return;
    if (this.reconciling) {
      this.again = true;
      return;
    }
    this.reconciling = this.reconcile()
      .catch((err) => this.log.error({ err }, 'console reconciliation failed'))
      .finally(() => {
        this.reconciling = undefined;
        if (this.again) {
          this.again = false;
          this.reconcileSoon();
        }
      });
  }

  private reconcile(): Promise<void> {
    return this.reconciler.reconcile();
  }

  /**
   * The watchdog: consoles wanted here are running, others are not; console processes on this
   * machine that nobody accounts for are killed and counted; expired tokens go.
   */
  async watchdog(): Promise<{ nodes: number; strays: StrayReport }> {
    this.reconcileSoon();
    await this.reconciling;
    const strays = await this.reconciler.reapStrays();
    if (strays.orphansKilled + strays.unrecorded > 0) this.log.warn({ ...strays }, 'console watchdog found stray console processes');
    await deleteExpiredTokens(this.deps.db);
    return { nodes: this.reconciler.consoles.size, strays };
  }

  /** Stops every console (sessions closed, processes ended, records removed). */
  async stop(): Promise<void> {
    clearInterval(this.pollTimer);
    this.reconciler.halt();
    await this.reconciling;
    await this.reconciler.stopAll();
    await this.listener?.stop();
    await this.endpoint.close();
  }
}
