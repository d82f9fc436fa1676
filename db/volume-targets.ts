import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { VolumeTargetAlreadyExists, VolumeTargetBootIndexAlreadyExists, VolumeTargetNotFound } from '../common/errors.js';
import { RowMapper } from './rows.js';
import { applyPage, markerValue } from './nodes.js';
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
  const row = await selectTargets(db).where('t.id', id).first();
  if (!row) throw new VolumeTargetNotFound(String(id));
  return mapper.fromRow(row);
}

export async function createVolumeTarget(
  db: Knex,
  values: VolumeTargetChanges & { nodeId: number; volumeType: string; bootIndex: number; volumeId: string },
): Promise<VolumeTarget> {
  const row = mapper.toRow({ ...values, uuid: values.uuid ?? randomUUID() });
  try {
    const [created] = await db('volume_targets').insert(row).returning('id');
    return await getTargetById(db, created.id);
  } catch (err) {
    translateWriteError(err, values);
  }
}

/** By UUID; the caller has checked the form (Ironic answers 400 for anything else). */
export async function getVolumeTarget(db: Knex, uuid: string): Promise<VolumeTarget> {
  const row = await selectTargets(db).where('t.uuid', uuid.toLowerCase()).first();
  if (!row) throw new VolumeTargetNotFound(uuid);
  return mapper.fromRow(row);
}

export async function listVolumeTargets(
  db: Knex,
  filters: { nodeId?: number },
  page: { limit: number; marker?: VolumeTarget; sortKey: string; sortDir: 'asc' | 'desc' },
): Promise<VolumeTarget[]> {
  const q = db('volume_targets').select('*');
  if (filters.nodeId !== undefined) q.where('node_id', filters.nodeId);
  applyPage(q, page, (t) => ({
    id: t.id,
    value: markerValue(db, 'volume_targets', page.sortKey, t.id, (t as unknown as Record<string, unknown>)[mapper.fieldOf(page.sortKey)]),
  }));
  // The node's UUID is joined after the page is cut: the sort keys are unqualified columns.
  const outer = db.select('p.*', 'nodes.uuid as node_uuid').from(q.as('p')).join('nodes', 'nodes.id', 'p.node_id');
  if (page.sortKey !== 'id') outer.orderBy(`p.${page.sortKey}`, page.sortDir);
  const rows = await outer.orderBy('p.id', page.sortDir);
  return rows.map((r: Record<string, unknown>) => mapper.fromRow(r));
}

export async function updateVolumeTarget(db: Knex, current: VolumeTarget, changes: VolumeTargetChanges): Promise<VolumeTarget> {
  try {
    const n = await db('volume_targets').where('id', current.id).update({ ...mapper.toRow(changes), updated_at: db.fn.now() });
    if (n === 0) throw new VolumeTargetNotFound(current.uuid);
  } catch (err) {
    translateWriteError(err, changes, current);
  }
  return getTargetById(db, current.id);
}

export async function deleteVolumeTarget(db: Knex, id: number): Promise<void> {
  await db('volume_targets').where('id', id).delete();
}
