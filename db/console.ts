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

/**
 * Records this conductor as the holder of a node's console. Succeeds when nobody holds it,
 * when this conductor already does, or when the holder is no longer alive.
 */
export async function claimConsole(db: Knex, nodeId: number, conductor: string, endpoint: string, heartbeatTimeout: number): Promise<boolean> {
  const { rows } = await db.raw<{ rows: unknown[] }>(
    `INSERT INTO console_processes (node_id, conductor, endpoint) VALUES (?, ?, ?)
     ON CONFLICT (node_id) DO UPDATE SET conductor = EXCLUDED.conductor, endpoint = EXCLUDED.endpoint,
       pid = NULL, start_ticks = NULL, started_at = now()
     WHERE console_processes.conductor = EXCLUDED.conductor
        OR NOT EXISTS (SELECT 1 FROM conductors c WHERE c.hostname = console_processes.conductor
                       AND c.online AND c.heartbeat_at > now() - make_interval(secs => ?))
     RETURNING node_id`,
    [nodeId, conductor, endpoint, heartbeatTimeout],
  );
  return rows.length === 1;
}

export async function recordConsolePid(db: Knex, nodeId: number, conductor: string, pid: number | null, startTicks: number | null): Promise<void> {
  await db('console_processes').where({ node_id: nodeId, conductor }).update({ pid, start_ticks: startTicks });
}

export async function releaseConsole(db: Knex, nodeId: number, conductor: string): Promise<void> {
  await db('console_processes').where({ node_id: nodeId, conductor }).delete();
}

export interface RecordedConsole {
  nodeId: number;
  pid: number | null;
  startTicks: number | null;
}

/** The console processes a conductor recorded (for reaping after a crash). */
export async function recordedConsoles(db: Knex, conductor: string): Promise<RecordedConsole[]> {
  const rows = await db('console_processes').where({ conductor }).select('node_id', 'pid', 'start_ticks');
  return rows.map((r: { node_id: number; pid: number | null; start_ticks: string | null }) => ({
    nodeId: r.node_id, pid: r.pid, startTicks: r.start_ticks === null ? null : Number(r.start_ticks),
  }));
}

/** Where the console of a node is held, if anywhere. */
export async function consoleEndpoint(db: Knex, nodeId: number): Promise<string | undefined> {
  const row = await db('console_processes').where('node_id', nodeId).first('endpoint');
  return (row?.endpoint as string | undefined) ?? undefined;
}
