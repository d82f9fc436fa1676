import { timingSafeEqual } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import type { Knex } from 'knex';
import pg from 'pg';
import type { Logger } from 'pino';
import { WebSocketServer, type WebSocket } from 'ws';
import type { Config } from '../../common/config.js';
import { AUTH_HEADER, CloseCode, TOKEN_HEADER, relayAuth } from '../../common/console-relay.js';
import {
  CONSOLE_CHANNEL, accessEpochs, checkToken, claimConsole, consoleSecret, deleteExpiredTokens, enabledConsoles,
  recordConsolePid, recordedConsoles, releaseConsole, type ConsoleTarget,
} from '../../db/console.js';
import type { DriverRegistry } from '../../drivers/registry.js';
import { ConsoleProcess, killGroup, processStartTicks } from './console-process.js';
import { RotatingLog } from './rotating-log.js';
import { ConsoleSession } from './session.js';

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

interface ConsoleEntry {
  target: ConsoleTarget;
  /** The command line (without secrets in logs), to notice a driver_info change. */
  key: string;
  proc: ConsoleProcess;
  sessions: Set<ConsoleSession>;
  writer?: ConsoleSession;
}

/**
 * The consoles of the nodes this conductor owns: at most one process per node (also held in
 * `console_processes`, whose primary key makes it one per node across conductors), viewer
 * sessions on an internal websocket endpoint that API servers relay to, and the rule that a
 * session lives only while its token's access epoch is the node's.
 */
export class ConsoleManager {
  private readonly consoles = new Map<number, ConsoleEntry>();
  /** The newest access epoch seen per node: a session checked against an older one is refused. */
  private readonly knownEpoch = new Map<number, number>();
  private readonly log: Logger;
  private server?: http.Server;
  private readonly wss = new WebSocketServer({ noServer: true });
  private listener?: pg.Client;
  private pollTimer?: NodeJS.Timeout;
  private secret = '';
  private endpoint = '';
  private reconciling?: Promise<void>;
  private again = false;
  private stopped = false;
  /** Node ids whose access changed since the last check. */
  private readonly dirty = new Set<number>();

  constructor(private readonly deps: ConsoleManagerDeps) {
    this.log = deps.log.child({ subsystem: 'console' });
  }

  /** Reaps what a previous run of this host left, opens the endpoint, and starts reconciling. */
  async start(): Promise<void> {
    const { db, config } = this.deps;
    this.secret = await consoleSecret(db);
    await this.reapRecorded();
    this.server = http.createServer((req, res) => this.serveHttp(req, res));
    this.server.on('upgrade', (req, socket, head) => void this.upgrade(req, socket, head));
    await new Promise<void>((resolve, reject) => {
      this.server!.once('error', reject);
      this.server!.listen(config.console.internal_port, config.console.internal_host, () => resolve());
    });
    const { port } = this.server.address() as AddressInfo;
    this.endpoint = `${config.console.internal_host.includes(':') ? `[${config.console.internal_host}]` : config.console.internal_host}:${port}`;

    this.listener = new pg.Client({ connectionString: this.deps.connectionString, application_name: 'galvanic-console-listen' });
    this.listener.on('error', (err) => this.log.error({ err }, 'console LISTEN connection failed; relying on polling'));
    await this.listener.connect();
    this.listener.on('notification', (msg) => {
      const id = Number(msg.payload);
      if (Number.isInteger(id)) this.dirty.add(id);
      void this.checkSessions();
      this.reconcileSoon();
    });
    await this.listener.query(`LISTEN ${CONSOLE_CHANNEL}`);
    this.pollTimer = setInterval(() => void this.checkSessions(true), EPOCH_POLL_MS);
    await this.reconcile();
    this.log.info({ endpoint: this.endpoint }, 'console endpoint listening');
  }

  /** Counts for /metrics and tests. */
  stats(): { processes: number; sessions: number; writers: number } {
    let sessions = 0;
    let writers = 0;
    for (const e of this.consoles.values()) {
      sessions += [...e.sessions].filter((s) => s.live).length;
      if (e.writer) writers++;
    }
    return { processes: [...this.consoles.values()].filter((e) => e.proc.pid !== undefined).length, sessions, writers };
  }

  /** Asks for a reconciliation; calls made while one runs coalesce into one more. */
  reconcileSoon(): void {
    if (this.stopped) return;
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

  /** The watchdog: consoles wanted here are running, others are not; expired tokens go. */
  async watchdog(): Promise<{ nodes: number }> {
    this.reconcileSoon();
    await this.reconciling;
    await deleteExpiredTokens(this.deps.db);
    return { nodes: this.consoles.size };
  }

  private async reconcile(): Promise<void> {
    const { db, config, registry } = this.deps;
    const wanted = new Map<number, { target: ConsoleTarget; key: string }>();
    for (const target of await enabledConsoles(db, config.conductor.conductor_group, this.deps.drivers)) {
      if (this.stopped) return;
      if (!this.deps.owns(target.uuid)) continue;
      const iface = registry.console(target.consoleInterface);
      if (!iface) continue;
      try {
        const cmd = iface.command(target.uuid, target.driverInfo);
        if (cmd) wanted.set(target.id, { target, key: JSON.stringify([cmd.command, cmd.args]) + JSON.stringify(target.driverInfo) });
      } catch (err) {
        this.log.warn({ node: target.uuid, err: (err as Error).message }, 'console cannot start: invalid driver_info');
      }
    }
    for (const [id, entry] of this.consoles) {
      const want = wanted.get(id);
      if (!want || want.key !== entry.key) {
        await this.stopConsole(id, CloseCode.CONSOLE_DISABLED, want ? 'the console was restarted with new settings' : 'the console was disabled or moved to another conductor');
      }
    }
    for (const [id, { target, key }] of wanted) {
      if (this.stopped) return;
      if (this.consoles.has(id)) continue;
      if (!(await claimConsole(db, id, this.deps.hostname, this.endpoint, config.conductor.heartbeat_timeout))) {
        this.log.debug({ node: target.uuid }, 'console held by another live conductor; will retry');
        continue;
      }
      this.startConsole(target, key);
    }
  }

  private startConsole(target: ConsoleTarget, key: string): void {
    const { config, registry, db } = this.deps;
    const iface = registry.console(target.consoleInterface)!;
    const command = iface.command(target.uuid, target.driverInfo)!;
    const c = config.console;
    let log: RotatingLog | undefined;
    if (c.log_dir) {
      try {
        mkdirSync(c.log_dir, { recursive: true, mode: 0o700 });
        log = new RotatingLog(path.join(c.log_dir, `${target.uuid}.log`), c.log_max_bytes, c.log_backups);
      } catch (err) {
        this.log.error({ node: target.uuid, err: (err as Error).message }, 'console log cannot be opened; running without it');
      }
    }
    const logger = this.log.child({ node: target.uuid });
    const proc = new ConsoleProcess({
      nodeUuid: target.uuid,
      command,
      reset: iface.reset?.(target.driverInfo),
      bufferBytes: c.buffer_bytes,
      log,
      restartInitialMs: c.restart_initial_delay * 1000,
      restartMaxMs: c.restart_max_delay * 1000,
      logger,
      onSpawn: (pid, ticks) => {
        recordConsolePid(db, target.id, this.deps.hostname, pid, ticks).catch((err) => logger.error({ err }, 'recording the console pid failed'));
      },
    });
    const entry: ConsoleEntry = { target, key, proc, sessions: new Set() };
    proc.on('data', (d) => {
      for (const s of entry.sessions) s.send(d);
    });
    this.consoles.set(target.id, entry);
    proc.start();
  }

  private async stopConsole(nodeId: number, code: number, reason: string): Promise<void> {
    const entry = this.consoles.get(nodeId);
    if (!entry) return;
    this.consoles.delete(nodeId);
    for (const s of entry.sessions) s.close(code, reason);
    await entry.proc.stop();
    await releaseConsole(this.deps.db, nodeId, this.deps.hostname);
    // Another conductor may be waiting to take this console over.
    await this.deps.db.raw('SELECT pg_notify(?, ?)', [CONSOLE_CHANNEL, String(nodeId)]).catch(() => undefined);
    this.log.info({ node: entry.target.uuid, reason }, 'console stopped');
  }

  /**
   * Closes sessions whose token's epoch is no longer the node's (or whose node lost its
   * console), and idle ones. `all`: check every node with sessions, not just notified ones.
   */
  private async checkSessions(all = false): Promise<void> {
    const now = Date.now();
    const idleMs = this.deps.config.console.idle_timeout * 1000;
    const ids = new Set<number>(this.dirty);
    this.dirty.clear();
    for (const [id, e] of this.consoles) {
      if (e.sessions.size === 0) continue;
      if (all) ids.add(id);
      if (idleMs > 0) {
        for (const s of e.sessions) if (s.live && now - s.lastActivity > idleMs) s.close(CloseCode.IDLE, `idle for more than ${idleMs / 1000} s`);
      }
    }
    if (ids.size === 0) return;
    let epochs: Map<number, { epoch: number; enabled: boolean }>;
    try {
      epochs = await accessEpochs(this.deps.db, [...ids]);
    } catch (err) {
      this.log.error({ err }, 'checking console access failed');
      return;
    }
    for (const id of ids) {
      const now = epochs.get(id);
      if (now) this.knownEpoch.set(id, Math.max(now.epoch, this.knownEpoch.get(id) ?? 0));
      const entry = this.consoles.get(id);
      if (!entry) continue;
      for (const s of entry.sessions) {
        if (!s.live) continue;
        if (!now) s.close(CloseCode.CONSOLE_DISABLED, 'the node was deleted');
        else if (now.epoch !== s.epoch) s.close(CloseCode.ACCESS_CHANGED, 'access to the node changed (owner, lessee, maintenance or console disabled); request a new console token');
        else if (!now.enabled) s.close(CloseCode.CONSOLE_DISABLED, 'the console of the node was disabled');
      }
    }
  }

  private serveHttp(req: http.IncomingMessage, res: http.ServerResponse): void {
    if (req.method === 'GET' && req.url === '/metrics') {
      const s = this.stats();
      const host = this.deps.hostname.replace(/["\\\n]/g, '_');
      res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' });
      res.end([
        '# HELP galvanic_console_processes Console processes running on this conductor.',
        '# TYPE galvanic_console_processes gauge',
        `galvanic_console_processes{conductor="${host}"} ${s.processes}`,
        '# HELP galvanic_console_sessions Live console viewer sessions on this conductor.',
        '# TYPE galvanic_console_sessions gauge',
        `galvanic_console_sessions{conductor="${host}"} ${s.sessions}`,
        '# HELP galvanic_console_writers Console sessions holding write access.',
        '# TYPE galvanic_console_writers gauge',
        `galvanic_console_writers{conductor="${host}"} ${s.writers}`,
        '',
      ].join('\n'));
      return;
    }
    res.writeHead(404).end();
  }

  private async upgrade(req: http.IncomingMessage, socket: import('node:stream').Duplex, head: Buffer): Promise<void> {
    const refuse = (status: number, text: string) => {
      socket.end(`HTTP/1.1 ${status} ${text}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
    };
    const m = /^\/console\/(\d+)$/.exec(req.url ?? '');
    const token = req.headers[TOKEN_HEADER];
    const auth = req.headers[AUTH_HEADER];
    if (!m || typeof token !== 'string' || typeof auth !== 'string') return refuse(400, 'Bad Request');
    const expected = Buffer.from(relayAuth(this.secret, token));
    const given = Buffer.from(auth);
    if (expected.length !== given.length || !timingSafeEqual(expected, given)) return refuse(403, 'Forbidden');
    const nodeId = Number(m[1]);
    this.wss.handleUpgrade(req, socket, head, (ws) => void this.attach(ws, nodeId, token));
  }

  /**
   * Attaches a viewer. The session is registered before the token is checked, so an access
   * change committed after the check is caught by the next session check; one committed
   * before it is seen by the check itself, or was already seen (`knownEpoch`).
   */
  private async attach(ws: WebSocket, nodeId: number, token: string): Promise<void> {
    const entry = this.consoles.get(nodeId);
    const session = new ConsoleSession(ws, nodeId);
    if (!entry) {
      session.close(CloseCode.CONSOLE_NOT_HERE, 'the console of this node is not running on this conductor');
      return;
    }
    entry.sessions.add(session);
    ws.on('close', () => {
      session.closed = true;
      entry.sessions.delete(session);
      if (entry.writer === session) entry.writer = undefined;
    });
    ws.on('error', () => undefined);
    // Input may arrive while the token is being checked: keep it (bounded) until then.
    const early: Buffer[] = [];
    ws.on('message', (data: Buffer, isBinary: boolean) => {
      session.lastActivity = Date.now();
      const input = isBinary ? data : Buffer.from(data.toString('utf8'));
      if (session.epoch === null) {
        if (early.length < 64) early.push(input);
      } else if (session.mode === 'rw' && session.live) {
        entry.proc.write(input);
      }
    });
    let grant;
    try {
      grant = await checkToken(this.deps.db, token);
    } catch (err) {
      this.log.error({ err }, 'console token check failed');
      session.close(1011, 'token check failed');
      return;
    }
    if (session.closed) return;
    if (!grant || grant.nodeId !== nodeId) return session.close(CloseCode.TOKEN_REFUSED, 'unknown console token');
    if (!grant.valid) return session.close(CloseCode.TOKEN_REFUSED, `console token refused: ${grant.reason}`);
    if (grant.accessEpoch < (this.knownEpoch.get(nodeId) ?? 0)) {
      return session.close(CloseCode.TOKEN_REFUSED, 'console token refused: access to the node changed after the console token was issued');
    }
    if (this.consoles.get(nodeId) !== entry) return session.close(CloseCode.CONSOLE_DISABLED, 'the console of the node was stopped');
    if (grant.mode === 'rw') {
      if (entry.writer && !entry.writer.closed) {
        return session.close(CloseCode.WRITER_PRESENT, 'another read-write session is connected to this console; use a read-only token or try later');
      }
      entry.writer = session;
    }
    session.mode = grant.mode;
    session.epoch = grant.accessEpoch;
    if (session.mode === 'rw') for (const input of early.splice(0)) entry.proc.write(input);
    const backlog = entry.proc.backlog();
    if (backlog.length) session.send(backlog);
  }

  /** Kills console processes this host recorded before (a crash or SIGKILL) and forgets them. */
  private async reapRecorded(): Promise<void> {
    const { db, hostname } = this.deps;
    for (const r of await recordedConsoles(db, hostname)) {
      if (r.pid !== null && r.startTicks !== null && processStartTicks(r.pid) === r.startTicks) {
        killGroup(r.pid, 'SIGKILL');
        this.log.warn({ consolePid: r.pid, nodeId: r.nodeId }, 'reaped a console process left by an earlier run');
      }
      await releaseConsole(db, r.nodeId, hostname);
    }
  }

  /** Stops every console (sessions closed, processes ended, records removed). */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.pollTimer);
    await this.reconciling;
    for (const id of [...this.consoles.keys()]) await this.stopConsole(id, CloseCode.SHUTDOWN, 'the conductor is shutting down');
    await this.listener?.end().catch(() => undefined);
    this.wss.close();
    if (this.server) {
      this.server.closeAllConnections();
      await new Promise((r) => this.server!.close(r));
    }
  }
}
