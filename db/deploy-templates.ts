import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { DeployTemplateAlreadyExists, DeployTemplateDuplicateName, DeployTemplateNotFound } from '../common/errors.js';
import { RowMapper } from './rows.js';
import { applyPage, isUuid, markerValue } from './nodes.js';
import { isUniqueViolation } from './transaction.js';

/** One step of a deploy template, as Ironic stores it. */
export interface DeployStep {
  interface: string;
  step: string;
  args: Record<string, unknown>;
  priority: number;
}

export interface DeployTemplate {
  id: number;
  uuid: string;
  name: string;
  steps: DeployStep[];
  extra: Record<string, unknown>;
  createdAt: Date;
  updatedAt: Date | null;
}

export type DeployTemplateChanges = Partial<Pick<DeployTemplate, 'uuid' | 'name' | 'steps' | 'extra'>>;

const JSON_COLUMNS = ['steps', 'extra'];
const mapper = new RowMapper<DeployTemplate>(['id', 'uuid', 'name', ...JSON_COLUMNS, 'created_at', 'updated_at'], JSON_COLUMNS);

/** Ironic refuses sorting by the JSON fields. */
export const DEPLOY_TEMPLATE_SORT_KEYS = new Set(['id', 'uuid', 'name', 'created_at', 'updated_at']);

function translateWriteError(err: unknown, values: DeployTemplateChanges): never {
  if (isUniqueViolation(err, 'deploy_templates_name_unique')) throw new DeployTemplateDuplicateName(String(values.name));
  if (isUniqueViolation(err, 'deploy_templates_uuid_unique')) throw new DeployTemplateAlreadyExists(String(values.uuid));
  throw err;
}

export async function createDeployTemplate(db: Knex, values: DeployTemplateChanges & { name: string; steps: DeployStep[] }): Promise<DeployTemplate> {
  const row = mapper.toRow({ ...values, uuid: values.uuid ?? randomUUID() });
  try {
    const [created] = await db('deploy_templates').insert(row).returning('*');
    return mapper.fromRow(created);
  } catch (err) {
    translateWriteError(err, values);
  }
}

/** By UUID or name. */
export async function getDeployTemplate(db: Knex, ident: string): Promise<DeployTemplate> {
  const row = await db('deploy_templates').where(isUuid(ident) ? 'uuid' : 'name', ident).first();
  if (!row) throw new DeployTemplateNotFound(ident);
  return mapper.fromRow(row);
}

export async function listDeployTemplates(
  db: Knex,
  page: { limit: number; marker?: DeployTemplate; sortKey: string; sortDir: 'asc' | 'desc' },
): Promise<DeployTemplate[]> {
  const q = db('deploy_templates').select('*');
  applyPage(q, page, (t) => ({
    id: t.id,
    value: markerValue(db, 'deploy_templates', page.sortKey, t.id, (t as unknown as Record<string, unknown>)[mapper.fieldOf(page.sortKey)]),
  }));
  const rows = await q;
  return rows.map((r: Record<string, unknown>) => mapper.fromRow(r));
}

export async function updateDeployTemplate(db: Knex, id: number, changes: DeployTemplateChanges): Promise<DeployTemplate> {
  try {
    const [row] = await db('deploy_templates').where('id', id).update({ ...mapper.toRow(changes), updated_at: db.fn.now() }).returning('*');
    if (!row) throw new DeployTemplateNotFound(String(id));
    return mapper.fromRow(row);
  } catch (err) {
    translateWriteError(err, changes);
  }
}

export async function deleteDeployTemplate(db: Knex, id: number): Promise<void> {
  await db('deploy_templates').where('id', id).delete();
}
