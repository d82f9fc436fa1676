import type { Knex } from 'knex';
import { VolumeTargetAlreadyExists, VolumeTargetBootIndexAlreadyExists, VolumeTargetNotFound } from '../common/errors.js';
import { RowMapper } from './rows.js';
import { nodeChildTable } from './table.js';
import { isUniqueViolation } from './transaction.js';

/** A volume a node may boot from or attach, with its place in the node's boot order. */
export interface VolumeTarget {
  id: number;
  uuid: string;
  nodeId: number;
  /** Joined from nodes: the API speaks of nodes by UUID. */
  nodeUuid: string;
  volumeType: string;
  properties: Record<string, unknown>;
  bootIndex: number;
  volumeId: string;
  extra: Record<string, unknown>;
  createdAt: Date;
  updatedAt: Date | null;
}

export type VolumeTargetChanges = Partial<Pick<VolumeTarget, 'uuid' | 'nodeId' | 'volumeType' | 'properties' | 'bootIndex' | 'volumeId' | 'extra'>>;

const JSON_COLUMNS = ['properties', 'extra'];
const mapper = new RowMapper<VolumeTarget>([
  'id', 'uuid', 'node_id', 'node_uuid', 'volume_type', 'boot_index', 'volume_id', ...JSON_COLUMNS, 'created_at', 'updated_at',
], JSON_COLUMNS);

/** Columns a client may sort by (Ironic refuses `extra` and `properties`). */
export const VOLUME_TARGET_SORT_KEYS = new Set(['id', 'uuid', 'node_id', 'volume_type', 'boot_index', 'volume_id', 'created_at', 'updated_at']);

function translateWriteError(err: unknown, values: VolumeTargetChanges, current?: VolumeTarget): never {
  if (isUniqueViolation(err, 'volume_targets_node_id_boot_index_unique')) {
    throw new VolumeTargetBootIndexAlreadyExists(Number(values.bootIndex ?? current?.bootIndex));
  }
  if (isUniqueViolation(err, 'volume_targets_uuid_unique')) throw new VolumeTargetAlreadyExists(String(values.uuid));
  throw err;
}

const table = nodeChildTable<VolumeTarget, VolumeTargetChanges>('volume_targets', mapper, (ident) => new VolumeTargetNotFound(ident), translateWriteError);

export const createVolumeTarget: (db: Knex, values: VolumeTargetChanges & { nodeId: number; volumeType: string; bootIndex: number; volumeId: string }) => Promise<VolumeTarget> = table.create;
/** By UUID; the caller has checked the form (Ironic answers 400 for anything else). */
export const getVolumeTarget = table.get;
export const listVolumeTargets = table.list;
export const updateVolumeTarget = table.update;
export const deleteVolumeTarget = table.remove;
