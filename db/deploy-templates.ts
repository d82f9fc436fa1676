import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { DeployTemplateAlreadyExists, DeployTemplateDuplicateName, DeployTemplateNotFound } from '../common/errors.js';
import { RowMapper } from './rows.js';
import { isUuid } from './nodes.js';
import { insertReturning, listPage, updateReturning, type PageRequest } from './table.js';
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
  return mapper.fromRow(await insertReturning(db, 'deploy_templates', row, (err) => translateWriteError(err, values)));
}

/** By UUID or name. */
export async function getDeployTemplate(db: Knex, ident: string): Promise<DeployTemplate> {
  return mapper.fromFound(await db('deploy_templates').where(isUuid(ident) ? 'uuid' : 'name', ident).first(), () => new DeployTemplateNotFound(ident));
}

export async function listDeployTemplates(
  db: Knex,
  page: PageRequest<DeployTemplate>,
): Promise<DeployTemplate[]> {
  return listPage(db, 'deploy_templates', mapper, page);
}

export async function updateDeployTemplate(db: Knex, id: number, changes: DeployTemplateChanges): Promise<DeployTemplate> {
  return mapper.fromRow(await updateReturning(db, 'deploy_templates', id, mapper.toRow(changes), () => new DeployTemplateNotFound(String(id)), (err) => translateWriteError(err, changes)));
}

export async function deleteDeployTemplate(db: Knex, id: number): Promise<void> {
  await db('deploy_templates').where('id', id).delete();
}
