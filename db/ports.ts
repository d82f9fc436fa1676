import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { preparedRaw } from './prepared.js';
import { MACAlreadyExists, PortAlreadyExists, PortNotFound, Conflict, InvalidParameterValue } from '../common/errors.js';
import { RowMapper } from './rows.js';
import { nodeMapper, type Node } from './nodes.js';
import { insertReturning, listPage, updateReturning, withNodeUuid, type PageRequest } from './table.js';
import { isUniqueViolation, pgError, SQLSTATE } from './transaction.js';

export interface Port {
  id: number;
  uuid: string;
  address: string;
  nodeId: number;
  /** Joined from nodes: the API speaks of nodes by UUID. */
  nodeUuid: string;
  portgroupId: number | null;
  /** Joined from portgroups. */
  portgroupUuid: string | null;
  pxeEnabled: boolean;
  localLinkConnection: Record<string, unknown>;
  physicalNetwork: string | null;
  extra: Record<string, unknown>;
  isSmartnic: boolean;
  name: string | null;
  createdAt: Date;
  updatedAt: Date | null;
}

export type PortChanges = Partial<Omit<Port, 'id' | 'nodeUuid' | 'portgroupUuid' | 'createdAt' | 'updatedAt'>>;

const JSON_COLUMNS = ['local_link_connection', 'extra'];
const mapper = new RowMapper<Port>([
  'id', 'uuid', 'address', 'node_id', 'node_uuid', 'portgroup_id', 'portgroup_uuid', 'pxe_enabled', ...JSON_COLUMNS, 'physical_network',
  'is_smartnic', 'name', 'created_at', 'updated_at',
], JSON_COLUMNS);

export const PORT_SORT_KEYS = new Set(['id', 'uuid', 'address', 'created_at', 'updated_at', 'pxe_enabled', 'physical_network', 'name']);

function translateWriteError(err: unknown, values: PortChanges): never {
  if (isUniqueViolation(err, 'ports_address_unique')) throw new MACAlreadyExists(String(values.address));
  if (isUniqueViolation(err, 'ports_uuid_unique')) throw new PortAlreadyExists(String(values.uuid));
  if (isUniqueViolation(err, 'ports_name_unique')) throw new Conflict(`A port with name ${String(values.name)} already exists.`);
  // The API checks this first; the constraint settles a race with a port group moving.
  if (pgError(err)?.code === SQLSTATE.foreignKeyViolation) throw new InvalidParameterValue('Port can not be added to a portgroup belonging to a different node.');
  throw err;
}

function selectPorts(db: Knex): Knex.QueryBuilder {
  return db('ports').join('nodes', 'nodes.id', 'ports.node_id').leftJoin('portgroups', 'portgroups.id', 'ports.portgroup_id')
    .select('ports.*', 'nodes.uuid as node_uuid', 'portgroups.uuid as portgroup_uuid');
}

export async function createPort(db: Knex, values: PortChanges & { address: string; nodeId: number }): Promise<Port> {
  const row = mapper.toRow({ ...values, uuid: values.uuid ?? randomUUID() });
  const created = await insertReturning(db, 'ports', row, (err) => translateWriteError(err, values), 'id');
  return getPortById(db, created.id as number);
}

export async function getPortById(db: Knex, id: number): Promise<Port> {
  return mapper.fromFound(await selectPorts(db).where('ports.id', id).first(), () => new PortNotFound(String(id)));
}

/** By UUID or, since API 1.88, by name. */
export async function getPort(db: Knex, ident: string, byName: boolean, opts: { forUpdate?: boolean } = {}): Promise<Port> {
  const isUuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(ident);
  if (!isUuid && !byName) throw new PortNotFound(ident);
  const q = selectPorts(db).where(isUuid ? 'ports.uuid' : 'ports.name', isUuid ? ident.toLowerCase() : ident).first();
  if (opts.forUpdate) q.forUpdate('ports');
  return mapper.fromFound(await q, () => new PortNotFound(ident));
}

export interface PortFilters {
  nodeId?: number;
  portgroupId?: number;
  pxeEnabled?: boolean;
  address?: string;
}

export async function listPorts(
  db: Knex,
  filters: PortFilters,
  page: PageRequest<Port>,
): Promise<Port[]> {
  return listPage(db, 'ports', mapper, page, {
    where: { node_id: filters.nodeId, portgroup_id: filters.portgroupId, pxe_enabled: filters.pxeEnabled, address: filters.address?.toLowerCase() },
    join: (outer) => withNodeUuid(outer).select('portgroups.uuid as portgroup_uuid').leftJoin('portgroups', 'portgroups.id', 'p.portgroup_id'),
  });
}

export async function updatePort(db: Knex, id: number, changes: PortChanges): Promise<Port> {
  await updateReturning(db, 'ports', id, mapper.toRow(changes), () => new PortNotFound(String(id)), (err) => translateWriteError(err, changes));
  return getPortById(db, id);
}

export async function deletePort(db: Knex, id: number): Promise<void> {
  await db('ports').where('id', id).delete();
}

/**
 * Creates a port for each MAC that has none yet (inspection's "create ports if not exist"); a
 * MAC that already belongs to any node is left alone. Returns the MACs that got a port.
 */
export async function createMissingPorts(db: Knex, nodeId: number, macs: readonly string[]): Promise<string[]> {
  const wanted = [...new Set(macs.map((m) => m.toLowerCase()))];
  if (wanted.length === 0) return [];
  const rows = wanted.map((address) => ({ uuid: randomUUID(), address, node_id: nodeId }));
  const created = await db('ports').insert(rows).onConflict('address').ignore().returning('address');
  return (created as Array<{ address: string }>).map((r) => r.address);
}

/**
 * The nodes owning ports with any of these addresses (lower-case MACs), in one statement: an
 * agent's lookup wants the node when exactly one has them.
 */
export async function nodesByPortAddresses(db: Knex, addresses: readonly string[]): Promise<Node[]> {
  if (addresses.length === 0) return [];
  // The ports' node ids first (an InitPlan), then each node by its key: as a join, a planner
  // that takes the nodes table for one row (never analyzed: a fleet enrolled since the last
  // autoanalyze, or autovacuum off) read every node and looked its ports up for each, 7-10 ms
  // per agent lookup at 1,000 nodes.
  const { rows } = await preparedRaw(
    db,
    `SELECT nodes.* FROM nodes
      WHERE nodes.id = ANY(ARRAY(SELECT ports.node_id FROM ports WHERE ports.address = ANY(?::text[])))
      ORDER BY nodes.id`,
    [addresses as string[]],
  );
  return (rows as Array<Record<string, unknown>>).map((r) => nodeMapper.fromRow(r));
}

/** A node's ports as inspection processing reads them. */
export async function portsOfNode(db: Knex, nodeId: number): Promise<Array<{ id: number; address: string; pxeEnabled: boolean; extra: Record<string, unknown> }>> {
  const rows: Array<{ id: number; address: string; pxe_enabled: boolean; extra: Record<string, unknown> | null }> = await db('ports')
    .select('id', 'address', 'pxe_enabled', 'extra').where('node_id', nodeId).orderBy('id');
  return rows.map((r) => ({ id: r.id, address: r.address, pxeEnabled: r.pxe_enabled, extra: r.extra ?? {} }));
}

/**
 * Applies what in-band inspection decided for a node's ports: creates those whose MAC has no
 * port yet (a MAC another node holds is left alone, as Ironic's MACAlreadyExists), deletes and
 * updates the node's own.
 */
export async function applyInspectedPorts(
  db: Knex,
  nodeId: number,
  plan: {
    createPorts: ReadonlyArray<{ address: string; pxeEnabled: boolean; extra: Record<string, unknown> }>;
    deletePortIds: readonly number[];
    updatePorts: ReadonlyArray<{ id: number; pxeEnabled?: boolean; extra?: Record<string, unknown> }>;
  },
): Promise<void> {
  if (plan.deletePortIds.length) await db('ports').where('node_id', nodeId).whereIn('id', plan.deletePortIds as number[]).delete();
  for (const u of plan.updatePorts) {
    const row: Record<string, unknown> = { updated_at: db.fn.now() };
    if (u.pxeEnabled !== undefined) row.pxe_enabled = u.pxeEnabled;
    if (u.extra !== undefined) row.extra = JSON.stringify(u.extra);
    await db('ports').where({ id: u.id, node_id: nodeId }).update(row);
  }
  if (plan.createPorts.length) {
    const rows = plan.createPorts.map((p) => ({ uuid: randomUUID(), address: p.address.toLowerCase(), node_id: nodeId, pxe_enabled: p.pxeEnabled, extra: JSON.stringify(p.extra) }));
    await db('ports').insert(rows).onConflict('address').ignore();
  }
}

/** The MAC addresses of a node's ports, as the agent is sent them. */
export async function portAddressesOfNode(db: Knex, nodeId: number): Promise<Array<{ address: string }>> {
  return db('ports').where({ node_id: nodeId }).orderBy('id').select('address');
}
