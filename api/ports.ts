import type { FastifyInstance, FastifyRequest } from 'fastify';
import jsonpatch from 'fast-json-patch';
import { InvalidParameterValue, MissingParameterValue, PatchError, NotAcceptable, NodeNotFound } from '../common/errors.js';
import { getNode, type Node } from '../db/nodes.js';
import { createPort, deletePort, getPort, listPorts, updatePort, PORT_SORT_KEYS, type Port, type PortChanges } from '../db/ports.js';
import type { ApiDeps } from './deps.js';
import { baseUrl, resourceLinks } from './links.js';
import { boolParam, limitParam, nextLink, param, sortParams, type Query } from './query.js';
import { ironicBoolean, isUuid, requireObject } from './body.js';
import { maskSecrets } from './masking.js';
import type { ApiVersion } from './versioning.js';

const MAC_RE = /^([0-9a-f]{2}[:-]){5}[0-9a-f]{2}$/i;

/** Ironic accepts Ethernet MACs and normalises them to lower case with colons. */
export function normalizeMac(value: unknown): string {
  if (typeof value !== 'string' || !MAC_RE.test(value)) {
    throw new InvalidParameterValue(`Expected a MAC address but received ${typeof value === 'string' ? value : JSON.stringify(value)}.`);
  }
  return value.toLowerCase().replace(/-/g, ':');
}

const LLC_KEYS = new Set(['switch_id', 'port_id', 'switch_info', 'network_type']);

function checkLocalLinkConnection(v: unknown): Record<string, unknown> {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new InvalidParameterValue('local_link_connection must be a JSON object.');
  for (const [k, val] of Object.entries(v)) {
    if (!LLC_KEYS.has(k)) throw new InvalidParameterValue(`Invalid key "${k}" in local_link_connection; allowed keys are ${[...LLC_KEYS].join(', ')}.`);
    if (typeof val !== 'string') throw new InvalidParameterValue(`local_link_connection.${k} must be a string.`);
  }
  return v as Record<string, unknown>;
}

/** Port fields with the microversion that introduced them. */
const PORT_FIELDS: Record<string, number> = {
  uuid: 1, address: 1, node_uuid: 1, extra: 1, local_link_connection: 19, pxe_enabled: 19, internal_info: 18,
  portgroup_uuid: 24, physical_network: 34, is_smartnic: 53, created_at: 1, updated_at: 1, links: 1,
};
const DEFAULT_LIST_FIELDS = ['uuid', 'address', 'links'];

function iso(d: Date | null): string | null {
  return d ? d.toISOString().replace('Z', '+00:00') : null;
}

function portView(p: Port, base: string, version: ApiVersion, fields?: readonly string[]): Record<string, unknown> {
  const full: Record<string, unknown> = {
    uuid: p.uuid, address: p.address, node_uuid: p.nodeUuid, extra: p.extra,
    local_link_connection: p.localLinkConnection, pxe_enabled: p.pxeEnabled, internal_info: maskSecrets({}),
    portgroup_uuid: null, physical_network: p.physicalNetwork, is_smartnic: p.isSmartnic,
    created_at: iso(p.createdAt), updated_at: iso(p.updatedAt), links: resourceLinks(base, 'ports', p.uuid),
  };
  const names = fields ?? Object.keys(PORT_FIELDS).filter((k) => version.atLeast(PORT_FIELDS[k]));
  return Object.fromEntries(names.map((k) => [k, full[k]]));
}

function parsePortFields(raw: string | undefined, version: ApiVersion): string[] | undefined {
  if (raw === undefined) return undefined;
  if (!version.atLeast(8)) throw new NotAcceptable('The "fields" parameter requires API version 1.8 or later.');
  const names = raw.split(',').map((s) => s.trim()).filter(Boolean);
  const bad = names.filter((n) => !(n in PORT_FIELDS));
  if (bad.length || names.length === 0) throw new InvalidParameterValue(`Field(s) "${bad.join(', ')}" are not valid`);
  if (!names.includes('uuid')) names.unshift('uuid');
  return names;
}

/** Writable port fields → domain fields, checked one by one. */
function toPortChanges(body: Record<string, unknown>, version: ApiVersion): PortChanges & { nodeIdent?: string } {
  const out: PortChanges & { nodeIdent?: string } = {};
  for (const [k, v] of Object.entries(body)) {
    switch (k) {
      case 'address': out.address = normalizeMac(v); break;
      case 'node_uuid':
        if (typeof v !== 'string' || !isUuid(v)) throw new InvalidParameterValue(`Invalid input for field/attribute node_uuid. Value: ${JSON.stringify(v)}. Expected a UUID.`);
        out.nodeIdent = v; break;
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
        out.localLinkConnection = checkLocalLinkConnection(v); break;
      case 'extra':
        if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new InvalidParameterValue('Invalid input for field/attribute extra. Expected a JSON object.');
        out.extra = v as Record<string, unknown>; break;
      case 'physical_network':
        if (!version.atLeast(34)) throw new NotAcceptable('physical_network requires API version 1.34 or later.');
        if (v !== null && (typeof v !== 'string' || v.length > 64)) throw new InvalidParameterValue('Invalid input for field/attribute physical_network. Expected a string of at most 64 characters.');
        out.physicalNetwork = v as string | null; break;
      case 'is_smartnic': {
        if (!version.atLeast(53)) throw new NotAcceptable('is_smartnic requires API version 1.53 or later.');
        const b = ironicBoolean(v);
        if (typeof b !== 'boolean') throw new InvalidParameterValue('Invalid input for field/attribute is_smartnic. Expected a boolean.');
        out.isSmartnic = b; break;
      }
      case 'portgroup_uuid':
        if (v !== null) throw new InvalidParameterValue('Galvanic has no port groups; portgroup_uuid must be null.');
        break;
      default:
        throw new InvalidParameterValue(`Schema error for port: Additional properties are not allowed ('${k}' was unexpected)`);
    }
  }
  return out;
}

export function registerPortRoutes(app: FastifyInstance, deps: ApiDeps): void {
  const { db, config } = deps;

  /** The node a port body names: a missing one is the body's fault, 400 as in Ironic (replace_node_uuid_with_id). */
  async function nodeForPort(uuid: string): Promise<Node> {
    try {
      return await getNode(db, uuid);
    } catch (err) {
      if (err instanceof NodeNotFound) throw new InvalidParameterValue(err.message);
      throw err;
    }
  }
  const base = (req: FastifyRequest) => baseUrl(req, config.api.public_endpoint);
  const portIdent = (req: FastifyRequest) => (req.params as { port: string }).port;

  async function list(req: FastifyRequest, detailPath: boolean, nodeIdent?: string) {
    const q = req.query as Query;
    const v = req.apiVersion;
    const known = new Set(['node', 'node_uuid', 'address', 'detail', 'fields', 'limit', 'marker', 'sort_key', 'sort_dir']);
    const unknown = Object.keys(q).filter((k) => !known.has(k));
    if (unknown.length) throw new InvalidParameterValue(`Unknown query parameter(s): ${unknown.join(', ')}`);
    const detail = detailPath || boolParam(q, 'detail') === true;
    const fieldsRaw = param(q, 'fields');
    if (detail && fieldsRaw !== undefined) throw new InvalidParameterValue('Can not specify ?detail=True and fields in the same request.');
    const fields = parsePortFields(fieldsRaw, v) ?? (detail ? undefined : DEFAULT_LIST_FIELDS);
    const limit = limitParam(q, config.api.max_limit);
    const sort = sortParams(q, PORT_SORT_KEYS, 'ports');
    const markerIdent = param(q, 'marker');
    if (markerIdent !== undefined && !isUuid(markerIdent)) throw new InvalidParameterValue(`Expected UUID for marker: ${markerIdent}`);
    const marker = markerIdent !== undefined ? await getPort(db, markerIdent, false) : undefined;
    const nodeUuid = param(q, 'node_uuid');
    if (nodeUuid !== undefined && !isUuid(nodeUuid)) throw new InvalidParameterValue(`Expected UUID for node_uuid: ${nodeUuid}`);
    const nodeFilter = nodeIdent ?? param(q, 'node') ?? param(q, 'node_uuid');
    // Node names arrived in 1.5: before it `node` (or the parent node) must be a UUID, as in Ironic.
    if (nodeUuid === undefined && nodeFilter !== undefined && !isUuid(nodeFilter) && !v.atLeast(5)) {
      throw new NotAcceptable('Request not acceptable.');
    }
    const nodeId = nodeFilter !== undefined ? (await getNode(db, nodeFilter)).id : undefined;
    const address = param(q, 'address');
    const ports = await listPorts(db, { nodeId, address: address === undefined ? undefined : normalizeMac(address) }, { limit, marker, ...sort });
    const b = base(req);
    const out: Record<string, unknown> = { ports: ports.map((p) => portView(p, b, v, fields)) };
    const path = nodeIdent ? `nodes/${nodeIdent}/ports` : detailPath ? 'ports/detail' : 'ports';
    const next = nextLink(b, path, q, ports.length, limit, ports.at(-1)?.uuid);
    if (next) out.next = next;
    return out;
  }

  app.get('/v1/ports', (req) => list(req, false));
  app.get('/v1/ports/detail', (req) => list(req, true));
  app.get('/v1/nodes/:node/ports', (req) => list(req, false, (req.params as { node: string }).node));
  app.get('/v1/nodes/:node/ports/detail', (req) => list(req, true, (req.params as { node: string }).node));

  app.get('/v1/ports/:port', async (req) => {
    const fields = parsePortFields(param(req.query as Query, 'fields'), req.apiVersion);
    return portView(await getPort(db, portIdent(req), false), base(req), req.apiVersion, fields);
  });

  app.post('/v1/ports', async (req, reply) => {
    const body = requireObject(req.body, 'port');
    if (body.address === undefined) throw new MissingParameterValue(`Schema error for port: 'address' is a required property`);
    if (body.node_uuid === undefined) throw new MissingParameterValue(`Schema error for port: 'node_uuid' is a required property`);
    const { nodeIdent, ...changes } = toPortChanges(body, req.apiVersion);
    const node = await nodeForPort(nodeIdent!);
    const port = await createPort(db, { ...changes, address: changes.address!, nodeId: node.id });
    reply.code(201).header('Location', `${base(req)}/v1/ports/${port.uuid}`);
    return portView(port, base(req), req.apiVersion);
  });

  app.patch('/v1/ports/:port', async (req) => {
    const ops = req.body;
    if (!Array.isArray(ops) || ops.length === 0) throw new PatchError('The request body must be a non-empty JSON patch (a list of operations).');
    const port = await getPort(db, portIdent(req), false);
    const doc: Record<string, unknown> = {
      address: port.address, node_uuid: port.nodeUuid, extra: port.extra, local_link_connection: port.localLinkConnection,
      pxe_enabled: port.pxeEnabled, physical_network: port.physicalNetwork, is_smartnic: port.isSmartnic, portgroup_uuid: null,
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
    let patched: Record<string, unknown>;
    try {
      patched = jsonpatch.applyPatch(structuredClone(doc), ops as jsonpatch.Operation[], true, false).newDocument;
    } catch (err) {
      throw new PatchError(`Invalid patch: ${(err as Error).message.split('\n')[0]}`);
    }
    const changedBody: Record<string, unknown> = {};
    for (const k of Object.keys(doc)) {
      const v = patched[k] === undefined ? (k === 'extra' || k === 'local_link_connection' ? {} : null) : patched[k];
      if (JSON.stringify(v) !== JSON.stringify(doc[k])) changedBody[k] = v;
    }
    const { nodeIdent, ...changes } = toPortChanges(changedBody, req.apiVersion);
    if (nodeIdent !== undefined) changes.nodeId = (await nodeForPort(nodeIdent)).id;
    const updated = Object.keys(changes).length ? await updatePort(db, port.id, changes) : port;
    return portView(updated, base(req), req.apiVersion);
  });

  app.delete('/v1/ports/:port', async (req, reply) => {
    const port = await getPort(db, portIdent(req), false);
    await deletePort(db, port.id);
    reply.code(204).send();
  });
}
