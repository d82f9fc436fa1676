import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Knex } from 'knex';
import { applyWholePatch } from './resource.js';
import {
  AllocationNotFound, InvalidParameterValue, InvalidState, MethodNotAllowed, NodeAssociated, NodeNotFound, NotAcceptable, PatchError,
  ResourceNotFound,
} from '../common/errors.js';
import { INSTANCE_REMOVAL_STATES, ProvisionState, UPDATE_ALLOWED_STATES } from '../common/states.js';
import {
  ALLOCATION_SORT_KEYS, backfillAllocation, createAllocation, deleteAllocation, findAllocationOfNode, findNodesByIdent, getAllocation,
  listAllocations, updateAllocation, updateNodeInstance, type Allocation, type AllocationChanges,
} from '../db/allocations.js';
import { getNode, type Node, type NodeChanges, type UpdateOptions } from '../db/nodes.js';
import type { ApiDeps } from './deps.js';
import { baseUrl, resourceLinks } from './links.js';
import { limitParam, nextLink, param, sortParams, type Query } from './query.js';
import { isUuid, requireObject } from './body.js';
import { checkTraitList } from './traits.js';
import type { ApiVersion } from './versioning.js';

/** Microversions: allocations, their PATCH, backfill (`node` on create), `owner`. */
export const ALLOCATIONS_VERSION = 52;
const UPDATE_VERSION = 57;
const BACKFILL_VERSION = 58;
const OWNER_VERSION = 60;

const NAME_RE = /^[A-Za-z0-9\-._~]+$/;

/** Fields in Ironic's order; owner only from 1.60. */
const FIELDS = ['uuid', 'name', 'node_uuid', 'state', 'last_error', 'resource_class', 'traits', 'candidate_nodes', 'extra', 'owner', 'created_at', 'updated_at', 'links'];

function iso(d: Date | null): string | null {
  return d ? d.toISOString().replace('Z', '+00:00') : null;
}

function isValidName(name: string): boolean {
  return name.length <= 255 && NAME_RE.test(name);
}

/** The allocation as the client's version shows it, restricted to `fields` when given. */
export function allocationView(a: Allocation, base: string, version: ApiVersion, fields?: readonly string[]): Record<string, unknown> {
  const full: Record<string, unknown> = {
    uuid: a.uuid, name: a.name, node_uuid: a.nodeUuid, state: a.state, last_error: a.lastError,
    resource_class: a.resourceClass, traits: a.traits, candidate_nodes: a.candidateNodes, extra: a.extra,
    owner: a.owner, created_at: iso(a.createdAt), updated_at: iso(a.updatedAt),
    links: resourceLinks(base, 'allocations', a.uuid),
  };
  const names = fields ?? FIELDS.filter((f) => f !== 'owner' || version.atLeast(OWNER_VERSION));
  return Object.fromEntries(names.map((k) => [k, full[k]]));
}

function parseFields(raw: string | undefined, version: ApiVersion): string[] | undefined {
  if (raw === undefined) return undefined;
  const names = raw.split(',').map((s) => s.trim()).filter(Boolean);
  const bad = names.filter((n) => !FIELDS.includes(n));
  if (bad.length || names.length === 0) throw new InvalidParameterValue(`Field(s) "${bad.join(', ')}" are not valid`);
  if (names.includes('owner') && !version.atLeast(OWNER_VERSION)) throw new NotAcceptable('Request not acceptable.');
  // Ironic always shows the links; uuid lets a client follow up.
  for (const always of ['uuid', 'links']) if (!names.includes(always)) names.push(always);
  return names;
}

/** Ironic's verify_node_for_deallocation. */
export function verifyNodeForDeallocation(node: Node, allocation: Pick<Allocation, 'uuid'>): void {
  if (node.maintenance) return;
  if (node.targetProvisionState && !UPDATE_ALLOWED_STATES.has(node.provisionState)) {
    throw new InvalidState(`Cannot remove allocation ${allocation.uuid} for node ${node.uuid}, because the node is in state ${node.provisionState} where updates are not allowed (and maintenance mode is off)`);
  }
  if (node.provisionState === ProvisionState.ACTIVE) {
    throw new InvalidState(`Cannot remove allocation ${allocation.uuid} for node ${node.uuid}, because the node is active (and maintenance mode is off)`);
  }
}

/**
 * PATCH of a node's instance_uuid, by Ironic's rules: an instance is never replaced by
 * another (NodeAssociated), and removing the instance of a node with an allocation removes
 * the allocation too, only in a state that allows updates or in maintenance.
 */
export async function patchInstanceUuid(db: Knex, current: Node, changes: NodeChanges, opts: UpdateOptions): Promise<Node> {
  return updateNodeInstance(db, current.id, changes, opts, (locked) => {
    if (changes.instanceUuid && locked.instanceUuid && changes.instanceUuid !== locked.instanceUuid) {
      throw new NodeAssociated(locked.uuid, locked.instanceUuid);
    }
    if (changes.instanceUuid === null && locked.allocationId !== null && !locked.maintenance && !INSTANCE_REMOVAL_STATES.includes(locked.provisionState)) {
      throw new InvalidState(`Node ${locked.uuid} with an allocation can not have instance_uuid removed unless it is in one of allowed (${INSTANCE_REMOVAL_STATES.join(', ')}) states or in maintenance mode. Current state is '${locked.provisionState}'.`);
    }
  });
}

/** Checks a create body as Ironic's schema does; returns the domain values and the node to backfill. */
function checkCreateBody(body: Record<string, unknown>, version: ApiVersion): { values: AllocationChanges; node?: string } {
  const values: AllocationChanges = {};
  let node: string | undefined;
  const where = (k: string, v: unknown) => `Invalid input for field/attribute ${k}. Value: ${JSON.stringify(v)}.`;
  const stringOrNull = (k: string, v: unknown): string | null => {
    if (v !== null && typeof v !== 'string') throw new InvalidParameterValue(`${where(k, v)} ${JSON.stringify(v)} is not of type 'string', 'null'`);
    return v;
  };
  for (const [k, v] of Object.entries(body)) {
    switch (k) {
      case 'uuid': {
        const s = stringOrNull(k, v);
        if (s !== null && !isUuid(s)) throw new InvalidParameterValue(`Expected a UUID for uuid: ${s}`);
        if (s !== null) values.uuid = s.toLowerCase();
        break;
      }
      case 'name': {
        const s = stringOrNull(k, v);
        if (s !== null && s !== '' && !isValidName(s)) throw new InvalidParameterValue(`Cannot create allocation with invalid name '${s}'`);
        if (s) values.name = s;
        break;
      }
      case 'resource_class': {
        const s = stringOrNull(k, v);
        if (s !== null && s.length > 80) throw new InvalidParameterValue(`${where(k, v)} ${JSON.stringify(v)} is too long`);
        if (s) values.resourceClass = s;
        break;
      }
      case 'owner': {
        const s = stringOrNull(k, v);
        if (s !== null && s.length > 255) throw new InvalidParameterValue(`${where(k, v)} ${JSON.stringify(v)} is too long`);
        if (s) values.owner = s;
        break;
      }
      case 'extra':
        if (v !== null && (typeof v !== 'object' || Array.isArray(v))) throw new InvalidParameterValue(`${where(k, v)} ${JSON.stringify(v)} is not of type 'object', 'null'`);
        if (v !== null) values.extra = v as Record<string, unknown>;
        break;
      case 'traits':
        if (v !== null) values.traits = [...new Set(checkTraitList(v))];
        break;
      case 'candidate_nodes':
        if (v !== null) {
          if (!Array.isArray(v) || v.some((x) => typeof x !== 'string')) throw new InvalidParameterValue(`${where(k, v)} ${JSON.stringify(v)} is not of type 'array', 'null'`);
          values.candidateNodes = v as string[];
        }
        break;
      case 'node':
        if (!version.atLeast(BACKFILL_VERSION)) throw new InvalidParameterValue('Cannot set node when creating an allocation in this API version');
        if (stringOrNull(k, v) !== null) node = v as string;
        break;
      default:
        throw new InvalidParameterValue(`Additional properties are not allowed ('${k}' was unexpected)`);
    }
  }
  return { values, node };
}

export function registerAllocationRoutes(app: FastifyInstance, deps: ApiDeps): void {
  const { db, config } = deps;
  const base = (req: FastifyRequest) => baseUrl(req, config.api.public_endpoint);
  const ident = (req: FastifyRequest) => (req.params as { allocation: string }).allocation;

  function gate(req: FastifyRequest, min = ALLOCATIONS_VERSION): void {
    if (req.apiVersion.atLeast(min)) return;
    const message = min === UPDATE_VERSION ? 'The API version does not allow updating allocations' : 'The API version does not allow allocations';
    // Ironic: reads are not found, writes not allowed, before the version.
    if (req.method === 'GET') throw new ResourceNotFound(message);
    throw new MethodNotAllowed(message);
  }

  /** A node named by a request body or query: missing is the request's fault (400), as in Ironic. */
  async function nodeOf(nodeIdent: string): Promise<Node> {
    try {
      return await getNode(db, nodeIdent);
    } catch (err) {
      if (err instanceof NodeNotFound) throw new InvalidParameterValue(err.message);
      throw err;
    }
  }

  app.get('/v1/allocations', async (req) => {
    gate(req);
    const q = req.query as Query;
    const v = req.apiVersion;
    const known = new Set(['node', 'resource_class', 'state', 'owner', 'fields', 'limit', 'marker', 'sort_key', 'sort_dir']);
    const unknown = Object.keys(q).filter((k) => !known.has(k));
    if (unknown.length) throw new InvalidParameterValue(`Unknown query parameter(s): ${unknown.join(', ')}`);
    const fields = parseFields(param(q, 'fields'), v);
    const owner = param(q, 'owner');
    if (owner !== undefined && !v.atLeast(OWNER_VERSION)) throw new NotAcceptable('Request not acceptable.');
    const limit = limitParam(q, config.api.max_limit);
    const sortKey = param(q, 'sort_key');
    if (sortKey !== undefined && ['extra', 'candidate_nodes', 'traits'].includes(sortKey)) {
      throw new InvalidParameterValue(`The sort_key value ${sortKey} is an invalid field for sorting`);
    }
    const sort = sortParams(q, ALLOCATION_SORT_KEYS, 'allocations');
    const markerIdent = param(q, 'marker');
    if (markerIdent !== undefined && !isUuid(markerIdent)) throw new InvalidParameterValue(`Expected UUID for marker: ${markerIdent}`);
    const marker = markerIdent !== undefined ? await getAllocation(db, markerIdent) : undefined;
    const nodeIdent = param(q, 'node');
    const nodeId = nodeIdent !== undefined ? (await nodeOf(nodeIdent)).id : undefined;
    const state = param(q, 'state');
    const list = await listAllocations(db, { nodeId, resourceClass: param(q, 'resource_class'), state, owner }, { limit, marker, ...sort });
    const b = base(req);
    const out: Record<string, unknown> = { allocations: list.map((a) => allocationView(a, b, v, fields)) };
    const next = nextLink(b, 'allocations', q, list.length, limit, list.at(-1)?.uuid);
    if (next) out.next = next;
    return out;
  });

  app.get('/v1/allocations/:allocation', async (req) => {
    gate(req);
    const fields = parseFields(param(req.query as Query, 'fields'), req.apiVersion);
    return allocationView(await getAllocation(db, ident(req)), base(req), req.apiVersion, fields);
  });

  app.post('/v1/allocations', async (req, reply) => {
    gate(req);
    const body = requireObject(req.body, 'allocation');
    const { values, node: nodeIdent } = checkCreateBody(body, req.apiVersion);
    const node = nodeIdent !== undefined ? await nodeOf(nodeIdent) : undefined;
    if (!values.resourceClass) {
      if (!node) throw new InvalidParameterValue('The resource_class field is mandatory when not backfilling');
      if (node.resourceClass) values.resourceClass = node.resourceClass;
    }
    if (values.candidateNodes?.length) {
      // Names become UUIDs, in the order given; one that names no node is the request's fault.
      const found = await findNodesByIdent(db, values.candidateNodes);
      const byIdent = new Map<string, string>();
      for (const n of found) {
        byIdent.set(n.uuid, n.uuid);
        if (n.name) byIdent.set(n.name, n.uuid);
      }
      values.candidateNodes = values.candidateNodes.map((c) => {
        const uuid = byIdent.get(isUuid(c) ? c.toLowerCase() : c);
        if (!uuid) throw new InvalidParameterValue(`Node ${c} could not be found.`);
        return uuid;
      });
    }
    let created: Allocation;
    if (node) {
      created = await backfillAllocation(db, values, node.id, (locked, traits) => {
        const errors: string[] = [];
        if (locked.provisionState !== ProvisionState.ACTIVE) errors.push(`Node must be in the "active" state, but the current state is "${locked.provisionState}"`);
        if (values.resourceClass && locked.resourceClass !== values.resourceClass) {
          errors.push(`Resource class ${locked.resourceClass} does not match the requested resource class ${values.resourceClass}`);
        }
        if (values.traits?.length && !values.traits.every((t) => traits.includes(t))) {
          errors.push(`List of traits ${JSON.stringify(traits)} does not match the requested traits ${JSON.stringify(values.traits)}`);
        }
        if (values.candidateNodes?.length && !values.candidateNodes.includes(locked.uuid)) {
          errors.push(`Candidate nodes must be empty or contain the target node, but got ${JSON.stringify(values.candidateNodes)}`);
        }
        if (errors.length) throw new InvalidParameterValue(`Cannot backfill an allocation for node ${locked.uuid}: ${errors.join('; ')}`);
      });
    } else {
      created = await createAllocation(db, values);
    }
    reply.code(201).header('Location', `${base(req)}/v1/allocations/${created.uuid}`);
    return allocationView(created, base(req), req.apiVersion);
  });

  app.patch('/v1/allocations/:allocation', async (req) => {
    gate(req, UPDATE_VERSION);
    const ops = req.body;
    if (!Array.isArray(ops) || ops.length === 0) throw new PatchError('The request body must be a non-empty JSON patch (a list of operations).');
    const allowed = ['name', 'extra'];
    for (const op of ops) {
      const { op: kind, path } = (op ?? {}) as { op?: unknown; path?: unknown };
      if (kind !== 'add' && kind !== 'replace' && kind !== 'remove') throw new PatchError(`Invalid patch operation ${JSON.stringify(kind)}: only add, replace and remove are supported.`);
      if (typeof path !== 'string' || !/^\/[^/]/.test(path)) throw new PatchError(`Invalid patch path ${JSON.stringify(path)}.`);
      if (!allowed.includes(path.split('/')[1])) throw new InvalidParameterValue(`Cannot patch ${path}. Only the following can be updated: ${allowed.join(', ')}`);
      if (path === '/name' && kind !== 'remove') {
        const name = (op as { value?: unknown }).value;
        if (typeof name === 'string' && name !== '' && !isValidName(name)) throw new InvalidParameterValue(`Cannot update allocation with invalid name '${name}'`);
      }
    }
    const a = await getAllocation(db, ident(req));
    const doc = { name: a.name, extra: a.extra };
    const patched = applyWholePatch(doc, ops);
    const name = patched.name ?? null;
    const extra = patched.extra ?? {};
    if (name !== null && typeof name !== 'string') throw new InvalidParameterValue(`Invalid input for field/attribute name. Value: ${JSON.stringify(name)}. ${JSON.stringify(name)} is not of type 'string', 'null'`);
    if (typeof extra !== 'object' || extra === null || Array.isArray(extra)) throw new InvalidParameterValue(`Invalid input for field/attribute extra. Value: ${JSON.stringify(extra)}. ${JSON.stringify(extra)} is not of type 'object', 'null'`);
    const updated = await updateAllocation(db, a.id, { name: name === '' ? null : name, extra: extra as Record<string, unknown> });
    return allocationView(updated, base(req), req.apiVersion);
  });

  app.delete('/v1/allocations/:allocation', async (req, reply) => {
    gate(req);
    const a = await getAllocation(db, ident(req));
    await deleteAllocation(db, a.id, verifyNodeForDeallocation);
    reply.code(204).send();
  });

  // The node's allocation; before 1.52 the node has no such child (404).
  const nodeIdentOf = (req: FastifyRequest) => (req.params as { node: string }).node;
  async function allocationOfNode(req: FastifyRequest): Promise<Allocation> {
    if (!req.apiVersion.atLeast(ALLOCATIONS_VERSION)) throw new ResourceNotFound('The API version does not allow allocations');
    const node = await getNode(db, nodeIdentOf(req));
    const a = await findAllocationOfNode(db, node.id);
    if (!a) throw new AllocationNotFound(nodeIdentOf(req), `Allocation for node ${nodeIdentOf(req)} was not found`);
    return a;
  }

  app.get('/v1/nodes/:node/allocation', async (req) => {
    const fields = parseFields(param(req.query as Query, 'fields'), req.apiVersion);
    return allocationView(await allocationOfNode(req), base(req), req.apiVersion, fields);
  });

  app.delete('/v1/nodes/:node/allocation', async (req, reply) => {
    const a = await allocationOfNode(req);
    await deleteAllocation(db, a.id, verifyNodeForDeallocation);
    reply.code(204).send();
  });
}
