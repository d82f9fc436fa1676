import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { WebSocket } from 'ws';
import type { Config } from '../../common/config.js';
import { CloseCode, MAX_PENDING_INPUT_BYTES, MAX_QUEUED_INPUT_BYTES } from '../../common/console-protocol.js';
import { accessEpochs, checkToken } from '../../db/console.js';
import type { ConsoleEntry } from './reconciler.js';
import { ConsoleSession } from './session.js';

/**
 * The rule that a console session lives only while its token's access epoch is the node's
 * and the node's console is enabled: checked when a viewer attaches, again on every NOTIFY
 * about the node and by a poll that covers a lost one; also the idle timeout and the bounds
 * on a viewer's input.
 */
export class AccessGuard {
  /** The newest access epoch seen per node: a session checked against an older one is refused. */
  private readonly knownEpoch = new Map<number, number>();
  /** Node ids whose access changed since the last check. */
  private readonly dirty = new Set<number>();

  constructor(
    private readonly deps: { config: Readonly<Config>; db: Knex; log: Logger },
    private readonly consoles: ReadonlyMap<number, ConsoleEntry>,
  ) {}

  /** Notes a NOTIFY about a node: its sessions are checked at the next check. */
  markDirty(nodeId: number): void {
    this.dirty.add(nodeId);
  }

  /**
   * Closes sessions whose token's epoch is no longer the node's (or whose node lost its
   * console), and idle ones. `all`: check every node with sessions, not just notified ones.
   */
  async checkSessions(all = false): Promise<void> {
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
      this.deps.log.error({ err }, 'checking console access failed');
      return;
    }
    for (const id of ids) {
      const state = epochs.get(id);
      if (state) this.knownEpoch.set(id, Math.max(state.epoch, this.knownEpoch.get(id) ?? 0));
      const entry = this.consoles.get(id);
      if (!entry) continue;
      for (const s of entry.sessions) {
        if (!s.live) continue;
        // Disabling also bumps the epoch: it is told as a disable, whichever check sees it first.
        if (!state) s.close(CloseCode.CONSOLE_DISABLED, 'the node was deleted');
        else if (!state.enabled) s.close(CloseCode.CONSOLE_DISABLED, 'the console of the node was disabled');
        else if (state.epoch !== s.epoch) s.close(CloseCode.ACCESS_CHANGED, 'access to the node changed (owner, lessee or maintenance); request a new console token');
      }
    }
  }

  /**
   * Attaches a viewer. The session is registered before the token is checked, so an access
   * change committed after the check is caught by the next session check; one committed
   * before it is seen by the check itself, or was already seen (`knownEpoch`).
   */
  async attach(ws: WebSocket, nodeId: number, token: string): Promise<void> {
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
    // Input may arrive while the token is being checked: kept (bounded) until then.
    const early: Buffer[] = [];
    let earlyBytes = 0;
    ws.on('message', (data: Buffer, isBinary: boolean) => {
      session.lastActivity = Date.now();
      const input = isBinary ? data : Buffer.from(data.toString('utf8'));
      if (session.epoch === null) {
        earlyBytes += input.length;
        if (earlyBytes > MAX_PENDING_INPUT_BYTES) {
          session.close(CloseCode.INPUT_OVERFLOW, `more than ${MAX_PENDING_INPUT_BYTES} bytes of input before the session was attached`);
        } else early.push(input);
      } else if (session.mode === 'rw' && session.live) {
        this.write(entry, session, input);
      }
    });
    let grant;
    try {
      grant = await checkToken(this.deps.db, token);
    } catch (err) {
      this.deps.log.error({ err }, 'console token check failed');
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
    if (session.mode === 'rw') for (const input of early.splice(0)) this.write(entry, session, input);
    const backlog = entry.proc.backlog();
    if (backlog.length) session.send(backlog);
  }

  /** Input to the console, unless the process has left too much of it unread. */
  private write(entry: ConsoleEntry, session: ConsoleSession, input: Buffer): void {
    if (entry.proc.inputQueued + input.length > MAX_QUEUED_INPUT_BYTES) {
      session.close(CloseCode.INPUT_OVERFLOW, `the console process has not read the last ${MAX_QUEUED_INPUT_BYTES} bytes of input`);
      return;
    }
    entry.proc.write(input);
  }
}
