/**
 * What deploy templates and runbooks share: both are named lists of steps, checked against
 * Ironic's step schemas with its messages, and shown with `fields=`.
 */
import type { FastifyRequest } from 'fastify';
import { InvalidParameterValue, MethodNotAllowed, ResourceNotFound } from '../common/errors.js';
import { boolParam, param, type Query } from './query.js';

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
