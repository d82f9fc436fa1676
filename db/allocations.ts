import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import {
  AllocationAlreadyExists, AllocationDuplicateName, AllocationNotFound, InstanceAssociated, NodeAssociated, NodeNotFound,
} from '../common/errors.js';
import { RowMapper } from './rows.js';
import { isUuid, nodeMapper, updateNode, type Node, type NodeChanges, type UpdateOptions } from './nodes.js';
import { insertReturning, listPage, uniqueViolations, type TranslateWrite, updateReturning, type PageRequest } from './table.js';
import { withTransaction } from './transaction.js';
import { traitsOfNode } from './traits.js';

/** Channel the allocations trigger (migration 0007) notifies on, with the allocation's UUID. */
export const ALLOCATION_CHANNEL = 'galvanic_allocations';

export type AllocationState = 'allocating' | 'active' | 'error';

export interface Allocation {
  id: number;
  uuid: string;
  name: string | null;
  nodeId: number | null;
  /** Joined from nodes. */
  nodeUuid: string | null;
  state: AllocationState;
  lastError: string | null;
  resourceClass: string | null;
  traits: string[];
  /** Node UUIDs (names are resolved by the API). */
  candidateNodes: string[];
  extra: Record<string, unknown>;
  owner: string | null;
  conductor: string | null;
  createdAt: Date;
  updatedAt: Date | null;
}

export type AllocationChanges = Partial<Pick<Allocation, 'uuid' | 'name' | 'resourceClass' | 'traits' | 'candidateNodes' | 'extra' | 'owner'>>;

const JSON_COLUMNS = ['traits', 'candidate_nodes', 'extra'];
const mapper = new RowMapper<Allocation>([
  'id', 'uuid', 'name', 'node_id', 'node_uuid', 'state', 'last_error', 'resource_class', ...JSON_COLUMNS,
  'owner', 'conductor', 'created_at', 'updated_at',
], JSON_COLUMNS);

/** Ironic refuses sorting by the JSON fields. */
export const ALLOCATION_SORT_KEYS = new Set(['id', 'uuid', 'name', 'node_id', 'state', 'last_error', 'resource_class', 'owner', 'created_at', 'updated_at']);

const translateWriteError: TranslateWrite<AllocationChanges> = uniqueViolations({
  allocations_name_unique: (values) => new AllocationDuplicateName(String(values.name)),
  allocations_uuid_unique: (values) => new AllocationAlreadyExists(String(values.uuid)),
});

function selectAllocations(db: Knex): Knex.QueryBuilder {
  return db('allocations').leftJoin('nodes', 'nodes.id', 'allocations.node_id').select('allocations.*', 'nodes.uuid as node_uuid');
}

/** Creates an allocation in `allocating`; a conductor is woken by the insert trigger. */
export async function createAllocation(db: Knex, values: AllocationChanges): Promise<Allocation> {
  const row = mapper.toRow({ ...values, uuid: values.uuid ?? randomUUID() });
  const created = await insertReturning(db, 'allocations', row, (err) => translateWriteError(err, values), 'id');
  return getAllocationById(db, created.id as number);
}

export async function getAllocationById(db: Knex, id: number): Promise<Allocation> {
  return mapper.fromFound(await selectAllocations(db).where('allocations.id', id).first(), () => new AllocationNotFound(String(id)));
}

/** By UUID or name. */
export async function getAllocation(db: Knex, ident: string): Promise<Allocation> {
  return mapper.fromFound(await selectAllocations(db).where(isUuid(ident) ? 'allocations.uuid' : 'allocations.name', ident).first(), () => new AllocationNotFound(ident));
}

export async function findAllocationOfNode(db: Knex, nodeId: number): Promise<Allocation | undefined> {
  const row = await selectAllocations(db).where('allocations.node_id', nodeId).first();
  return row ? mapper.fromRow(row) : undefined;
}

export interface AllocationFilters {
  nodeId?: number;
  resourceClass?: string;
  state?: string;
  owner?: string;
}

export async function listAllocations(
  db: Knex,
  filters: AllocationFilters,
  page: PageRequest<Allocation>,
): Promise<Allocation[]> {
  return listPage(db, 'allocations', mapper, page, {
    where: { node_id: filters.nodeId, resource_class: filters.resourceClass, state: filters.state, owner: filters.owner },
    // An allocation may have no node (yet).
    join: (outer) => outer.select('p.*', 'nodes.uuid as node_uuid').leftJoin('nodes', 'nodes.id', 'p.node_id'),
  });
}

/** Changes the client-editable fields (name, extra, owner). */
export async function updateAllocation(db: Knex, id: number, changes: Pick<AllocationChanges, 'name' | 'extra' | 'owner'>): Promise<Allocation> {
  await updateReturning(db, 'allocations', id, mapper.toRow(changes), () => new AllocationNotFound(String(id)), (err) => translateWriteError(err, changes));
  return getAllocationById(db, id);
}

/** The node fields an allocation sets, and that its removal clears. */
function allocatedChanges(node: Node, allocation: Pick<Allocation, 'id' | 'uuid' | 'traits'>) {
  // Ironic copies the requested traits into instance_info for the deploy to use.
  return { instanceUuid: allocation.uuid, allocationId: allocation.id, instanceInfo: { ...node.instanceInfo, traits: allocation.traits } };
}

/**
 * Deletes an allocation; when it holds a node, under the node's row lock, after `verify`
 * accepts the node, clearing the node's instance_uuid and allocation in the same transaction.
 */
export async function deleteAllocation(db: Knex, allocationId: number, verify: (node: Node, allocation: Allocation) => void): Promise<void> {
  await withTransaction(db, async (trx) => {
    const row = await trx('allocations').where('id', allocationId).forUpdate().first('*');
    if (!row) throw new AllocationNotFound(String(allocationId));
    const allocation = mapper.fromRow(row);
    if (allocation.nodeId !== null) {
      const nodeRow = await trx('nodes').where('id', allocation.nodeId).forUpdate().first('*');
      if (nodeRow) {
        const node = nodeMapper.fromRow(nodeRow);
        verify(node, { ...allocation, nodeUuid: node.uuid });
        await releaseNode(trx, node, allocation.id);
      }
    }
    await trx('allocations').where('id', allocationId).delete();
  });
}

/** Clears what an allocation set on a node whose row `trx` holds locked. */
async function releaseNode(trx: Knex.Transaction, node: Node, allocationId: number): Promise<void> {
  if (node.allocationId !== allocationId) return;
  await updateNode(trx, node.id, { instanceUuid: null, allocationId: null });
}

/**
 * A change of a node that sets or clears its instance_uuid, under the node's row lock:
 * `verify` sees the locked node first and may refuse; clearing the instance of a node that
 * has an allocation deletes the allocation in the same transaction, as Ironic does.
 */
export async function updateNodeInstance(
  db: Knex,
  nodeId: number,
  changes: NodeChanges,
  opts: UpdateOptions,
  verify: (locked: Node) => void,
): Promise<Node> {
  return withTransaction(db, async (trx) => {
    const row = await trx('nodes').where('id', nodeId).forUpdate().first('*');
    if (!row) throw new NodeNotFound(String(nodeId));
    const locked = nodeMapper.fromRow(row);
    verify(locked);
    if (changes.instanceUuid === null && locked.allocationId !== null) {
      await trx('allocations').where('id', locked.allocationId).delete();
      changes = { ...changes, allocationId: null };
    }
    return updateNode(trx, nodeId, changes, opts);
  });
}

/**
 * Backfill (1.58): records an allocation that is active on `nodeIdent` at once. `verify`
 * checks the locked node against the request (Ironic's rules) and throws to refuse it.
 */
export async function backfillAllocation(
  db: Knex,
  values: AllocationChanges,
  nodeId: number,
  verify: (node: Node, traits: string[]) => void,
): Promise<Allocation> {
  try {
    return await withTransaction(db, async (trx) => {
      const nodeRow = await trx('nodes').where('id', nodeId).forUpdate().first('*');
      const node = nodeMapper.fromRow(nodeRow);
      verify(node, await traitsOfNode(trx, node.id));
      // Without a UUID asked for, the node's instance is taken to be the allocation's.
      const uuid = values.uuid ?? node.instanceUuid ?? randomUUID();
      if (node.instanceUuid && node.instanceUuid !== uuid) throw new NodeAssociated(node.uuid, node.instanceUuid);
      if (node.allocationId !== null) throw new NodeAssociated(node.uuid, node.instanceUuid ?? String(node.allocationId));
      const other = await trx('nodes').first('uuid').where('instance_uuid', uuid).whereNot('id', node.id);
      if (other) throw new InstanceAssociated(uuid, node.uuid);
      const row = mapper.toRow({ ...values, uuid });
      const [created] = await trx('allocations').insert({ ...row, state: 'active', node_id: node.id }).returning(['id', 'uuid', 'traits']);
      await updateNode(trx, node.id, allocatedChanges(node, { id: created.id, uuid: created.uuid, traits: created.traits as string[] }));
      return getAllocationById(trx, created.id);
    });
  } catch (err) {
    translateWriteError(err, values);
  }
}

/** The nodes named by UUID or name among `idents` (candidate nodes); unknown ones are left out. */
export async function findNodesByIdent(db: Knex, idents: readonly string[]): Promise<Array<{ uuid: string; name: string | null }>> {
  const uuids = [...new Set(idents.filter(isUuid).map((u) => u.toLowerCase()))];
  const names = [...new Set(idents.filter((i) => !isUuid(i)))];
  return db('nodes').select('uuid', 'name').whereRaw('uuid = any(?::uuid[]) OR name = any(?::text[])', [uuids, names]);
}

/** Pending allocations, locked for this transaction; ones another conductor holds are skipped. */
export async function claimPendingAllocations(trx: Knex.Transaction, limit: number): Promise<Allocation[]> {
  const rows = await trx('allocations').select('*').where('state', 'allocating').orderBy('id').limit(limit).forUpdate().skipLocked();
  return rows.map((r: Record<string, unknown>) => mapper.fromRow({ ...r, node_uuid: null }));
}

/** Which nodes an allocation may take, before locks: the counts tell Ironic's error messages apart. */
export interface CandidateCounts {
  /** Available, unassociated, powered, not in maintenance, of the resource class (and candidates, owner). */
  matching: number;
  /** Of those, the ones that have every requested trait. */
  withTraits: number;
}

function candidateWhere(q: Knex.QueryBuilder, db: Knex, a: Allocation, withTraits: boolean): Knex.QueryBuilder {
  q.where('n.provision_state', 'available')
    .where('n.maintenance', false)
    .whereNull('n.instance_uuid')
    .whereNull('n.allocation_id')
    // Ironic's `with_power_state`: a node whose power state is unknown is not offered.
    .whereNotNull('n.power_state')
    .where('n.resource_class', a.resourceClass ?? '');
  if (a.candidateNodes.length) q.whereRaw('n.uuid = any(?::uuid[])', [a.candidateNodes]);
  if (a.owner !== null) q.where((w) => w.where('n.owner', a.owner!).orWhere('n.lessee', a.owner!));
  if (withTraits && a.traits.length) {
    q.whereRaw(
      'NOT EXISTS (SELECT 1 FROM unnest(?::text[]) AS want(trait) WHERE NOT EXISTS (SELECT 1 FROM node_traits nt WHERE nt.node_id = n.id AND nt.trait = want.trait))',
      [a.traits],
    );
  }
  void db;
  return q;
}

export async function countCandidates(db: Knex, a: Allocation): Promise<CandidateCounts> {
  const count = async (withTraits: boolean) => {
    const row = await candidateWhere(db('nodes as n'), db, a, withTraits).count<{ count: string }[]>('* as count').first();
    return Number(row?.count ?? 0);
  };
  const matching = await count(false);
  return { matching, withTraits: matching === 0 ? 0 : await count(true) };
}

/**
 * Locks one node the allocation may take: unreserved (no conductor is working on it) and
 * not locked by a concurrent allocation pass (SKIP LOCKED), in random order so that parallel
 * passes try different nodes, a node named like the allocation first (as Ironic does). The
 * row lock is re-checked against the WHERE clause after it is taken, so a node another
 * transaction just allocated is not returned.
 */
export async function lockCandidateNode(trx: Knex.Transaction, a: Allocation): Promise<Node | undefined> {
  const q = candidateWhere(trx('nodes as n').select('n.*'), trx, a, true).whereNull('n.reservation');
  if (a.name !== null) q.orderByRaw('(n.name = ?) DESC', [a.name]);
  const row = await q.orderByRaw('random()').limit(1).forUpdate().skipLocked().first();
  return row ? nodeMapper.fromRow(row) : undefined;
}

/** Gives a locked node to a locked allocation: the node's instance_uuid and allocation, the allocation active. */
export async function assignNode(trx: Knex.Transaction, a: Allocation, node: Node, conductor: string): Promise<void> {
  await updateNode(trx, node.id, allocatedChanges(node, a));
  await trx('allocations').where('id', a.id).update({ state: 'active', node_id: node.id, last_error: null, conductor, updated_at: trx.fn.now() });
}

/** Records a failed allocation (Ironic keeps it, in `error`, with the reason). */
export async function failAllocation(db: Knex, id: number, error: string, conductor: string): Promise<void> {
  await db('allocations').where({ id, state: 'allocating' }).update({ state: 'error', node_id: null, last_error: error, conductor, updated_at: db.fn.now() });
}
