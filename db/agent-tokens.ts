import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { Knex } from 'knex';
import { NodeLocked } from '../common/errors.js';
import { preparedRaw } from './prepared.js';
import { isUuid, nodeIdsNamed, nodeMapper, type Node } from './nodes.js';

/**
 * Mints the node's agent token if it has none (Ironic's get_node_with_token): the token, or
 * null when one was handed out already (the lookup then shows `******`).
 *
 * `unlessHeld`: no token is minted while a conductor holds the node (Ironic upgrades to the
 * node's exclusive lock to mint one, and fails with NodeLocked). A conductor wipes the token
 * before it powers the node off or reboots it (conductor/node-power.ts), holding the node's
 * row lock; the row lock taken here, with the reservation read again under it, orders the two:
 * a token minted first is wiped, and none is minted between the wipe and the reset, so the
 * agent about to die cannot take the token of the one that boots next.
 * @throws NodeLocked when `unlessHeld` and a conductor holds the node, which has no token
 */
export async function mintAgentToken(db: Knex, nodeId: number, opts: { unlessHeld?: boolean } = {}): Promise<string | null> {
  // 32 bytes, url-safe base64: secrets.token_urlsafe()'s default size.
  const token = randomBytes(32).toString('base64url');
  if (!opts.unlessHeld) {
    const rows = await db('agent_tokens').insert({ node_id: nodeId, token }).onConflict('node_id').ignore().returning('node_id');
    return rows.length ? token : null;
  }
  const { rows } = await preparedRaw(
    db,
    `INSERT INTO agent_tokens (node_id, token)
      SELECT id, ? FROM nodes WHERE id = ? AND reservation IS NULL FOR KEY SHARE
      ON CONFLICT (node_id) DO NOTHING RETURNING node_id`,
    [token, nodeId],
  );
  if ((rows as unknown[]).length) return token;
  const row = await db('nodes').leftJoin('agent_tokens', 'agent_tokens.node_id', 'nodes.id').where('nodes.id', nodeId)
    .first('nodes.uuid', 'nodes.reservation', 'agent_tokens.node_id as has_token');
  if (!row || row.has_token !== null) return null;
  // Held (or released since the insert looked): the agent asks again, as after any refusal.
  throw new NodeLocked(row.uuid as string, (row.reservation as string | null) ?? 'unknown');
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
  const named = nodeIdsNamed(idents);
  const { rows } = await preparedRaw(
    trx,
    `SELECT nodes.*, agent_tokens.token AS agent_token FROM nodes LEFT JOIN agent_tokens ON agent_tokens.node_id = nodes.id
      WHERE ${named.sql} ORDER BY nodes.id FOR UPDATE OF nodes`,
    named.bindings,
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

/**
 * Forgets the node's token: its agent's work has ended (Ironic's wipe_token_and_url), or the
 * agent is about to be powered off or rebooted. `db` may be the transaction of the node's write.
 */
export async function wipeAgentToken(db: Knex, nodeId: number): Promise<void> {
  await db('agent_tokens').where({ node_id: nodeId }).delete();
}
