import type { Knex } from 'knex';
import { VolumeConnectorAlreadyExists, VolumeConnectorNotFound, VolumeConnectorTypeAndIdAlreadyExists } from '../common/errors.js';
import { RowMapper } from './rows.js';
import { nodeChildTable } from './table.js';
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

const table = nodeChildTable<VolumeConnector, VolumeConnectorChanges>('volume_connectors', mapper, (ident) => new VolumeConnectorNotFound(ident), translateWriteError);

export const createVolumeConnector: (db: Knex, values: VolumeConnectorChanges & { nodeId: number; type: string; connectorId: string }) => Promise<VolumeConnector> = table.create;
/** By UUID; the caller has checked the form (Ironic answers 400 for anything else). */
export const getVolumeConnector = table.get;
export const listVolumeConnectors = table.list;
export const updateVolumeConnector = table.update;
export const deleteVolumeConnector = table.remove;
