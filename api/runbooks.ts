/**
 * Runbooks (API 1.92, Ironic's controllers/v1/runbook.py as it was at 1.92): named step lists
 * that manual cleaning and servicing run in place of explicit steps, on nodes that carry a
 * trait of the runbook's name. Created, listed, patched and deleted like deploy templates.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { InvalidParameterValue, PatchError } from '../common/errors.js';
import {
  createRunbook, deleteRunbook, getRunbook, listRunbooks, RUNBOOK_SORT_KEYS, updateRunbook, type Runbook, type RunbookChanges,
  type RunbookStep,
} from '../db/runbooks.js';
import type { ApiDeps } from './deps.js';
import { applyPatch, checkPatch } from './resource.js';
import { checkExtra, checkStepFields, checkStepList, invalidInput, registerStepListRoutes, versionGate } from './steps.js';
import { baseUrl, resourceLinks } from './links.js';
import { maskSecrets } from '../common/masking.js';
import { boolParam } from './query.js';
import { isUuid, requireObject } from './body.js';
import { checkTrait } from './traits.js';
import { STEP_INTERFACES } from '../common/steps.js';

export const RUNBOOKS_VERSION = 92;

/** Interfaces a runbook step may belong to (Ironic's CLEANING_INTERFACE_PRIORITY). */
const BODY_KEYS = ['uuid', 'name', 'description', 'steps', 'disable_ramdisk', 'extra', 'public', 'owner'];
const PATCH_ALLOWED = ['extra', 'name', 'steps', 'description', 'public', 'owner'];
const FIELDS = ['uuid', 'name', 'extra', 'public', 'owner', 'disable_ramdisk', 'steps', 'created_at', 'updated_at', 'links'];
const DEFAULT_LIST_FIELDS = ['uuid', 'name', 'links'];

function iso(d: Date | null): string | null {
  return d ? d.toISOString().replace('Z', '+00:00') : null;
}

function runbookView(r: Runbook, base: string, fields?: readonly string[]): Record<string, unknown> {
  const full: Record<string, unknown> = {
    uuid: r.uuid, name: r.name, extra: r.extra, public: r.public, owner: r.owner, disable_ramdisk: r.disableRamdisk,
    steps: r.steps.map((s) => ({ interface: s.interface, step: s.step, args: maskSecrets(s.args), order: s.order })),
    created_at: iso(r.createdAt), updated_at: iso(r.updatedAt), links: resourceLinks(base, 'runbooks', r.uuid),
  };
  return Object.fromEntries((fields ?? FIELDS).map((k) => [k, full[k]]));
}

const invalid = invalidInput;

/** One step as Ironic's RUNBOOK_STEP_SCHEMA has it; a numeric string order becomes a number. */
function checkStep(v: unknown): RunbookStep {
  const s = checkStepFields(v, STEP_INTERFACES, 'order', false);
  return { interface: s.interface, step: s.step, args: s.args, order: s.number };
}

const optionalBoolean = (body: Record<string, unknown>, key: string): boolean | undefined => {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'boolean') throw invalid(key, v, `${JSON.stringify(v)} is not of type 'boolean', 'null'`);
  return v;
};

/** Ironic's RUNBOOK_SCHEMA and duplicate-step rule over a whole runbook. */
function checkRunbook(body: Record<string, unknown>): RunbookChanges & { name: string; steps: RunbookStep[] } {
  const extraKeys = Object.keys(body).filter((k) => !BODY_KEYS.includes(k));
  if (extraKeys.length) throw new InvalidParameterValue(`Additional properties are not allowed ('${extraKeys[0]}' was unexpected)`);
  for (const req of ['steps', 'name']) {
    if (body[req] === undefined) throw new InvalidParameterValue(`'${req}' is a required property`);
  }
  const name = checkTrait(body.name, 'name');
  if (body.description !== undefined && body.description !== null && (typeof body.description !== 'string' || body.description.length > 255)) {
    throw invalid('description', body.description, `${JSON.stringify(body.description)} is not of type 'string', 'null'`);
  }
  const steps = checkStepList(body.steps, checkStep);
  const extra = checkExtra(body);
  const owner = body.owner ?? null;
  if (owner !== null && (typeof owner !== 'string' || owner.length > 255)) throw invalid('owner', owner, `${JSON.stringify(owner)} is not of type 'string', 'null'`);
  let uuid: string | undefined;
  if (body.uuid !== undefined && body.uuid !== null) {
    if (typeof body.uuid !== 'string' || !isUuid(body.uuid)) throw new InvalidParameterValue(`Expected UUID for uuid: ${JSON.stringify(body.uuid)}`);
    uuid = body.uuid.toLowerCase();
  }
  return {
    uuid, name, steps, extra, owner: owner as string | null,
    public: optionalBoolean(body, 'public') ?? false, disableRamdisk: optionalBoolean(body, 'disable_ramdisk') ?? false,
  };
}

export function registerRunbookRoutes(app: FastifyInstance, deps: ApiDeps): void {
  const { db, config } = deps;
  const base = (req: FastifyRequest) => baseUrl(req, config.api.public_endpoint);
  const ident = (req: FastifyRequest) => (req.params as { runbook: string }).runbook;

  const gate = versionGate(RUNBOOKS_VERSION, 'runbooks');

  registerStepListRoutes(app, base, config.api.max_limit, {
    collection: 'runbooks', param: 'runbook', gate,
    // `project` narrows to the caller's project; a standalone caller has none, so it changes nothing.
    extraQuery: { names: ['project'], read: (q) => boolParam(q, 'project') },
    fields: FIELDS, defaultListFields: DEFAULT_LIST_FIELDS, sortKeys: RUNBOOK_SORT_KEYS, sortResource: 'runbooks',
    get: (ident) => getRunbook(db, ident),
    list: (page) => listRunbooks(db, page),
    remove: (id) => deleteRunbook(db, id),
    view: runbookView,
  });

  app.post('/v1/runbooks', async (req, reply) => {
    gate(req);
    const checked = checkRunbook(requireObject(req.body, 'runbook'));
    // Ironic gives a runbook the caller's project unless the caller is system-scoped; a
    // standalone caller (noauth, http_basic) has neither, so no owner can be asked for here.
    if (checked.owner) throw new InvalidParameterValue('Cannot create a runbook as a project scoped admin with an owner other than your own project.');
    const r = await createRunbook(db, { ...checked, owner: null });
    reply.code(201).header('Location', `${base(req)}/v1/runbooks/${r.uuid}`);
    return runbookView(r, base(req));
  });

  app.patch('/v1/runbooks/:runbook', async (req) => {
    gate(req);
    const ops = checkPatch(req.body, PATCH_ALLOWED);
    const r = await getRunbook(db, ident(req));
    const valuesOf = (path: string) => ops.filter((o) => o.path === path && o.op !== 'remove').map((o) => o.value);
    const owner = valuesOf('/owner');
    const pub = valuesOf('/public');
    // An owned runbook may be made private and given an owner at once; a public one has none.
    if (owner.length && ((r.public && !pub.length) || pub[0] === true)) throw new PatchError('There cannot be an owner for a public runbook');
    const doc: Record<string, unknown> = {
      uuid: r.uuid, name: r.name, steps: r.steps, extra: r.extra, public: r.public, owner: pub.length ? null : r.owner, disable_ramdisk: r.disableRamdisk,
    };
    const patched = applyPatch(doc, ops);
    // `description` passes the schema but Ironic's runbook object has no such field: it is dropped.
    const checked = checkRunbook(patched);
    const changes: RunbookChanges = {};
    if (checked.name !== r.name) changes.name = checked.name;
    if (JSON.stringify(checked.steps) !== JSON.stringify(r.steps)) changes.steps = checked.steps;
    if (JSON.stringify(checked.extra) !== JSON.stringify(r.extra)) changes.extra = checked.extra;
    if (checked.public !== r.public) changes.public = checked.public;
    if (checked.owner !== r.owner) changes.owner = checked.owner;
    const updated = Object.keys(changes).length ? await updateRunbook(db, r.id, changes) : r;
    return runbookView(updated, base(req));
  });
}
