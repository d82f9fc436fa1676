import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { VolumeConnectorAlreadyExists, VolumeConnectorNotFound, VolumeConnectorTypeAndIdAlreadyExists } from '../common/errors.js';
import { RowMapper } from './rows.js';
import { insertReturning, listPage, updateReturning, withNodeUuid, type PageRequest } from './table.js';
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
  return mapper.fromFound(await selectConnectors(db).where('c.id', id).first(), () => new VolumeConnectorNotFound(String(id)));
}

export async function createVolumeConnector(
  db: Knex,
  values: VolumeConnectorChanges & { nodeId: number; type: string; connectorId: string },
): Promise<VolumeConnector> {
  const row = mapper.toRow({ ...values, uuid: values.uuid ?? randomUUID() });
  const created = await insertReturning(db, 'volume_connectors', row, (err) => translateWriteError(err, values), 'id');
  return getConnectorById(db, created.id as number);
}

/** By UUID; the caller has checked the form (Ironic answers 400 for anything else). */
export async function getVolumeConnector(db: Knex, uuid: string): Promise<VolumeConnector> {
  return mapper.fromFound(await selectConnectors(db).where('c.uuid', uuid.toLowerCase()).first(), () => new VolumeConnectorNotFound(uuid));
}

export async function listVolumeConnectors(
  db: Knex,
  filters: { nodeId?: number },
  page: PageRequest<VolumeConnector>,
): Promise<VolumeConnector[]> {
  return listPage(db, 'volume_connectors', mapper, page, { where: { node_id: filters.nodeId }, join: withNodeUuid });
}

export async function updateVolumeConnector(db: Knex, current: VolumeConnector, changes: VolumeConnectorChanges): Promise<VolumeConnector> {
  await updateReturning(db, 'volume_connectors', current.id, mapper.toRow(changes), () => new VolumeConnectorNotFound(current.uuid), (err) => translateWriteError(err, changes, current));
  return getConnectorById(db, current.id);
}

export async function deleteVolumeConnector(db: Knex, id: number): Promise<void> {
  await db('volume_connectors').where('id', id).delete();
}
