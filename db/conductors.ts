import type { Knex } from 'knex';
import { ConductorNotFound } from '../common/errors.js';
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
