import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { randomUUID } from 'node:crypto';
import {
  ChassisNotFound, InterfaceNotFoundInEntrypoint, InvalidParameterValue, MissingParameterValue, PatchError, InvalidState, NodeLocked,
  NotAcceptable, NodeAssociated, NodeProtected, ReferencedResourceNotFound, ResourceNotFound,
} from '../common/errors.js';
import { getChassis } from '../db/chassis.js';
import { DELETE_ALLOWED_STATES, ProvisionState } from '../common/states.js';
import {
  createNode, getNode, getNodesByIds, listNodeStamps, maintenanceChanges, updateNode, NODE_SORT_KEYS, type Node, type NodeChanges,
  type NodeFilters, type NodeStamp,
} from '../db/nodes.js';
import { INTERFACE_KINDS, type InterfaceKind } from '../drivers/interfaces.js';
import type { ApiDeps } from './deps.js';
import { baseUrl } from './links.js';
import { nodeView, parseFields, provisionStateForVersion } from './node-view.js';
import { NODE_FIELD_BY_NAME, DEFAULT_LIST_FIELDS } from './node-fields.js';
import { boolParam, limitParam, nextLink, param, sortParams, type Query } from './query.js';
import { checkFieldValue, checkFieldVersion, checkName, ironicBoolean, isUuid, requireObject } from './body.js';
import { noValidHost } from './drivers.js';
import { ConductorLocator } from './conductor-locator.js';
import { RenderedNodes } from './rendered-nodes.js';
import { traitsOfNode, traitsOfNodes } from '../db/traits.js';
import { deleteNodeIfUnreserved } from '../db/reservations.js';
import { TRAITS_VERSION } from './traits.js';
import { patchInstanceUuid } from './allocations.js';
import { checkNodeListQuery } from './list-gates.js';
import { bootNeedsPorts, describeNode, validateAll } from '../drivers/validate-node.js';
import { bootPort } from '../drivers/dhcp.js';
import { portsOfNode } from '../db/ports.js';
import { getInventory } from '../db/inventory.js';
import { childAndShardFilters, resolveParentNode } from './node-relations.js';
import { getNodeWithSuffix } from './json-suffix.js';
import { applyWholePatch, checkPatchOp, patchOps } from './resource.js';
import { pyRepr } from '../common/py-repr.js';

/** The node field holding each interface kind. */
export const INTERFACE_FIELDS = Object.fromEntries(
  INTERFACE_KINDS.map((k) => [k, `${k}Interface`]),
) as Record<InterfaceKind, `${InterfaceKind}Interface` & keyof NodeChanges>;

/** API field name → domain field name, for the writable fields. */
const WRITABLE: ReadonlyMap<string, keyof NodeChanges> = new Map([
  ['uuid', 'uuid'], ['name', 'name'], ['driver', 'driver'], ['driver_info', 'driverInfo'], ['properties', 'properties'],
  ['instance_info', 'instanceInfo'], ['instance_uuid', 'instanceUuid'], ['extra', 'extra'], ['chassis_uuid', 'chassisUuid'],
  ['resource_class', 'resourceClass'],
  ...INTERFACE_KINDS.map((k): [string, keyof NodeChanges] => [`${k}_interface`, INTERFACE_FIELDS[k]]),
  ['conductor_group', 'conductorGroup'], ['automated_clean', 'automatedClean'], ['protected', 'protected'],
  ['protected_reason', 'protectedReason'], ['owner', 'owner'], ['description', 'description'],
  ['retired', 'retired'], ['retired_reason', 'retiredReason'], ['lessee', 'lessee'], ['network_data', 'networkData'],
  ['disable_power_off', 'disablePowerOff'], ['maintenance', 'maintenance'], ['shard', 'shard'], ['parent_node', 'parentNode'],
]);

const LIST_HEAD = Buffer.from('{"nodes":[');
const LIST_TAIL = Buffer.from(']}');
const COMMA = Buffer.from(',');

function ident(req: FastifyRequest): string {
  return (req.params as { node: string }).node;
}

/** Ironic's REQUIRED_INT_PROPERTIES: properties a node may hold only as non-negative integers. */
const INT_PROPERTIES = ['local_gb', 'memory_mb'];

/** Whether Python's int(value) gives a non-negative integer: a number, a boolean, or a string of digits. */
function isNonNegativeInt(value: unknown): boolean {
  if (typeof value === 'boolean') return true;
  if (typeof value === 'number') return Number.isFinite(value) && Math.trunc(value) >= 0;
  return typeof value === 'string' && /^\s*\+?\d+(_\d+)*\s*$|^\s*-0+\s*$/.test(value);
}

/**
 * Ironic's Node._validate_property_values, run on every create and save: local_gb and
 * memory_mb, when present, must be non-negative integers (inspection writes them as strings).
 * @throws InvalidParameterValue
 */
function checkPropertyValues(nodeUuid: string, properties: Record<string, unknown> | undefined): void {
  if (!properties) return;
  const bad = INT_PROPERTIES.filter((p) => properties[p] !== undefined && properties[p] !== null && !isNonNegativeInt(properties[p]))
    .map((p) => `${p}=${typeof properties[p] === 'string' ? properties[p] : pyRepr(properties[p])}`);
  if (bad.length) {
    throw new InvalidParameterValue(`The following properties for node ${nodeUuid} should be non-negative integers, but provided values are: ${bad.join(', ')}`);
  }
}

/** Checks a node body's fields and converts them to domain changes. */
function toChanges(body: Record<string, unknown>, req: FastifyRequest, allowUuid: boolean): NodeChanges {
  const changes: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(body)) {
    const field = NODE_FIELD_BY_NAME.get(key);
    const target = WRITABLE.get(key);
    if (!field || !target || (key === 'uuid' && !allowUuid)) {
      if (field && !field.writable) throw new InvalidParameterValue(`'/${key}' is an internal attribute and can not be updated`);
      throw new InvalidParameterValue(`Schema error for node: Additional properties are not allowed ('${key}' was unexpected)`);
    }
    checkFieldVersion(field, req.apiVersion);
    checkFieldValue(field, value);
    if (key === 'name' && value !== null) checkName(value as string);
    if (key === 'conductor_group' && typeof value === 'string') {
      if (!/^[A-Za-z0-9_\-.]*$/.test(value)) throw new InvalidParameterValue(`Invalid conductor group ${value}: only letters, digits, "_", "-" and "." are allowed.`);
      changes[target] = value.toLowerCase();
      continue;
    }
    if (key === 'instance_uuid' && value !== null) changes[target] = (value as string).toLowerCase();
    else changes[target] = value;
  }
  return changes as NodeChanges;
}

export function registerNodeRoutes(app: FastifyInstance, deps: ApiDeps): void {
  const { db, config, registry } = deps;
  const base = (req: FastifyRequest) => baseUrl(req, config.api.public_endpoint);
  const rendered = new RenderedNodes(config.api.node_render_cache_bytes);
  const locator = new ConductorLocator(db, config.conductor.heartbeat_timeout);

  function resolveInterfaces(driver: string, changes: NodeChanges, conductorGroup: string): Record<InterfaceKind, string> {
    if (!registry.hardwareTypes().some((t) => t.name === driver)) throw noValidHost(driver, conductorGroup);
    const requested: Partial<Record<InterfaceKind, string | null>> = {};
    for (const kind of INTERFACE_KINDS) requested[kind] = changes[INTERFACE_FIELDS[kind]] as string | null | undefined;
    return registry.resolve(driver, requested);
  }

  /** Whether a view at this version and with these fields shows traits (read from their own table). */
  const showsTraits = (req: FastifyRequest, fields?: readonly string[]) =>
    req.apiVersion.atLeast(TRAITS_VERSION) && (fields === undefined || fields.includes('traits'));

  async function view(req: FastifyRequest, node: Node, fields?: readonly string[]) {
    await locator.refresh();
    const traits = showsTraits(req, fields) ? await traitsOfNode(db, node.id) : undefined;
    return nodeView(node, { base: base(req), version: req.apiVersion, fields, conductor: locator.conductorOf(node), traits });
  }

  /** A chassis a node body names must exist: 400 with Ironic's ChassisNotFound message when not. */
  async function checkChassis(uuid: string | null | undefined): Promise<void> {
    if (uuid === null || uuid === undefined) return;
    try {
      await getChassis(db, uuid);
    } catch (err) {
      if (err instanceof ChassisNotFound) throw new ReferencedResourceNotFound(err);
      throw err;
    }
  }

  /** `chassis` is set for `/v1/chassis/{uuid}/nodes`, which lists that chassis's nodes. */
  async function list(req: FastifyRequest, reply: FastifyReply, detailPath: boolean, chassis?: string) {
    const q = req.query as Query;
    const v = req.apiVersion;
    const fieldsRaw = param(q, 'fields');
    // /detail takes no `detail` (Ironic's detail() has no such argument); elsewhere it is gated.
    checkNodeListQuery(detailPath ? { ...q, detail: undefined } : q, v, fieldsRaw);
    const detail = detailPath || boolParam(q, 'detail') === true;
    if (detail && fieldsRaw !== undefined) throw new InvalidParameterValue('Can not specify ?detail=True and fields in the same request.');
    const fields = parseFields(fieldsRaw, v) ?? (detail ? undefined : DEFAULT_LIST_FIELDS);
    const limit = limitParam(q, config.api.max_limit);
    const sort = sortParams(q, NODE_SORT_KEYS, 'nodes');
    const markerIdent = param(q, 'marker');
    if (markerIdent !== undefined && !isUuid(markerIdent)) throw new InvalidParameterValue(`Expected UUID for marker: ${markerIdent}`);
    const marker = markerIdent !== undefined ? await getNode(db, markerIdent) : undefined;
    const filters: NodeFilters = {
      driver: param(q, 'driver'),
      provisionState: param(q, 'provision_state'),
      maintenance: boolParam(q, 'maintenance'),
      associated: boolParam(q, 'associated'),
      owner: param(q, 'owner'),
      lessee: param(q, 'lessee'),
      conductorGroup: param(q, 'conductor_group'),
      resourceClass: param(q, 'resource_class'),
      fault: param(q, 'fault'),
      retired: boolParam(q, 'retired'),
      descriptionContains: param(q, 'description_contains'),
      ...childAndShardFilters(q),
    };
    const known = new Set(['detail', 'fields', 'limit', 'marker', 'sort_key', 'sort_dir', 'driver', 'provision_state',
      'maintenance', 'associated', 'owner', 'lessee', 'conductor_group', 'resource_class', 'fault', 'retired',
      'description_contains', 'instance_uuid', 'conductor', 'shard', 'sharded', 'include_children', 'parent_node', ...(chassis === undefined ? ['chassis_uuid'] : [])]);
    const unknown = Object.keys(q).filter((k) => !known.has(k));
    if (unknown.length) throw new InvalidParameterValue(`Unknown query parameter(s): ${unknown.join(', ')}`);
    const instanceUuid = param(q, 'instance_uuid');
    if (instanceUuid !== undefined && !isUuid(instanceUuid)) throw new InvalidParameterValue(`Invalid UUID for instance_uuid: ${instanceUuid}`);
    const chassisUuid = chassis ?? param(q, 'chassis_uuid');
    if (chassisUuid !== undefined) {
      if (!isUuid(chassisUuid)) throw new InvalidParameterValue(`Expected UUID for chassis_uuid: ${chassisUuid}`);
      // A chassis that does not exist is a 404, as in Ironic, not an empty list.
      filters.chassisUuid = (await getChassis(db, chassisUuid)).uuid;
    }
    // Filtered in SQL, not after the page is cut: a match past the first `limit` rows counts too.
    // The page is read as stamps first; only nodes not already rendered for this view are read
    // in full, and the body is put together from the rendered pieces.
    const conductor = param(q, 'conductor');
    const page = await listNodeStamps(db, { ...filters, instanceUuid: instanceUuid?.toLowerCase() }, { limit, marker, ...sort });
    const b = base(req);
    await locator.refresh();
    // As in Ironic, the managing conductor filters the page read, not the query: it is the
    // hash ring's answer, not a column. `next` follows the page read, so no node is skipped.
    const stamps = conductor === undefined ? page : page.filter((s) => locator.conductorOf(s) === conductor);
    // The managing conductor is part of the view: a node moves when the ring changes.
    const viewKey = (n: NodeStamp) => `${v.minor}|${b}|${fields?.join(',') ?? '*'}|${locator.conductorOf(n) ?? ''}`;
    let traits = new Map<number, string[]>();
    const toJson = (n: Node) => nodeView(n, { base: b, version: v, fields, conductor: locator.conductorOf(n), traits: traits.get(n.id) });
    const pieces: Array<Buffer | undefined> = stamps.map((s) => rendered.get(s, viewKey(s)));
    const missing = stamps.filter((_, i) => pieces[i] === undefined);
    if (missing.length > 0) {
      const ids = missing.map((s) => s.id);
      // A change of traits bumps the node's version, so a cached piece never shows old ones.
      if (showsTraits(req, fields)) traits = await traitsOfNodes(db, ids);
      const fresh = new Map((await getNodesByIds(db, ids)).map((n) => [n.id, n]));
      stamps.forEach((s, i) => {
        const node = fresh.get(s.id);
        // A node deleted between the two reads is left out, as if the list had been read later.
        if (pieces[i] === undefined && node) pieces[i] = rendered.render(node, viewKey(node), toJson);
      });
    }
    const parts: Buffer[] = [LIST_HEAD];
    for (const piece of pieces) {
      if (piece === undefined) continue;
      if (parts.length > 1) parts.push(COMMA);
      parts.push(piece);
    }
    const collection = chassis === undefined ? 'nodes' : `chassis/${chassis}/nodes`;
    const next = nextLink(b, detailPath ? `${collection}/detail` : collection, q, page.length, limit, page.at(-1)?.uuid);
    parts.push(next ? Buffer.from(`],"next":${JSON.stringify(next)}}`) : LIST_TAIL);
    reply.type('application/json; charset=utf-8');
    return Buffer.concat(parts);
  }

  app.get('/v1/nodes', (req, reply) => list(req, reply, false));
  app.get('/v1/nodes/detail', (req, reply) => list(req, reply, true));
  app.get('/v1/chassis/:chassis/nodes', (req, reply) => list(req, reply, false, (req.params as { chassis: string }).chassis));
  app.get('/v1/chassis/:chassis/nodes/detail', (req, reply) => list(req, reply, true, (req.params as { chassis: string }).chassis));

  app.get('/v1/nodes/:node', async (req, reply) => {
    const fields = parseFields(param(req.query as Query, 'fields'), req.apiVersion);
    const node = await getNodeWithSuffix(db, req, ident(req));
    // The version a later PATCH can send back in If-Match.
    reply.header('ETag', `"${node.version}"`);
    return view(req, node, fields);
  });

  app.post('/v1/nodes', async (req, reply) => {
    const body = requireObject(req.body, 'node');
    if (body.driver === undefined) throw new MissingParameterValue(`Schema error for node: 'driver' is a required property`);
    const changes = toChanges(body, req, true);
    // The UUID chosen here, as Ironic's API does, so that a refusal can name the node.
    changes.uuid ??= randomUUID();
    checkPropertyValues(changes.uuid, changes.properties as Record<string, unknown> | undefined);
    await checkChassis(changes.chassisUuid);
    if (changes.parentNode) changes.parentNode = await resolveParentNode(db, changes.parentNode, changes.owner ?? null);
    const group = changes.conductorGroup ?? '';
    const ifaces = resolveInterfaces(changes.driver as string, changes, group);
    const node = await createNode(db, {
      ...changes,
      driver: changes.driver as string,
      ...interfaceChanges(ifaces),
      // Before 1.11 nodes were born available; since then in enroll.
      provisionState: req.apiVersion.atLeast(11) ? ProvisionState.ENROLL : ProvisionState.AVAILABLE,
    });
    reply.code(201).header('Location', `${base(req)}/v1/nodes/${node.uuid}`).header('ETag', `"${node.version}"`);
    return view(req, node);
  });

  app.patch('/v1/nodes/:node', async (req, reply) => {
    const ops = patchOps(req.body);
    const resetInterfaces = boolParam(req.query as Query, 'reset_interfaces');
    if (resetInterfaces !== undefined && !req.apiVersion.atLeast(45)) throw new NotAcceptable('reset_interfaces requires API version 1.45 or later.');
    for (const [i, raw] of ops.entries()) {
      const { op: kind, path } = checkPatchOp(raw, i);
      const root = path.split('/')[1].replace(/~1/g, '/').replace(/~0/g, '~');
      const field = NODE_FIELD_BY_NAME.get(root);
      if (!field) throw new PatchError(`Invalid patch path ${path}: there is no node field "${root}".`);
      if (!WRITABLE.has(root) || root === 'uuid') throw new PatchError(`'/${root}' is an internal attribute and can not be updated`);
      checkFieldVersion(field, req.apiVersion);
      // Removing a non-nullable boolean (`node unset --protected`/`--retired`) sets it false, as in Ironic.
      if (kind === 'remove' && path === `/${root}` && field.nullable === false && field.type !== 'object' && field.type !== 'boolean') {
        throw new PatchError(`'/${root}' is a mandatory attribute and can not be removed`);
      }
    }
    if (resetInterfaces && !ops.some((op) => (op as { path: string }).path === '/driver' && (op as { op: string }).op !== 'remove')) {
      throw new InvalidParameterValue("The reset_interfaces parameter can only be used when changing the node's driver.");
    }
    const current = await getNodeWithSuffix(db, req, ident(req));
    // Replaced on success; on a 412 it tells the client which version it missed.
    reply.header('ETag', `"${current.version}"`);
    const ifMatch = req.headers['if-match'];
    const expectedVersion = ifMatch === undefined || ifMatch === '*' ? undefined : Number(String(ifMatch).replace(/^W\//, '').replace(/"/g, ''));
    if (expectedVersion !== undefined && !Number.isInteger(expectedVersion)) throw new InvalidParameterValue(`Invalid If-Match header: ${String(ifMatch)}`);

    // The document the patch applies to: writable fields, secrets unmasked.
    const doc: Record<string, unknown> = {};
    for (const [apiName, domain] of WRITABLE) doc[apiName] = current[domain as keyof Node] ?? null;
    const patched = applyWholePatch(doc, ops);
    // A removed top-level object field means "empty", a removed scalar means null.
    const body: Record<string, unknown> = {};
    for (const [apiName] of WRITABLE) {
      const field = NODE_FIELD_BY_NAME.get(apiName)!;
      let value = patched[apiName];
      if (value === undefined) value = field.type === 'object' ? {} : field.type === 'boolean' && field.nullable === false ? false : null;
      if (field.type === 'boolean') value = ironicBoolean(value);
      if (JSON.stringify(value) !== JSON.stringify(doc[apiName])) body[apiName] = value;
    }
    const changes = toChanges(body, req, false);
    if (changes.parentNode) changes.parentNode = await resolveParentNode(db, changes.parentNode, current.owner);
    if ('chassisUuid' in changes) {
      // Taking a node out of its chassis came with 1.25; before, only moving it was possible.
      if (changes.chassisUuid === null && current.chassisUuid !== null && !req.apiVersion.atLeast(25)) throw new NotAcceptable('Request not acceptable.');
      await checkChassis(changes.chassisUuid);
    }
    const driver = changes.driver ?? current.driver;
    if (changes.driver !== undefined || Object.values(INTERFACE_FIELDS).some((f) => f in changes)) {
      const requested: NodeChanges = {};
      for (const f of Object.values(INTERFACE_FIELDS)) {
        // A driver change keeps explicit interfaces unless reset_interfaces says otherwise.
        requested[f] = f in changes ? changes[f] : resetInterfaces ? null : current[f];
      }
      let ifaces: Record<InterfaceKind, string>;
      try {
        ifaces = resolveInterfaces(driver, requested, changes.conductorGroup ?? current.conductorGroup);
      } catch (err) {
        // As in Ironic, a new driver does not silently reset the interfaces it cannot use: say how to.
        const kept = resetInterfaces ? [] : Object.entries(INTERFACE_FIELDS).filter(([, f]) => !(f in changes)).map(([k]) => `${k}_interface`);
        if (changes.driver === undefined || kept.length === 0 || !(err instanceof InterfaceNotFoundInEntrypoint)) throw err;
        throw new InterfaceNotFoundInEntrypoint(`${err.message} Changing the driver keeps the node's ${kept.join(', ')}: set the incompatible ones in the same request, or pass reset_interfaces=True (baremetal node set --reset-interfaces) to reset them to the new hardware type's defaults.`);
      }
      Object.assign(changes, interfaceChanges(ifaces));
    }
    checkUpdateRules(current, changes);
    if ('properties' in changes) checkPropertyValues(current.uuid, changes.properties as Record<string, unknown>);
    // Older clients (Metal3, tempest) set maintenance by PATCH: the same rule as the endpoint's.
    if (changes.maintenance !== undefined) Object.assign(changes, maintenanceChanges(changes.maintenance));
    const opts = { expectedVersion, maintenanceBumpsAccess: config.console.maintenance_closes_console };
    const updated = Object.keys(changes).length === 0 && expectedVersion === undefined
      ? current
      : 'instanceUuid' in changes
        ? await patchInstanceUuid(db, current, changes, opts)
        : await updateNode(db, current.id, changes, opts);
    reply.header('ETag', `"${updated.version}"`);
    return view(req, updated);
  });

  // A node is often held for a moment by a periodic task (power sync, sensors): like Ironic's
  // conductor, wait for it node_locked_retry_attempts times, node_locked_retry_interval apart.
  app.delete('/v1/nodes/:node', async (req, reply) => {
    const { node_locked_retry_attempts: attempts, node_locked_retry_interval: interval } = config.conductor;
    for (let attempt = 1; ; attempt++) {
      const node = await getNodeWithSuffix(db, req, ident(req));
      if (node.reservation === null) {
        // Ironic's destroy_node, in its order: a node in maintenance may go whatever its state
        // (a hopelessly broken one); any other must not hold an instance, nor be in the middle
        // of something or failed with a previous tenant's data on its disks.
        if (!node.maintenance && node.instanceUuid !== null) throw new NodeAssociated(node.uuid, node.instanceUuid);
        if (node.protected) throw new NodeProtected(node.uuid);
        const allowed = config.conductor.allow_deleting_available_nodes ? [...DELETE_ALLOWED_STATES, ProvisionState.AVAILABLE] : DELETE_ALLOWED_STATES;
        if (!node.maintenance && !allowed.includes(node.provisionState)) {
          throw new InvalidState(`Can not delete node "${node.uuid}" while it is in provision state "${node.provisionState}". Valid provision states to perform deletion are: "(${allowed.map((s) => `'${s}'`).join(', ')})", or set the node into maintenance mode`);
        }
        // Deleted only as checked: a task that took it, or a change, since the read means read again.
        if (await deleteNodeIfUnreserved(db, node.id, node.version)) return reply.code(204).send();
      }
      if (attempt >= attempts) throw new NodeLocked(node.uuid, node.reservation ?? 'another request');
      if (node.reservation !== null) await new Promise((r) => setTimeout(r, interval * 1000));
    }
  });

  app.get('/v1/nodes/:node/states', async (req) => {
    const n = await getNode(db, ident(req));
    const v = req.apiVersion;
    const out: Record<string, unknown> = {
      console_enabled: n.consoleEnabled,
      last_error: n.lastError,
      power_state: n.powerState,
      provision_state: provisionStateForVersion(n.provisionState, v),
      provision_updated_at: n.provisionUpdatedAt ? n.provisionUpdatedAt.toISOString().replace('Z', '+00:00') : null,
      target_power_state: n.targetPowerState,
      target_provision_state: n.targetProvisionState,
    };
    if (v.atLeast(12)) Object.assign(out, { raid_config: n.raidConfig ?? {}, target_raid_config: n.targetRaidConfig ?? {} });
    if (v.atLeast(75)) Object.assign(out, { boot_mode: null, secure_boot: null });
    return out;
  });

  app.get('/v1/nodes/:node/validate', async (req) => {
    const n = await getNode(db, ident(req));
    const ports = bootNeedsPorts(registry, n) ? (await portsOfNode(db, n.id)).map(bootPort) : undefined;
    return validateAll(registry, describeNode(n, ports));
  });

  app.get('/v1/nodes/:node/inventory', async (req) => {
    if (!req.apiVersion.atLeast(81)) throw new ResourceNotFound('The resource could not be found.');
    const n = await getNode(db, ident(req));
    const inv = await getInventory(db, n.id, n.uuid);
    return { inventory: inv.inventory, plugin_data: inv.pluginData };
  });
}

/** Where a node's interfaces and resource class may change (Ironic's allowed_update_states). */
const UPDATE_STATES = ['enroll', 'inspecting', 'inspect wait', 'manageable', 'available'];

/**
 * The rules Ironic's conductor applies to an update before writing it (update_node):
 * protection only while deployed, retirement not while available, interfaces only in the
 * update states or in maintenance, an instance_uuid never overwritten. Adjusts `changes`
 * (clearing a reason with its flag) as Ironic does.
 */
function checkUpdateRules(current: Node, changes: NodeChanges): void {
  const state = current.provisionState;
  if ('protected' in changes) {
    if (!changes.protected) changes.protectedReason = null;
    else if (state !== 'active' && state !== 'rescue') {
      throw new InvalidState(`Node ${current.uuid} can only be made protected in provision states 'active' or 'rescue', the current state is '${state}'`);
    }
  }
  const isProtected = changes.protected ?? current.protected;
  if ('protectedReason' in changes && changes.protectedReason && !isProtected) {
    throw new InvalidParameterValue('The protected_reason field can only be set when protected is True');
  }
  if ('retired' in changes) {
    if (!changes.retired) changes.retiredReason = null;
    else if (state === 'available') {
      throw new InvalidState(`Node ${current.uuid} can not have 'retired' set in provision state 'available', the current state is '${state}'`);
    }
  }
  const isRetired = changes.retired ?? current.retired;
  if ('retiredReason' in changes && changes.retiredReason && !isRetired) {
    throw new InvalidParameterValue('The retired_reason field can only be set when retired is True');
  }
  const allowed = UPDATE_STATES.includes(state);
  for (const kind of INTERFACE_KINDS) {
    const f = INTERFACE_FIELDS[kind];
    if (f in changes && changes[f] !== current[f] && !allowed && !current.maintenance) {
      throw new InvalidState(`Node ${current.uuid} can not have ${kind}_interface updated unless it is in one of allowed (${UPDATE_STATES.join(', ')}) states or in maintenance mode. Current state is '${state}'.`);
    }
  }
  if (changes.instanceUuid && current.instanceUuid && changes.instanceUuid !== current.instanceUuid) {
    throw new InvalidState(`Node ${current.uuid} is associated with instance ${current.instanceUuid}.`);
  }
  if ('resourceClass' in changes && current.resourceClass && !allowed) {
    throw new InvalidState(`Node ${current.uuid} can not have resource_class updated unless it is in one of allowed (${UPDATE_STATES.join(', ')}) states. Current state is '${state}'.`);
  }
}

/** Resolved interfaces as node changes. */
function interfaceChanges(ifaces: Record<InterfaceKind, string>): NodeChanges {
  const out: Record<string, string> = {};
  for (const kind of INTERFACE_KINDS) out[INTERFACE_FIELDS[kind]] = ifaces[kind];
  return out as NodeChanges;
}

/** Request ids as Ironic sends them. */
export function requestId(): string {
  return `req-${randomUUID()}`;
}
