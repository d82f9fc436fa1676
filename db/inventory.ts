import type { Knex } from 'knex';
import { ResourceNotFound } from '../common/errors.js';

/** What inspection stored for a node (Ironic's node_inventory). */
export interface NodeInventory {
  inventory: Record<string, unknown>;
  pluginData: Record<string, unknown>;
}

/** Replaces the node's inventory with what the latest inspection found. */
export async function storeInventory(db: Knex, nodeId: number, inv: NodeInventory): Promise<void> {
  await db('node_inventory')
    .insert({ node_id: nodeId, inventory: JSON.stringify(inv.inventory), plugin_data: JSON.stringify(inv.pluginData), created_at: db.fn.now() })
    .onConflict('node_id').merge();
}

/** @throws ResourceNotFound with Ironic's NodeInventoryNotFound message */
export async function getInventory(db: Knex, nodeId: number, nodeUuid: string): Promise<NodeInventory> {
  const row = await db('node_inventory').where('node_id', nodeId).first();
  if (!row) throw new ResourceNotFound(`Node inventory for node ${nodeUuid} could not be found.`);
  return { inventory: row.inventory as Record<string, unknown>, pluginData: row.plugin_data as Record<string, unknown> };
}
