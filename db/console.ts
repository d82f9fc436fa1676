import { createHash, randomBytes } from 'node:crypto';
import type { Knex } from 'knex';

/** Postgres channel the nodes trigger notifies (payload: node id) on console-relevant changes. */
export const CONSOLE_CHANNEL = 'galvanic_console';

export type ConsoleMode = 'ro' | 'rw';

/** SHA-256 of a token, hex: what the database holds instead of the token. */
export function hashToken(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

/** A fresh token: 256 random bits, URL-safe. */
export function newToken(): string {
  return randomBytes(32).toString('base64url');
}

/** Token strings as newToken makes them; anything else is refused before a lookup. */
export const TOKEN_RE = /^[A-Za-z0-9_-]{43}$/;

/** Stores a token for a node at `accessEpoch`; call inside the transaction that authorised it. */
export async function insertToken(trx: Knex.Transaction, v: {
  token: string; nodeId: number; accessEpoch: number; mode: ConsoleMode; requester: string | null; ttlSeconds: number;
}): Promise<Date> {
  const [row] = await trx('console_tokens').insert({
    token_hash: hashToken(v.token),
    node_id: v.nodeId,
    access_epoch: v.accessEpoch,
    mode: v.mode,
    requester: v.requester,
    expires_at: trx.raw("now() + make_interval(secs => ?)", [v.ttlSeconds]),
  }).returning('expires_at');
  return new Date(row.expires_at as string);
}

/** What a token grants, once checked against its node. */
export interface TokenGrant {
  nodeId: number;
  nodeUuid: string;
  mode: ConsoleMode;
  accessEpoch: number;
  /** The token's epoch is still the node's, it has not expired and the console is enabled. */
  valid: boolean;
  /** Why not, when not valid. */
  reason: string | null;
  /** The holder of the node's console process, if any. */
  conductor: string | null;
  endpoint: string | null;
}

/** Looks a token up with its node and console holder; undefined when no such token exists. */
export async function checkToken(db: Knex, token: string): Promise<TokenGrant | undefined> {
  const row = await db('console_tokens as t')
    .join('nodes as n', 'n.id', 't.node_id')
    .leftJoin('console_processes as p', 'p.node_id', 't.node_id')
    .where('t.token_hash', hashToken(token))
    .first(
      't.node_id', 'n.uuid', 't.mode', 't.access_epoch', 'n.access_epoch as node_epoch', 'n.console_enabled',
      db.raw('t.expires_at <= now() AS expired'), 'p.conductor', 'p.endpoint',
    );
  if (!row) return undefined;
  const epoch = Number(row.access_epoch);
  let reason: string | null = null;
  if (row.expired) reason = 'the console token has expired';
  else if (Number(row.node_epoch) !== epoch) reason = 'access to the node changed after the console token was issued';
  else if (!row.console_enabled) reason = 'the console of the node is disabled';
  return {
    nodeId: row.node_id as number,
    nodeUuid: row.uuid as string,
    mode: row.mode as ConsoleMode,
    accessEpoch: epoch,
    valid: reason === null,
    reason,
    conductor: (row.conductor as string | null) ?? null,
    endpoint: (row.endpoint as string | null) ?? null,
  };
}

/** Current access epochs of nodes (absent = deleted). */
export async function accessEpochs(db: Knex, nodeIds: number[]): Promise<Map<number, { epoch: number; enabled: boolean }>> {
  const rows = await db('nodes').whereIn('id', nodeIds).select('id', 'access_epoch', 'console_enabled');
  return new Map(rows.map((r: { id: number; access_epoch: string; console_enabled: boolean }) => [r.id, { epoch: Number(r.access_epoch), enabled: r.console_enabled }]));
}

export async function deleteExpiredTokens(db: Knex): Promise<number> {
  return db('console_tokens').where('expires_at', '<', db.raw('now()')).delete();
}

/** The shared secret of API servers and conductors for the internal console endpoint. */
export async function consoleSecret(db: Knex): Promise<string> {
  const row = await db('console_secret').where('id', 1).first('secret');
  return row.secret as string;
}

/** A node whose console should be running somewhere. */
export interface ConsoleTarget {
  id: number;
  uuid: string;
  consoleInterface: string;
  driverInfo: Record<string, unknown>;
}

/** Nodes of a group with the console enabled and a console interface other than no-console. */
export async function enabledConsoles(db: Knex, conductorGroup: string, drivers: string[]): Promise<ConsoleTarget[]> {
  const rows = await db('nodes')
    .where({ conductor_group: conductorGroup, console_enabled: true })
    .whereIn('driver', drivers)
    .whereNotNull('console_interface')
    .whereNot('console_interface', 'no-console')
    .select('id', 'uuid', 'console_interface', 'driver_info')
    .orderBy('id');
  return rows.map((r: Record<string, unknown>) => ({
    id: r.id as number, uuid: r.uuid as string, consoleInterface: r.console_interface as string, driverInfo: r.driver_info as Record<string, unknown>,
  }));
}

/** Where a console process runs: the pid names a process only within one boot of one machine. */
export interface ProcessRecord {
  pid: number;
  startTicks: number;
  bootId: string | null;
}

/**
 * Records this conductor as the holder of a node's console. Succeeds when nobody holds it,
 * when this conductor already does, or when the holder is no longer alive. A dead holder's
 * process is not forgotten: it moves to `console_orphans`, in the same transaction, until a
 * conductor that can reach it has seen it gone.
 */
export async function claimConsole(db: Knex, nodeId: number, conductor: string, endpoint: string, heartbeatTimeout: number): Promise<boolean> {
  return db.transaction(async (trx) => {
    const { rows } = await trx.raw<{ rows: Array<{ conductor: string; pid: number | null; start_ticks: string | null; boot_id: string | null; alive: boolean }> }>(
      `SELECT p.conductor, p.pid, p.start_ticks, p.boot_id,
              EXISTS (SELECT 1 FROM conductors c WHERE c.hostname = p.conductor
                      AND c.online AND c.heartbeat_at > now() - make_interval(secs => ?)) AS alive
         FROM console_processes p WHERE p.node_id = ? FOR UPDATE`,
      [heartbeatTimeout, nodeId],
    );
    const held = rows[0];
    if (held && held.conductor !== conductor && held.alive) return false;
    if (held && held.pid !== null && held.start_ticks !== null) {
      await insertOrphan(trx, nodeId, held.conductor, { pid: held.pid, startTicks: Number(held.start_ticks), bootId: held.boot_id });
    }
    if (held) {
      await trx('console_processes').where('node_id', nodeId)
        .update({ conductor, endpoint, pid: null, start_ticks: null, boot_id: null, started_at: trx.fn.now() });
      return true;
    }
    // Nobody held it when we looked: a conductor claiming at the same moment wins or loses here.
    const inserted = await trx('console_processes').insert({ node_id: nodeId, conductor, endpoint }).onConflict('node_id').ignore().returning('node_id');
    return inserted.length === 1;
  });
}

export async function recordConsolePid(db: Knex, nodeId: number, conductor: string, proc: ProcessRecord): Promise<void> {
  await db('console_processes').where({ node_id: nodeId, conductor }).update({ pid: proc.pid, start_ticks: proc.startTicks, boot_id: proc.bootId });
}

/**
 * Removes this conductor's record of a node's console. A process that is still running
 * (`leftover`: it could not be ended) becomes an orphan instead of being forgotten.
 */
export async function releaseConsole(db: Knex, nodeId: number, conductor: string, leftover?: ProcessRecord): Promise<void> {
  await db.transaction(async (trx) => {
    if (leftover) await insertOrphan(trx, nodeId, conductor, leftover);
    await trx('console_processes').where({ node_id: nodeId, conductor }).delete();
  });
}

async function insertOrphan(db: Knex, nodeId: number, conductor: string, p: ProcessRecord): Promise<void> {
  await db('console_orphans')
    .insert({ node_id: nodeId, conductor, pid: p.pid, start_ticks: p.startTicks, boot_id: p.bootId })
    .onConflict(['pid', 'start_ticks', 'boot_id']).ignore();
}

/** A console process whose holder lost it (crash, takeover): to be killed where it runs. */
export interface OrphanConsole extends ProcessRecord {
  id: number;
  nodeId: number;
  conductor: string;
}

/**
 * Orphans this conductor should deal with: those it started itself (any boot: a stale boot
 * means the process died with the machine) and those of any conductor on this boot (this
 * machine), optionally of one node only.
 */
export async function orphanConsoles(db: Knex, conductor: string, bootId: string | null, nodeId?: number): Promise<OrphanConsole[]> {
  const q = db('console_orphans').where((w) => {
    w.where('conductor', conductor);
    if (bootId !== null) w.orWhere('boot_id', bootId);
  });
  if (nodeId !== undefined) q.andWhere('node_id', nodeId);
  const rows = await q.select('id', 'node_id', 'conductor', 'pid', 'start_ticks', 'boot_id').orderBy('id');
  return rows.map((r: { id: string; node_id: number; conductor: string; pid: number; start_ticks: string; boot_id: string | null }) => ({
    id: Number(r.id), nodeId: r.node_id, conductor: r.conductor, pid: r.pid, startTicks: Number(r.start_ticks), bootId: r.boot_id,
  }));
}

/** Forgets orphans seen gone. */
export async function forgetOrphans(db: Knex, ids: number[]): Promise<void> {
  if (ids.length) await db('console_orphans').whereIn('id', ids).delete();
}

/** Wakes console holders about a node (another conductor may be waiting to take its console over). */
export async function notifyConsole(db: Knex, nodeId: number): Promise<void> {
  await db.raw('SELECT pg_notify(?, ?)', [CONSOLE_CHANNEL, String(nodeId)]);
}

/** Whether a node exists and has its console enabled. */
export async function consoleEnabled(db: Knex, nodeId: number): Promise<boolean> {
  const node = await db('nodes').where({ id: nodeId }).first('console_enabled');
  return node?.console_enabled === true;
}

export interface RecordedConsole {
  nodeId: number;
  pid: number | null;
  startTicks: number | null;
  bootId: string | null;
}

/** The console processes a conductor recorded (for reaping after a crash). */
export async function recordedConsoles(db: Knex, conductor: string): Promise<RecordedConsole[]> {
  const rows = await db('console_processes').where({ conductor }).select('node_id', 'pid', 'start_ticks', 'boot_id');
  return rows.map((r: { node_id: number; pid: number | null; start_ticks: string | null; boot_id: string | null }) => ({
    nodeId: r.node_id, pid: r.pid, startTicks: r.start_ticks === null ? null : Number(r.start_ticks), bootId: r.boot_id,
  }));
}

/** Where the console of a node is held, if anywhere. */
export async function consoleEndpoint(db: Knex, nodeId: number): Promise<string | undefined> {
  const row = await db('console_processes').where('node_id', nodeId).first('endpoint');
  return (row?.endpoint as string | undefined) ?? undefined;
}
