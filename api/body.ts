import { InvalidParameterValue, NotAcceptable } from '../common/errors.js';
import type { NodeField } from './node-fields.js';
import type { ApiVersion } from './versioning.js';

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** RFC 3986 unreserved characters, Ironic's rule for logical names. */
const NAME_RE = /^[A-Za-z0-9\-._~]+$/;

export function isUuid(v: string): boolean {
  return UUID_RE.test(v);
}

export function requireObject(body: unknown, what: string): Record<string, unknown> {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new InvalidParameterValue(`The request body for ${what} must be a JSON object.`);
  }
  return body as Record<string, unknown>;
}

/** Ironic's logical-name rule: unreserved characters, at most 255, and not a UUID. */
export function checkName(value: string, what = 'name'): void {
  if (!value || value.length > 255 || !NAME_RE.test(value) || isUuid(value)) {
    throw new InvalidParameterValue(`Cannot use "${value}" as a ${what}: it must be 1-255 characters from [A-Za-z0-9-._~] and not a UUID.`);
  }
}

/**
 * oslo's `bool_from_string(strict=True)`, which Ironic's validators (`args.boolean`) apply to
 * boolean body fields: python-ironicclient's `node set --protected`/`--retired`/
 * `--automated-clean`, `port create --pxe-enabled false` and `port set --pxe-disabled` send
 * strings such as "True"/"false". Returns anything else unchanged (type checks then refuse it).
 */
export function ironicBoolean(value: unknown): unknown {
  if (typeof value !== 'string') return value;
  const s = value.trim().toLowerCase();
  if (['1', 't', 'true', 'on', 'y', 'yes'].includes(s)) return true;
  if (['0', 'f', 'false', 'off', 'n', 'no'].includes(s)) return false;
  return value;
}

/** Type-checks one value against its field declaration. */
export function checkFieldValue(field: NodeField, value: unknown): void {
  const where = `Invalid input for field/attribute ${field.name}.`;
  if (value === null) {
    if (field.nullable === false) throw new InvalidParameterValue(`${where} Value: null. The field may not be null.`);
    return;
  }
  const shown = JSON.stringify(value)?.slice(0, 100);
  const expect = (ok: boolean, what: string): void => {
    if (!ok) throw new InvalidParameterValue(`${where} Value: ${shown}. Wrong type. Expected ${what}.`);
  };
  switch (field.type) {
    case 'string':
    case 'interface':
      expect(typeof value === 'string', 'a string');
      if (field.maxLength !== undefined && (value as string).length > field.maxLength) {
        throw new InvalidParameterValue(`${where} Value: ${shown}. Longer than ${field.maxLength} characters.`);
      }
      break;
    case 'uuid':
      expect(typeof value === 'string' && isUuid(value), 'a UUID');
      break;
    case 'object':
      expect(typeof value === 'object' && !Array.isArray(value), 'a JSON object');
      break;
    case 'boolean':
      expect(typeof value === 'boolean', 'a boolean');
      break;
    default:
      break;
  }
}

/** Fields newer than the client's version are refused with 406, as Ironic does. */
export function checkFieldVersion(field: NodeField, version: ApiVersion): void {
  if (!version.atLeast(field.since)) {
    throw new NotAcceptable(`Field "${field.name}" requires API version 1.${field.since} or later; the request used ${version.toString()}.`);
  }
}
