import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { Knex } from 'knex';

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

/** Whether `given` is the node's token (compared in constant time). */
export async function agentTokenMatches(db: Knex, nodeId: number, given: string): Promise<boolean> {
  const token = await agentTokenOf(db, nodeId);
  if (token === null) return false;
  const a = Buffer.from(token);
  const b = Buffer.from(given);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** Forgets the node's token: its agent's work has ended (Ironic's wipe_token_and_url). */
export async function wipeAgentToken(db: Knex, nodeId: number): Promise<void> {
  await db('agent_tokens').where({ node_id: nodeId }).delete();
}
