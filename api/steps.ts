/**
 * What deploy templates and runbooks share: both are named lists of steps, checked against
 * Ironic's step schemas with its messages, and shown with `fields=`.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { InvalidParameterValue, MethodNotAllowed, ResourceNotFound } from '../common/errors.js';
import { boolParam, listPageResponse, param, type Query } from './query.js';
import { checkQueryNames } from './resource.js';

/** Ironic's jsonschema message for a bad attribute. */
export function invalidInput(attr: string, v: unknown, why: string): InvalidParameterValue {
  return new InvalidParameterValue(`Invalid input for field/attribute ${attr}. Value: ${JSON.stringify(v)}. ${why}`);
}

/** `fields=` of a step list: known names only, and `uuid` and `links` always. */
export function stepListFields(raw: string | undefined, known: readonly string[]): string[] | undefined {
  if (raw === undefined) return undefined;
  const names = raw.split(',').map((s) => s.trim()).filter(Boolean);
  const bad = names.filter((n) => !known.includes(n));
  if (bad.length || names.length === 0) throw new InvalidParameterValue(`Field(s) "${bad.join(', ')}" are not valid`);
  for (const always of ['uuid', 'links']) if (!names.includes(always)) names.push(always);
  return names;
}

/** A step's priority or order: a non-negative integer, or a string of digits that becomes one. */
export function stepNumber(n: unknown, step: unknown): number {
  const value = typeof n === 'number' && Number.isInteger(n) && n >= 0 ? n
    : typeof n === 'string' && /^[0-9]+$/.test(n) ? Number(n) : undefined;
  if (value === undefined || !Number.isSafeInteger(value)) throw invalidInput('steps', step, `${JSON.stringify(n)} is not valid under any of the given schemas`);
  return value;
}

/** Ironic's rule against two steps of one interface and name; runbooks are checked with it too, message included. */
export function checkUniqueSteps(steps: ReadonlyArray<{ interface: string; step: string }>): void {
  const seen = new Map<string, number>();
  for (const s of steps) seen.set(`interface: ${s.interface}, step: ${s.step}`, (seen.get(`interface: ${s.interface}, step: ${s.step}`) ?? 0) + 1);
  const duplicates = [...seen].filter(([, n]) => n > 1).map(([k]) => k);
  if (duplicates.length) {
    throw new InvalidParameterValue(`Deploy template invalid: Duplicate deploy steps. A template cannot have multiple deploy steps with the same interface and step. Duplicates: ${duplicates.join('; ')}.`);
  }
}

/** Ironic's _route for a step-list resource newer than the request: reads are not found, writes not allowed. */
export function versionGate(minor: number, what: string): (req: FastifyRequest) => void {
  return (req) => {
    if (req.apiVersion.atLeast(minor)) return;
    const message = `The API version does not allow ${what}`;
    if (req.method === 'GET') throw new ResourceNotFound(message);
    throw new MethodNotAllowed(message);
  };
}

/** The fields a list shows: all with `detail` (which `fields` may not join), else `fields` or the defaults. */
export function stepListRequestFields(q: Query, detailPath: boolean, known: readonly string[], defaults: readonly string[]): readonly string[] | undefined {
  const detail = detailPath || boolParam(q, 'detail') === true;
  const fieldsRaw = param(q, 'fields');
  if (detail && fieldsRaw !== undefined) throw new InvalidParameterValue('Can not specify ?detail=True and fields in the same request.');
  return stepListFields(fieldsRaw, known) ?? (detail ? undefined : defaults);
}

/** What the list, show and delete routes of a step-list resource need to know of it. */
export interface StepListResource<T extends { id: number; uuid: string }> {
  /** In paths and bodies, e.g. `deploy_templates`. */
  collection: string;
  /** The path parameter naming one, e.g. `template`. */
  param: string;
  gate(req: FastifyRequest): void;
  /** The query parameters a list takes beyond Ironic's common ones, and how they are read. */
  extraQuery?: { names: readonly string[]; read(q: Query): void };
  fields: readonly string[];
  defaultListFields: readonly string[];
  sortKeys: ReadonlySet<string>;
  sortResource: string;
  get(ident: string): Promise<T>;
  list(page: { limit: number; marker?: T; sortKey: string; sortDir: 'asc' | 'desc' }): Promise<T[]>;
  remove(id: number): Promise<void>;
  view(row: T, base: string, fields?: readonly string[]): Record<string, unknown>;
}

/** GET of the list (and `/detail`) and of one, and DELETE, as deploy templates and runbooks share them. */
export function registerStepListRoutes<T extends { id: number; uuid: string }>(
  app: FastifyInstance,
  base: (req: FastifyRequest) => string,
  maxLimit: number,
  r: StepListResource<T>,
): void {
  const ident = (req: FastifyRequest) => (req.params as Record<string, string>)[r.param];
  async function list(req: FastifyRequest, detailPath: boolean) {
    r.gate(req);
    const q = req.query as Query;
    checkQueryNames(q, ['detail', 'fields', 'limit', 'marker', 'sort_key', 'sort_dir', ...(r.extraQuery?.names ?? [])]);
    r.extraQuery?.read(q);
    const fields = stepListRequestFields(q, detailPath, r.fields, r.defaultListFields);
    const b = base(req);
    return listPageResponse(q, b, {
      collection: r.collection, detailPath, maxLimit,
      sortKeys: r.sortKeys, refusedSortKeys: ['extra', 'steps'], sortResource: r.sortResource,
      marker: r.get,
      list: r.list,
      view: (row) => r.view(row, b, fields),
    });
  }
  app.get(`/v1/${r.collection}`, (req) => list(req, false));
  app.get(`/v1/${r.collection}/detail`, (req) => list(req, true));
  app.get(`/v1/${r.collection}/:${r.param}`, async (req) => {
    r.gate(req);
    const fields = stepListFields(param(req.query as Query, 'fields'), r.fields);
    return r.view(await r.get(ident(req)), base(req), fields);
  });
  app.delete(`/v1/${r.collection}/:${r.param}`, async (req, reply) => {
    r.gate(req);
    const row = await r.get(ident(req));
    await r.remove(row.id);
    reply.code(204).send();
  });
}

/**
 * One step as Ironic's step schemas have it: `interface` (one of `interfaces`), `step`, `args`
 * (required, or {} when absent) and `numberKey` (a priority or an order), nothing else.
 */
export function checkStepFields(
  v: unknown, interfaces: readonly string[], numberKey: 'priority' | 'order', argsRequired: boolean,
): { interface: string; step: string; args: Record<string, unknown>; number: number } {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw invalidInput('steps', v, `${JSON.stringify(v)} is not of type 'object'`);
  const s = v as Record<string, unknown>;
  for (const req of ['interface', 'step', ...(argsRequired ? ['args'] : []), numberKey]) {
    if (!(req in s)) throw invalidInput('steps', v, `'${req}' is a required property`);
  }
  const extra = Object.keys(s).filter((k) => !['interface', 'step', 'args', numberKey].includes(k));
  if (extra.length) throw invalidInput('steps', v, `Additional properties are not allowed ('${extra[0]}' was unexpected)`);
  if (typeof s.interface !== 'string' || !interfaces.includes(s.interface)) {
    throw invalidInput('steps', v, `${JSON.stringify(s.interface)} is not one of ${JSON.stringify(interfaces)}`);
  }
  if (typeof s.step !== 'string' || s.step.length === 0) throw invalidInput('steps', v, `${JSON.stringify(s.step)} is not a non-empty string`);
  const args = argsRequired ? s.args : s.args ?? {};
  if (args === null || typeof args !== 'object' || Array.isArray(args)) throw invalidInput('steps', v, `${JSON.stringify(s.args)} is not of type 'object'`);
  return { interface: s.interface, step: s.step, args: args as Record<string, unknown>, number: stepNumber(s[numberKey], v) };
}

/** A body's `steps`: a non-empty array, each step through `checkStep`, no step twice. */
export function checkStepList<S extends { interface: string; step: string }>(steps: unknown, checkStep: (v: unknown) => S): S[] {
  if (!Array.isArray(steps)) throw invalidInput('steps', steps, `${JSON.stringify(steps)} is not of type 'array'`);
  if (steps.length === 0) throw invalidInput('steps', steps, '[] should be non-empty');
  const checked = steps.map(checkStep);
  checkUniqueSteps(checked);
  return checked;
}

/** A body's `extra`: an object, {} when absent. */
export function checkExtra(body: Record<string, unknown>): Record<string, unknown> {
  const extra = body.extra ?? {};
  if (extra === null || typeof extra !== 'object' || Array.isArray(extra)) throw invalidInput('extra', extra, `${JSON.stringify(extra)} is not of type 'object', 'null'`);
  return extra as Record<string, unknown>;
}
