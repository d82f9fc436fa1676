import type { FastifyInstance, FastifyRequest } from 'fastify';
import { InvalidParameterValue } from '../common/errors.js';
import { getNode } from '../db/nodes.js';
import {
  createVolumeConnector, deleteVolumeConnector, getVolumeConnector, listVolumeConnectors, updateVolumeConnector,
  VOLUME_CONNECTOR_SORT_KEYS, type VolumeConnector, type VolumeConnectorChanges,
} from '../db/volume-connectors.js';
import {
  createVolumeTarget, deleteVolumeTarget, getVolumeTarget, listVolumeTargets, updateVolumeTarget,
  VOLUME_TARGET_SORT_KEYS, type VolumeTarget, type VolumeTargetChanges,
} from '../db/volume-targets.js';
import type { ApiDeps } from './deps.js';
import type { IntentAcceptor } from './intents.js';
import { baseUrl } from './links.js';
import { maskSecrets } from '../common/masking.js';
import {
  iso, objectField, registerVolumeResource, requireVolumeVersion, stringField, volumeLinks, type VolumeResourceSpec,
} from './volume-resource.js';

/** The connector types Ironic documents (api-ref: "One of iqn, ip, mac, wwnn, wwpn, port, portgroup"). */
const CONNECTOR_TYPES = ['iqn', 'ip', 'mac', 'wwnn', 'wwpn', 'port', 'portgroup'];

const connectors: VolumeResourceSpec<VolumeConnector, VolumeConnectorChanges> = {
  collection: 'connectors',
  what: 'volume connector',
  bodyName: 'connector',
  fields: ['uuid', 'node_uuid', 'type', 'connector_id', 'extra', 'created_at', 'updated_at', 'links'],
  defaultFields: ['uuid', 'node_uuid', 'type', 'connector_id'],
  required: ['connector_id', 'node_uuid', 'type'],
  patchable: ['connector_id', 'extra', 'node_uuid', 'type'],
  sortKeys: VOLUME_CONNECTOR_SORT_KEYS,
  document: (c) => ({ type: c.type, connector_id: c.connectorId, extra: c.extra }),
  toChanges(body) {
    const out: VolumeConnectorChanges = {};
    for (const [k, v] of Object.entries(body)) {
      switch (k) {
        case 'type':
          if (typeof v !== 'string' || !CONNECTOR_TYPES.includes(v)) {
            throw new InvalidParameterValue(`Invalid volume connector type ${JSON.stringify(v)}: expected one of ${CONNECTOR_TYPES.join(', ')}.`);
          }
          out.type = v;
          break;
        case 'connector_id': out.connectorId = stringField('connector', k, v, 255); break;
        case 'extra': out.extra = objectField('connector', k, v); break;
        default: throw new InvalidParameterValue(`Schema error for connector: Additional properties are not allowed ('${k}' was unexpected)`);
      }
    }
    return out;
  },
  view: (c) => ({
    uuid: c.uuid, node_uuid: c.nodeUuid, type: c.type, connector_id: c.connectorId, extra: c.extra,
    created_at: iso(c.createdAt), updated_at: iso(c.updatedAt),
  }),
  get: getVolumeConnector,
  list: listVolumeConnectors,
  create: createVolumeConnector as VolumeResourceSpec<VolumeConnector, VolumeConnectorChanges>['create'],
  update: updateVolumeConnector,
  remove: deleteVolumeConnector,
};

/** Postgres integer: a boot index beyond it would fail in SQL. */
const INT_MAX = 2 ** 31 - 1;

const targets: VolumeResourceSpec<VolumeTarget, VolumeTargetChanges> = {
  collection: 'targets',
  what: 'volume target',
  bodyName: 'target',
  fields: ['uuid', 'node_uuid', 'volume_type', 'properties', 'boot_index', 'volume_id', 'extra', 'created_at', 'updated_at', 'links'],
  defaultFields: ['uuid', 'node_uuid', 'volume_type', 'boot_index', 'volume_id'],
  required: ['boot_index', 'node_uuid', 'volume_id', 'volume_type'],
  patchable: ['boot_index', 'extra', 'node_uuid', 'properties', 'volume_id', 'volume_type'],
  sortKeys: VOLUME_TARGET_SORT_KEYS,
  document: (t) => ({ volume_type: t.volumeType, properties: t.properties, boot_index: t.bootIndex, volume_id: t.volumeId, extra: t.extra }),
  toChanges(body) {
    const out: VolumeTargetChanges = {};
    for (const [k, v] of Object.entries(body)) {
      switch (k) {
        case 'volume_type': out.volumeType = stringField('target', k, v, 64); break;
        case 'volume_id': out.volumeId = stringField('target', k, v, 36); break;
        case 'boot_index':
          if (typeof v !== 'number' || !Number.isInteger(v) || Math.abs(v) > INT_MAX) {
            throw new InvalidParameterValue(`Schema error for target: boot_index: ${JSON.stringify(v)} is not of type 'integer'`);
          }
          out.bootIndex = v;
          break;
        case 'properties': out.properties = objectField('target', k, v); break;
        case 'extra': out.extra = objectField('target', k, v); break;
        default: throw new InvalidParameterValue(`Schema error for target: Additional properties are not allowed ('${k}' was unexpected)`);
      }
    }
    return out;
  },
  view: (t) => ({
    uuid: t.uuid, node_uuid: t.nodeUuid, volume_type: t.volumeType,
    // Volume properties may carry CHAP secrets: masked as Ironic does.
    properties: maskSecrets(t.properties),
    boot_index: t.bootIndex, volume_id: t.volumeId, extra: t.extra,
    created_at: iso(t.createdAt), updated_at: iso(t.updatedAt),
  }),
  get: getVolumeTarget,
  list: listVolumeTargets,
  create: createVolumeTarget as VolumeResourceSpec<VolumeTarget, VolumeTargetChanges>['create'],
  update: updateVolumeTarget,
  remove: deleteVolumeTarget,
};

/** `/v1/volume`, `/v1/nodes/{n}/volume` and the connectors and targets below them (API 1.32). */
export function registerVolumeRoutes(app: FastifyInstance, deps: ApiDeps, acceptor: IntentAcceptor): void {
  const base = (req: FastifyRequest) => baseUrl(req, deps.config.api.public_endpoint);
  app.get('/v1/volume', async (req) => {
    requireVolumeVersion(req.apiVersion);
    return volumeLinks(base(req), 'volume');
  });
  app.get('/v1/nodes/:node/volume', async (req) => {
    requireVolumeVersion(req.apiVersion);
    const ident = (req.params as { node: string }).node;
    await getNode(deps.db, ident);
    return volumeLinks(base(req), `nodes/${ident}/volume`);
  });
  registerVolumeResource(app, deps, acceptor, connectors);
  registerVolumeResource(app, deps, acceptor, targets);
}
