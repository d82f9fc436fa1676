/**
 * JSON Schema draft 4 validation of the keywords Ironic's schemas use, reporting the one error
 * Python's jsonschema (4.23, Ironic 2025.1's upper constraint) reports from `validate`: every
 * error collected in the order jsonschema visits the schema, then its `best_match` heuristic
 * (the shallowest error; among siblings the one with the greater path; for `anyOf` the most
 * relevant error inside it unless they tie), with its messages. Clients and operators read
 * these messages, so they must be the same words as Ironic's.
 *
 * Keywords: type, enum, minimum (+ exclusiveMinimum), minItems, items (one schema),
 * properties, required, additionalProperties (false), dependencies (property lists), anyOf.
 */
import { pyRepr } from './py-repr.js';

/** The part of a draft-4 schema this module reads. */
export interface Schema {
  type?: string | readonly string[];
  enum?: readonly unknown[];
  minimum?: number;
  exclusiveMinimum?: boolean;
  minItems?: number;
  items?: Schema;
  properties?: Readonly<Record<string, Schema>>;
  required?: readonly string[];
  additionalProperties?: boolean;
  dependencies?: Readonly<Record<string, readonly string[]>>;
  anyOf?: readonly Schema[];
  description?: string;
  [other: string]: unknown;
}

type PathItem = string | number;

interface SchemaError {
  message: string;
  /** Where in the instance, relative to where validation (or the anyOf holding it) started. */
  path: PathItem[];
  validator: string;
  /** The schema holding the keyword (for jsonschema's "does the instance match its type"). */
  schema: Schema;
  instance: unknown;
  context: SchemaError[];
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/** jsonschema's draft-4 type checker; a boolean is no number. */
function isType(v: unknown, type: string): boolean {
  switch (type) {
    case 'object': return isObject(v);
    case 'array': return Array.isArray(v);
    case 'string': return typeof v === 'string';
    case 'boolean': return typeof v === 'boolean';
    case 'null': return v === null;
    case 'integer': return typeof v === 'number' && Number.isInteger(v);
    case 'number': return typeof v === 'number';
    default: return false;
  }
}

function equal(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** Every error of `instance` against `schema`, in the order jsonschema yields them (the schema's key order). */
function iterErrors(instance: unknown, schema: Schema): SchemaError[] {
  const out: SchemaError[] = [];
  const err = (validator: string, message: string, context: SchemaError[] = []): void => {
    out.push({ message, path: [], validator, schema, instance, context });
  };
  const descend = (value: unknown, sub: Schema, at: PathItem): void => {
    for (const e of iterErrors(value, sub)) out.push({ ...e, path: [at, ...e.path] });
  };
  for (const key of Object.keys(schema)) {
    switch (key) {
      case 'type': {
        const types = typeof schema.type === 'string' ? [schema.type] : [...(schema.type ?? [])];
        if (!types.some((t) => isType(instance, t))) err('type', `${pyRepr(instance)} is not of type ${types.map((t) => pyRepr(t)).join(', ')}`);
        break;
      }
      case 'enum':
        if (!(schema.enum ?? []).some((e) => equal(e, instance))) err('enum', `${pyRepr(instance)} is not one of ${pyRepr(schema.enum)}`);
        break;
      case 'minimum':
        if (typeof instance === 'number' && schema.minimum !== undefined) {
          const failed = schema.exclusiveMinimum ? instance <= schema.minimum : instance < schema.minimum;
          if (failed) err('minimum', `${pyRepr(instance)} is ${schema.exclusiveMinimum ? 'less than or equal to' : 'less than'} the minimum of ${pyRepr(schema.minimum)}`);
        }
        break;
      case 'minItems':
        if (Array.isArray(instance) && schema.minItems !== undefined && instance.length < schema.minItems) {
          err('minItems', `${pyRepr(instance)} ${schema.minItems === 1 ? 'should be non-empty' : 'is too short'}`);
        }
        break;
      case 'items':
        if (Array.isArray(instance) && schema.items) instance.forEach((item, i) => descend(item, schema.items as Schema, i));
        break;
      case 'properties':
        if (isObject(instance)) {
          for (const [name, sub] of Object.entries(schema.properties ?? {})) if (Object.hasOwn(instance, name)) descend(instance[name], sub, name);
        }
        break;
      case 'required':
        if (isObject(instance)) for (const name of schema.required ?? []) if (!Object.hasOwn(instance, name)) err('required', `${pyRepr(name)} is a required property`);
        break;
      case 'additionalProperties':
        if (isObject(instance) && schema.additionalProperties === false) {
          // A set in jsonschema, shown sorted.
          const extras = Object.keys(instance).filter((k) => !Object.hasOwn(schema.properties ?? {}, k)).sort();
          if (extras.length) err('additionalProperties', `Additional properties are not allowed (${extras.map((e) => pyRepr(e)).join(', ')} ${extras.length === 1 ? 'was' : 'were'} unexpected)`);
        }
        break;
      case 'dependencies':
        if (isObject(instance)) {
          for (const [name, needs] of Object.entries(schema.dependencies ?? {})) {
            if (!Object.hasOwn(instance, name)) continue;
            for (const need of needs) if (!Object.hasOwn(instance, need)) err('dependencies', `${pyRepr(need)} is a dependency of ${pyRepr(name)}`);
          }
        }
        break;
      case 'anyOf': {
        const all: SchemaError[] = [];
        let matched = false;
        for (const sub of schema.anyOf ?? []) {
          const errs = iterErrors(instance, sub);
          if (!errs.length) {
            matched = true;
            break;
          }
          all.push(...errs);
        }
        if (!matched) err('anyOf', `${pyRepr(instance)} is not valid under any of the given schemas`, all);
        break;
      }
      default:
        break;
    }
  }
  return out;
}

/** jsonschema's `relevance` key: higher sorts as a better match for `max`. */
type Relevance = [number, PathItem[], boolean, boolean, boolean];

function relevance(e: SchemaError): Relevance {
  const t = e.schema.type;
  const matchesType = t === undefined ? false : (typeof t === 'string' ? [t] : [...t]).some((x) => isType(e.instance, x));
  return [-e.path.length, e.path, !['anyOf', 'oneOf'].includes(e.validator), false, !matchesType];
}

/** Python's comparison of two path deques (element by element, then length). */
function comparePaths(a: PathItem[], b: PathItem[]): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    if (a[i] !== b[i]) return a[i] < b[i] ? -1 : 1;
  }
  return a.length - b.length;
}

function compare(a: Relevance, b: Relevance): number {
  if (a[0] !== b[0]) return a[0] - b[0];
  const p = comparePaths(a[1], b[1]);
  if (p !== 0) return p;
  for (const i of [2, 3, 4] as const) if (a[i] !== b[i]) return a[i] ? 1 : -1;
  return 0;
}

/** jsonschema's best_match: the first most relevant error, then down into anyOf's context while one stands out. */
function bestMatch(errors: SchemaError[]): SchemaError | null {
  if (!errors.length) return null;
  let best = errors[0];
  for (const e of errors.slice(1)) if (compare(relevance(e), relevance(best)) > 0) best = e;
  while (best.context.length) {
    const sorted = [...best.context].sort((a, b) => compare(relevance(a), relevance(b)));
    if (sorted.length >= 2 && compare(relevance(sorted[0]), relevance(sorted[1])) === 0) return best;
    best = sorted[0];
  }
  return best;
}

/** The message of the error jsonschema's `validate` raises for `instance`, or null when it is valid. */
export function schemaError(instance: unknown, schema: Schema): string | null {
  return bestMatch(iterErrors(instance, schema))?.message ?? null;
}
