/**
 * A node's firmware components (Ironic's FirmwareComponent objects over `firmware_information`).
 */
import type { Knex } from 'knex';

/** A component's version as the firmware interface read it. */
export interface FirmwareReading {
  component: string;
  currentVersion: string;
}

export interface FirmwareComponentRow {
  component: string;
  initial_version: string;
  current_version: string | null;
  last_version_flashed: string | null;
  created_at: Date;
  updated_at: Date | null;
}

/** A node's components, in the order they were first read. */
export async function firmwareOfNode(db: Knex, nodeId: number): Promise<FirmwareComponentRow[]> {
  return db('firmware_information')
    .select('component', 'initial_version', 'current_version', 'last_version_flashed', 'created_at', 'updated_at')
    .where('node_id', nodeId).orderBy('id');
}

/**
 * Ironic's cache_firmware_components with sync_firmware_components: a component read for the
 * first time starts with its initial version; one whose version changed records it as the
 * last version flashed; components not read are left as they are.
 */
export async function syncFirmware(db: Knex, nodeId: number, readings: readonly FirmwareReading[]): Promise<void> {
  if (readings.length === 0) return;
  const known = new Map((await firmwareOfNode(db, nodeId)).map((r) => [r.component, r]));
  for (const r of readings) {
    const row = known.get(r.component);
    if (!row) {
      await db('firmware_information').insert({ node_id: nodeId, component: r.component, initial_version: r.currentVersion, current_version: r.currentVersion })
        .onConflict(['node_id', 'component']).ignore();
    } else if (row.current_version !== r.currentVersion) {
      await db('firmware_information').where({ node_id: nodeId, component: r.component })
        .update({ current_version: r.currentVersion, last_version_flashed: r.currentVersion, updated_at: db.fn.now() });
    }
  }
}
