/**
 * `POST /v1/continue_inspection` (API 1.84; 1.1 too, for ramdisks written for
 * ironic-inspector): where the agent booted for an in-band inspection sends what it found.
 * Ironic finds the node by its ports' MACs or the `node_uuid` the ramdisk knows, and accepts
 * the data only for a node in `inspect wait`; any failure to find one is the same 404
 * "Resource could not be found.", so that the endpoint does not disclose which nodes exist
 * ([auto_discovery] is not offered). An accepted inventory moves the node to `inspecting` and
 * queues its processing for the node's conductor; the answer is 202 with the lookup body
 * (1.84) or `{"uuid": …}` (the old style).
 *
 * The lookup by BMC address that Ironic adds is left out: it only finds nodes whose BMC is not
 * on a loopback address, and the ports created from the BMC's MACs before the agent boots
 * ([inspector] pre_create_ports) find the node.
 */
import type { FastifyInstance } from 'fastify';
import { InvalidParameterValue, NotFoundError, ResourceNotFound } from '../common/errors.js';
import { getNode, updateNode } from '../db/nodes.js';
import { INTENT_CHANNEL, enqueueIntents, handToWaitingStep, intentWakePayload } from '../db/intents.js';
import { withTransaction } from '../db/transaction.js';
import type { IntentAcceptor } from './intents.js';
import { baseUrl } from './links.js';
import { MASK } from '../common/masking.js';
import { lookupBody } from './ramdisk.js';
import { mintAgentToken } from '../db/agent-tokens.js';
import { inspectorArgs } from './provision.js';
import { nodesByPortAddresses } from '../db/ports.js';
import { ProvisionState, eventChanges } from '../common/states.js';
import type { ApiDeps } from './deps.js';
import { isUuid } from './body.js';
import type { Query } from './query.js';
import { intentArgs, processInspectionArgs } from '../common/intent-kinds.js';

/** Ironic's is_valid_mac: six colon-separated octets. */
const MAC_RE = /^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/i;

const notFound = () => new ResourceNotFound('Resource could not be found.');

function schemaError(message: string): InvalidParameterValue {
  return new InvalidParameterValue(`Schema error for data: ${message}`);
}

const pyType = (v: unknown): string => (v === null ? 'None' : typeof v === 'string' ? `'${v}'` : JSON.stringify(v));

/** Ironic's minimal acceptable inventory (ramdisk.py DATA_VALIDATOR), with jsonschema's messages. */
function checkData(data: unknown): { inventory: Record<string, unknown>; pluginData: Record<string, unknown> } {
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
  const { inventory: _inv, ...pluginData } = data as Record<string, unknown>;
  return { inventory: inv, pluginData };
}

export function registerInspectionRoutes(app: FastifyInstance, deps: ApiDeps, acceptor: IntentAcceptor): void {
  const { db, config } = deps;

  app.post('/v1/continue_inspection', async (req, reply) => {
    const q = req.query as Query;
    const extra = Object.keys(q).filter((k) => k !== 'node_uuid');
    if (extra.length) throw new InvalidParameterValue(`Unexpected arguments: ${extra.join(', ')}`);
    const { inventory, pluginData } = checkData(req.body);
    const nodeUuid = q.node_uuid;
    if (Array.isArray(nodeUuid) || (nodeUuid !== undefined && !isUuid(nodeUuid))) {
      throw new InvalidParameterValue(`Expected UUID for node_uuid: ${String(nodeUuid)}`);
    }
    // 1.1 is let through too, as Ironic does for ramdisks written for ironic-inspector.
    const v = req.apiVersion;
    const newStyle = v.atLeast(84);
    if (!(newStyle || v.minor === 1) || (nodeUuid && !newStyle)) {
      throw new ResourceNotFound('API version 1.84 or newer is required');
    }
    const macs = (inventory.interfaces as Array<{ mac_address: string }>)
      .map((i) => i.mac_address.toLowerCase()).filter((m) => MAC_RE.test(m));
    const bmc = [inventory.bmc_address, inventory.bmc_v6address].filter((a) => typeof a === 'string' && a !== '');
    if (macs.length === 0 && bmc.length === 0 && !nodeUuid) throw new InvalidParameterValue('No lookup information provided');

    let found;
    if (nodeUuid) {
      try {
        found = await getNode(db, nodeUuid);
      } catch (err) {
        if (err instanceof NotFoundError) throw notFound();
        throw err;
      }
    }
    if (macs.length) {
      const byMac = await nodesByPortAddresses(db, macs);
      // MACs of several nodes, or of another node than the one named: a conflict Ironic refuses.
      if (byMac.length > 1) throw notFound();
      if (byMac.length === 1) {
        if (found && found.id !== byMac[0].id) throw notFound();
        found ??= byMac[0];
      }
    }
    if (!found || found.provisionState !== ProvisionState.INSPECTWAIT) throw notFound();

    // Ironic's resume (inspect wait → inspecting) and the processing handed to the conductor, at once.
    const { node, seq } = await withTransaction(db, async (trx) => {
      const current = await getNode(trx, found.uuid, { forUpdate: true });
      if (current.provisionState !== ProvisionState.INSPECTWAIT) throw notFound();
      const updated = await updateNode(trx, current.id, eventChanges(current, 'resume'));
      const data = { inventory, pluginData, inspector: inspectorArgs(config) };
      // A group operation's inspect step waits for this data: it processes it, and ends with it.
      const waiting = await handToWaitingStep(trx, current.id, data);
      if (waiting !== undefined) return { node: updated, seq: waiting };
      const [queued] = await enqueueIntents(trx, current.id, [{
        kind: 'provision',
        args: intentArgs('provision', processInspectionArgs(data)),
        maxAttempts: config.conductor.intent_max_attempts,
        requester: null,
        requestId: req.id,
      }]);
      return { node: updated, seq: queued.seq };
    });
    acceptor.wake.notify(INTENT_CHANNEL, intentWakePayload({ nodeUuid: node.uuid, seq }));
    reply.code(202);
    if (!newStyle) return { uuid: node.uuid };
    // Ironic's get_node_with_token: the agent that inspects gets its token here (later lookups
    // see `******`), even while a conductor holds the node: its data was taken above, and an
    // agent that could post it booted after the conductor's last reboot of the node.
    const token = (await mintAgentToken(db, node.id)) ?? MASK;
    return lookupBody(node, token, baseUrl(req, config.api.public_endpoint), config.api.ramdisk_heartbeat_timeout);
  });
}
