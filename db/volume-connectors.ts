import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { VolumeConnectorAlreadyExists, VolumeConnectorNotFound, VolumeConnectorTypeAndIdAlreadyExists } from '../common/errors.js';
import { RowMapper } from './rows.js';
import { applyPage, markerValue } from './nodes.js';
import { isUniqueViolation } from './transaction.js';

/** A node's volume connector: how the node reaches a volume (an iSCSI initiator IQN, a WWPN…). */
export interface VolumeConnector {
  id: number;
  uuid: string;
  nodeId: number;
  /** Joined from nodes: the API speaks of nodes by UUID. */
  nodeUuid: string;
  type: string;
  connectorId: string;
  extra: Record<string, unknown>;
  createdAt: Date;
  updatedAt: Date | null;
}

export type VolumeConnectorChanges = Partial<Pick<VolumeConnector, 'uuid' | 'nodeId' | 'type' | 'connectorId' | 'extra'>>;

const JSON_COLUMNS = ['extra'];
const mapper = new RowMapper<VolumeConnector>([
  'id', 'uuid', 'node_id', 'node_uuid', 'type', 'connector_id', ...JSON_COLUMNS, 'created_at', 'updated_at',
], JSON_COLUMNS);

/** Columns a client may sort by (Ironic refuses `extra`). */
export const VOLUME_CONNECTOR_SORT_KEYS = new Set(['id', 'uuid', 'node_id', 'type', 'connector_id', 'created_at', 'updated_at']);

function translateWriteError(err: unknown, values: VolumeConnectorChanges, current?: VolumeConnector): never {
  if (isUniqueViolation(err, 'volume_connectors_type_connector_id_unique')) {
    throw new VolumeConnectorTypeAndIdAlreadyExists(String(values.type ?? current?.type), String(values.connectorId ?? current?.connectorId));
  }
  if (isUniqueViolation(err, 'volume_connectors_uuid_unique')) throw new VolumeConnectorAlreadyExists(String(values.uuid));
  throw err;
}

function selectConnectors(db: Knex): Knex.QueryBuilder {
  return db('volume_connectors as c').join('nodes', 'nodes.id', 'c.node_id').select('c.*', 'nodes.uuid as node_uuid');
}

async function getConnectorById(db: Knex, id: number): Promise<VolumeConnector> {
  const row = await selectConnectors(db).where('c.id', id).first();
  if (!row) throw new VolumeConnectorNotFound(String(id));
  return mapper.fromRow(row);
}

export async function createVolumeConnector(
  db: Knex,
  values: VolumeConnectorChanges & { nodeId: number; type: string; connectorId: string },
): Promise<VolumeConnector> {
  const row = mapper.toRow({ ...values, uuid: values.uuid ?? randomUUID() });
  try {
    const [created] = await db('volume_connectors').insert(row).returning('id');
    return await getConnectorById(db, created.id);
  } catch (err) {
    translateWriteError(err, values);
  }
}

/** By UUID; the caller has checked the form (Ironic answers 400 for anything else). */
export async function getVolumeConnector(db: Knex, uuid: string): Promise<VolumeConnector> {
  const row = await selectConnectors(db).where('c.uuid', uuid.toLowerCase()).first();
  if (!row) throw new VolumeConnectorNotFound(uuid);
  return mapper.fromRow(row);
}

export async function listVolumeConnectors(
  db: Knex,
  filters: { nodeId?: number },
  page: { limit: number; marker?: VolumeConnector; sortKey: string; sortDir: 'asc' | 'desc' },
): Promise<VolumeConnector[]> {
  const q = db('volume_connectors').select('*');
  if (filters.nodeId !== undefined) q.where('node_id', filters.nodeId);
  applyPage(q, page, (c) => ({
    id: c.id,
    value: markerValue(db, 'volume_connectors', page.sortKey, c.id, (c as unknown as Record<string, unknown>)[mapper.fieldOf(page.sortKey)]),
  }));
  // The node's UUID is joined after the page is cut: the sort keys are unqualified columns.
  const outer = db.select('p.*', 'nodes.uuid as node_uuid').from(q.as('p')).join('nodes', 'nodes.id', 'p.node_id');
  if (page.sortKey !== 'id') outer.orderBy(`p.${page.sortKey}`, page.sortDir);
  const rows = await outer.orderBy('p.id', page.sortDir);
  return rows.map((r: Record<string, unknown>) => mapper.fromRow(r));
}

export async function updateVolumeConnector(db: Knex, current: VolumeConnector, changes: VolumeConnectorChanges): Promise<VolumeConnector> {
  try {
    const n = await db('volume_connectors').where('id', current.id).update({ ...mapper.toRow(changes), updated_at: db.fn.now() });
    if (n === 0) throw new VolumeConnectorNotFound(current.uuid);
  } catch (err) {
    translateWriteError(err, changes, current);
  }
  return getConnectorById(db, current.id);
}

export async function deleteVolumeConnector(db: Knex, id: number): Promise<void> {
  await db('volume_connectors').where('id', id).delete();
}
