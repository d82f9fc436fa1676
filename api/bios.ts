/**
 * A node's cached BIOS settings (Ironic's api/controllers/v1/bios.py): `GET /v1/nodes/{n}/bios`
 * and `/bios/{name}` from 1.40; from 1.74 the registry fields, with `detail=true` or `fields=`
 * on the list, and always on a single setting.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { BIOS_REGISTRY_FIELDS } from '../common/bios.js';
import { InvalidParameterValue, ResourceNotFound } from '../common/errors.js';
import { getBiosSetting, listBiosSettings, type StoredBiosSetting } from '../db/bios-settings.js';
import { getNode } from '../db/nodes.js';
import type { ApiDeps } from './deps.js';
import { baseUrl, resourceLinks } from './links.js';
import { boolParam, param, type Query } from './query.js';
import { iso } from './resource.js';

const DEFAULT_FIELDS = ['name', 'value'] as const;
const WITH_REGISTRY = [...DEFAULT_FIELDS, ...BIOS_REGISTRY_FIELDS];
/** What `fields=` may name (Ironic's index_request_query_v74). */
const KNOWN_FIELDS = new Set<string>([...WITH_REGISTRY, 'created_at', 'updated_at', 'links', 'node_uuid']);

/** A setting's field by its API name. */
function fieldOf(s: StoredBiosSetting, name: string): unknown {
  switch (name) {
    case 'name': return s.name;
    case 'value': return s.value;
    case 'attribute_type': return s.attributeType;
    case 'allowable_values': return s.allowableValues;
    case 'lower_bound': return s.lowerBound;
    case 'max_length': return s.maxLength;
    case 'min_length': return s.minLength;
    case 'read_only': return s.readOnly;
    case 'reset_required': return s.resetRequired;
    case 'unique': return s.unique;
    case 'upper_bound': return s.upperBound;
    default: return undefined;
  }
}

/** Ironic's query schemas: before 1.74 the list takes no query at all; from it, `detail` and `fields`. */
function checkQuery(q: Query, allowed: readonly string[]): void {
  const unexpected = Object.keys(q).filter((k) => !allowed.includes(k));
  if (unexpected.length) {
    const names = unexpected.map((k) => `'${k}'`).join(', ');
    throw new InvalidParameterValue(`Additional properties are not allowed (${names} ${unexpected.length > 1 ? 'were' : 'was'} unexpected)`);
  }
}

export function registerBiosRoutes(app: FastifyInstance, deps: ApiDeps): void {
  const { db, config } = deps;

  /** Ironic's object_to_dict: created_at, updated_at, the fields asked for, and links. */
  function view(req: FastifyRequest, nodeIdent: string, s: StoredBiosSetting, fields: readonly string[]): Record<string, unknown> {
    const out: Record<string, unknown> = { created_at: iso(s.createdAt), updated_at: iso(s.updatedAt) };
    for (const f of fields) if (f !== 'created_at' && f !== 'updated_at' && f !== 'links' && f !== 'node_uuid') out[f] = fieldOf(s, f);
    out.links = resourceLinks(baseUrl(req, config.api.public_endpoint), 'nodes', nodeIdent, `bios/${s.name}`);
    return out;
  }

  function requireVersion(req: FastifyRequest): void {
    if (!req.apiVersion.atLeast(40)) throw new ResourceNotFound('The resource could not be found.');
  }

  app.get('/v1/nodes/:node/bios', async (req) => {
    requireVersion(req);
    const q = req.query as Query;
    const registry = req.apiVersion.atLeast(74);
    checkQuery(q, registry ? ['detail', 'fields'] : []);
    const detail = boolParam(q, 'detail');
    const rawFields = param(q, 'fields');
    let fields: readonly string[] = DEFAULT_FIELDS;
    if (rawFields !== undefined) {
      const names = rawFields.split(',').map((s) => s.trim()).filter(Boolean);
      const bad = names.filter((n) => !KNOWN_FIELDS.has(n));
      if (bad.length) throw new InvalidParameterValue(`Field(s) "${bad.join(', ')}" are not valid`);
      if (detail) throw new InvalidParameterValue('Can not specify ?detail=True and fields in the same request.');
      fields = names;
    } else if (detail) {
      fields = WITH_REGISTRY;
    }
    const ident = (req.params as { node: string }).node;
    const node = await getNode(db, ident);
    // Ironic links a listed setting by the node as the client named it.
    return { bios: (await listBiosSettings(db, node.id)).map((s) => view(req, ident, s, fields)) };
  });

  app.get('/v1/nodes/:node/bios/:setting', async (req) => {
    requireVersion(req);
    checkQuery(req.query as Query, []);
    const { node: ident, setting: name } = req.params as { node: string; setting: string };
    const node = await getNode(db, ident);
    const s = await getBiosSetting(db, node.id, name);
    if (!s) throw new ResourceNotFound(`Node ${node.uuid} doesn't have a BIOS setting '${name}'`);
    return { [name]: view(req, node.uuid, s, req.apiVersion.atLeast(74) ? WITH_REGISTRY : DEFAULT_FIELDS) };
  });
}
