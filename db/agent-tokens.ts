import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { Knex } from 'knex';
import { preparedRaw } from './prepared.js';
import { isUuid, nodeMapper, splitIdents, type Node } from './nodes.js';

/**
 * Mints the node's agent token if it has none (Ironic's get_node_with_token): the token, or
 * null when one was handed out already (the lookup then shows `******`).
 */
export async function mintAgentToken(db: Knex, nodeId: number): Promise<string | null> {
  // 32 bytes, url-safe base64: secrets.token_urlsafe()'s default size.
  const token = randomBytes(32).toString('base64url');
  const rows = await db('agent_tokens').insert({ node_id: nodeId, token }).onConflict('node_id').ignore().returning('node_id');
  return rows.length ? token : null;
}

/** The node's agent token, for the conductor's calls to its agent; null when none. */
export async function agentTokenOf(db: Knex, nodeId: number): Promise<string | null> {
  const row = await db('agent_tokens').where({ node_id: nodeId }).first('token');
  return row ? (row.token as string) : null;
}

/** Whether `given` is the node's agent token `token` (compared in constant time). */
export function agentTokenMatches(token: string | null, given: string | undefined): boolean {
  if (token === null || given === undefined) return false;
  const a = Buffer.from(token);
  const b = Buffer.from(given);
  return a.length === b.length && timingSafeEqual(a, b);
}

/**
 * The nodes named by UUID or name with their rows locked (in id order, as every multi-node
 * lock here), each with its agent token: what a batch of heartbeats checks first, in one
 * statement. Keyed by the identifier given; one missing has no such node.
 */
export async function lockNodesWithTokens(trx: Knex.Transaction, idents: readonly string[]): Promise<Map<string, { node: Node; token: string | null }>> {
  const { uuids, names } = splitIdents(idents);
  const { rows } = await preparedRaw(
    trx,
    `SELECT nodes.*, agent_tokens.token AS agent_token FROM nodes LEFT JOIN agent_tokens ON agent_tokens.node_id = nodes.id
      WHERE nodes.uuid = ANY(?::uuid[]) OR nodes.name = ANY(?::text[]) ORDER BY nodes.id FOR UPDATE OF nodes`,
    [uuids, names],
  );
  const byUuid = new Map<string, { node: Node; token: string | null }>();
  const byName = new Map<string, { node: Node; token: string | null }>();
  for (const r of rows as Array<Record<string, unknown>>) {
    const entry = { node: nodeMapper.fromRow(r), token: (r.agent_token as string | null) ?? null };
    byUuid.set(entry.node.uuid, entry);
    if (entry.node.name) byName.set(entry.node.name, entry);
  }
  const out = new Map<string, { node: Node; token: string | null }>();
  for (const ident of idents) {
    const entry = isUuid(ident) ? byUuid.get(ident.toLowerCase()) : byName.get(ident);
    if (entry) out.set(ident, entry);
  }
  return out;
}

/** Forgets the node's token: its agent's work has ended (Ironic's wipe_token_and_url). */
export async function wipeAgentToken(db: Knex, nodeId: number): Promise<void> {
  await db('agent_tokens').where({ node_id: nodeId }).delete();
}
