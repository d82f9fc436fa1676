import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { Knex } from 'knex';
import { isUuid, nodeMapper, type Node } from './nodes.js';

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

/** Whether `given` is the token (compared in constant time). */
function tokenEquals(token: string | null, given: string | undefined): boolean {
  if (token === null || given === undefined) return false;
  const a = Buffer.from(token);
  const b = Buffer.from(given);
  return a.length === b.length && timingSafeEqual(a, b);
}

/**
 * The node named by UUID or name with its row locked, and whether `given` is its agent token:
 * what a heartbeat checks first, in one statement. Undefined when there is no such node.
 */
export async function lockNodeWithToken(trx: Knex.Transaction, ident: string, given: string | undefined): Promise<{ node: Node; tokenMatches: boolean } | undefined> {
  const row = await trx('nodes').leftJoin('agent_tokens', 'agent_tokens.node_id', 'nodes.id')
    .where(isUuid(ident) ? 'nodes.uuid' : 'nodes.name', ident)
    .first('nodes.*', 'agent_tokens.token as agent_token').forUpdate('nodes');
  if (!row) return undefined;
  return { node: nodeMapper.fromRow(row), tokenMatches: tokenEquals((row.agent_token as string | null) ?? null, given) };
}

/** Forgets the node's token: its agent's work has ended (Ironic's wipe_token_and_url). */
export async function wipeAgentToken(db: Knex, nodeId: number): Promise<void> {
  await db('agent_tokens').where({ node_id: nodeId }).delete();
}
