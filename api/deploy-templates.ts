import type { FastifyInstance, FastifyRequest } from 'fastify';
import { InvalidParameterValue } from '../common/errors.js';
import {
  createDeployTemplate, deleteDeployTemplate, DEPLOY_TEMPLATE_SORT_KEYS, getDeployTemplate, listDeployTemplates,
  updateDeployTemplate, type DeployStep, type DeployTemplate,
} from '../db/deploy-templates.js';
import type { ApiDeps } from './deps.js';
import { applyPatch, checkPatch } from './resource.js';
import { checkExtra, checkStepFields, checkStepList, registerStepListRoutes, versionGate } from './steps.js';
import { baseUrl, resourceLinks } from './links.js';
import { maskSecrets } from '../common/masking.js';
import { isUuid, requireObject } from './body.js';
import { checkTrait } from './traits.js';
import { STEP_INTERFACES } from '../common/steps.js';

/** Deploy templates arrived in 1.55. */
export const DEPLOY_TEMPLATES_VERSION = 55;

/** Interfaces a deploy step may belong to (Ironic's DEPLOYING_INTERFACE_PRIORITY). */

const FIELDS = ['uuid', 'name', 'steps', 'extra', 'created_at', 'updated_at', 'links'];
const DEFAULT_LIST_FIELDS = ['uuid', 'name', 'links'];

function iso(d: Date | null): string | null {
  return d ? d.toISOString().replace('Z', '+00:00') : null;
}

function templateView(t: DeployTemplate, base: string, fields?: readonly string[]): Record<string, unknown> {
  const full: Record<string, unknown> = {
    uuid: t.uuid, name: t.name,
    steps: t.steps.map((s) => ({ interface: s.interface, step: s.step, args: maskSecrets(s.args), priority: s.priority })),
    extra: t.extra, created_at: iso(t.createdAt), updated_at: iso(t.updatedAt),
    links: resourceLinks(base, 'deploy_templates', t.uuid),
  };
  return Object.fromEntries((fields ?? FIELDS).map((k) => [k, full[k]]));
}


/** One step as Ironic's DEPLOY_STEP_SCHEMA has it; a numeric string priority becomes a number. */
function checkStep(v: unknown): DeployStep {
  const s = checkStepFields(v, STEP_INTERFACES, 'priority', true);
  return { interface: s.interface, step: s.step, args: s.args, priority: s.number };
}

/** Ironic's TEMPLATE_SCHEMA and duplicate-step rule over a whole template. */
function checkTemplate(body: Record<string, unknown>): { uuid?: string; name: string; steps: DeployStep[]; extra: Record<string, unknown> } {
  const extraKeys = Object.keys(body).filter((k) => !['uuid', 'name', 'steps', 'extra'].includes(k));
  if (extraKeys.length) throw new InvalidParameterValue(`Additional properties are not allowed ('${extraKeys[0]}' was unexpected)`);
  for (const req of ['steps', 'name']) {
    if (body[req] === undefined) throw new InvalidParameterValue(`'${req}' is a required property`);
  }
  const name = checkTrait(body.name, 'name');
  const steps = checkStepList(body.steps, checkStep);
  const extra = checkExtra(body);
  let uuid: string | undefined;
  if (body.uuid !== undefined && body.uuid !== null) {
    if (typeof body.uuid !== 'string' || !isUuid(body.uuid)) throw new InvalidParameterValue(`Expected a UUID for uuid: ${JSON.stringify(body.uuid)}`);
    uuid = body.uuid.toLowerCase();
  }
  return { uuid, name, steps, extra };
}

export function registerDeployTemplateRoutes(app: FastifyInstance, deps: ApiDeps): void {
  const { db, config } = deps;
  const base = (req: FastifyRequest) => baseUrl(req, config.api.public_endpoint);
  const ident = (req: FastifyRequest) => (req.params as { template: string }).template;

  const gate = versionGate(DEPLOY_TEMPLATES_VERSION, 'deploy templates');

  registerStepListRoutes(app, base, config.api.max_limit, {
    collection: 'deploy_templates', param: 'template', gate,
    fields: FIELDS, defaultListFields: DEFAULT_LIST_FIELDS, sortKeys: DEPLOY_TEMPLATE_SORT_KEYS, sortResource: 'deploy templates',
    get: (ident) => getDeployTemplate(db, ident),
    list: (page) => listDeployTemplates(db, page),
    remove: (id) => deleteDeployTemplate(db, id),
    view: templateView,
  });

  app.post('/v1/deploy_templates', async (req, reply) => {
    gate(req);
    const t = await createDeployTemplate(db, checkTemplate(requireObject(req.body, 'deploy template')));
    reply.code(201).header('Location', `${base(req)}/v1/deploy_templates/${t.uuid}`);
    return templateView(t, base(req));
  });

  app.patch('/v1/deploy_templates/:template', async (req) => {
    gate(req);
    const ops = checkPatch(req.body, ['extra', 'name', 'steps']);
    const t = await getDeployTemplate(db, ident(req));
    const doc: Record<string, unknown> = { uuid: t.uuid, name: t.name, steps: t.steps, extra: t.extra };
    const patched = applyPatch(doc, ops);
    const checked = checkTemplate(patched);
    const changes: Record<string, unknown> = {};
    if (checked.name !== t.name) changes.name = checked.name;
    if (JSON.stringify(checked.steps) !== JSON.stringify(t.steps)) changes.steps = checked.steps;
    if (JSON.stringify(checked.extra) !== JSON.stringify(t.extra)) changes.extra = checked.extra;
    const updated = Object.keys(changes).length ? await updateDeployTemplate(db, t.id, changes) : t;
    return templateView(updated, base(req));
  });
}
