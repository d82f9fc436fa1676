import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { RunbookAlreadyExists, RunbookDuplicateName, RunbookNotFound } from '../common/errors.js';
import { RowMapper } from './rows.js';
import { isUuid } from './nodes.js';
import { insertReturning, listPage, updateReturning, type PageRequest } from './table.js';
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
  return mapper.fromRow(await insertReturning(db, 'runbooks', row, (err) => translateWriteError(err, values)));
}

/** By UUID or name. */
export async function getRunbook(db: Knex, ident: string): Promise<Runbook> {
  return mapper.fromFound(await db('runbooks').where(isUuid(ident) ? 'uuid' : 'name', ident).first(), () => new RunbookNotFound(ident));
}

export async function listRunbooks(
  db: Knex,
  page: PageRequest<Runbook>,
): Promise<Runbook[]> {
  return listPage(db, 'runbooks', mapper, page);
}

export async function updateRunbook(db: Knex, id: number, changes: RunbookChanges): Promise<Runbook> {
  return mapper.fromRow(await updateReturning(db, 'runbooks', id, mapper.toRow(changes), () => new RunbookNotFound(String(id)), (err) => translateWriteError(err, changes)));
}

export async function deleteRunbook(db: Knex, id: number): Promise<void> {
  await db('runbooks').where('id', id).delete();
}
