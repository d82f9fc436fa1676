/**
 * `GET /v1/nodes/{node}/firmware` (API 1.86, Ironic's NodeFirmwareController): the node's
 * firmware components as its firmware interface last read them (at inspection and after an
 * update); a node whose interface reads none lists none.
 */
import type { FastifyInstance } from 'fastify';
import { InvalidParameterValue, ResourceNotFound } from '../common/errors.js';
import { firmwareOfNode, type FirmwareComponentRow } from '../db/firmware-components.js';
import { getNode } from '../db/nodes.js';
import type { ApiDeps } from './deps.js';
import { boolParam, param, type Query } from './query.js';
import { iso } from './resource.js';

/** Ironic's _DEFAULT_RETURN_FIELDS. */
const DEFAULT_FIELDS = ['component', 'initial_version', 'current_version', 'last_version_flashed'] as const;
type Field = (typeof DEFAULT_FIELDS)[number];
/** What `fields` may name below 1.114, where the identity fields come. */
const FIELDS = ['created_at', 'updated_at', ...DEFAULT_FIELDS];
const IDENTITY_FIELDS = ['vendor', 'model', 'serial_number'];

/**
 * The fields to show (Ironic's get_request_return_fields): the defaults; those asked for; or,
 * with `detail` and no `fields`, none besides the timestamps, as Ironic answers.
 */
function requestedFields(q: Query): readonly Field[] {
  const raw = param(q, 'fields');
  const detail = boolParam(q, 'detail');
  if (raw === undefined) return detail ? [] : DEFAULT_FIELDS;
  const fields = raw.split(',').map((s) => s.trim()).filter((f) => f !== '');
  const identity = fields.filter((f) => IDENTITY_FIELDS.includes(f));
  if (identity.length) {
    throw new InvalidParameterValue(`Fields ${[...new Set(identity)].sort().join(', ')} are not allowed in this API version. They require at least API version 1.114.`);
  }
  const bad = fields.filter((f) => !FIELDS.includes(f));
  if (bad.length) throw new InvalidParameterValue(`Field(s) "${bad.join(', ')}" are not valid`);
  if (detail) throw new InvalidParameterValue('Can not specify ?detail=True and fields in the same request.');
  return DEFAULT_FIELDS.filter((f) => fields.includes(f));
}

/** One component as Ironic's object_to_dict builds it: created_at and updated_at always. */
function view(row: FirmwareComponentRow, fields: readonly Field[]): Record<string, unknown> {
  const out: Record<string, unknown> = { created_at: iso(row.created_at), updated_at: iso(row.updated_at) };
  for (const f of fields) out[f] = row[f];
  return out;
}

export function registerFirmwareRoutes(app: FastifyInstance, deps: ApiDeps): void {
  const { db } = deps;
  app.get('/v1/nodes/:node/firmware', async (req) => {
    if (!req.apiVersion.atLeast(86)) throw new ResourceNotFound('The resource could not be found.');
    const fields = requestedFields(req.query as Query);
    const node = await getNode(db, (req.params as { node: string }).node);
    return { firmware: (await firmwareOfNode(db, node.id)).map((r) => view(r, fields)) };
  });
}
