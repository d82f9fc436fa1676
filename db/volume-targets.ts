import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { VolumeTargetAlreadyExists, VolumeTargetBootIndexAlreadyExists, VolumeTargetNotFound } from '../common/errors.js';
import { RowMapper } from './rows.js';
import { insertReturning, listPage, updateReturning, withNodeUuid, type PageRequest } from './table.js';
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

function selectTargets(db: Knex): Knex.QueryBuilder {
  return db('volume_targets as t').join('nodes', 'nodes.id', 't.node_id').select('t.*', 'nodes.uuid as node_uuid');
}

async function getTargetById(db: Knex, id: number): Promise<VolumeTarget> {
  return mapper.fromFound(await selectTargets(db).where('t.id', id).first(), () => new VolumeTargetNotFound(String(id)));
}

export async function createVolumeTarget(
  db: Knex,
  values: VolumeTargetChanges & { nodeId: number; volumeType: string; bootIndex: number; volumeId: string },
): Promise<VolumeTarget> {
  const row = mapper.toRow({ ...values, uuid: values.uuid ?? randomUUID() });
  const created = await insertReturning(db, 'volume_targets', row, (err) => translateWriteError(err, values), 'id');
  return getTargetById(db, created.id as number);
}

/** By UUID; the caller has checked the form (Ironic answers 400 for anything else). */
export async function getVolumeTarget(db: Knex, uuid: string): Promise<VolumeTarget> {
  return mapper.fromFound(await selectTargets(db).where('t.uuid', uuid.toLowerCase()).first(), () => new VolumeTargetNotFound(uuid));
}

export async function listVolumeTargets(
  db: Knex,
  filters: { nodeId?: number },
  page: PageRequest<VolumeTarget>,
): Promise<VolumeTarget[]> {
  return listPage(db, 'volume_targets', mapper, page, { where: { node_id: filters.nodeId }, join: withNodeUuid });
}

export async function updateVolumeTarget(db: Knex, current: VolumeTarget, changes: VolumeTargetChanges): Promise<VolumeTarget> {
  await updateReturning(db, 'volume_targets', current.id, mapper.toRow(changes), () => new VolumeTargetNotFound(current.uuid), (err) => translateWriteError(err, changes, current));
  return getTargetById(db, current.id);
}

export async function deleteVolumeTarget(db: Knex, id: number): Promise<void> {
  await db('volume_targets').where('id', id).delete();
}
