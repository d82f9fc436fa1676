/**
 * `POST /v1/continue_inspection` (API 1.84): where an in-band inspection ramdisk sends what it
 * found. Ironic finds the node by its ports' MACs, its BMC addresses or the `node_uuid` the
 * ramdisk knows, and accepts the data only for a node in `inspect wait`.
 *
 * Galvanic's inspect interfaces are all out-of-band (redfish, fake): none waits for a ramdisk,
 * so no node is ever in `inspect wait` because of an inspection and the BMC address cache that
 * Ironic fills when one starts is never filled. Every lookup therefore ends as Ironic's does
 * when no node waits: 404 "Resource could not be found.", the same message whatever the cause,
 * so that the endpoint does not disclose which nodes exist ([auto_discovery] is not offered).
 */
import type { FastifyInstance } from 'fastify';
import { InvalidParameterValue, NotFoundError, ResourceNotFound } from '../common/errors.js';
import { getNode, getNodeById } from '../db/nodes.js';
import { nodeIdsByPortAddresses } from '../db/ports.js';
import { ProvisionState } from '../common/states.js';
import type { ApiDeps } from './deps.js';
import { isUuid } from './body.js';
import type { Query } from './query.js';

/** Ironic's is_valid_mac: six colon-separated octets. */
const MAC_RE = /^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/i;

const notFound = () => new ResourceNotFound('Resource could not be found.');

function schemaError(message: string): InvalidParameterValue {
  return new InvalidParameterValue(`Schema error for data: ${message}`);
}

const pyType = (v: unknown): string => (v === null ? 'None' : typeof v === 'string' ? `'${v}'` : JSON.stringify(v));

/** Ironic's minimal acceptable inventory (ramdisk.py DATA_VALIDATOR), with jsonschema's messages. */
function checkData(data: unknown): { inventory: Record<string, unknown> } {
  if (data === undefined) data = {};
  if (typeof data !== 'object' || data === null || Array.isArray(data)) throw schemaError(`${pyType(data)} is not of type 'object'`);
  const inventory = (data as Record<string, unknown>).inventory;
  if (inventory === undefined) throw schemaError("'inventory' is a required property");
  if (typeof inventory !== 'object' || inventory === null || Array.isArray(inventory)) throw schemaError(`${pyType(inventory)} is not of type 'object'`);
  const inv = inventory as Record<string, unknown>;
  for (const key of ['bmc_address', 'bmc_v6address']) {
    if (inv[key] !== undefined && inv[key] !== null && typeof inv[key] !== 'string') throw schemaError(`${pyType(inv[key])} is not of type 'string', 'null'`);
  }
  const interfaces = inv.interfaces;
  if (interfaces === undefined) throw schemaError("'interfaces' is a required property");
  if (!Array.isArray(interfaces)) throw schemaError(`${pyType(interfaces)} is not of type 'array'`);
  if (interfaces.length === 0) throw schemaError('[] should be non-empty');
  for (const iface of interfaces) {
    if (typeof iface !== 'object' || iface === null || Array.isArray(iface)) throw schemaError(`${pyType(iface)} is not of type 'object'`);
    const mac = (iface as Record<string, unknown>).mac_address;
    if (mac === undefined) throw schemaError("'mac_address' is a required property");
    if (typeof mac !== 'string') throw schemaError(`${pyType(mac)} is not of type 'string'`);
  }
  return { inventory: inv };
}

export function registerInspectionRoutes(app: FastifyInstance, deps: ApiDeps): void {
  const { db } = deps;

  app.post('/v1/continue_inspection', async (req) => {
    const q = req.query as Query;
    const extra = Object.keys(q).filter((k) => k !== 'node_uuid');
    if (extra.length) throw new InvalidParameterValue(`Unexpected arguments: ${extra.join(', ')}`);
    const { inventory } = checkData(req.body);
    const nodeUuid = q.node_uuid;
    if (Array.isArray(nodeUuid) || (nodeUuid !== undefined && !isUuid(nodeUuid))) {
      throw new InvalidParameterValue(`Expected UUID for node_uuid: ${String(nodeUuid)}`);
    }
    // 1.1 is let through too, as Ironic does for ramdisks written for ironic-inspector.
    const v = req.apiVersion;
    if (!(v.atLeast(84) || v.minor === 1) || (nodeUuid && !v.atLeast(84))) {
      throw new ResourceNotFound('API version 1.84 or newer is required');
    }
    const macs = (inventory.interfaces as Array<{ mac_address: string }>)
      .map((i) => i.mac_address.toLowerCase()).filter((m) => MAC_RE.test(m));
    const bmc = [inventory.bmc_address, inventory.bmc_v6address].filter((a) => typeof a === 'string' && a !== '');
    if (macs.length === 0 && bmc.length === 0 && !nodeUuid) throw new InvalidParameterValue('No lookup information provided');

    let node;
    if (nodeUuid) {
      try {
        node = await getNode(db, nodeUuid);
      } catch (err) {
        if (err instanceof NotFoundError) throw notFound();
        throw err;
      }
    }
    if (macs.length) {
      const ids = await nodeIdsByPortAddresses(db, macs);
      // MACs of several nodes, or of another node than the one named: a conflict Ironic refuses.
      if (ids.length > 1) throw notFound();
      if (ids.length === 1) {
        if (node && node.id !== ids[0]) throw notFound();
        node ??= await getNodeById(db, ids[0]);
      }
    }
    if (node && node.provisionState !== ProvisionState.INSPECTWAIT) throw notFound();
    // Neither the BMC addresses (cached only when an in-band inspection starts) nor discovery can
    // find a node; a node in `inspect wait` has no in-band inspect interface to take the data.
    throw notFound();
  });
}
