import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { RunbookAlreadyExists, RunbookDuplicateName, RunbookNotFound } from '../common/errors.js';
import { RowMapper } from './rows.js';
import { applyPage, isUuid, markerValue } from './nodes.js';
import { isUniqueViolation } from './transaction.js';

/** One step of a runbook, as Ironic stores it: run in the order given, `order` kept as asked. */
export interface RunbookStep {
  interface: string;
  step: string;
  args: Record<string, unknown>;
  order: number;
}

export interface Runbook {
  id: number;
  uuid: string;
  name: string;
  public: boolean;
  owner: string | null;
  disableRamdisk: boolean;
  steps: RunbookStep[];
  extra: Record<string, unknown>;
  createdAt: Date;
  updatedAt: Date | null;
}

export type RunbookChanges = Partial<Pick<Runbook, 'uuid' | 'name' | 'public' | 'owner' | 'disableRamdisk' | 'steps' | 'extra'>>;

const JSON_COLUMNS = ['steps', 'extra'];
const mapper = new RowMapper<Runbook>(
  ['id', 'uuid', 'name', 'public', 'owner', 'disable_ramdisk', ...JSON_COLUMNS, 'created_at', 'updated_at'], JSON_COLUMNS,
);

/** Ironic refuses sorting by the JSON fields. */
export const RUNBOOK_SORT_KEYS = new Set(['id', 'uuid', 'name', 'public', 'owner', 'disable_ramdisk', 'created_at', 'updated_at']);

function translateWriteError(err: unknown, values: RunbookChanges): never {
  if (isUniqueViolation(err, 'runbooks_name_unique')) throw new RunbookDuplicateName(String(values.name));
  if (isUniqueViolation(err, 'runbooks_uuid_unique')) throw new RunbookAlreadyExists(String(values.uuid));
  throw err;
}

export async function createRunbook(db: Knex, values: RunbookChanges & { name: string; steps: RunbookStep[] }): Promise<Runbook> {
  const row = mapper.toRow({ ...values, uuid: values.uuid ?? randomUUID() });
  try {
    const [created] = await db('runbooks').insert(row).returning('*');
    return mapper.fromRow(created);
  } catch (err) {
    translateWriteError(err, values);
  }
}

/** By UUID or name. */
export async function getRunbook(db: Knex, ident: string): Promise<Runbook> {
  const row = await db('runbooks').where(isUuid(ident) ? 'uuid' : 'name', ident).first();
  if (!row) throw new RunbookNotFound(ident);
  return mapper.fromRow(row);
}

export async function listRunbooks(
  db: Knex,
  page: { limit: number; marker?: Runbook; sortKey: string; sortDir: 'asc' | 'desc' },
): Promise<Runbook[]> {
  const q = db('runbooks').select('*');
  applyPage(q, page, (r) => ({
    id: r.id,
    value: markerValue(db, 'runbooks', page.sortKey, r.id, (r as unknown as Record<string, unknown>)[mapper.fieldOf(page.sortKey)]),
  }));
  const rows = await q;
  return rows.map((r: Record<string, unknown>) => mapper.fromRow(r));
}

export async function updateRunbook(db: Knex, id: number, changes: RunbookChanges): Promise<Runbook> {
  try {
    const [row] = await db('runbooks').where('id', id).update({ ...mapper.toRow(changes), updated_at: db.fn.now() }).returning('*');
    if (!row) throw new RunbookNotFound(String(id));
    return mapper.fromRow(row);
  } catch (err) {
    translateWriteError(err, changes);
  }
}

export async function deleteRunbook(db: Knex, id: number): Promise<void> {
  await db('runbooks').where('id', id).delete();
}
