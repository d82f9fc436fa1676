/**
 * The bios_settings table: the BIOS settings cached for each node (Ironic's
 * BIOSSettingList.sync_node_setting and its create/save/delete).
 */
import type { Knex } from 'knex';
import type { BiosSetting } from '../common/bios.js';
import { RowMapper } from './rows.js';

export interface StoredBiosSetting extends BiosSetting {
  createdAt: Date;
  updatedAt: Date | null;
}

const COLUMNS = [
  'name', 'value', 'attribute_type', 'allowable_values', 'lower_bound', 'max_length', 'min_length', 'read_only', 'reset_required',
  'unique', 'upper_bound', 'created_at', 'updated_at',
] as const;
const mapper = new RowMapper<StoredBiosSetting>(COLUMNS, ['allowable_values']);
/** The columns a new reading may change; a row changes (and its updated_at) only when one of them does. */
const VALUE_COLUMNS = COLUMNS.filter((c) => c !== 'name' && c !== 'created_at' && c !== 'updated_at');

/** The node's settings, by name. */
export async function listBiosSettings(db: Knex, nodeId: number): Promise<StoredBiosSetting[]> {
  const rows = await db('bios_settings').where('node_id', nodeId).orderBy('name').select(COLUMNS);
  return rows.map((r: Record<string, unknown>) => mapper.fromRow(r));
}

export async function getBiosSetting(db: Knex, nodeId: number, name: string): Promise<StoredBiosSetting | undefined> {
  const row = await db('bios_settings').where({ node_id: nodeId, name }).first(COLUMNS);
  return row ? mapper.fromRow(row as Record<string, unknown>) : undefined;
}

/**
 * Makes the node's cached settings those read now: new ones created, changed ones updated
 * (updated_at set), those the BMC no longer has deleted, the rest left as they are.
 */
export async function syncBiosSettings(db: Knex, nodeId: number, settings: readonly BiosSetting[]): Promise<void> {
  const names = settings.map((s) => s.name);
  await db('bios_settings').where('node_id', nodeId).whereNotIn('name', names).delete();
  if (settings.length === 0) return;
  const rows = settings.map((s) => ({ ...mapper.toRow(s), node_id: nodeId }));
  const changed = VALUE_COLUMNS.map((c) => `bios_settings."${c}" IS DISTINCT FROM excluded."${c}"`).join(' OR ');
  const set = VALUE_COLUMNS.map((c) => `"${c}" = excluded."${c}"`).join(', ');
  await db.raw(`? ON CONFLICT (node_id, name) DO UPDATE SET ${set}, updated_at = now() WHERE ${changed}`, [db('bios_settings').insert(rows)]);
}
