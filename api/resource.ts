/**
 * What chassis and port groups share with Ironic's other simple resources: `fields=`, the
 * `detail` switch, and JSON-patch application with Ironic's rules and messages.
 */
import jsonpatch from 'fast-json-patch';
import { InvalidParameterValue, NotAcceptable, PatchError } from '../common/errors.js';
import { boolParam, param, type Query } from './query.js';
import type { ApiVersion } from './versioning.js';

/** Field name → the minor microversion that introduced it. */
export type FieldVersions = Readonly<Record<string, number>>;

/** Ironic's timestamps: ISO 8601 with an explicit +00:00. */
export function iso(d: Date | null | undefined): string | null {
  return d ? d.toISOString().replace('Z', '+00:00') : null;
}

/** The fields the client's version shows, in declaration order. */
export function visibleFields(all: FieldVersions, version: ApiVersion): string[] {
  return Object.keys(all).filter((k) => version.atLeast(all[k]));
}

/**
 * Keeps the requested fields of a full view, and `links` always, as Ironic's sanitize_dict
 * does; without `fields`, every field the version shows.
 */
export function pickFields(full: Record<string, unknown>, all: FieldVersions, version: ApiVersion, fields?: readonly string[]): Record<string, unknown> {
  const names = fields ? [...fields, ...(fields.includes('links') || !('links' in all) ? [] : ['links'])] : visibleFields(all, version);
  return Object.fromEntries(names.map((k) => [k, full[k]]));
}

/**
 * `fields=a,b` (1.8+): unknown names are a 400, names newer than the version a 406.
 */
export function parseFieldsParam(raw: string | undefined, all: FieldVersions, version: ApiVersion): string[] | undefined {
  if (raw === undefined) return undefined;
  if (!version.atLeast(8)) throw new NotAcceptable('Request not acceptable. The minimal required API version should be 1.8 to use the "fields" parameter.');
  const names = [...new Set(raw.split(',').map((s) => s.trim()).filter(Boolean))];
  const bad = names.filter((n) => !(n in all));
  if (bad.length) throw new InvalidParameterValue(`Field(s) "${bad.join(', ')}" are not valid`);
  for (const n of names) {
    if (!version.atLeast(all[n])) throw new NotAcceptable(`Field "${n}" requires API version 1.${all[n]} or later.`);
  }
  return names;
}

/**
 * The fields a list shows: `detail` (1.43+, or the /detail path) shows all, `fields` some,
 * neither the resource's defaults; both at once is a 400, as in Ironic.
 */
export function listFields(q: Query, detailPath: boolean, all: FieldVersions, defaults: readonly string[], version: ApiVersion): string[] | undefined {
  if (detailPath) return undefined;
  const detailRaw = param(q, 'detail');
  if (detailRaw !== undefined && !version.atLeast(43)) throw new NotAcceptable('The "detail" parameter requires API version 1.43 or later.');
  const detail = boolParam(q, 'detail') === true;
  const fieldsRaw = param(q, 'fields');
  if (detail && fieldsRaw !== undefined) throw new InvalidParameterValue('Can not specify ?detail=True and fields in the same request.');
  if (detail) return undefined;
  return parseFieldsParam(fieldsRaw, all, version) ?? [...defaults];
}

/** Refuses query parameters a list does not know, rather than silently ignoring a typo. */
export function checkQueryNames(q: Query, known: readonly string[]): void {
  const unknown = Object.keys(q).filter((k) => !known.includes(k));
  if (unknown.length) throw new InvalidParameterValue(`Unknown query parameter(s): ${unknown.join(', ')}`);
}

export interface PatchOp {
  op: 'add' | 'replace' | 'remove';
  path: string;
  value?: unknown;
}

/** The operations of a JSON patch body, which must be a non-empty list; check each with checkPatchOp. */
export function patchOps(body: unknown): unknown[] {
  if (!Array.isArray(body) || body.length === 0) throw new PatchError('The request body must be a non-empty JSON patch (a list of operations).');
  return body;
}

/** Checks operation `i` of a JSON patch: an object with an op Ironic supports, a path, and a value unless removing. */
export function checkPatchOp(op: unknown, i: number): PatchOp {
  if (!op || typeof op !== 'object' || Array.isArray(op)) throw new PatchError(`Patch operation ${i} is not a JSON object.`);
  const { op: kind, path } = op as { op?: unknown; path?: unknown };
  if (kind !== 'add' && kind !== 'replace' && kind !== 'remove') {
    throw new PatchError(`Invalid patch operation ${JSON.stringify(kind)}: only add, replace and remove are supported.`);
  }
  if (typeof path !== 'string' || !/^\/[^/]/.test(path)) throw new PatchError(`Invalid patch path ${JSON.stringify(path)}.`);
  if (kind !== 'remove' && !('value' in op)) throw new PatchError(`Patch operation ${i} (${kind} ${path}) has no value.`);
  return op as PatchOp;
}

/** Checks that a body is a JSON patch Ironic accepts, and that it touches only `allowed` fields. */
export function checkPatch(body: unknown, allowed: readonly string[]): PatchOp[] {
  return patchOps(body).map((raw, i) => {
    const op = checkPatchOp(raw, i);
    const root = op.path.split('/')[1];
    if (!allowed.includes(root)) throw new InvalidParameterValue(`Cannot patch ${op.path}. Only the following can be updated: ${allowed.join(', ')}`);
    return op;
  });
}

/** True when the patch sets or removes `path` itself or anything below it. */
export function patchTouches(ops: readonly PatchOp[], root: string): boolean {
  return ops.some((op) => op.path === `/${root}` || op.path.startsWith(`/${root}/`));
}

/**
 * Applies a checked patch to a document one operation at a time, as Ironic does, so the
 * error names the operation that failed. A removed top-level field comes back as undefined.
 */
/** The whole patch at once on a copy of `doc` (Ironic's apply_jsonpatch); a failure is "Invalid patch". */
export function applyWholePatch(doc: Record<string, unknown>, ops: readonly unknown[]): Record<string, unknown> {
  try {
    return jsonpatch.applyPatch(structuredClone(doc), ops as jsonpatch.Operation[], true, false).newDocument;
  } catch (err) {
    throw new PatchError(`Invalid patch: ${(err as Error).message.split('\n')[0]}`);
  }
}

export function applyPatch(doc: Record<string, unknown>, ops: readonly PatchOp[]): Record<string, unknown> {
  for (const op of ops) {
    if (op.op === 'add' && op.path.split('/').length === 2 && !(op.path.slice(1) in doc)) {
      throw new InvalidParameterValue(`Adding a new attribute (${op.path}) to the root of the resource is not allowed`);
    }
  }
  let out = structuredClone(doc);
  for (const op of ops) {
    try {
      out = jsonpatch.applyPatch(out, [op as jsonpatch.Operation], true, true).newDocument;
    } catch (err) {
      throw new PatchError(`Couldn't apply patch '${JSON.stringify(op)}'. Reason: ${(err as Error).message.split('\n')[0]}`);
    }
  }
  return out;
}

/** Top-level fields whose value the patch changed; a removed JSON object becomes {}, any other field null. */
export function changedFields(before: Record<string, unknown>, after: Record<string, unknown>, objectFields: readonly string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(before)) {
    const v = after[k] === undefined ? (objectFields.includes(k) ? {} : null) : after[k];
    if (JSON.stringify(v) !== JSON.stringify(before[k])) out[k] = v;
  }
  return out;
}
