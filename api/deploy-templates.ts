import type { FastifyInstance, FastifyRequest } from 'fastify';
import { InvalidParameterValue } from '../common/errors.js';
import {
  createDeployTemplate, deleteDeployTemplate, DEPLOY_TEMPLATE_SORT_KEYS, getDeployTemplate, listDeployTemplates,
  updateDeployTemplate, type DeployStep, type DeployTemplate,
} from '../db/deploy-templates.js';
import type { ApiDeps } from './deps.js';
import { applyPatch, checkPatch, checkQueryNames } from './resource.js';
import { checkUniqueSteps, invalidInput, stepListFields, stepListRequestFields, stepNumber, versionGate } from './steps.js';
import { baseUrl, resourceLinks } from './links.js';
import { maskSecrets } from './masking.js';
import { listPageResponse, param, type Query } from './query.js';
import { isUuid, requireObject } from './body.js';
import { checkTrait } from './traits.js';

/** Deploy templates arrived in 1.55. */
export const DEPLOY_TEMPLATES_VERSION = 55;

/** Interfaces a deploy step may belong to (Ironic's DEPLOYING_INTERFACE_PRIORITY). */
export const DEPLOY_STEP_INTERFACES = ['vendor', 'power', 'management', 'firmware', 'deploy', 'bios', 'raid'];

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

const parseFields = (raw: string | undefined) => stepListFields(raw, FIELDS);
const invalid = invalidInput;

/** One step as Ironic's DEPLOY_STEP_SCHEMA has it; a numeric string priority becomes a number. */
function checkStep(v: unknown): DeployStep {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw invalid('steps', v, `${JSON.stringify(v)} is not of type 'object'`);
  const s = v as Record<string, unknown>;
  for (const req of ['interface', 'step', 'args', 'priority']) {
    if (!(req in s)) throw invalid('steps', v, `'${req}' is a required property`);
  }
  const extra = Object.keys(s).filter((k) => !['interface', 'step', 'args', 'priority'].includes(k));
  if (extra.length) throw invalid('steps', v, `Additional properties are not allowed ('${extra[0]}' was unexpected)`);
  if (typeof s.interface !== 'string' || !DEPLOY_STEP_INTERFACES.includes(s.interface)) {
    throw invalid('steps', v, `${JSON.stringify(s.interface)} is not one of ${JSON.stringify(DEPLOY_STEP_INTERFACES)}`);
  }
  if (typeof s.step !== 'string' || s.step.length === 0) throw invalid('steps', v, `${JSON.stringify(s.step)} is not a non-empty string`);
  if (s.args === null || typeof s.args !== 'object' || Array.isArray(s.args)) throw invalid('steps', v, `${JSON.stringify(s.args)} is not of type 'object'`);
  return { interface: s.interface, step: s.step, args: s.args as Record<string, unknown>, priority: stepNumber(s.priority, v) };
}

/** Ironic's TEMPLATE_SCHEMA and duplicate-step rule over a whole template. */
function checkTemplate(body: Record<string, unknown>): { uuid?: string; name: string; steps: DeployStep[]; extra: Record<string, unknown> } {
  const extraKeys = Object.keys(body).filter((k) => !['uuid', 'name', 'steps', 'extra'].includes(k));
  if (extraKeys.length) throw new InvalidParameterValue(`Additional properties are not allowed ('${extraKeys[0]}' was unexpected)`);
  for (const req of ['steps', 'name']) {
    if (body[req] === undefined) throw new InvalidParameterValue(`'${req}' is a required property`);
  }
  const name = checkTrait(body.name, 'name');
  if (!Array.isArray(body.steps)) throw invalid('steps', body.steps, `${JSON.stringify(body.steps)} is not of type 'array'`);
  if (body.steps.length === 0) throw invalid('steps', body.steps, '[] should be non-empty');
  const steps = body.steps.map(checkStep);
  checkUniqueSteps(steps);
  const extra = body.extra ?? {};
  if (extra === null || typeof extra !== 'object' || Array.isArray(extra)) throw invalid('extra', extra, `${JSON.stringify(extra)} is not of type 'object', 'null'`);
  let uuid: string | undefined;
  if (body.uuid !== undefined && body.uuid !== null) {
    if (typeof body.uuid !== 'string' || !isUuid(body.uuid)) throw new InvalidParameterValue(`Expected a UUID for uuid: ${JSON.stringify(body.uuid)}`);
    uuid = body.uuid.toLowerCase();
  }
  return { uuid, name, steps, extra: extra as Record<string, unknown> };
}

export function registerDeployTemplateRoutes(app: FastifyInstance, deps: ApiDeps): void {
  const { db, config } = deps;
  const base = (req: FastifyRequest) => baseUrl(req, config.api.public_endpoint);
  const ident = (req: FastifyRequest) => (req.params as { template: string }).template;

  const gate = versionGate(DEPLOY_TEMPLATES_VERSION, 'deploy templates');

  async function list(req: FastifyRequest, detailPath: boolean) {
    gate(req);
    const q = req.query as Query;
    checkQueryNames(q, ['detail', 'fields', 'limit', 'marker', 'sort_key', 'sort_dir']);
    const fields = stepListRequestFields(q, detailPath, FIELDS, DEFAULT_LIST_FIELDS);
    const b = base(req);
    return listPageResponse(q, b, {
      collection: 'deploy_templates', detailPath, maxLimit: config.api.max_limit,
      sortKeys: DEPLOY_TEMPLATE_SORT_KEYS, refusedSortKeys: ['extra', 'steps'], sortResource: 'deploy templates',
      marker: (ident) => getDeployTemplate(db, ident),
      list: (page) => listDeployTemplates(db, page),
      view: (t) => templateView(t, b, fields),
    });
  }

  app.get('/v1/deploy_templates', (req) => list(req, false));
  app.get('/v1/deploy_templates/detail', (req) => list(req, true));

  app.get('/v1/deploy_templates/:template', async (req) => {
    gate(req);
    const fields = parseFields(param(req.query as Query, 'fields'));
    return templateView(await getDeployTemplate(db, ident(req)), base(req), fields);
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

  app.delete('/v1/deploy_templates/:template', async (req, reply) => {
    gate(req);
    const t = await getDeployTemplate(db, ident(req));
    await deleteDeployTemplate(db, t.id);
    reply.code(204).send();
  });
}
