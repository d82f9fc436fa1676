import type { FastifyInstance, FastifyRequest } from 'fastify';
import { applyWholePatch } from './resource.js';
import type { Knex } from 'knex';
import {
  Conflict, Forbidden, InvalidParameterValue, InvalidState, MissingParameterValue, PatchError, NotAcceptable, NodeNotFound,
  PortgroupNotFound, PortgroupPhysnetInconsistent, ReferencedResourceNotFound, ResourceNotFound,
} from '../common/errors.js';
import { getNode, type Node } from '../db/nodes.js';
import { getPortgroup, portgroupPhysnets, type Portgroup } from '../db/portgroups.js';
import { createPort, deletePort, getPort, listPorts, updatePort, PORT_SORT_KEYS, type Port, type PortChanges } from '../db/ports.js';
import { withTransaction } from '../db/transaction.js';
import type { ApiDeps } from './deps.js';
import { baseUrl, resourceLinks } from './links.js';
import { boolParam, limitParam, nextLink, param, sortParams, type Query } from './query.js';
import { ironicBoolean, isUuid, requireObject } from './body.js';
import { maskSecrets } from '../common/masking.js';
import type { ApiVersion } from './versioning.js';
import { PORT_CONNECTIVITY_STATES } from '../common/states.js';

const MAC_RE = /^([0-9a-f]{2}[:-]){5}[0-9a-f]{2}$/i;

/** Ironic accepts Ethernet MACs and normalises them to lower case with colons. */
export function normalizeMac(value: unknown): string {
  if (typeof value !== 'string' || !MAC_RE.test(value)) {
    throw new InvalidParameterValue(`Expected a MAC address but received ${typeof value === 'string' ? value : JSON.stringify(value)}.`);
  }
  return value.toLowerCase().replace(/-/g, ':');
}

const LLC_KEYS = new Set(['switch_id', 'port_id', 'switch_info', 'network_type']);
/** An OVN VTEP switch (1.90): both keys or neither, with the port_id. */
const LLC_VTEP_KEYS = ['vtep-logical-switch', 'vtep-physical-switch'];

function checkLocalLinkConnection(v: unknown, version: ApiVersion): Record<string, unknown> {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new InvalidParameterValue('local_link_connection must be a JSON object.');
  for (const [k, val] of Object.entries(v)) {
    if (LLC_VTEP_KEYS.includes(k)) {
      if (!version.atLeast(90)) throw new NotAcceptable('Request not acceptable.');
    } else if (!LLC_KEYS.has(k)) {
      throw new InvalidParameterValue(`Invalid key "${k}" in local_link_connection; allowed keys are ${[...LLC_KEYS, ...(version.atLeast(90) ? LLC_VTEP_KEYS : [])].join(', ')}.`);
    }
    if (typeof val !== 'string') throw new InvalidParameterValue(`local_link_connection.${k} must be a string.`);
  }
  const vtep = LLC_VTEP_KEYS.filter((k) => k in v);
  if (vtep.length === 1 || (vtep.length === 2 && !('port_id' in v))) {
    throw new InvalidParameterValue(`local_link_connection for an OVN VTEP switch needs port_id, ${LLC_VTEP_KEYS.join(' and ')}.`);
  }
  return v as Record<string, unknown>;
}

/** Port fields with the microversion that introduced them. */
const PORT_FIELDS: Record<string, number> = {
  uuid: 1, address: 1, node_uuid: 1, extra: 1, local_link_connection: 19, pxe_enabled: 19, internal_info: 18,
  portgroup_uuid: 24, physical_network: 34, is_smartnic: 53, name: 88, created_at: 1, updated_at: 1, links: 1,
};
const DEFAULT_LIST_FIELDS = ['uuid', 'address', 'links'];

function iso(d: Date | null): string | null {
  return d ? d.toISOString().replace('Z', '+00:00') : null;
}

function portView(p: Port, base: string, version: ApiVersion, fields?: readonly string[]): Record<string, unknown> {
  const full: Record<string, unknown> = {
    uuid: p.uuid, address: p.address, node_uuid: p.nodeUuid, extra: p.extra,
    local_link_connection: p.localLinkConnection, pxe_enabled: p.pxeEnabled, internal_info: maskSecrets({}),
    portgroup_uuid: p.portgroupUuid, physical_network: p.physicalNetwork, is_smartnic: p.isSmartnic, name: p.name,
    created_at: iso(p.createdAt), updated_at: iso(p.updatedAt), links: resourceLinks(base, 'ports', p.uuid),
  };
  const names = fields ?? Object.keys(PORT_FIELDS).filter((k) => version.atLeast(PORT_FIELDS[k]));
  // Below 1.90 a VTEP link is shown empty, as Ironic hides what older clients cannot parse.
  if (!version.atLeast(90) && LLC_VTEP_KEYS.some((k) => k in p.localLinkConnection)) full.local_link_connection = {};
  return Object.fromEntries(names.map((k) => [k, full[k]]));
}

function parsePortFields(raw: string | undefined, version: ApiVersion): string[] | undefined {
  if (raw === undefined) return undefined;
  if (!version.atLeast(8)) throw new NotAcceptable('The "fields" parameter requires API version 1.8 or later.');
  const names = raw.split(',').map((s) => s.trim()).filter(Boolean);
  const bad = names.filter((n) => !(n in PORT_FIELDS));
  if (bad.length || names.length === 0) throw new InvalidParameterValue(`Field(s) "${bad.join(', ')}" are not valid`);
  for (const n of names) {
    if (!version.atLeast(PORT_FIELDS[n])) throw new NotAcceptable(`Field "${n}" requires API version 1.${PORT_FIELDS[n]} or later.`);
  }
  if (!names.includes('uuid')) names.unshift('uuid');
  return names;
}

/** What a port body names by UUID besides its own fields: its node and (null: no) port group. */
type PortBody = PortChanges & { nodeIdent?: string; portgroupIdent?: string | null };

/** Writable port fields → domain fields, checked one by one. */
function toPortChanges(body: Record<string, unknown>, version: ApiVersion): PortBody {
  const out: PortBody = {};
  for (const [k, v] of Object.entries(body)) {
    switch (k) {
      case 'address': out.address = normalizeMac(v); break;
      case 'node_uuid':
        if (typeof v !== 'string' || !isUuid(v)) throw new InvalidParameterValue(`Invalid input for field/attribute node_uuid. Value: ${JSON.stringify(v)}. Expected a UUID.`);
        if (out.nodeIdent !== undefined) throw bothNodeIdents();
        out.nodeIdent = v; break;
      case 'node_ident':
        // 1.94: the node by UUID or name.
        if (!version.atLeast(94)) throw new NotAcceptable('Request not acceptable.');
        if (typeof v !== 'string') throw new InvalidParameterValue(`Invalid input for field/attribute node_ident. Value: ${JSON.stringify(v)}. Expected a string.`);
        if (out.nodeIdent !== undefined) throw bothNodeIdents();
        out.nodeIdent = v; break;
      case 'name':
        if (!version.atLeast(88)) throw new NotAcceptable('name requires API version 1.88 or later.');
        if (v !== null && (typeof v !== 'string' || v.length > 255)) throw new InvalidParameterValue('Invalid input for field/attribute name. Expected a string of at most 255 characters.');
        out.name = v as string | null; break;
      case 'uuid':
        if (typeof v !== 'string' || !isUuid(v)) throw new InvalidParameterValue(`Invalid input for field/attribute uuid. Value: ${JSON.stringify(v)}. Expected a UUID.`);
        out.uuid = v.toLowerCase(); break;
      case 'pxe_enabled': {
        // `port create --pxe-enabled false` and `port set --pxe-disabled` send strings.
        const b = ironicBoolean(v);
        if (typeof b !== 'boolean') throw new InvalidParameterValue('Invalid input for field/attribute pxe_enabled. Expected a boolean.');
        if (!version.atLeast(19)) throw new NotAcceptable('pxe_enabled requires API version 1.19 or later.');
        out.pxeEnabled = b; break;
      }
      case 'local_link_connection':
        if (!version.atLeast(19)) throw new NotAcceptable('local_link_connection requires API version 1.19 or later.');
        out.localLinkConnection = checkLocalLinkConnection(v, version); break;
      case 'extra':
        if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new InvalidParameterValue('Invalid input for field/attribute extra. Expected a JSON object.');
        out.extra = v as Record<string, unknown>; break;
      case 'physical_network':
        if (!version.atLeast(34)) throw new NotAcceptable('physical_network requires API version 1.34 or later.');
        if (v !== null && (typeof v !== 'string' || v.length > 64)) throw new InvalidParameterValue('Invalid input for field/attribute physical_network. Expected a string of at most 64 characters.');
        if (v === '') throw new InvalidParameterValue('A non-empty value is required when setting physical_network');
        out.physicalNetwork = v as string | null; break;
      case 'is_smartnic': {
        if (!version.atLeast(53)) throw new NotAcceptable('is_smartnic requires API version 1.53 or later.');
        const b = ironicBoolean(v);
        if (typeof b !== 'boolean') throw new InvalidParameterValue('Invalid input for field/attribute is_smartnic. Expected a boolean.');
        out.isSmartnic = b; break;
      }
      case 'portgroup_uuid':
        if (!version.atLeast(24)) throw new NotAcceptable('portgroup_uuid requires API version 1.24 or later.');
        if (v !== null && (typeof v !== 'string' || !isUuid(v))) throw new InvalidParameterValue(`Expected UUID for portgroup_uuid: ${typeof v === 'string' ? v : JSON.stringify(v)}`);
        out.portgroupIdent = v === null ? null : v.toLowerCase(); break;
      default:
        throw new InvalidParameterValue(`Schema error for port: Additional properties are not allowed ('${k}' was unexpected)`);
    }
  }
  return out;
}

/** Ironic's schema for a body naming its node twice (oneOf node_uuid, node_ident). */
function bothNodeIdents(): InvalidParameterValue {
  return new InvalidParameterValue("Schema error for port: the body is valid under each of {'required': ['node_ident']}, {'required': ['node_uuid']}");
}

/** Ironic's is_valid_logical_name (RFC 3986 unreserved characters). */
const LOGICAL_NAME = /^[A-Za-z0-9\-._~]+$/;

/** A port by UUID or, from 1.88, by name; anything else is a 400, as in Ironic. */
function portIdentParam(req: FastifyRequest): { ident: string; byName: boolean } {
  const ident = (req.params as { port: string }).port;
  if (isUuid(ident)) return { ident, byName: false };
  if (!req.apiVersion.atLeast(88)) throw new InvalidParameterValue(`Expected UUID for port_uuid: ${ident}`);
  if (!LOGICAL_NAME.test(ident) || ident.length > 255) throw new InvalidParameterValue(`Expected UUID or name for port_ident: ${ident}`);
  return { ident, byName: true };
}

/** Python's str() of an optional string, as Ironic's messages show it. */
const py = (v: string | null): string => v ?? 'None';

/**
 * Ironic's rules for a port in a port group: the group belongs to the port's node, a group
 * without standalone ports takes no PXE-enabled port, and all members share one physical
 * network. The group's row is locked, so two ports joining at once cannot disagree.
 */
async function checkMembership(
  trx: Knex.Transaction,
  pg: Portgroup,
  port: { id?: number; uuid?: string; nodeId: number; pxeEnabled: boolean | undefined; physicalNetwork: string | null },
  changed: { membership: boolean; pxe: boolean; physnet: boolean },
): Promise<void> {
  if (pg.nodeId !== port.nodeId) throw new InvalidParameterValue('Port can not be added to a portgroup belonging to a different node.');
  if ((changed.membership || changed.pxe) && port.pxeEnabled === true && !pg.standalonePortsSupported) {
    throw new Conflict(port.id === undefined
      ? `Port group ${pg.uuid} doesn't support standalone ports. This port cannot be created as a member of that portgroup as the port's 'pxe_enabled' field was set to True.`
      : `Port group ${pg.uuid} doesn't support standalone ports. This port ${port.uuid} cannot be  a member of that port group because of: 'pxe_enabled' was set to True`);
  }
  if (!changed.membership && !changed.physnet) return;
  const physnets = await portgroupPhysnets(trx, pg.id, port.id);
  if (physnets.length > 1) throw new PortgroupPhysnetInconsistent(pg.uuid, physnets.map(py).join(', '));
  if (physnets.length === 1 && physnets[0] !== port.physicalNetwork) {
    throw new Conflict(`Port with physical network ${py(port.physicalNetwork)} cannot become a member of port group ${pg.uuid} which has ports in physical network ${py(physnets[0])}.`);
  }
}

export function registerPortRoutes(app: FastifyInstance, deps: ApiDeps): void {
  const { db, config } = deps;

  /** The node a port body names: a missing one is the body's fault, 400 as in Ironic (replace_node_uuid_with_id). */
  async function nodeForPort(trx: Knex, uuid: string): Promise<Node> {
    try {
      return await getNode(trx, uuid);
    } catch (err) {
      if (err instanceof NodeNotFound) throw new ReferencedResourceNotFound(err);
      throw err;
    }
  }
  /** The port group a port body names, locked; a missing one is a 400 too. */
  async function portgroupForPort(trx: Knex, uuid: string): Promise<Portgroup> {
    try {
      return await getPortgroup(trx, uuid, { forUpdate: true });
    } catch (err) {
      if (err instanceof PortgroupNotFound) throw new ReferencedResourceNotFound(err);
      throw err;
    }
  }
  const base = (req: FastifyRequest) => baseUrl(req, config.api.public_endpoint);

  async function list(req: FastifyRequest, detailPath: boolean, parent?: { node?: string; portgroup?: string }) {
    const q = req.query as Query;
    const v = req.apiVersion;
    const known = new Set(['node', 'node_uuid', 'address', 'portgroup', 'detail', 'fields', 'limit', 'marker', 'sort_key', 'sort_dir']);
    const unknown = Object.keys(q).filter((k) => !known.has(k));
    if (unknown.length) throw new InvalidParameterValue(`Unknown query parameter(s): ${unknown.join(', ')}`);
    if (parent?.portgroup !== undefined && !v.atLeast(24)) throw new ResourceNotFound('The resource could not be found.');
    const detail = detailPath || boolParam(q, 'detail') === true;
    const fieldsRaw = param(q, 'fields');
    if (detail && fieldsRaw !== undefined) throw new InvalidParameterValue('Can not specify ?detail=True and fields in the same request.');
    const fields = parsePortFields(fieldsRaw, v) ?? (detail ? undefined : DEFAULT_LIST_FIELDS);
    const limit = limitParam(q, config.api.max_limit);
    const sort = sortParams(q, PORT_SORT_KEYS, 'ports');
    if (sort.sortKey in PORT_FIELDS && !v.atLeast(PORT_FIELDS[sort.sortKey])) throw new NotAcceptable('Request not acceptable.');
    const markerIdent = param(q, 'marker');
    if (markerIdent !== undefined && !isUuid(markerIdent)) throw new InvalidParameterValue(`Expected UUID for marker: ${markerIdent}`);
    const marker = markerIdent !== undefined ? await getPort(db, markerIdent, false) : undefined;
    const nodeUuid = param(q, 'node_uuid');
    if (nodeUuid !== undefined && !isUuid(nodeUuid)) throw new InvalidParameterValue(`Expected UUID for node_uuid: ${nodeUuid}`);
    const nodeFilter = parent?.node ?? param(q, 'node') ?? nodeUuid;
    // Node names arrived in 1.5: before it `node` (or the parent node) must be a UUID, as in Ironic.
    if (nodeUuid === undefined && nodeFilter !== undefined && !isUuid(nodeFilter) && !v.atLeast(5)) {
      throw new NotAcceptable('Request not acceptable.');
    }
    const portgroupFilter = parent?.portgroup ?? param(q, 'portgroup');
    if (portgroupFilter !== undefined && !v.atLeast(24)) throw new NotAcceptable('Request not acceptable.');
    // Ironic answers a node and a port group together with OperationNotPermitted.
    if (nodeFilter !== undefined && portgroupFilter !== undefined) throw new Forbidden('Operation not permitted.');
    const nodeId = nodeFilter !== undefined ? (await getNode(db, nodeFilter)).id : undefined;
    const portgroupId = portgroupFilter !== undefined ? (await getPortgroup(db, portgroupFilter)).id : undefined;
    const address = param(q, 'address');
    const ports = await listPorts(db, { nodeId, portgroupId, address: address === undefined ? undefined : normalizeMac(address) }, { limit, marker, ...sort });
    const b = base(req);
    const out: Record<string, unknown> = { ports: ports.map((p) => portView(p, b, v, fields)) };
    const collection = parent?.node !== undefined ? `nodes/${parent.node}/ports`
      : parent?.portgroup !== undefined ? `portgroups/${parent.portgroup}/ports` : 'ports';
    const next = nextLink(b, detailPath ? `${collection}/detail` : collection, q, ports.length, limit, ports.at(-1)?.uuid);
    if (next) out.next = next;
    return out;
  }

  const nodeParent = (req: FastifyRequest) => ({ node: (req.params as { node: string }).node });
  const pgParent = (req: FastifyRequest) => ({ portgroup: (req.params as { portgroup: string }).portgroup });
  app.get('/v1/ports', (req) => list(req, false));
  app.get('/v1/ports/detail', (req) => list(req, true));
  app.get('/v1/nodes/:node/ports', (req) => list(req, false, nodeParent(req)));
  app.get('/v1/nodes/:node/ports/detail', (req) => list(req, true, nodeParent(req)));
  app.get('/v1/portgroups/:portgroup/ports', (req) => list(req, false, pgParent(req)));
  app.get('/v1/portgroups/:portgroup/ports/detail', (req) => list(req, true, pgParent(req)));

  app.get('/v1/ports/:port', async (req) => {
    const { ident, byName } = portIdentParam(req);
    const fields = parsePortFields(param(req.query as Query, 'fields'), req.apiVersion);
    return portView(await getPort(db, ident, byName), base(req), req.apiVersion, fields);
  });

  app.post('/v1/ports', async (req, reply) => {
    const body = requireObject(req.body, 'port');
    if (body.address === undefined) throw new MissingParameterValue(`Schema error for port: 'address' is a required property`);
    if (body.node_uuid === undefined && body.node_ident === undefined) {
      throw new MissingParameterValue(`Schema error for port: 'node_uuid' is a required property`);
    }
    const { nodeIdent, portgroupIdent, ...changes } = toPortChanges(body, req.apiVersion);
    const port = await withTransaction(db, async (trx) => {
      const node = await nodeForPort(trx, nodeIdent!);
      let portgroupId: number | null = null;
      if (portgroupIdent) {
        const pg = await portgroupForPort(trx, portgroupIdent);
        await checkMembership(trx, pg, { nodeId: node.id, pxeEnabled: changes.pxeEnabled, physicalNetwork: changes.physicalNetwork ?? null },
          { membership: true, pxe: true, physnet: true });
        portgroupId = pg.id;
      }
      return createPort(trx, { ...changes, address: changes.address!, nodeId: node.id, portgroupId });
    });
    reply.code(201).header('Location', `${base(req)}/v1/ports/${port.uuid}`);
    return portView(port, base(req), req.apiVersion);
  });

  app.patch('/v1/ports/:port', async (req) => {
    const { ident, byName } = portIdentParam(req);
    const ops = req.body;
    if (!Array.isArray(ops) || ops.length === 0) throw new PatchError('The request body must be a non-empty JSON patch (a list of operations).');
    const updated = await withTransaction(db, async (trx) => {
      const port = await getPort(trx, ident, byName, { forUpdate: true });
      const doc: Record<string, unknown> = {
        address: port.address, node_uuid: port.nodeUuid, extra: port.extra, local_link_connection: port.localLinkConnection,
        pxe_enabled: port.pxeEnabled, physical_network: port.physicalNetwork, is_smartnic: port.isSmartnic, portgroup_uuid: port.portgroupUuid,
        name: port.name,
      };
      for (const op of ops) {
        const path = (op as { path?: unknown })?.path;
        const kind = (op as { op?: unknown })?.op;
        if (kind !== 'add' && kind !== 'replace' && kind !== 'remove') throw new PatchError(`Invalid patch operation ${JSON.stringify(kind)}: only add, replace and remove are supported.`);
        if (typeof path !== 'string' || !path.startsWith('/')) throw new PatchError(`Invalid patch path ${JSON.stringify(path)}.`);
        const root = path.split('/')[1];
        if (!(root in doc)) throw new PatchError(`'/${root}' is an internal attribute and can not be updated`);
        if (kind === 'remove' && (root === 'address' || root === 'node_uuid') && path === `/${root}`) {
          throw new PatchError(`'/${root}' is a mandatory attribute and can not be removed`);
        }
      }
      const patched = applyWholePatch(doc, ops);
      const changedBody: Record<string, unknown> = {};
      for (const k of Object.keys(doc)) {
        const v = patched[k] === undefined ? (k === 'extra' || k === 'local_link_connection' ? {} : null) : patched[k];
        if (JSON.stringify(v) !== JSON.stringify(doc[k])) changedBody[k] = v;
      }
      const { nodeIdent, portgroupIdent, ...changes } = toPortChanges(changedBody, req.apiVersion);
      const node = nodeIdent !== undefined ? await nodeForPort(trx, nodeIdent) : await getNode(trx, port.nodeUuid);
      if (nodeIdent !== undefined) changes.nodeId = node.id;
      if (portgroupIdent !== undefined) changes.portgroupId = portgroupIdent === null ? null : (await portgroupForPort(trx, portgroupIdent)).id;
      if (changes.address !== undefined && (node.provisionState === 'active' || node.instanceUuid) && !node.maintenance) {
        throw new InvalidState(`Cannot update hardware address for port ${port.uuid} as node ${node.uuid} is active or has instance UUID assigned`);
      }
      const connectivity = ['portgroupId', 'pxeEnabled', 'localLinkConnection', 'physicalNetwork'].filter((f) => f in changes);
      if (connectivity.length > 0 && !PORT_CONNECTIVITY_STATES.includes(node.provisionState) && !node.maintenance) {
        throw new InvalidState(`Port ${port.uuid} can not have any connectivity attributes (portgroup_id, pxe_enabled, local_link_connection, physical_network) updated unless node ${node.uuid} is in a ${PORT_CONNECTIVITY_STATES.join(', ')} state or in maintenance mode. The current state is ${node.provisionState}.`);
      }
      const portgroupId = changes.portgroupId !== undefined ? changes.portgroupId : port.portgroupId;
      if (portgroupId !== null) {
        const pg = portgroupIdent ? await portgroupForPort(trx, portgroupIdent) : await getPortgroup(trx, port.portgroupUuid!, { forUpdate: true });
        await checkMembership(trx, pg, {
          id: port.id, uuid: port.uuid, nodeId: node.id, pxeEnabled: changes.pxeEnabled ?? port.pxeEnabled,
          physicalNetwork: changes.physicalNetwork !== undefined ? changes.physicalNetwork : port.physicalNetwork,
        }, { membership: changes.portgroupId !== undefined || changes.nodeId !== undefined, pxe: 'pxeEnabled' in changes, physnet: 'physicalNetwork' in changes });
      }
      return Object.keys(changes).length ? updatePort(trx, port.id, changes) : port;
    });
    return portView(updated, base(req), req.apiVersion);
  });

  app.delete('/v1/ports/:port', async (req, reply) => {
    const { ident, byName } = portIdentParam(req);
    const port = await getPort(db, ident, byName);
    await deletePort(db, port.id);
    reply.code(204).send();
  });
}
