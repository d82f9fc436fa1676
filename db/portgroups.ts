import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import {
  PortgroupAlreadyExists, PortgroupDuplicateName, PortgroupMACAlreadyExists, PortgroupNotEmpty, PortgroupNotFound,
} from '../common/errors.js';
import { RowMapper } from './rows.js';
import { isUuid } from './nodes.js';
import { deleteUnreferenced, insertReturning, listPage, uniqueViolations, type TranslateWrite, updateReturning, withNodeUuid, type PageRequest } from './table.js';
import { pgError, SQLSTATE } from './transaction.js';

/** A group of a node's ports bonded together (Ironic's portgroup). */
export interface Portgroup {
  id: number;
  uuid: string;
  name: string | null;
  address: string | null;
  nodeId: number;
  /** Joined from nodes: the API speaks of nodes by UUID. */
  nodeUuid: string;
  standalonePortsSupported: boolean;
  mode: string | null;
  properties: Record<string, unknown>;
  internalInfo: Record<string, unknown>;
  extra: Record<string, unknown>;
  createdAt: Date;
  updatedAt: Date | null;
}

export type PortgroupChanges = Partial<Omit<Portgroup, 'id' | 'nodeUuid' | 'internalInfo' | 'createdAt' | 'updatedAt'>>;

const JSON_COLUMNS = ['properties', 'internal_info', 'extra'];
const mapper = new RowMapper<Portgroup>([
  'id', 'uuid', 'name', 'address', 'node_id', 'node_uuid', 'standalone_ports_supported', 'mode', ...JSON_COLUMNS,
  'created_at', 'updated_at',
], JSON_COLUMNS);

/** Columns a client may sort port groups by (Ironic refuses the JSON ones). */
export const PORTGROUP_SORT_KEYS = new Set([
  'id', 'uuid', 'name', 'address', 'node_id', 'standalone_ports_supported', 'mode', 'created_at', 'updated_at',
]);

const translateWriteError: TranslateWrite<PortgroupChanges> = uniqueViolations({
  portgroups_name_unique: (values) => new PortgroupDuplicateName(String(values.name)),
  portgroups_address_unique: (values) => new PortgroupMACAlreadyExists(String(values.address)),
  portgroups_uuid_unique: (values) => new PortgroupAlreadyExists(String(values.uuid)),
});

function selectPortgroups(db: Knex): Knex.QueryBuilder {
  return db('portgroups').join('nodes', 'nodes.id', 'portgroups.node_id').select('portgroups.*', 'nodes.uuid as node_uuid');
}

export async function createPortgroup(db: Knex, values: PortgroupChanges & { nodeId: number }): Promise<Portgroup> {
  const withUuid = { ...values, uuid: values.uuid ?? randomUUID() };
  const created = await insertReturning(db, 'portgroups', mapper.toRow(withUuid), (err) => translateWriteError(err, withUuid), 'id');
  return getPortgroupById(db, created.id as number);
}

export async function getPortgroupById(db: Knex, id: number, opts: { forUpdate?: boolean } = {}): Promise<Portgroup> {
  const q = selectPortgroups(db).where('portgroups.id', id).first();
  if (opts.forUpdate) q.forUpdate('portgroups');
  return mapper.fromFound(await q, () => new PortgroupNotFound(String(id)));
}

/** By UUID or name; `forUpdate` locks the portgroup row (not its node) inside a transaction. */
export async function getPortgroup(db: Knex, ident: string, opts: { forUpdate?: boolean } = {}): Promise<Portgroup> {
  const q = selectPortgroups(db).where(isUuid(ident) ? 'portgroups.uuid' : 'portgroups.name', isUuid(ident) ? ident.toLowerCase() : ident).first();
  if (opts.forUpdate) q.forUpdate('portgroups');
  return mapper.fromFound(await q, () => new PortgroupNotFound(ident));
}

export interface PortgroupFilters {
  nodeId?: number;
  address?: string;
}

export async function listPortgroups(
  db: Knex,
  filters: PortgroupFilters,
  page: PageRequest<Portgroup>,
): Promise<Portgroup[]> {
  return listPage(db, 'portgroups', mapper, page, { where: { node_id: filters.nodeId, address: filters.address?.toLowerCase() }, join: withNodeUuid });
}

export async function updatePortgroup(db: Knex, id: number, changes: PortgroupChanges): Promise<Portgroup> {
  await updateReturning(db, 'portgroups', id, mapper.toRow(changes), () => new PortgroupNotFound(String(id)), (err) => {
    if (pgError(err)?.code === SQLSTATE.foreignKeyViolation) throw new PortgroupNotEmpty(String(changes.uuid ?? id));
    translateWriteError(err, changes);
  });
  return getPortgroupById(db, id);
}

/** The member ports' physical networks, distinct (null included), leaving out one port. */
export async function portgroupPhysnets(db: Knex, portgroupId: number, exceptPortId?: number): Promise<Array<string | null>> {
  const q = db('ports').distinct('physical_network').where('portgroup_id', portgroupId);
  if (exceptPortId !== undefined) q.whereNot('id', exceptPortId);
  const rows: Array<{ physical_network: string | null }> = await q;
  return rows.map((r) => r.physical_network);
}

export async function countPortgroupPorts(db: Knex, portgroupId: number): Promise<number> {
  const row = await db('ports').where('portgroup_id', portgroupId).count({ n: '*' }).first();
  return Number(row?.n ?? 0);
}

/** Deletes a port group that has no ports; the foreign key from ports decides, so no race can orphan one. */
export function deletePortgroup(db: Knex, pg: Portgroup): Promise<void> {
  return deleteUnreferenced(db, 'portgroups', pg.id, () => new PortgroupNotEmpty(pg.uuid));
}
