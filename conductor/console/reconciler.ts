import { mkdirSync } from 'node:fs';
import path from 'node:path';
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { Config } from '../../common/config.js';
import { CloseCode } from '../../common/console-protocol.js';
import {
  claimConsole, enabledConsoles, forgetOrphans, notifyConsole, orphanConsoles, recordConsolePid, recordedConsoles, releaseConsole,
  type ConsoleTarget,
} from '../../db/console.js';
import type { DriverRegistry } from '../../drivers/registry.js';
import { ConsoleProcess } from './console-process.js';
import { bootId, killGroup, markedGroups, processAlive, processStartTicks } from './processes.js';
import { RotatingLog } from './rotating-log.js';
import type { ConsoleSession } from './session.js';

/** How long a killed process gets to disappear from /proc before it is left for the next pass. */
const REAP_WAIT_MS = 2000;

export interface ReconcilerDeps {
  config: Readonly<Config>;
  db: Knex;
  registry: DriverRegistry;
  log: Logger;
  hostname: string;
  drivers: string[];
  owns(nodeUuid: string): boolean;
}

/** A console running here, with its viewers. */
export interface ConsoleEntry {
  target: ConsoleTarget;
  /** The command line (without secrets in logs), to notice a driver_info change. */
  key: string;
  proc: ConsoleProcess;
  sessions: Set<ConsoleSession>;
  writer?: ConsoleSession;
}

/** What one stray scan found and did. */
export interface StrayReport {
  /** Orphans recorded in the database that were still running, and were killed. */
  orphansKilled: number;
  /** Marked process groups without a live owner or unknown to their owner (this conductor), killed. */
  unrecorded: number;
}

/**
 * Keeps the consoles this conductor should hold running, and no other: claims each in
 * `console_processes`, starts and stops its process, and makes sure that no console process
 * it can reach outlives the record of it (orphans of a dead holder, leftovers of an earlier run).
 */
export class ConsoleReconciler {
  readonly consoles = new Map<number, ConsoleEntry>();
  /** Process group ids of the console processes this conductor runs now. */
  private readonly live = new Set<number>();
  private readonly boot = bootId();
  private stopped = false;
  /** Strays found since start, for /metrics. */
  straysFound = 0;

  constructor(private readonly deps: ReconcilerDeps, private readonly endpoint: () => string) {}

  /** Kills console processes this host recorded before (a crash or SIGKILL) and forgets them. */
  async reapRecorded(): Promise<void> {
    const { db, hostname, log } = this.deps;
    for (const r of await recordedConsoles(db, hostname)) {
      // A record of another boot names a process that died with it.
      if (r.pid !== null && r.startTicks !== null && r.bootId === this.boot && processAlive(r.pid, r.startTicks)) {
        killGroup(r.pid, 'SIGKILL');
        log.warn({ consolePid: r.pid, nodeId: r.nodeId }, 'reaped a console process left by an earlier run');
        if (!(await gone(r.pid, r.startTicks))) {
          await releaseConsole(db, r.nodeId, hostname, { pid: r.pid, startTicks: r.startTicks, bootId: r.bootId });
          continue;
        }
      }
      await releaseConsole(db, r.nodeId, hostname);
    }
    await this.reapOrphans();
  }

  /**
   * Kills the orphans this conductor can reach (its own from any earlier run, and any on this
   * machine), optionally of one node only, and forgets those seen gone. Returns how many were
   * still running.
   */
  async reapOrphans(nodeId?: number): Promise<number> {
    const { db, hostname, log } = this.deps;
    const forget: number[] = [];
    let killed = 0;
    for (const o of await orphanConsoles(db, hostname, this.boot, nodeId)) {
      if (o.bootId !== this.boot) {
        // Ours, from another boot of this machine (or another machine under our name): gone.
        forget.push(o.id);
        continue;
      }
      if (this.live.has(o.pid)) continue;
      if (processAlive(o.pid, o.startTicks)) {
        killGroup(o.pid, 'SIGKILL');
        killed++;
        log.warn({ consolePid: o.pid, nodeId: o.nodeId, startedBy: o.conductor }, 'killed a console process whose holder lost it');
        if (!(await gone(o.pid, o.startTicks))) continue;
      }
      forget.push(o.id);
    }
    await forgetOrphans(db, forget);
    return killed;
  }

  /**
   * Finds console processes on this machine that nobody accounts for: marked groups whose
   * owner is gone, or that this conductor started and no longer runs. Kills and counts them.
   */
  async reapStrays(): Promise<StrayReport> {
    const orphansKilled = await this.reapOrphans();
    const self = `${process.pid}:${processStartTicks(process.pid) ?? 0}`;
    let unrecorded = 0;
    for (const g of markedGroups()) {
      const mine = `${g.ownerPid}:${g.ownerStartTicks}` === self;
      if (mine ? this.live.has(g.pgid) : processAlive(g.ownerPid, g.ownerStartTicks)) continue;
      // Seen again: a member is still there (a group id lives as long as one member does).
      if (!markedGroups().some((x) => x.pgid === g.pgid)) continue;
      killGroup(g.pgid, 'SIGKILL');
      unrecorded++;
      this.deps.log.warn({ pgid: g.pgid, pids: g.pids, ownerPid: g.ownerPid, owner: mine ? 'this conductor' : 'gone' }, 'killed a stray console process group');
    }
    this.straysFound += orphansKilled + unrecorded;
    return { orphansKilled, unrecorded };
  }

  /** Consoles wanted here are running, others are not. */
  async reconcile(): Promise<void> {
    const { db, config, registry, log } = this.deps;
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
        log.warn({ node: target.uuid, err: (err as Error).message }, 'console cannot start: invalid driver_info');
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
      if (!(await claimConsole(db, id, this.deps.hostname, this.endpoint(), config.conductor.heartbeat_timeout))) {
        log.debug({ node: target.uuid }, 'console held by another live conductor; will retry');
        continue;
      }
      // A process the previous holder left on this machine goes before ours starts (for IPMI:
      // two SOL sessions would fight over one payload).
      await this.reapOrphans(id);
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
        this.deps.log.error({ node: target.uuid, err: (err as Error).message }, 'console log cannot be opened; running without it');
      }
    }
    const logger = this.deps.log.child({ node: target.uuid });
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
        this.live.add(pid);
        if (ticks === null) return;
        recordConsolePid(db, target.id, this.deps.hostname, { pid, startTicks: ticks, bootId: this.boot })
          .catch((err) => logger.error({ err }, 'recording the console pid failed'));
      },
      onExit: (pid) => this.live.delete(pid),
    });
    const entry: ConsoleEntry = { target, key, proc, sessions: new Set() };
    proc.on('data', (d) => {
      for (const s of entry.sessions) s.send(d);
    });
    this.consoles.set(target.id, entry);
    proc.start();
  }

  async stopConsole(nodeId: number, code: number, reason: string): Promise<void> {
    const entry = this.consoles.get(nodeId);
    if (!entry) return;
    this.consoles.delete(nodeId);
    for (const s of entry.sessions) s.close(code, reason);
    await entry.proc.stop();
    await releaseConsole(this.deps.db, nodeId, this.deps.hostname);
    await notifyConsole(this.deps.db, nodeId).catch(() => undefined);
    this.deps.log.info({ node: entry.target.uuid, reason }, 'console stopped');
  }

  /** No console starts from now on. */
  halt(): void {
    this.stopped = true;
  }

  /** Stops every console (sessions closed, processes ended, records removed). */
  async stopAll(): Promise<void> {
    this.stopped = true;
    for (const id of [...this.consoles.keys()]) await this.stopConsole(id, CloseCode.SHUTDOWN, 'the conductor is shutting down');
  }

  get isStopped(): boolean {
    return this.stopped;
  }
}

/** Waits (bounded) for a killed process to leave /proc. */
async function gone(pid: number, startTicks: number): Promise<boolean> {
  const deadline = Date.now() + REAP_WAIT_MS;
  while (processAlive(pid, startTicks)) {
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 20));
  }
  return true;
}
