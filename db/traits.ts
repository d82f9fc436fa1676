import type { Knex } from 'knex';
import { InvalidParameterValue, NodeTraitNotFound } from '../common/errors.js';
import { updateNode } from './nodes.js';

/** Ironic's limit (db/sqlalchemy/api.py MAX_TRAITS_PER_NODE). */
export const MAX_TRAITS_PER_NODE = 50;

function checkCount(nodeUuid: string, count: number): void {
  if (count > MAX_TRAITS_PER_NODE) {
    throw new InvalidParameterValue(`Could not modify traits for node ${nodeUuid} as it would exceed the maximum number of traits per node (${count} vs. ${MAX_TRAITS_PER_NODE})`);
  }
}

/** A node's traits, sorted. */
export async function traitsOfNode(db: Knex, nodeId: number): Promise<string[]> {
  const rows: Array<{ trait: string }> = await db('node_traits').select('trait').where('node_id', nodeId).orderBy('trait');
  return rows.map((r) => r.trait);
}

/** The traits of many nodes at once (a list page), sorted per node; nodes without any are absent. */
export async function traitsOfNodes(db: Knex, nodeIds: readonly number[]): Promise<Map<number, string[]>> {
  const out = new Map<number, string[]>();
  if (nodeIds.length === 0) return out;
  const rows: Array<{ node_id: number; trait: string }> = await db('node_traits')
    .select('node_id', 'trait').whereRaw('node_id = any(?::int[])', [nodeIds as number[]]).orderBy(['node_id', 'trait']);
  for (const r of rows) {
    let list = out.get(r.node_id);
    if (!list) out.set(r.node_id, (list = []));
    list.push(r.trait);
  }
  return out;
}

/**
 * Changes a node's traits under its row lock, in one transaction: `replace` sets exactly
 * `traits`, otherwise they are added. The node's version is bumped, since its view (and
 * ETag) includes the traits.
 */
export async function setNodeTraits(db: Knex, node: { id: number; uuid: string }, traits: readonly string[], replace: boolean): Promise<void> {
  await db.transaction(async (trx) => {
    await trx('nodes').where('id', node.id).forUpdate().first('id');
    const wanted = new Set(traits);
    if (!replace) for (const t of await traitsOfNode(trx, node.id)) wanted.add(t);
    checkCount(node.uuid, wanted.size);
    if (replace) await trx('node_traits').where('node_id', node.id).delete();
    if (wanted.size) {
      await trx('node_traits').insert([...wanted].map((trait) => ({ node_id: node.id, trait }))).onConflict(['node_id', 'trait']).ignore();
    }
    await updateNode(trx, node.id, {});
  });
}

/** Removes one trait (NodeTraitNotFound when the node lacks it) or, with none named, all. */
export async function removeNodeTraits(db: Knex, node: { id: number; uuid: string }, trait?: string): Promise<void> {
  await db.transaction(async (trx) => {
    await trx('nodes').where('id', node.id).forUpdate().first('id');
    const q = trx('node_traits').where('node_id', node.id);
    if (trait !== undefined) q.where('trait', trait);
    const removed = await q.delete();
    if (trait !== undefined && removed === 0) throw new NodeTraitNotFound(node.uuid, trait);
    await updateNode(trx, node.id, {});
  });
}
