import type { Knex } from 'knex';
import { DeployTemplateAlreadyExists, DeployTemplateDuplicateName, DeployTemplateNotFound } from '../common/errors.js';
import { RowMapper } from './rows.js';
import { namedTable } from './named-table.js';

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

const table = namedTable<DeployTemplate, DeployTemplateChanges>('deploy_templates', mapper, {
  notFound: (ident) => new DeployTemplateNotFound(ident),
  duplicateName: (name) => new DeployTemplateDuplicateName(name),
  uuidExists: (uuid) => new DeployTemplateAlreadyExists(uuid),
});

export const createDeployTemplate: (db: Knex, values: DeployTemplateChanges & { name: string; steps: DeployStep[] }) => Promise<DeployTemplate> = table.create;
export const listDeployTemplates = table.list;
export const updateDeployTemplate = table.update;
export const deleteDeployTemplate = table.remove;
/** By UUID or name. */
export const getDeployTemplate = table.get;
