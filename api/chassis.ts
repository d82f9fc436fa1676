import type { FastifyInstance, FastifyRequest } from 'fastify';
import { InvalidParameterValue } from '../common/errors.js';
import {
  CHASSIS_SORT_KEYS, createChassis, deleteChassis, getChassis, listChassis, updateChassis, type Chassis, type ChassisChanges,
} from '../db/chassis.js';
import { withTransaction } from '../db/transaction.js';
import { isUuid, requireObject } from './body.js';
import type { ApiDeps } from './deps.js';
import type { ApiVersion } from './versioning.js';
import { baseUrl, resourceLinks } from './links.js';
import { listPageResponse, param, type Query } from './query.js';
import {
  applyPatch, changedFields, checkPatch, checkQueryNames, iso, listFields, parseFieldsParam, pickFields, type FieldVersions,
} from './resource.js';

/** Chassis fields; all date from 1.1. */
const CHASSIS_FIELDS: FieldVersions = {
  uuid: 1, description: 1, extra: 1, created_at: 1, updated_at: 1, links: 1, nodes: 1,
};
const DEFAULT_LIST_FIELDS = ['uuid', 'description'];
const WRITABLE = ['uuid', 'description', 'extra'];
const PATCHABLE = ['description', 'extra'];

function chassisView(c: Chassis, base: string, version: ApiVersion, fields?: readonly string[]): Record<string, unknown> {
  const full = {
    uuid: c.uuid, description: c.description, extra: c.extra, created_at: iso(c.createdAt), updated_at: iso(c.updatedAt),
    links: resourceLinks(base, 'chassis', c.uuid), nodes: resourceLinks(base, 'chassis', c.uuid, 'nodes'),
  };
  return pickFields(full, CHASSIS_FIELDS, version, fields);
}

/** Checks a chassis body (Ironic's CHASSIS_SCHEMA) and converts it to domain changes. */
function toChanges(body: Record<string, unknown>): ChassisChanges {
  const out: ChassisChanges = {};
  for (const [k, v] of Object.entries(body)) {
    if (!WRITABLE.includes(k)) throw new InvalidParameterValue(`Schema error for chassis: Additional properties are not allowed ('${k}' was unexpected)`);
    const shown = JSON.stringify(v)?.slice(0, 100);
    switch (k) {
      case 'uuid':
        if (v === null) break;
        if (typeof v !== 'string' || !isUuid(v)) throw new InvalidParameterValue(`Expected UUID for uuid: ${typeof v === 'string' ? v : shown}`);
        out.uuid = v.toLowerCase();
        break;
      case 'description':
        if (v !== null && typeof v !== 'string') throw new InvalidParameterValue(`Schema error for chassis: ${shown} is not of type 'string', 'null'`);
        if (typeof v === 'string' && v.length > 255) throw new InvalidParameterValue(`Schema error for chassis/description: '${v.slice(0, 40)}…' is too long (at most 255 characters)`);
        out.description = v as string | null;
        break;
      case 'extra':
        if (v !== null && (typeof v !== 'object' || Array.isArray(v))) throw new InvalidParameterValue(`Schema error for chassis: ${shown} is not of type 'object', 'null'`);
        out.extra = (v ?? {}) as Record<string, unknown>;
        break;
    }
  }
  return out;
}

/** Ironic names a chassis by UUID only; anything else is a 400 before any lookup. */
function chassisUuidParam(req: FastifyRequest): string {
  const ident = (req.params as { chassis: string }).chassis;
  if (!isUuid(ident)) throw new InvalidParameterValue(`Expected UUID for chassis_uuid: ${ident}`);
  return ident;
}

/** `/v1/chassis`: Ironic's chassis resource (its nodes are listed by api/nodes.ts). */
export function registerChassisRoutes(app: FastifyInstance, deps: ApiDeps): void {
  const { db, config } = deps;
  const base = (req: FastifyRequest) => baseUrl(req, config.api.public_endpoint);

  async function list(req: FastifyRequest, detailPath: boolean) {
    const q = req.query as Query;
    checkQueryNames(q, ['detail', 'fields', 'limit', 'marker', 'sort_key', 'sort_dir']);
    const fields = listFields(q, detailPath, CHASSIS_FIELDS, DEFAULT_LIST_FIELDS, req.apiVersion);
    const b = base(req);
    return listPageResponse(q, b, {
      collection: 'chassis', detailPath, maxLimit: config.api.max_limit,
      sortKeys: CHASSIS_SORT_KEYS, refusedSortKeys: ['extra'], sortResource: 'chassis',
      marker: (ident) => {
        if (!isUuid(ident)) throw new InvalidParameterValue(`Expected UUID for marker: ${ident}`);
        return getChassis(db, ident);
      },
      list: (page) => listChassis(db, page),
      view: (c) => chassisView(c, b, req.apiVersion, fields),
    });
  }

  app.get('/v1/chassis', (req) => list(req, false));
  app.get('/v1/chassis/detail', (req) => list(req, true));

  app.get('/v1/chassis/:chassis', async (req) => {
    const uuid = chassisUuidParam(req);
    const fields = parseFieldsParam(param(req.query as Query, 'fields'), CHASSIS_FIELDS, req.apiVersion);
    return chassisView(await getChassis(db, uuid), base(req), req.apiVersion, fields);
  });

  app.post('/v1/chassis', async (req, reply) => {
    const changes = toChanges(requireObject(req.body, 'chassis'));
    const chassis = await createChassis(db, changes);
    reply.code(201).header('Location', `${base(req)}/v1/chassis/${chassis.uuid}`);
    return chassisView(chassis, base(req), req.apiVersion);
  });

  app.patch('/v1/chassis/:chassis', async (req) => {
    // Ironic looks a patched chassis up without checking the UUID first: a name is a 404 here.
    const uuid = (req.params as { chassis: string }).chassis;
    const ops = checkPatch(req.body, PATCHABLE);
    const updated = await withTransaction(db, async (trx) => {
      const current = await getChassis(trx, uuid, { forUpdate: true });
      const doc = { description: current.description, extra: current.extra };
      const changed = changedFields(doc, applyPatch(doc, ops), ['extra']);
      if (Object.keys(changed).length === 0) return current;
      return updateChassis(trx, current.id, toChanges(changed));
    });
    return chassisView(updated, base(req), req.apiVersion);
  });

  app.delete('/v1/chassis/:chassis', async (req, reply) => {
    const uuid = chassisUuidParam(req);
    await deleteChassis(db, await getChassis(db, uuid));
    reply.code(204).send();
  });
}
