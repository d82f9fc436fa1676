import type { FastifyRequest } from 'fastify';
import { TextDecoder } from 'node:util';
import { boolFromString } from '../common/bool-string.js';
import { InvalidParameterValue, NotAcceptable } from '../common/errors.js';
import type { NodeField } from './node-fields.js';
import { jsonDepthExceeds } from './routing.js';
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

/**
 * Deepest nesting of arrays and objects a request body may have. Ironic's own bodies need a
 * handful of levels; past this a body is refused with 400 before anything recursive sees it.
 */
export const MAX_BODY_DEPTH = 100;

/** JSON.parse reviver: Postgres text and jsonb cannot hold U+0000, so such bodies are a 400. */
function refuseNul(key: string, value: unknown): unknown {
  if (key.includes('\u0000') || (typeof value === 'string' && value.includes('\u0000'))) {
    throw new InvalidParameterValue('The request body contains a NUL character (\\u0000), which is not allowed.');
  }
  return value;
}

/**
 * A body's text in the charset its Content-Type names, UTF-8 when it names none (webob's
 * `Request.text`, which Ironic's `request.json` reads).
 * @throws InvalidParameterValue for a charset this runtime cannot decode
 */
export function decodeBody(body: Buffer, contentType: string | undefined): string {
  const charset = /;\s*charset\s*=\s*"?([^";\s]+)"?/i.exec(contentType ?? '')?.[1];
  if (charset === undefined || /^utf-?8$/i.test(charset)) return body.toString('utf8');
  let decoder: TextDecoder;
  try {
    decoder = new TextDecoder(charset);
  } catch {
    throw new InvalidParameterValue(`The request body's charset "${charset}" is not supported.`);
  }
  return decoder.decode(body);
}

/**
 * Fastify content-type parser for JSON bodies (`parseAs: 'buffer'`): an empty body is no body,
 * too deep a nesting or a NUL is a 400, as is text that is not JSON.
 */
export function parseJsonBody(req: FastifyRequest, body: string | Buffer, done: (err: Error | null, value?: unknown) => void): void {
  let text: string;
  try {
    text = decodeBody(body as Buffer, req.headers['content-type']);
  } catch (err) {
    return done(err as Error, undefined);
  }
  if (text.trim() === '') return done(null, undefined);
  if (text.length > MAX_BODY_DEPTH && jsonDepthExceeds(text, MAX_BODY_DEPTH)) {
    return done(new InvalidParameterValue(`The request body is nested more than ${MAX_BODY_DEPTH} levels deep.`), undefined);
  }
  try {
    // A NUL can only arrive escaped; the reviver (slower) runs only when one may be there.
    done(null, JSON.parse(text, text.includes('\\u0000') ? refuseNul : undefined));
  } catch (err) {
    const e = err as Error & { statusCode?: number };
    e.statusCode = 400;
    done(e, undefined);
  }
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
  return boolFromString(value) ?? value;
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
