import type { Knex } from 'knex';
import { ChassisAlreadyExists, ChassisNotEmpty, ChassisNotFound } from '../common/errors.js';
import { RowMapper } from './rows.js';
import { isUuid } from './nodes.js';
import { deleteUnreferenced, plainTable } from './table.js';
import { isUniqueViolation } from './transaction.js';

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

const table = plainTable<Chassis, ChassisChanges>('chassis', mapper, (ident) => new ChassisNotFound(ident), (err, values) => {
  if (isUniqueViolation(err, 'chassis_uuid_unique')) throw new ChassisAlreadyExists(String(values.uuid));
  throw err;
});

export const createChassis = table.create;
export const listChassis = table.list;
export const updateChassis = table.update;

/** By UUID, the only way Ironic names a chassis; `forUpdate` locks the row inside a transaction. */
export async function getChassis(db: Knex, uuid: string, opts: { forUpdate?: boolean } = {}): Promise<Chassis> {
  // Not a UUID: no chassis has it (and Postgres would refuse the comparison).
  if (!isUuid(uuid)) throw new ChassisNotFound(uuid);
  const q = db('chassis').where('uuid', uuid.toLowerCase()).first();
  if (opts.forUpdate) q.forUpdate();
  return mapper.fromFound(await q, () => new ChassisNotFound(uuid));
}

/** Deletes a chassis that no node names (the foreign key from `nodes.chassis_uuid` decides). */
export function deleteChassis(db: Knex, chassis: Chassis): Promise<void> {
  return deleteUnreferenced(db, 'chassis', chassis.id, () => new ChassisNotEmpty(chassis.uuid));
}
