import type { Knex } from 'knex';
import { ConductorNotFound } from '../common/errors.js';
import { ringOf, type HashRing } from '../common/hash-ring.js';
import { RowMapper } from './rows.js';

export interface Conductor {
  id: number;
  hostname: string;
  conductorGroup: string;
  drivers: string[];
  online: boolean;
  heartbeatAt: Date;
  createdAt: Date;
  updatedAt: Date | null;
}

const mapper = new RowMapper<Conductor>(
  ['id', 'hostname', 'conductor_group', 'drivers', 'online', 'heartbeat_at', 'created_at', 'updated_at'],
  ['drivers'],
);

/** Registers (or re-registers after a restart) a conductor and marks it online. */
export async function registerConductor(db: Knex, hostname: string, conductorGroup: string, drivers: string[]): Promise<Conductor> {
  const row = mapper.toRow({ hostname, conductorGroup, drivers, online: true });
  const [r] = await db('conductors')
    .insert({ ...row, heartbeat_at: db.fn.now() })
    .onConflict('hostname')
    .merge({ ...row, heartbeat_at: db.fn.now(), updated_at: db.fn.now() })
    .returning('*');
  return mapper.fromRow(r);
}

export async function heartbeat(db: Knex, hostname: string): Promise<void> {
  await db('conductors').where('hostname', hostname).update({ heartbeat_at: db.fn.now(), online: true });
}

export async function markOffline(db: Knex, hostname: string): Promise<void> {
  await db('conductors').where('hostname', hostname).update({ online: false, updated_at: db.fn.now() });
}

/** A conductor is alive when online and its heartbeat is younger than `timeoutSeconds`. */
export interface ConductorWithLiveness extends Conductor {
  alive: boolean;
}

function aliveExpr(db: Knex, timeoutSeconds: number): Knex.Raw {
  return db.raw("(online AND heartbeat_at > now() - make_interval(secs => ?)) AS alive", [timeoutSeconds]);
}

export async function listConductors(db: Knex, timeoutSeconds: number): Promise<ConductorWithLiveness[]> {
  const rows = await db('conductors').select('*', aliveExpr(db, timeoutSeconds)).orderBy('id');
  return rows.map((r: Record<string, unknown>) => ({ ...mapper.fromRow(r), alive: Boolean(r.alive) }));
}

export async function getConductor(db: Knex, hostname: string, timeoutSeconds: number): Promise<ConductorWithLiveness> {
  const r = await db('conductors').select('*', aliveExpr(db, timeoutSeconds)).where('hostname', hostname).first();
  if (!r) throw new ConductorNotFound(hostname);
  return { ...mapper.fromRow(r), alive: Boolean(r.alive) };
}

/**
 * Conductors that stopped heartbeating but still hold something (online flag, running
 * intents or reservations): the survivors recover them.
 */
export async function findDeadConductors(db: Knex, timeoutSeconds: number): Promise<string[]> {
  const rows = await db('conductors')
    .select('hostname')
    .whereRaw('heartbeat_at <= now() - make_interval(secs => ?)', [timeoutSeconds])
    .andWhere((w) => w.where('online', true)
      .orWhereExists(db('nodes').select(db.raw('1')).whereRaw('nodes.reservation = conductors.hostname'))
      .orWhereExists(db('intents').select(db.raw('1')).whereRaw("intents.conductor = conductors.hostname AND intents.state = 'running' AND intents.finished_at IS NULL")));
  return rows.map((r: { hostname: string }) => r.hostname);
}

/** Hostnames of the live conductors (online, heartbeat within the timeout) by group. */
async function liveHostsByGroup(db: Knex, timeoutSeconds: number, group?: string): Promise<Map<string, string[]>> {
  const q = db('conductors')
    .select('hostname', 'conductor_group')
    .where({ online: true })
    .whereRaw('heartbeat_at > now() - make_interval(secs => ?)', [timeoutSeconds]);
  if (group !== undefined) q.andWhere({ conductor_group: group });
  const byGroup = new Map<string, string[]>();
  for (const r of await q as Array<{ hostname: string; conductor_group: string }>) {
    const hosts = byGroup.get(r.conductor_group) ?? [];
    hosts.push(r.hostname);
    byGroup.set(r.conductor_group, hosts);
  }
  return byGroup;
}

/** The hash ring of each group that has a live conductor. */
export async function liveRings(db: Knex, timeoutSeconds: number): Promise<Map<string, HashRing>> {
  const rings = new Map<string, HashRing>();
  for (const [group, hosts] of await liveHostsByGroup(db, timeoutSeconds)) rings.set(group, ringOf(hosts));
  return rings;
}

/** The hash ring of one group's live conductors, with `alsoHosts` on it whatever their heartbeat says. */
export async function liveRing(db: Knex, group: string, timeoutSeconds: number, alsoHosts: readonly string[] = []): Promise<HashRing> {
  const live = (await liveHostsByGroup(db, timeoutSeconds, group)).get(group) ?? [];
  return ringOf([...live, ...alsoHosts]);
}
