/**
 * What volume connectors and volume targets (API 1.32) have in common: collections under
 * `/v1/volume/{connectors|targets}` and `/v1/nodes/{n}/volume/…`, Ironic's list parameters,
 * JSON-patch updates, and the rule that a node's volume records change only while it is
 * powered off.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Knex } from 'knex';
import { applyWholePatch } from './resource.js';
import {
  InvalidParameterValue, InvalidStateRequested, MalformedRequestURI, MissingParameterValue, NodeNotFound, PatchError, ResourceNotFound,
} from '../common/errors.js';
import { lastOpenIntent } from '../db/intents.js';
import { getNode, type Node } from '../db/nodes.js';
import { withTransaction } from '../db/transaction.js';
import type { ApiDeps } from './deps.js';
import type { IntentAcceptor } from './intents.js';
import { baseUrl, resourceLinks } from './links.js';
import { boolParam, limitParam, nextLink, param, sortParams, type Query } from './query.js';
import { isUuid, requireObject } from './body.js';
import type { ApiVersion } from './versioning.js';

/** How long a change waits for the node's queued actions (a power off asked just before) to end. */
const SETTLE_MS = 30_000;

/** What every volume record has. */
export interface VolumeRecord {
  id: number;
  uuid: string;
  nodeId: number;
  nodeUuid: string;
  createdAt: Date;
  updatedAt: Date | null;
}

export interface Page<T> {
  limit: number;
  marker?: T;
  sortKey: string;
  sortDir: 'asc' | 'desc';
}

/** One volume resource: its API shape and its repository. */
export interface VolumeResourceSpec<T extends VolumeRecord, C extends object> {
  /** `connectors` or `targets`: the collection's name in URLs and list bodies. */
  collection: string;
  /** `volume connector`: how Ironic names it in its messages. */
  what: string;
  /** `connector`: how Ironic's schema errors name the body. */
  bodyName: string;
  /** Every field the API shows, `links` included. */
  fields: readonly string[];
  /** What a list shows without `detail` or `fields`. */
  defaultFields: readonly string[];
  /** Body fields a create must have. */
  required: readonly string[];
  /** Top-level fields a PATCH may touch (Ironic's PATCH_ALLOWED_FIELDS). */
  patchable: readonly string[];
  sortKeys: ReadonlySet<string>;
  /** The writable fields of a record as the API names them, the document a PATCH applies to. */
  document(item: T): Record<string, unknown>;
  /** Checks body fields other than `uuid` and `node_uuid` and converts them to domain changes. */
  toChanges(body: Record<string, unknown>): C;
  /** Every field but `links`, as the API shows it. */
  view(item: T): Record<string, unknown>;
  get(db: Knex, uuid: string): Promise<T>;
  list(db: Knex, filters: { nodeId?: number }, page: Page<T>): Promise<T[]>;
  create(db: Knex, values: C & { nodeId: number; uuid?: string }): Promise<T>;
  update(db: Knex, current: T, changes: C & { nodeId?: number }): Promise<T>;
  remove(db: Knex, id: number): Promise<void>;
}

export function iso(d: Date | null): string | null {
  return d ? d.toISOString().replace('Z', '+00:00') : null;
}

/** Volume resources appeared in 1.32; before that Ironic does not know the URLs. */
export function requireVolumeVersion(version: ApiVersion): void {
  if (!version.atLeast(32)) throw new ResourceNotFound('The resource could not be found.');
}

/** A UUID in a URL or query, refused with Ironic's InvalidUUID message otherwise. */
export function checkUuid(value: string, what: string): string {
  if (!isUuid(value)) throw new InvalidParameterValue(`Expected a UUID for ${what}, but received ${value}.`);
  return value.toLowerCase();
}

function schemaError(resource: string, message: string): InvalidParameterValue {
  return new InvalidParameterValue(`Schema error for ${resource}: ${message}`);
}

/** Checks a JSON object field that may be null (taken as empty). */
export function objectField(resource: string, name: string, v: unknown): Record<string, unknown> {
  if (v === null) return {};
  if (typeof v !== 'object' || Array.isArray(v)) throw schemaError(resource, `${name}: ${JSON.stringify(v)} is not of type 'object', 'null'`);
  return v as Record<string, unknown>;
}

/** Checks a string field, with the column's length as its bound. */
export function stringField(resource: string, name: string, v: unknown, maxLength: number): string {
  if (typeof v !== 'string') throw schemaError(resource, `${name}: ${JSON.stringify(v)} is not of type 'string'`);
  if (v.length === 0 || v.length > maxLength) throw schemaError(resource, `${name}: ${JSON.stringify(v)} must be 1 to ${maxLength} characters long`);
  return v;
}

/** Registers the collection, item and per-node routes of one volume resource. */
export function registerVolumeResource<T extends VolumeRecord, C extends object>(
  app: FastifyInstance,
  deps: ApiDeps,
  acceptor: IntentAcceptor,
  spec: VolumeResourceSpec<T, C>,
): void {
  const { db, config } = deps;
  const base = (req: FastifyRequest) => baseUrl(req, config.api.public_endpoint);
  const itemPath = `volume/${spec.collection}`;
  const allFields = new Set(spec.fields);

  function render(item: T, b: string, fields?: readonly string[]): Record<string, unknown> {
    const full = { ...spec.view(item), links: resourceLinks(b, itemPath, item.uuid) };
    if (!fields) return full;
    // As Ironic's sanitize_dict: the fields asked for, and the links always.
    const out: Record<string, unknown> = {};
    for (const f of fields) out[f] = full[f as keyof typeof full];
    out.links = full.links;
    return out;
  }

  function parseFields(raw: string | undefined): string[] | undefined {
    if (raw === undefined) return undefined;
    const names = raw.split(',').map((s) => s.trim()).filter(Boolean);
    const bad = names.filter((n) => !allFields.has(n));
    if (bad.length || names.length === 0) throw new InvalidParameterValue(`Field(s) "${bad.join(', ')}" are not valid`);
    return names;
  }

  /** A body's node: one that does not exist is the body's fault (Ironic's InvalidInput). */
  async function nodeOfBody(trx: Knex, value: unknown): Promise<Node> {
    if (typeof value !== 'string' || !isUuid(value)) {
      throw new InvalidParameterValue(`Expected a UUID for node_uuid, but received ${typeof value === 'string' ? value : JSON.stringify(value)}.`);
    }
    try {
      return await getNode(trx, value.toLowerCase(), { forUpdate: true });
    } catch (err) {
      if (err instanceof NodeNotFound) throw new InvalidParameterValue(`Invalid input for field/attribute node_uuid. Value: ${value}. ${err.message}`);
      throw err;
    }
  }

  /**
   * Runs `work` with the node's row locked, once it is powered off (Ironic's
   * InvalidStateRequested otherwise). Actions already queued for the node run first, so a
   * power off asked just before is honoured as Ironic's synchronous conductor would.
   */
  async function whilePoweredOff<R>(nodeUuid: string, action: string, work: (trx: Knex.Transaction, node: Node) => Promise<R>): Promise<R> {
    const unlocked = await getNode(db, nodeUuid);
    const open = await lastOpenIntent(db, unlocked.id);
    if (open) await acceptor.waiter.wait(open, SETTLE_MS);
    return withTransaction(db, async (trx) => {
      const node = await getNode(trx, nodeUuid, { forUpdate: true });
      if (node.powerState !== 'power off') {
        throw new InvalidStateRequested(`The requested action "${action}" can not be performed on node "${node.uuid}" while it is in state "${node.powerState}".`);
      }
      return work(trx, node);
    });
  }

  async function list(req: FastifyRequest, parentNode?: string) {
    requireVolumeVersion(req.apiVersion);
    const q = req.query as Query;
    const known = new Set(['node', 'detail', 'fields', 'limit', 'marker', 'sort_key', 'sort_dir']);
    const unknown = Object.keys(q).filter((k) => !known.has(k));
    if (unknown.length) throw new InvalidParameterValue(`Unknown query parameter(s): ${unknown.join(', ')}`);
    const detail = boolParam(q, 'detail') === true;
    const requested = parseFields(param(q, 'fields'));
    if (requested && detail) throw new InvalidParameterValue("Can't fetch a subset of fields with 'detail' set");
    const fields = detail ? undefined : requested ?? spec.defaultFields;
    const limit = limitParam(q, config.api.max_limit);
    const sort = sortParams(q, spec.sortKeys, spec.collection);
    const markerRaw = param(q, 'marker');
    const marker = markerRaw === undefined ? undefined : await spec.get(db, checkUuid(markerRaw, 'marker'));
    const nodeIdent = parentNode ?? param(q, 'node');
    const nodeId = nodeIdent === undefined ? undefined : (await getNode(db, nodeIdent)).id;
    const items = await spec.list(db, { nodeId }, { limit, marker, ...sort });
    const b = base(req);
    const out: Record<string, unknown> = { [spec.collection]: items.map((i) => render(i, b, fields)) };
    const path = parentNode === undefined ? itemPath : `nodes/${parentNode}/${itemPath}`;
    const next = nextLink(b, path, q, items.length, limit, items.at(-1)?.uuid);
    if (next) out.next = next;
    return out;
  }

  const itemUuid = (req: FastifyRequest) => checkUuid((req.params as { uuid: string }).uuid, `${spec.what} UUID`);
  const nested = async (req: FastifyRequest) => {
    requireVolumeVersion(req.apiVersion);
    throw new MalformedRequestURI();
  };

  app.get(`/v1/${itemPath}`, (req) => list(req));
  app.get(`/v1/nodes/:node/${itemPath}`, (req) => list(req, (req.params as { node: string }).node));
  for (const method of ['GET', 'POST', 'PATCH', 'DELETE'] as const) {
    app.route({ method, url: `/v1/nodes/:node/${itemPath}/:uuid`, handler: nested });
  }
  app.route({ method: 'POST', url: `/v1/nodes/:node/${itemPath}`, handler: nested });

  app.get(`/v1/${itemPath}/:uuid`, async (req) => {
    requireVolumeVersion(req.apiVersion);
    const q = req.query as Query;
    const unknown = Object.keys(q).filter((k) => k !== 'fields');
    if (unknown.length) throw new InvalidParameterValue(`Unknown query parameter(s): ${unknown.join(', ')}`);
    const fields = parseFields(param(q, 'fields'));
    return render(await spec.get(db, itemUuid(req)), base(req), fields);
  });

  app.post(`/v1/${itemPath}`, async (req, reply) => {
    requireVolumeVersion(req.apiVersion);
    const body = requireObject(req.body, spec.what);
    for (const name of spec.required) {
      if (body[name] === undefined) throw new MissingParameterValue(`Schema error for ${spec.bodyName}: '${name}' is a required property`);
    }
    const { uuid, node_uuid: nodeUuid, ...rest } = body;
    if (uuid !== undefined && uuid !== null && (typeof uuid !== 'string' || !isUuid(uuid))) {
      throw new InvalidParameterValue(`Expected a UUID for uuid, but received ${typeof uuid === 'string' ? uuid : JSON.stringify(uuid)}.`);
    }
    const changes = spec.toChanges(rest);
    const created = await withTransaction(db, async (trx) => {
      const node = await nodeOfBody(trx, nodeUuid);
      return spec.create(trx, { ...changes, nodeId: node.id, ...(typeof uuid === 'string' ? { uuid: uuid.toLowerCase() } : {}) });
    });
    reply.code(201).header('Location', `${base(req)}/v1/${itemPath}/${created.uuid}`);
    return render(created, base(req));
  });

  app.patch(`/v1/${itemPath}/:uuid`, async (req) => {
    requireVolumeVersion(req.apiVersion);
    const uuid = itemUuid(req);
    const ops = req.body;
    if (!Array.isArray(ops) || ops.length === 0) throw new PatchError('The request body must be a non-empty JSON patch (a list of operations).');
    const current = await spec.get(db, uuid);
    for (const [i, op] of ops.entries()) {
      if (!op || typeof op !== 'object' || Array.isArray(op)) throw new PatchError(`Patch operation ${i} is not a JSON object.`);
      const { op: kind, path } = op as { op?: unknown; path?: unknown };
      if (kind !== 'add' && kind !== 'replace' && kind !== 'remove') {
        throw new PatchError(`Invalid patch operation ${JSON.stringify(kind)}: only add, replace and remove are supported.`);
      }
      if (typeof path !== 'string' || !/^(\/[\w-]+)+$/.test(path)) throw new PatchError(`Invalid patch path ${JSON.stringify(path)}.`);
      if (kind !== 'remove' && !('value' in op)) throw new PatchError(`Patch operation ${i} (${kind} ${path}) has no value.`);
      if (!spec.patchable.includes(path.split('/')[1])) {
        throw new PatchError(`Cannot patch ${path}. Only the following can be updated: ${spec.patchable.join(', ')}`);
      }
      if (path === '/node_uuid' && kind !== 'remove') {
        const v = (op as { value?: unknown }).value;
        if (typeof v !== 'string' || !isUuid(v)) throw new InvalidParameterValue(`Expected a UUID for node_uuid, but received ${typeof v === 'string' ? v : JSON.stringify(v)}.`);
      }
    }
    const doc: Record<string, unknown> = { ...spec.document(current), node_uuid: current.nodeUuid };
    const patched = applyWholePatch(doc, ops);
    for (const name of spec.required) {
      if (patched[name] === undefined) throw new PatchError(`'/${name}' is a mandatory attribute and can not be removed`);
    }
    const { node_uuid: nodeUuid, ...rest } = patched;
    const changed: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(rest)) if (JSON.stringify(v) !== JSON.stringify(doc[k])) changed[k] = v;
    // A removed object field is empty again.
    for (const k of Object.keys(doc)) if (!(k in patched) && JSON.stringify(doc[k]) !== '{}') changed[k] = null;
    const changes = spec.toChanges(changed);
    const target = String(nodeUuid).toLowerCase();
    // Ironic checks the node the record ends up on, holding its lock while it writes.
    const updated = await whilePoweredOff(target, `${spec.what} update`, async (trx, node) => {
      const moved = node.id !== current.nodeId ? { nodeId: node.id } : {};
      return Object.keys(changes).length || 'nodeId' in moved ? spec.update(trx, current, { ...changes, ...moved }) : current;
    }).catch((err: unknown) => {
      if (err instanceof NodeNotFound && target !== current.nodeUuid) throw new InvalidParameterValue(`Invalid input for field/attribute node_uuid. Value: ${target}. ${err.message}`);
      throw err;
    });
    return render(updated, base(req));
  });

  app.delete(`/v1/${itemPath}/:uuid`, async (req, reply) => {
    requireVolumeVersion(req.apiVersion);
    const current = await spec.get(db, itemUuid(req));
    await whilePoweredOff(current.nodeUuid, `${spec.what} deletion`, (trx) => spec.remove(trx, current.id));
    reply.code(204).send();
  });
}

/** The links of `GET /v1/volume` and `GET /v1/nodes/{n}/volume`. */
export function volumeLinks(base: string, prefix: string): Record<string, unknown> {
  const link = (sub: string) => [
    { href: `${base}/v1/${prefix}/${sub}`, rel: 'self' },
    { href: `${base}/${prefix}/${sub}`, rel: 'bookmark' },
  ];
  return { links: link(''), connectors: link('connectors'), targets: link('targets') };
}
