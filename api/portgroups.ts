import type { FastifyInstance, FastifyRequest } from 'fastify';
import {
  Conflict, InvalidParameterValue, InvalidState, MissingParameterValue, NodeNotFound, NotAcceptable, PortgroupNotEmpty,
  ReferencedResourceNotFound, ResourceNotFound,
} from '../common/errors.js';
import { getNode, type Node } from '../db/nodes.js';
import {
  countPortgroupPorts, createPortgroup, deletePortgroup, getPortgroup, listPortgroups, updatePortgroup, PORTGROUP_SORT_KEYS,
  type Portgroup, type PortgroupChanges,
} from '../db/portgroups.js';
import { listPorts } from '../db/ports.js';
import { withTransaction } from '../db/transaction.js';
import { ironicBoolean, isUuid, requireObject } from './body.js';
import type { ApiDeps } from './deps.js';
import { baseUrl, resourceLinks } from './links.js';
import { maskSecrets } from '../common/masking.js';
import { normalizeMac } from './ports.js';
import { limitParam, nextLink, param, sortParams, type Query } from './query.js';
import {
  applyPatch, changedFields, checkPatch, checkQueryNames, iso, listFields, parseFieldsParam, patchTouches, pickFields,
  type FieldVersions,
} from './resource.js';
import type { ApiVersion } from './versioning.js';
import { PORT_CONNECTIVITY_STATES } from '../common/states.js';

/**
 * Port groups came with 1.23; mode and properties with 1.26. Ironic 21.4 shows mode and
 * properties at every version and refuses only to set them, or to ask for them in `fields`,
 * below 1.26 (checkFieldsVersion).
 */
export const PORTGROUPS_SINCE = 23;
const PORTGROUP_FIELDS: FieldVersions = {
  uuid: 23, address: 23, name: 23, node_uuid: 23, standalone_ports_supported: 23, internal_info: 23, extra: 23,
  mode: 23, properties: 23, created_at: 23, updated_at: 23, links: 23, ports: 23,
};

/** Ironic's check_allowed_portgroup_fields. */
function checkFieldsVersion(fields: readonly string[] | undefined, version: ApiVersion): void {
  if (fields && (fields.includes('mode') || fields.includes('properties')) && !version.atLeast(26)) throw new NotAcceptable('Request not acceptable.');
}
const DEFAULT_LIST_FIELDS = ['uuid', 'address', 'name'];
const PATCHABLE = ['address', 'extra', 'mode', 'name', 'node_uuid', 'properties', 'standalone_ports_supported'];
/** Ironic's `[DEFAULT] default_portgroup_mode`: the bonding mode of a port group created without one. */
const DEFAULT_MODE = 'active-backup';
const NAME_RE = /^[A-Za-z0-9\-._~]+$/;

/** Ironic's logical-name rule. */
export function isLogicalName(v: string): boolean {
  return v.length > 0 && v.length <= 255 && NAME_RE.test(v) && !isUuid(v);
}

function portgroupView(pg: Portgroup, base: string, version: ApiVersion, fields?: readonly string[]): Record<string, unknown> {
  const full = {
    uuid: pg.uuid, address: pg.address, name: pg.name, node_uuid: pg.nodeUuid, standalone_ports_supported: pg.standalonePortsSupported,
    internal_info: maskSecrets(pg.internalInfo), extra: pg.extra, mode: pg.mode, properties: pg.properties,
    created_at: iso(pg.createdAt), updated_at: iso(pg.updatedAt),
    links: resourceLinks(base, 'portgroups', pg.uuid), ports: resourceLinks(base, 'portgroups', pg.uuid, 'ports'),
  };
  return pickFields(full, PORTGROUP_FIELDS, version, fields);
}

/** Checks a portgroup body (Ironic's PORTGROUP_SCHEMA and validators) and converts it to domain changes. */
function toChanges(body: Record<string, unknown>): PortgroupChanges & { nodeUuid?: string } {
  const out: PortgroupChanges & { nodeUuid?: string } = {};
  const schema = (v: unknown, types: string): never => {
    throw new InvalidParameterValue(`Schema error for portgroup: ${JSON.stringify(v)?.slice(0, 100)} is not of type ${types}`);
  };
  for (const [k, v] of Object.entries(body)) {
    switch (k) {
      case 'uuid':
        if (v === null) break;
        if (typeof v !== 'string' || !isUuid(v)) throw new InvalidParameterValue(`Expected UUID for uuid: ${String(v)}`);
        out.uuid = v.toLowerCase();
        break;
      case 'node_uuid':
        if (typeof v !== 'string') schema(v, "'string'");
        if (!isUuid(v as string)) throw new InvalidParameterValue(`Expected UUID for node_uuid: ${String(v)}`);
        out.nodeUuid = (v as string).toLowerCase();
        break;
      case 'address':
        if (v !== null && typeof v !== 'string') schema(v, "'string', 'null'");
        try {
          out.address = v === null ? null : normalizeMac(v);
        } catch {
          throw new InvalidParameterValue(`Expected valid MAC address for address: ${String(v)}`);
        }
        break;
      case 'name':
        if (v !== null && typeof v !== 'string') schema(v, "'string', 'null'");
        out.name = v as string | null;
        break;
      case 'standalone_ports_supported': {
        if (v === null) break;
        const b = ironicBoolean(v);
        if (typeof b !== 'boolean') throw new InvalidParameterValue(`Invalid boolean for standalone_ports_supported: ${String(v)}`);
        out.standalonePortsSupported = b;
        break;
      }
      case 'mode':
        if (v !== null && typeof v !== 'string') schema(v, "'string', 'null'");
        out.mode = v as string | null;
        break;
      case 'extra':
      case 'properties':
        if (v !== null && (typeof v !== 'object' || Array.isArray(v))) schema(v, "'object', 'null'");
        out[k] = (v ?? {}) as Record<string, unknown>;
        break;
      default:
        throw new InvalidParameterValue(`Schema error for portgroup: Additional properties are not allowed ('${k}' was unexpected)`);
    }
  }
  return out;
}

/** `/v1/portgroups` (1.23+), `/v1/nodes/{node}/portgroups` and `/v1/portgroups/{pg}/ports` (1.24+). */
export function registerPortgroupRoutes(app: FastifyInstance, deps: ApiDeps): void {
  const { db, config } = deps;
  const base = (req: FastifyRequest) => baseUrl(req, config.api.public_endpoint);

  /** Below 1.23 the resource does not exist, as in Ironic. */
  function requireVersion(req: FastifyRequest, minor = PORTGROUPS_SINCE): void {
    if (!req.apiVersion.atLeast(minor)) throw new ResourceNotFound('The resource could not be found.');
  }

  /** A portgroup in the URL: a UUID or a logical name, anything else a 400. */
  function pgIdent(req: FastifyRequest): string {
    const ident = (req.params as { portgroup: string }).portgroup;
    if (!isUuid(ident) && !isLogicalName(ident)) throw new InvalidParameterValue(`Expected UUID or name for portgroup: ${ident}`);
    return ident;
  }

  /** The node a body names: a missing one is the body's fault (400), as in Ironic. */
  async function bodyNode(uuid: string): Promise<Node> {
    try {
      return await getNode(db, uuid);
    } catch (err) {
      if (err instanceof NodeNotFound) throw new ReferencedResourceNotFound(err);
      throw err;
    }
  }

  async function list(req: FastifyRequest, detailPath: boolean, parentNode?: string) {
    requireVersion(req, parentNode === undefined ? PORTGROUPS_SINCE : 24);
    const q = req.query as Query;
    const v = req.apiVersion;
    checkQueryNames(q, ['detail', 'fields', 'limit', 'marker', 'sort_key', 'sort_dir', 'address', ...(parentNode === undefined ? ['node'] : [])]);
    const fields = listFields(q, detailPath, PORTGROUP_FIELDS, DEFAULT_LIST_FIELDS, v);
    checkFieldsVersion(fields, v);
    const limit = limitParam(q, config.api.max_limit);
    const sortKey = param(q, 'sort_key');
    if (sortKey !== undefined && ['extra', 'internal_info', 'properties'].includes(sortKey)) {
      throw new InvalidParameterValue(`The sort_key value ${sortKey} is an invalid field for sorting`);
    }
    if ((sortKey === 'mode') && !v.atLeast(26)) throw new NotAcceptable('Request not acceptable.');
    const sort = sortParams(q, PORTGROUP_SORT_KEYS, 'portgroups');
    const markerIdent = param(q, 'marker');
    if (markerIdent !== undefined && !isUuid(markerIdent)) throw new InvalidParameterValue(`Expected UUID for marker: ${markerIdent}`);
    const marker = markerIdent !== undefined ? await getPortgroup(db, markerIdent) : undefined;
    const nodeIdent = parentNode ?? param(q, 'node');
    if (nodeIdent !== undefined && !isUuid(nodeIdent) && !isLogicalName(nodeIdent)) throw new InvalidParameterValue(`Expected UUID or name for node: ${nodeIdent}`);
    const addressRaw = param(q, 'address');
    let address: string | undefined;
    if (addressRaw !== undefined) {
      try {
        address = normalizeMac(addressRaw);
      } catch {
        throw new InvalidParameterValue(`Expected valid MAC address for address: ${addressRaw}`);
      }
    }
    if (nodeIdent !== undefined && address !== undefined) throw new InvalidParameterValue('Filtering by node, address, or shard simultaneously is not supported.');
    const nodeId = nodeIdent !== undefined ? (await getNode(db, nodeIdent)).id : undefined;
    const rows = await listPortgroups(db, { nodeId, address }, { limit, marker, ...sort });
    const b = base(req);
    const out: Record<string, unknown> = { portgroups: rows.map((pg) => portgroupView(pg, b, v, fields)) };
    const collection = parentNode === undefined ? 'portgroups' : `nodes/${parentNode}/portgroups`;
    const next = nextLink(b, detailPath ? `${collection}/detail` : collection, q, rows.length, limit, rows.at(-1)?.uuid);
    if (next) out.next = next;
    return out;
  }

  app.get('/v1/portgroups', (req) => list(req, false));
  app.get('/v1/portgroups/detail', (req) => list(req, true));
  app.get('/v1/nodes/:node/portgroups', (req) => list(req, false, (req.params as { node: string }).node));
  app.get('/v1/nodes/:node/portgroups/detail', (req) => list(req, true, (req.params as { node: string }).node));

  app.get('/v1/portgroups/:portgroup', async (req) => {
    requireVersion(req);
    const ident = pgIdent(req);
    const fields = parseFieldsParam(param(req.query as Query, 'fields'), PORTGROUP_FIELDS, req.apiVersion);
    checkFieldsVersion(fields, req.apiVersion);
    return portgroupView(await getPortgroup(db, ident), base(req), req.apiVersion, fields);
  });

  app.post('/v1/portgroups', async (req, reply) => {
    requireVersion(req);
    const body = requireObject(req.body, 'portgroup');
    if (body.node_uuid === undefined) throw new MissingParameterValue(`Schema error for portgroup: 'node_uuid' is a required property`);
    const { nodeUuid, ...changes } = toChanges(body);
    if (!req.apiVersion.atLeast(26) && (body.mode || (body.properties && Object.keys(body.properties).length))) {
      throw new NotAcceptable('Request not acceptable.');
    }
    if (typeof changes.name === 'string' && !isLogicalName(changes.name)) {
      throw new InvalidParameterValue(`Cannot create portgroup with invalid name '${changes.name}'`);
    }
    const node = await bodyNode(nodeUuid!);
    const pg = await createPortgroup(db, { ...changes, mode: changes.mode || DEFAULT_MODE, nodeId: node.id });
    reply.code(201).header('Location', `${base(req)}/v1/portgroups/${pg.uuid}`);
    return portgroupView(pg, base(req), req.apiVersion);
  });

  app.patch('/v1/portgroups/:portgroup', async (req) => {
    requireVersion(req);
    const ident = pgIdent(req);
    const ops = checkPatch(req.body, PATCHABLE);
    // Ironic looks at the first operation only (its is_path_updated returns after one), and
    // clients, Ironic's own API tests among them, patch properties at 1.23 after another field.
    if (!req.apiVersion.atLeast(26) && (patchTouches(ops.slice(0, 1), 'mode') || patchTouches(ops.slice(0, 1), 'properties'))) {
      throw new NotAcceptable('Request not acceptable.');
    }
    for (const op of ops) {
      if (op.path === '/name' && op.op !== 'remove' && op.value !== null && !(typeof op.value === 'string' && isLogicalName(op.value))) {
        throw new InvalidParameterValue(`Portgroup ${ident}: Cannot change name to invalid name '${String(op.value)}'`);
      }
    }
    const updated = await withTransaction(db, async (trx) => {
      const current = await getPortgroup(trx, ident, { forUpdate: true });
      const doc: Record<string, unknown> = {
        address: current.address, extra: current.extra, mode: current.mode, name: current.name, node_uuid: current.nodeUuid,
        properties: current.properties, standalone_ports_supported: current.standalonePortsSupported,
      };
      const patched = applyPatch(doc, ops);
      if (patched.mode === undefined) throw new InvalidParameterValue("'mode' is a mandatory attribute and can not be removed");
      if (patched.node_uuid === undefined) throw new InvalidParameterValue("'/node_uuid' is a mandatory attribute and can not be removed");
      const changed = changedFields(doc, patched, ['extra', 'properties']);
      // A removed flag falls back to its default, as Ironic's object field does.
      if (changed.standalone_ports_supported === null) changed.standalone_ports_supported = true;
      if (Object.keys(changed).length === 0) return current;
      const { nodeUuid, ...changes } = toChanges(changed);
      if (nodeUuid !== undefined) {
        const node = await bodyNode(nodeUuid);
        if (!PORT_CONNECTIVITY_STATES.includes(node.provisionState) && !node.maintenance) {
          throw new InvalidState(`Portgroup ${current.uuid} can not be associated to node ${node.uuid} unless the node is in a ${PORT_CONNECTIVITY_STATES.join(', ')} state or in maintenance mode.`);
        }
        if (await countPortgroupPorts(trx, current.id) > 0) {
          throw new PortgroupNotEmpty(current.uuid, `Portgroup ${current.uuid} can not be associated with node ${node.uuid} because there are ports associated with this portgroup.`);
        }
        changes.nodeId = node.id;
      }
      if (changes.standalonePortsSupported === false && current.standalonePortsSupported) {
        const pxe = await listPorts(trx, { portgroupId: current.id, pxeEnabled: true }, { limit: 1, sortKey: 'id', sortDir: 'asc' });
        if (pxe.length > 0) {
          throw new Conflict(`standalone_ports_supported can not be set to False, because the port group ${current.uuid} contains port with 'pxe_enabled' is set to True`);
        }
      }
      return updatePortgroup(trx, current.id, { ...changes, uuid: undefined });
    });
    return portgroupView(updated, base(req), req.apiVersion);
  });

  app.delete('/v1/portgroups/:portgroup', async (req, reply) => {
    requireVersion(req);
    const pg = await getPortgroup(db, pgIdent(req));
    await deletePortgroup(db, pg);
    reply.code(204).send();
  });

}
