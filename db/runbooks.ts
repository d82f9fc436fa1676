import type { Knex } from 'knex';
import { RunbookAlreadyExists, RunbookDuplicateName, RunbookNotFound } from '../common/errors.js';
import { RowMapper } from './rows.js';
import { namedTable } from './named-table.js';

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

const table = namedTable<Runbook, RunbookChanges>('runbooks', mapper, {
  notFound: (ident) => new RunbookNotFound(ident),
  duplicateName: (name) => new RunbookDuplicateName(name),
  uuidExists: (uuid) => new RunbookAlreadyExists(uuid),
});

export const createRunbook: (db: Knex, values: RunbookChanges & { name: string; steps: RunbookStep[] }) => Promise<Runbook> = table.create;
export const listRunbooks = table.list;
export const updateRunbook = table.update;
export const deleteRunbook = table.remove;
/** By UUID or name. */
export const getRunbook = table.get;
