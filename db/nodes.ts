import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { preparedRaw } from './prepared.js';
import {
  ChassisNotFound, DuplicateName, NodeAlreadyExists, NodeNotFound, Conflict, PreconditionFailed, ReferencedResourceNotFound,
} from '../common/errors.js';
import { RowMapper } from './rows.js';
import { applyMarkerPage, whereDefined } from './table.js';
import { isUniqueViolation, pgError } from './transaction.js';
import { SYNC_EXCLUDED_STATES, WAIT_STATES } from '../common/states.js';

/** A node as the rest of Galvanic sees it. */
export interface Node {
  id: number;
  uuid: string;
  name: string | null;
  driver: string;
  powerInterface: string | null;
  managementInterface: string | null;
  consoleInterface: string | null;
  biosInterface: string | null;
  bootInterface: string | null;
  deployInterface: string | null;
  firmwareInterface: string | null;
  inspectInterface: string | null;
  networkInterface: string | null;
  raidInterface: string | null;
  rescueInterface: string | null;
  storageInterface: string | null;
  vendorInterface: string | null;
  driverInfo: Record<string, unknown>;
  driverInternalInfo: Record<string, unknown>;
  properties: Record<string, unknown>;
  instanceInfo: Record<string, unknown>;
  extra: Record<string, unknown>;
  /** The RAID configuration asked for (PUT …/states/raid) and the one the conductor applied. */
  targetRaidConfig: Record<string, unknown>;
  raidConfig: Record<string, unknown>;
  instanceUuid: string | null;
  description: string | null;
  provisionState: string;
  targetProvisionState: string | null;
  provisionUpdatedAt: Date | null;
  powerState: string | null;
  targetPowerState: string | null;
  maintenance: boolean;
  maintenanceReason: string | null;
  fault: string | null;
  lastError: string | null;
  reservation: string | null;
  conductorGroup: string;
  owner: string | null;
  lessee: string | null;
  resourceClass: string | null;
  consoleEnabled: boolean;
  automatedClean: boolean | null;
  protected: boolean;
  protectedReason: string | null;
  retired: boolean;
  retiredReason: string | null;
  chassisUuid: string | null;
  shard: string | null;
  parentNode: string | null;
  inspectionStartedAt: Date | null;
  inspectionFinishedAt: Date | null;
  /** The allocation holding the node (its instance_uuid is then the allocation's UUID). */
  allocationId: number | null;
  /** The deploy step running now ({} when none), as Ironic shows it. */
  deployStep: Record<string, unknown>;
  cleanStep: Record<string, unknown>;
  /** The service step running now ({} when none). */
  serviceStep: Record<string, unknown>;
  networkData: Record<string, unknown>;
  disablePowerOff: boolean;
  version: number;
  accessEpoch: number;
  createdAt: Date;
  updatedAt: Date | null;
}

/** Fields a caller may set; the rest are managed here (ids, version, timestamps). */
export type NodeChanges = Partial<Omit<Node, 'id' | 'version' | 'accessEpoch' | 'createdAt' | 'updatedAt'>>;

const JSON_COLUMNS = [
  'driver_info', 'driver_internal_info', 'properties', 'instance_info', 'extra', 'deploy_step', 'clean_step', 'network_data',
  'target_raid_config', 'raid_config', 'service_step',
];
export const NODE_COLUMNS = [
  'id', 'uuid', 'name', 'driver', 'power_interface', 'management_interface', 'console_interface',
  'bios_interface', 'boot_interface', 'deploy_interface', 'firmware_interface', 'inspect_interface', 'network_interface',
  'raid_interface', 'rescue_interface', 'storage_interface', 'vendor_interface', 'disable_power_off',
  ...JSON_COLUMNS, 'instance_uuid', 'description', 'provision_state', 'target_provision_state',
  'provision_updated_at', 'power_state', 'target_power_state', 'maintenance', 'maintenance_reason',
  'fault', 'last_error', 'reservation', 'conductor_group', 'owner', 'lessee', 'resource_class',
  'console_enabled', 'automated_clean', 'protected', 'protected_reason', 'retired', 'retired_reason',
  'chassis_uuid', 'shard', 'parent_node', 'inspection_started_at', 'inspection_finished_at',
  'allocation_id', 'version', 'access_epoch', 'created_at', 'updated_at',
] as const;

export const nodeMapper = new RowMapper<Node>(NODE_COLUMNS, JSON_COLUMNS);

/** Changes to these fields change who may reach the node: they bump `access_epoch`. */
const ACCESS_FIELDS = ['owner', 'lessee'] as const;

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function isUuid(value: string): boolean {
  return UUID_RE.test(value);
}

function translateWriteError(err: unknown, values: NodeChanges): never {
  if (isUniqueViolation(err, 'nodes_name_unique')) throw new DuplicateName(String(values.name));
  if (isUniqueViolation(err, 'nodes_uuid_unique')) throw new NodeAlreadyExists(String(values.uuid));
  if (isUniqueViolation(err, 'nodes_instance_uuid_unique')) {
    throw new Conflict(`Instance ${String(values.instanceUuid)} is already associated with a node.`);
  }
  // The API looks the chassis up first; this settles a race with its deletion.
  if (pgError(err)?.constraint === 'nodes_chassis_uuid_foreign') {
    throw new ReferencedResourceNotFound(new ChassisNotFound(String(values.chassisUuid)));
  }
  throw err;
}

export async function createNode(db: Knex, values: NodeChanges & { driver: string; provisionState: string }): Promise<Node> {
  const row = nodeMapper.toRow({ ...values, uuid: values.uuid ?? randomUUID() });
  try {
    const [created] = await db('nodes').insert(row).returning('*');
    return nodeMapper.fromRow(created);
  } catch (err) {
    translateWriteError(err, values);
  }
}

/** Finds a node by UUID or name; `forUpdate` (`forShare`) takes the row lock (shared) inside a transaction. */
export async function getNode(db: Knex, ident: string, opts: { forUpdate?: boolean; forShare?: boolean } = {}): Promise<Node> {
  const node = await findNode(db, ident, opts);
  if (!node) throw new NodeNotFound(ident);
  return node;
}

export async function findNode(db: Knex, ident: string, opts: { forUpdate?: boolean; forShare?: boolean } = {}): Promise<Node | undefined> {
  const q = db('nodes').where(isUuid(ident) ? 'uuid' : 'name', ident).first();
  if (opts.forUpdate) q.forUpdate();
  else if (opts.forShare) q.forShare();
  const row = await q;
  return row ? nodeMapper.fromRow(row) : undefined;
}

/** Node identifiers split into the UUIDs (lowercased) and the names among them, each once. */
export function splitIdents(idents: readonly string[]): { uuids: string[]; names: string[] } {
  return { uuids: [...new Set(idents.filter(isUuid).map((u) => u.toLowerCase()))], names: [...new Set(idents.filter((i) => !isUuid(i)))] };
}

/**
 * `nodes.id = ANY(...)` for the nodes named by UUID or name among `idents`, with its bindings:
 * the ids first (an InitPlan, each kind through its unique index), then each node by its key.
 * With `uuid = ANY(..) OR name = ANY(..)` in the scan, a planner that takes the table for one
 * row (never analyzed: a fleet enrolled since the last autoanalyze, or autovacuum off) read
 * every node in id order. A kind none of `idents` uses is left out: its empty test was served
 * by reading whichever index was smallest.
 */
export function nodeIdsNamed(idents: readonly string[]): { sql: string; bindings: string[][] } {
  const { uuids, names } = splitIdents(idents);
  const parts: string[] = [];
  const bindings: string[][] = [];
  if (uuids.length) {
    parts.push('SELECT u.id FROM nodes u WHERE u.uuid = ANY(?::uuid[])');
    bindings.push(uuids);
  }
  if (names.length) {
    parts.push('SELECT m.id FROM nodes m WHERE m.name = ANY(?::text[])');
    bindings.push(names);
  }
  return { sql: `nodes.id = ANY(ARRAY(${parts.join(' UNION ALL ') || 'SELECT NULL::int'}))`, bindings };
}

/**
 * Locks (FOR UPDATE, in id order) the nodes named by UUID or name among `idents` and returns
 * them; idents that name no node are left out.
 */
export async function lockNodesByIdent(trx: Knex.Transaction, idents: readonly string[]): Promise<Node[]> {
  const named = nodeIdsNamed(idents);
  const { rows } = await preparedRaw(trx, `SELECT * FROM nodes WHERE ${named.sql} ORDER BY id FOR UPDATE`, named.bindings);
  return (rows as Array<Record<string, unknown>>).map((r) => nodeMapper.fromRow(r));
}

export async function getNodeById(db: Knex, id: number): Promise<Node> {
  const row = await db('nodes').where('id', id).first();
  if (!row) throw new NodeNotFound(String(id));
  return nodeMapper.fromRow(row);
}

export interface NodeFilters {
  driver?: string;
  provisionState?: string;
  maintenance?: boolean;
  associated?: boolean;
  owner?: string;
  lessee?: string;
  conductorGroup?: string;
  resourceClass?: string;
  fault?: string;
  retired?: boolean;
  descriptionContains?: string;
  instanceUuid?: string;
  chassisUuid?: string;
  /** Nodes in any of these shards. */
  shardIn?: readonly string[];
  /** Nodes with (true) or without (false) a shard. */
  sharded?: boolean;
  /** Children are left out unless asked for, or unless their parent is named (Ironic's rule). */
  includeChildren?: boolean;
  parentNode?: string;
}

export interface Page {
  limit: number;
  /** The last node of the previous page. */
  marker?: Node;
  sortKey: string;
  sortDir: 'asc' | 'desc';
}

/** Columns a client may sort by (Ironic's, minus JSON fields it also refuses). */
export const NODE_SORT_KEYS = new Set([
  'id', 'uuid', 'name', 'driver', 'provision_state', 'power_state', 'maintenance', 'created_at',
  'updated_at', 'provision_updated_at', 'conductor_group', 'owner', 'lessee', 'resource_class',
  'instance_uuid', 'target_provision_state', 'target_power_state', 'fault', 'reservation',
  'console_enabled', 'protected', 'retired', 'description', 'inspection_started_at',
  'inspection_finished_at', 'power_interface', 'management_interface', 'console_interface',
  'shard', 'parent_node',
]);

/** The filtered, sorted page of nodes, before any columns are chosen. */
function nodePage(db: Knex, filters: NodeFilters, page: Page): Knex.QueryBuilder {
  const q = whereDefined(db('nodes'), { driver: filters.driver, provision_state: filters.provisionState, maintenance: filters.maintenance });
  if (filters.associated !== undefined) {
    if (filters.associated) q.whereNotNull('instance_uuid');
    else q.whereNull('instance_uuid');
  }
  whereDefined(q, {
    owner: filters.owner, lessee: filters.lessee, conductor_group: filters.conductorGroup?.toLowerCase(),
    resource_class: filters.resourceClass, fault: filters.fault, retired: filters.retired,
    instance_uuid: filters.instanceUuid, chassis_uuid: filters.chassisUuid?.toLowerCase(),
  });
  if (filters.descriptionContains !== undefined) {
    q.whereRaw("description LIKE '%' || ? || '%'", [filters.descriptionContains]);
  }
  if (filters.shardIn !== undefined) q.whereIn('shard', filters.shardIn as string[]);
  if (filters.sharded !== undefined) {
    if (filters.sharded) q.whereNotNull('shard');
    else q.whereNull('shard');
  }
  if (!filters.includeChildren) {
    if (filters.parentNode !== undefined) q.where('parent_node', filters.parentNode);
    else q.whereNull('parent_node');
  }
  applyMarkerPage(db, 'nodes', nodeMapper, q, page);
  return q;
}

/**
 * What tells whether a copy of a node made earlier is still current: every change of a node
 * goes through updateNode and bumps `version`, except the reservation, which locks set and
 * clear on their own.
 */
export interface NodeStamp {
  id: number;
  uuid: string;
  version: number;
  reservation: string | null;
  /** Not part of the stamp proper; lets a caller place the node on its group's hash ring. */
  conductorGroup: string;
}

/** The stamps of a page of nodes, in page order: a narrow read for callers that cache nodes. */
export async function listNodeStamps(db: Knex, filters: NodeFilters, page: Page): Promise<NodeStamp[]> {
  const rows: NodeStamp[] = await nodePage(db, filters, page)
    .select('id', 'uuid', 'version', 'reservation', { conductorGroup: 'conductor_group' });
  return rows;
}

/** Nodes by id, in no particular order; ids that no longer exist are left out. */
export async function getNodesByIds(db: Knex, ids: readonly number[]): Promise<Node[]> {
  if (ids.length === 0) return [];
  const { rows } = await db.raw('SELECT * FROM nodes WHERE id = any(?::int[])', [ids as number[]]);
  return (rows as Array<Record<string, unknown>>).map((r: Record<string, unknown>) => nodeMapper.fromRow(r));
}

export interface UpdateOptions {
  /** Optimistic concurrency: fail with 412 unless the node is still at this version. */
  expectedVersion?: number;
  /** Whether putting the node in maintenance bumps `access_epoch` ([console] maintenance_closes_console); default yes. */
  maintenanceBumpsAccess?: boolean;
}

/** What every change of a node, one or many, is written by (see changeOf). */
export type AccessOptions = Pick<UpdateOptions, 'maintenanceBumpsAccess'>;

/**
 * What entering or leaving maintenance writes, however it is asked (the maintenance endpoint,
 * a PATCH of /maintenance): leaving clears the reason and the fault with it, as Ironic's
 * update_node does; entering sets the reason only when one is given. Entering also bumps
 * `access_epoch`, which `changeOf` decides for every writer.
 */
export function maintenanceChanges(maintenance: boolean, reason?: string | null): NodeChanges {
  if (!maintenance) return { maintenance: false, maintenanceReason: null, fault: null };
  return reason === undefined ? { maintenance: true } : { maintenance: true, maintenanceReason: reason };
}

/**
 * What a change of a node locked as `before` writes: the changed columns, and whether it
 * bumps `access_epoch` (which console tokens bind to): when owner or lessee change, the
 * console is disabled, or the node enters maintenance (unless the caller's config says
 * otherwise). Power and provision changes never bump it.
 */
function changeOf(before: LockedNodeState, changes: NodeChanges, opts: AccessOptions): { row: Record<string, unknown>; accessChanged: boolean } {
  const accessChanged = ACCESS_FIELDS.some((f) => f in changes && changes[f] !== before[f])
    || (changes.consoleEnabled === false && before.consoleEnabled)
    || (opts.maintenanceBumpsAccess !== false && changes.maintenance === true && !before.maintenance);
  return { row: nodeMapper.toRow(changes), accessChanged };
}

/**
 * Changes one node row: bumps `version` always, and `access_epoch` as `changeOf` says (the
 * rule updateLockedNodes shares; reservations alone change through db/reservations.ts). Takes
 * the row lock for the read-compare-write.
 */
export async function updateNode(db: Knex, id: number, changes: NodeChanges, opts: UpdateOptions = {}): Promise<Node> {
  const run = async (trx: Knex.Transaction): Promise<Node> => {
    const currentRow = await trx('nodes').where('id', id).forUpdate().first('*');
    if (!currentRow) throw new NodeNotFound(String(id));
    const current = nodeMapper.fromRow(currentRow);
    if (opts.expectedVersion !== undefined && current.version !== opts.expectedVersion) {
      throw new PreconditionFailed(`Node ${current.uuid} has changed since version ${opts.expectedVersion}; it is now at version ${current.version}.`);
    }
    const { row, accessChanged } = changeOf(current, changes, opts);
    row.version = trx.raw('version + 1');
    row.updated_at = trx.fn.now();
    if (accessChanged) row.access_epoch = trx.raw('access_epoch + 1');
    try {
      const [updated] = await trx('nodes').where('id', id).update(row).returning('*');
      return nodeMapper.fromRow(updated);
    } catch (err) {
      translateWriteError(err, changes);
    }
  };
  return db.isTransaction ? run(db as Knex.Transaction) : db.transaction(run);
}

/** What a change of a locked node depends on (see changeOf): a caller may read just these. */
export type LockedNodeState = Pick<Node, 'id' | 'version' | 'accessEpoch' | 'owner' | 'lessee' | 'consoleEnabled' | 'maintenance' | 'provisionState' | 'targetProvisionState'>;
export const LOCKED_STATE_COLUMNS = ['id', 'version', 'access_epoch', 'owner', 'lessee', 'console_enabled', 'maintenance', 'provision_state', 'target_provision_state'] as const;

/** A change of a node whose row the transaction already holds locked, read as `before`. */
export interface LockedNodeChange {
  before: LockedNodeState;
  changes: NodeChanges;
}

/** The changes of one node as the values of its row in a grouped UPDATE (see groupLockedChanges). */
export interface LockedChangeGroup {
  /** The columns the group's statement sets (with `id`), sorted and joined: the group's key. */
  key: string;
  members: Array<{ index: number; values: Record<string, unknown> }>;
}

/**
 * updateNode's rules for nodes whose rows are (or are about to be) locked as `before`: each
 * change as the values of its row, grouped by the set of columns it writes (one statement per
 * group). The rows are locked: the new version and epoch are known exactly. JSON columns go in
 * as JSON values (the document is itself JSON), not as the strings toRow made.
 */
export function groupLockedChanges(updates: readonly LockedNodeChange[], opts: AccessOptions = {}): LockedChangeGroup[] {
  const groups = new Map<string, LockedChangeGroup>();
  updates.forEach(({ before, changes }, index) => {
    const { row, accessChanged } = changeOf(before, changes, opts);
    const values: Record<string, unknown> = { id: before.id };
    for (const column of Object.keys(row)) values[column] = (changes as Record<string, unknown>)[nodeMapper.fieldOf(column)];
    values.version = before.version + 1;
    if (accessChanged) values.access_epoch = before.accessEpoch + 1;
    const key = Object.keys(values).sort().join(',');
    let group = groups.get(key);
    if (!group) groups.set(key, (group = { key, members: [] }));
    group.members.push({ index, values });
  });
  return [...groups.values()];
}

/** The SET list of a group's statement, its rows' values in `v` (see groupLockedChanges). */
export function lockedGroupSet(group: LockedChangeGroup): string {
  const set = group.key.split(',').filter((c) => c !== 'id').map((c) => `"${c}" = v."${c}"`);
  return [...set, 'updated_at = now()'].join(', ');
}

/** The rows' values of a group, as the JSON document its statement reads with jsonb_populate_recordset. */
export function lockedGroupDocument(group: LockedChangeGroup): string {
  return JSON.stringify(group.members.map((m) => m.values));
}

/**
 * Changes many nodes whose rows the transaction already holds locked, by updateNode's rules,
 * in one statement per set of changed columns (the conductor records a batch of intent
 * outcomes this way). Returns the updated nodes in the order given.
 */
export async function updateLockedNodes(trx: Knex.Transaction, updates: readonly LockedNodeChange[], opts: AccessOptions = {}): Promise<Node[]> {
  const out: Node[] = new Array(updates.length);
  for (const group of groupLockedChanges(updates, opts)) {
    const { rows } = await preparedRaw(
      trx,
      // Each row by its key, then by its tuple id: joined on id, a planner that took the table
      // for one row (never analyzed) hashed every node to update one.
      `UPDATE nodes AS n SET ${lockedGroupSet(group)}
         FROM jsonb_populate_recordset(NULL::nodes, ?::jsonb) AS v
              CROSS JOIN LATERAL (SELECT k.ctid FROM nodes k WHERE k.id = v.id FOR UPDATE) AS k
        WHERE n.ctid = k.ctid
       RETURNING n.*`,
      [lockedGroupDocument(group)],
    );
    const byId = new Map((rows as Array<Record<string, unknown>>).map((r) => [r.id as number, nodeMapper.fromRow(r)]));
    for (const m of group.members) {
      const node = byId.get(m.values.id as number);
      if (!node) throw new NodeNotFound(String(m.values.id));
      out[m.index] = node;
    }
  }
  return out;
}

export async function deleteNode(db: Knex, id: number): Promise<void> {
  await db('nodes').where('id', id).delete();
}

/** What the power state sync needs of a node, read for a whole pass in one query. */
export interface PowerSyncNode {
  id: number;
  uuid: string;
  name: string | null;
  driver: string;
  powerInterface: string | null;
  driverInfo: Record<string, unknown>;
  powerState: string | null;
  provisionState: string;
  instanceUuid: string | null;
}

/**
 * The nodes of a group the power state sync reads, as Ironic's _sync_power_states picks them:
 * not in maintenance, not in SYNC_EXCLUDED_STATES, not reserved, no power change under way
 * (target_power_state; here also no intent queued or running), no firmware update running.
 */
export async function nodesForPowerSync(db: Knex, conductorGroup: string): Promise<PowerSyncNode[]> {
  const { rows } = await db.raw(
    `SELECT n.id, n.uuid, n.name, n.driver, n.power_interface, n.driver_info, n.power_state, n.provision_state, n.instance_uuid
       FROM nodes n
      WHERE n.conductor_group = ? AND n.reservation IS NULL AND NOT n.maintenance AND n.target_power_state IS NULL
        AND n.provision_state <> ALL(?::text[]) AND COALESCE(n.driver_internal_info -> 'redfish_fw_updates', 'null'::jsonb) = 'null'::jsonb
        AND NOT EXISTS (SELECT 1 FROM intents i WHERE i.node_id = n.id AND i.finished_at IS NULL)
      ORDER BY n.id`,
    [conductorGroup, SYNC_EXCLUDED_STATES as string[]],
  );
  return (rows as Array<Record<string, unknown>>).map((r) => ({
    id: r.id as number,
    uuid: r.uuid as string,
    name: r.name as string | null,
    driver: r.driver as string,
    powerInterface: r.power_interface as string | null,
    driverInfo: (r.driver_info ?? {}) as Record<string, unknown>,
    powerState: r.power_state as string | null,
    provisionState: r.provision_state as string,
    instanceUuid: r.instance_uuid as string | null,
  }));
}

/** What the sensor task needs of a node: read in one query, reserving nothing (a shared read). */
export interface SensorNode {
  id: number;
  uuid: string;
  name: string | null;
  driver: string;
  managementInterface: string | null;
  driverInfo: Record<string, unknown>;
  instanceUuid: string | null;
}

/**
 * Nodes of a group whose sensors may be read: active ones (all with `undeployed`), not in
 * maintenance (unless `maintenance`). A node reserved by an exclusive task is read anyway.
 */
export async function nodesForSensorData(db: Knex, conductorGroup: string, opts: { undeployed: boolean; maintenance: boolean }): Promise<SensorNode[]> {
  const q = db('nodes')
    .select('id', 'uuid', 'name', 'driver', 'management_interface', 'driver_info', 'instance_uuid')
    .where('conductor_group', conductorGroup)
    .orderBy('id');
  if (!opts.undeployed) q.where('provision_state', 'active');
  if (!opts.maintenance) q.where('maintenance', false);
  const rows = await q;
  return rows.map((r: Record<string, unknown>) => ({
    id: r.id as number,
    uuid: r.uuid as string,
    name: r.name as string | null,
    driver: r.driver as string,
    managementInterface: r.management_interface as string | null,
    driverInfo: (r.driver_info ?? {}) as Record<string, unknown>,
    instanceUuid: r.instance_uuid as string | null,
  }));
}

/** Every shard with its node count, most nodes first; nodes without one count as "None" (Ironic's get_shard_list). */
export async function listShards(db: Knex): Promise<Array<{ name: string; count: number }>> {
  const rows: Array<{ shard: string | null; count: string }> = await db('nodes').select('shard').count('id as count').groupBy('shard');
  return rows
    .map((r) => ({ name: r.shard === null ? 'None' : r.shard, count: Number(r.count) }))
    .sort((a, b) => b.count - a.count);
}

/** The UUIDs of the nodes whose parent_node is this node's UUID. */
export async function listChildUuids(db: Knex, parentUuid: string): Promise<string[]> {
  const rows: Array<{ uuid: string }> = await db('nodes').select('uuid').where('parent_node', parentUuid).orderBy('id');
  return rows.map((r) => r.uuid);
}

/** The provision state of each of these nodes that exists, by UUID (the HTTP root's sweep). */
export async function provisionStatesByUuid(db: Knex, uuids: readonly string[]): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (let i = 0; i < uuids.length; i += 1000) {
    const rows: Array<{ uuid: string; provision_state: string }> = await db('nodes').select('uuid', 'provision_state').whereIn('uuid', uuids.slice(i, i + 1000));
    for (const r of rows) out.set(r.uuid, r.provision_state);
  }
  return out;
}

/** A node waiting too long, or left in a transitional state with no work queued for it. */
export interface StalledNode {
  id: number;
  uuid: string;
  provisionState: string;
}

/**
 * What stalls a node in its state, over `n` (nodes) and `waiting` (a boolean: the state waits
 * for a call-back): nobody holds it and no intent of it runs; in a working state none is
 * queued either. A queued intent does not hold off a wait's deadline: a group operation's step
 * stays queued while its node waits for the agent (conductor/actions/provision-step.ts), and
 * its agent's call-backs move provision_updated_at on. As Ironic's timeout checks, a wait in
 * maintenance is left alone (allow_provisioning_in_maintenance pauses it there).
 */
function stalledSql(waiting: string): string {
  return `n.reservation IS NULL
        AND NOT (n.maintenance AND ${waiting})
        AND NOT EXISTS (SELECT 1 FROM intents i WHERE i.node_id = n.id AND i.finished_at IS NULL AND (i.state = 'running' OR NOT ${waiting}))`;
}

/**
 * Nodes of a conductor group in one of `states` whose provision state last changed before
 * `olderThan` (per state) and that are stalled there (stalledSql). The caller checks each again
 * under the row lock before it fails it.
 */
export async function stalledNodes(db: Knex, conductorGroup: string, olderThan: Readonly<Record<string, Date>>): Promise<StalledNode[]> {
  const states = Object.keys(olderThan);
  if (states.length === 0) return [];
  const { rows } = await db.raw(
    `SELECT n.id, n.uuid, n.provision_state
       FROM nodes n JOIN unnest(?::text[], ?::timestamptz[], ?::boolean[]) AS s(state, before, waiting) ON n.provision_state = s.state
      WHERE n.conductor_group = ? AND COALESCE(n.provision_updated_at, n.updated_at, n.created_at) < s.before
        AND ${stalledSql('s.waiting')}
      ORDER BY n.id`,
    [states, states.map((s) => olderThan[s].toISOString()), states.map((s) => Object.hasOwn(WAIT_STATES, s)), conductorGroup],
  );
  return (rows as Array<{ id: number; uuid: string; provision_state: string }>).map((r) => ({ id: r.id, uuid: r.uuid, provisionState: r.provision_state }));
}

/**
 * Locks a stalled node (skipping one that is locked) and returns it if it is still stalled
 * (stalledSql) in `state` since before `olderThan`.
 */
export async function lockStalledNode(trx: Knex.Transaction, id: number, state: string, olderThan: Date): Promise<Node | undefined> {
  const { rows } = await trx.raw(
    `SELECT n.* FROM nodes n
      WHERE n.id = ? AND n.provision_state = ? AND COALESCE(n.provision_updated_at, n.updated_at, n.created_at) < ?
        AND ${stalledSql(Object.hasOwn(WAIT_STATES, state) ? 'true' : 'false')}
      FOR UPDATE OF n SKIP LOCKED`,
    [id, state, olderThan.toISOString()],
  );
  const row = (rows as Array<Record<string, unknown>>)[0];
  return row ? nodeMapper.fromRow(row) : undefined;
}
