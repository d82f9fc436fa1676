import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { preparedRaw } from './prepared.js';
import { NodeHistoryNotFound } from '../common/errors.js';
import { RowMapper } from './rows.js';

export type Severity = 'INFO' | 'WARNING' | 'ERROR';

export interface NodeHistoryEvent {
  id: number;
  uuid: string;
  nodeId: number;
  severity: Severity;
  eventType: string;
  event: string;
  conductor: string | null;
  user: string | null;
  operation: string | null;
  createdAt: Date;
}

const mapper = new RowMapper<NodeHistoryEvent>([
  'id', 'uuid', 'node_id', 'severity', 'event_type', 'event', 'conductor', 'user', 'operation', 'created_at',
]);

export interface NewHistoryEvent {
  nodeId: number;
  severity: Severity;
  eventType: string;
  event: string;
  conductor?: string | null;
  user?: string | null;
  operation?: string | null;
}

export async function recordHistory(db: Knex, e: NewHistoryEvent): Promise<void> {
  await db('node_history').insert(mapper.toRow({ ...e, uuid: randomUUID() }));
}

/** Records many events in one statement. */
export async function recordHistories(db: Knex, events: readonly NewHistoryEvent[]): Promise<void> {
  if (events.length === 0) return;
  await preparedRaw(
    db,
    `INSERT INTO node_history (uuid, node_id, severity, event_type, event, conductor, "user", operation)
     SELECT uuid, node_id, severity, event_type, event, conductor, "user", operation
       FROM jsonb_populate_recordset(NULL::node_history, ?::jsonb)`,
    [JSON.stringify(events.map((e) => ({ ...mapper.toRow(e), uuid: randomUUID() })))],
  );
}

export async function listHistory(db: Knex, nodeId: number, limit: number, marker?: NodeHistoryEvent): Promise<NodeHistoryEvent[]> {
  const q = db('node_history').where('node_id', nodeId).orderBy('id', 'asc').limit(limit);
  if (marker) q.where('id', '>', marker.id);
  const rows = await q;
  return rows.map((r: Record<string, unknown>) => mapper.fromRow(r));
}

export async function getHistoryEvent(db: Knex, nodeId: number, uuid: string): Promise<NodeHistoryEvent> {
  if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(uuid)) throw new NodeHistoryNotFound(uuid);
  const row = await db('node_history').where({ node_id: nodeId, uuid }).first();
  if (!row) throw new NodeHistoryNotFound(uuid);
  return mapper.fromRow(row);
}
