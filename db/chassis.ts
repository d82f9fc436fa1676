import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { ChassisAlreadyExists, ChassisNotEmpty, ChassisNotFound } from '../common/errors.js';
import { RowMapper } from './rows.js';
import { applyPage, isUuid, markerValue } from './nodes.js';
import { isUniqueViolation, pgError, SQLSTATE } from './transaction.js';

/** A chassis: a named group of nodes, nothing more (Ironic's model). */
export interface Chassis {
  id: number;
  uuid: string;
  description: string | null;
  extra: Record<string, unknown>;
  createdAt: Date;
  updatedAt: Date | null;
}

export type ChassisChanges = Partial<Pick<Chassis, 'uuid' | 'description' | 'extra'>>;

const JSON_COLUMNS = ['extra'];
const mapper = new RowMapper<Chassis>(['id', 'uuid', 'description', 'extra', 'created_at', 'updated_at'], JSON_COLUMNS);

/** Columns a client may sort chassis by (Ironic refuses only `extra`). */
export const CHASSIS_SORT_KEYS = new Set(['id', 'uuid', 'description', 'created_at', 'updated_at']);

export async function createChassis(db: Knex, values: ChassisChanges): Promise<Chassis> {
  const uuid = values.uuid ?? randomUUID();
  try {
    const [row] = await db('chassis').insert(mapper.toRow({ ...values, uuid })).returning('*');
    return mapper.fromRow(row);
  } catch (err) {
    if (isUniqueViolation(err, 'chassis_uuid_unique')) throw new ChassisAlreadyExists(uuid);
    throw err;
  }
}

/** By UUID, the only way Ironic names a chassis; `forUpdate` locks the row inside a transaction. */
export async function getChassis(db: Knex, uuid: string, opts: { forUpdate?: boolean } = {}): Promise<Chassis> {
  // Not a UUID: no chassis has it (and Postgres would refuse the comparison).
  if (!isUuid(uuid)) throw new ChassisNotFound(uuid);
  const q = db('chassis').where('uuid', uuid.toLowerCase()).first();
  if (opts.forUpdate) q.forUpdate();
  const row = await q;
  if (!row) throw new ChassisNotFound(uuid);
  return mapper.fromRow(row);
}

export async function listChassis(
  db: Knex,
  page: { limit: number; marker?: Chassis; sortKey: string; sortDir: 'asc' | 'desc' },
): Promise<Chassis[]> {
  const q = db('chassis').select('*');
  applyPage(q, page, (c) => ({
    id: c.id,
    value: markerValue(db, 'chassis', page.sortKey, c.id, (c as unknown as Record<string, unknown>)[mapper.fieldOf(page.sortKey)]),
  }));
  const rows = await q;
  return rows.map((r: Record<string, unknown>) => mapper.fromRow(r));
}

export async function updateChassis(db: Knex, id: number, changes: ChassisChanges): Promise<Chassis> {
  const [row] = await db('chassis').where('id', id).update({ ...mapper.toRow(changes), updated_at: db.fn.now() }).returning('*');
  if (!row) throw new ChassisNotFound(String(id));
  return mapper.fromRow(row);
}

/**
 * Deletes a chassis that no node names. The foreign key from `nodes.chassis_uuid` decides,
 * so a node added to the chassis concurrently cannot be left pointing at nothing.
 */
export async function deleteChassis(db: Knex, chassis: Chassis): Promise<void> {
  try {
    await db('chassis').where('id', chassis.id).delete();
  } catch (err) {
    if (pgError(err)?.code === SQLSTATE.foreignKeyViolation) throw new ChassisNotEmpty(chassis.uuid);
    throw err;
  }
}
