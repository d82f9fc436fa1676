import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Conflict, InvalidParameterValue } from '../common/errors.js';
import type { Config } from '../common/config.js';
import { INTENT_CHANNEL } from '../db/intents.js';
import {
  OPERATION_NODE_STATES, listOperationNodes, operationCounts, positionOf, progressOf, type OperationCounts, type OperationNodeRow, type OperationNodeState,
} from '../db/operation-nodes.js';
import {
  OPERATION_STATES, assertNodesFree, cancelOperation, createOperation, getOperation, listOperations, lockNodesByIdent, lockNodesBySelector,
  retryFailedNodes, type NewOperation, type NodeSelector, type Operation, type OperationState,
} from '../db/operations.js';
import { withTransaction } from '../db/transaction.js';
import { requireObject, isUuid } from './body.js';
import type { ApiDeps } from './deps.js';
import { parseSteps, type IntentAcceptor } from './intents.js';
import {
  isProvisionStep, parseProvisionStep, prepareProvisionSteps, provisionIntentStep, stepView, type ProvisionStepRequest,
} from './operation-provision.js';
import { baseUrl, resourceLinks } from './links.js';
import { limitParam, nextLink, param, type Query } from './query.js';

function iso(d: Date | null): string | null {
  return d ? d.toISOString().replace('Z', '+00:00') : null;
}

function unknownKeys(obj: Record<string, unknown>, allowed: readonly string[], what: string): void {
  const extra = Object.keys(obj).filter((k) => !allowed.includes(k));
  if (extra.length) throw new InvalidParameterValue(`Unknown attribute(s) for ${what}: ${extra.join(', ')}`);
}

function numberIn(value: unknown, name: string, min: number, max: number, integer: boolean): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || (integer && !Number.isInteger(value)) || value < min || value > max) {
    throw new InvalidParameterValue(`"${name}" must be ${integer ? 'an integer' : 'a number'} from ${min} to ${max}, got ${JSON.stringify(value)}.`);
  }
  return value;
}

const SELECTOR_KEYS: Record<string, keyof NodeSelector> = {
  resource_class: 'resourceClass', conductor_group: 'conductorGroup', owner: 'owner',
  provision_state: 'provisionState', driver: 'driver', maintenance: 'maintenance',
};

function parseSelector(raw: unknown): NodeSelector {
  const body = requireObject(raw, 'selector');
  unknownKeys(body, Object.keys(SELECTOR_KEYS), 'selector');
  if (Object.keys(body).length === 0) throw new InvalidParameterValue('"selector" needs at least one of: ' + Object.keys(SELECTOR_KEYS).join(', ') + '.');
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(body)) {
    const ok = key === 'maintenance' ? typeof value === 'boolean' : typeof value === 'string' && value.length <= 255;
    if (!ok) throw new InvalidParameterValue(`selector "${key}" must be ${key === 'maintenance' ? 'a boolean' : 'a string'}.`);
    out[SELECTOR_KEYS[key]] = value;
  }
  return out as NodeSelector;
}

/** A checked POST /v1/operations body. */
interface OperationRequest {
  idents?: string[];
  selector?: NodeSelector;
  values: NewOperation;
  /** Its provision steps, in order, to check against every node. */
  provision: ProvisionStepRequest[];
}

/**
 * The steps: those of the intents API, and provision verbs. A provision step stands in for
 * `get_power_state` while the intents API's checks run, so that they see every step at its index.
 */
function parseOperationSteps(raw: unknown, req: FastifyRequest, config: Readonly<Config>): { steps: NewOperation['steps']; provision: ProvisionStepRequest[] } {
  const provisionAt = new Map<number, ProvisionStepRequest>();
  const plain = Array.isArray(raw)
    ? raw.map((s, i) => (isProvisionStep(s) ? (provisionAt.set(i, parseProvisionStep(s, i, req)), { action: 'get_power_state' }) : s))
    : raw;
  const steps = parseSteps(plain, req).map((s, i) => {
    const p = provisionAt.get(i);
    return p ? provisionIntentStep(p, config) : s;
  });
  return { steps, provision: [...provisionAt.values()] };
}

function parseOperationRequest(raw: unknown, req: FastifyRequest, config: Readonly<Config>): OperationRequest {
  const body = requireObject(raw, 'operation');
  unknownKeys(body, ['nodes', 'selector', 'steps', 'max_parallel', 'retry', 'on_failure', 'description', 'queue'], 'operation');
  if ((body.nodes === undefined) === (body.selector === undefined)) throw new InvalidParameterValue('Give exactly one of "nodes" (a list) and "selector".');
  let idents: string[] | undefined;
  if (body.nodes !== undefined) {
    const max = config.operations.max_nodes;
    if (!Array.isArray(body.nodes) || body.nodes.length === 0 || body.nodes.length > max) throw new InvalidParameterValue(`"nodes" must be a list of 1 to ${max} node UUIDs or names.`);
    idents = body.nodes.map((n, i) => {
      if (typeof n !== 'string' || n.length === 0 || n.length > 255) throw new InvalidParameterValue(`"nodes"[${i}] must be a node UUID or name.`);
      return n;
    });
  }
  const { steps, provision } = parseOperationSteps(body.steps, req, config);
  const retry = body.retry === undefined ? {} : requireObject(body.retry, 'retry');
  unknownKeys(retry, ['max_attempts', 'initial_delay', 'max_delay'], 'retry');
  const c = config.conductor;
  const maxAttempts = retry.max_attempts === undefined ? c.intent_max_attempts : numberIn(retry.max_attempts, 'retry.max_attempts', 1, 100, true);
  const initialDelay = retry.initial_delay === undefined ? c.intent_retry_initial_delay : numberIn(retry.initial_delay, 'retry.initial_delay', 0, 3600, false);
  const maxDelay = retry.max_delay === undefined ? Math.max(initialDelay, c.intent_retry_max_delay) : numberIn(retry.max_delay, 'retry.max_delay', 0, 86400, false);
  if (maxDelay < initialDelay) throw new InvalidParameterValue('"retry.max_delay" must not be below "retry.initial_delay".');
  const onFailure = body.on_failure ?? 'continue';
  if (onFailure !== 'continue' && onFailure !== 'abort') throw new InvalidParameterValue(`"on_failure" must be "continue" or "abort", got ${JSON.stringify(onFailure)}.`);
  const description = body.description ?? null;
  if (description !== null && (typeof description !== 'string' || description.length > 255)) throw new InvalidParameterValue('"description" must be a string of at most 255 characters.');
  const queue = body.queue ?? false;
  if (typeof queue !== 'boolean') throw new InvalidParameterValue('"queue" must be a boolean.');
  return {
    idents,
    provision,
    selector: body.selector === undefined ? undefined : parseSelector(body.selector),
    values: {
      description, steps, onFailure, queue,
      maxParallel: body.max_parallel === undefined ? config.operations.default_max_parallel : numberIn(body.max_parallel, 'max_parallel', 1, 10000, true),
      maxAttempts, initialDelayMs: Math.round(initialDelay * 1000), maxDelayMs: Math.round(maxDelay * 1000),
      requester: req.user, requestId: req.id,
    },
  };
}

function nodeRowView(r: OperationNodeRow): Record<string, unknown> {
  return {
    node_uuid: r.nodeUuid, node_name: r.nodeName, state: r.state, round: r.round, attempts: r.attempts, last_error: r.lastError,
    admitted_at: iso(r.admittedAt), started_at: iso(r.startedAt), finished_at: iso(r.finishedAt),
  };
}

export function operationView(op: Operation, counts: OperationCounts, base: string): Record<string, unknown> {
  return {
    uuid: op.uuid,
    state: op.state,
    description: op.description,
    steps: op.steps.map(stepView),
    max_parallel: op.maxParallel,
    retry: { max_attempts: op.maxAttempts, initial_delay: op.initialDelayMs / 1000, max_delay: op.maxDelayMs / 1000 },
    on_failure: op.onFailure,
    queue: op.queue,
    round: op.round,
    node_count: op.nodeCount,
    counts,
    progress: progressOf(counts),
    abort_reason: op.abortReason,
    requester: op.requester,
    request_id: op.requestId,
    created_at: iso(op.createdAt),
    started_at: iso(op.startedAt),
    finished_at: iso(op.finishedAt),
    cancelled_at: iso(op.cancelledAt),
    links: resourceLinks(base, 'operations', op.uuid),
  };
}

/** Galvanic's group operations: /v1/operations. */
export function registerOperationRoutes(app: FastifyInstance, deps: ApiDeps, acceptor: IntentAcceptor): void {
  const { db, config, registry } = deps;
  const base = (req: FastifyRequest) => baseUrl(req, config.api.public_endpoint);
  const opId = (req: FastifyRequest) => (req.params as { op: string }).op;
  const view = async (req: FastifyRequest, op: Operation) => operationView(op, (await operationCounts(db, [op.id])).get(op.id)!, base(req));
  // Conductors admit nodes when they look: tell them to look now.
  const wakeConductors = () => acceptor.wake.notify(INTENT_CHANNEL, 'operation');

  app.post('/v1/operations', async (req, reply) => {
    const parsed = parseOperationRequest(req.body, req, config);
    const op = await withTransaction(db, async (trx) => {
      const nodeIds = parsed.idents
        ? await lockNodesByIdent(trx, parsed.idents)
        : await lockNodesBySelector(trx, parsed.selector!, config.operations.max_nodes);
      if (!parsed.values.queue) await assertNodesFree(trx, nodeIds);
      await prepareProvisionSteps(trx, registry, config.conductor, parsed.provision, nodeIds, parsed.values.queue);
      return createOperation(trx, parsed.values, nodeIds);
    });
    wakeConductors();
    reply.code(201).header('Location', `${base(req)}/v1/operations/${op.uuid}`);
    return view(req, op);
  });

  app.get('/v1/operations', async (req) => {
    const q = req.query as Query;
    unknownKeys(q, ['state', 'limit', 'marker'], 'listing operations');
    const state = param(q, 'state');
    if (state !== undefined && !OPERATION_STATES.includes(state as OperationState)) {
      throw new InvalidParameterValue(`Invalid state "${state}": expected one of ${OPERATION_STATES.join(', ')}.`);
    }
    const limit = limitParam(q, config.api.max_limit);
    const markerId = param(q, 'marker');
    if (markerId !== undefined && !isUuid(markerId)) throw new InvalidParameterValue(`Expected UUID for marker: ${markerId}`);
    const marker = markerId !== undefined ? await getOperation(db, markerId) : undefined;
    const ops = await listOperations(db, { state: state as OperationState | undefined, limit, marker });
    const counts = await operationCounts(db, ops.map((o) => o.id));
    const b = base(req);
    const out: Record<string, unknown> = { operations: ops.map((o) => operationView(o, counts.get(o.id)!, b)) };
    const next = nextLink(b, 'operations', q, ops.length, limit, ops.at(-1)?.uuid);
    if (next) out.next = next;
    return out;
  });

  // The operation, with a page of its nodes: ?limit=&marker=<node uuid>&node_state=.
  app.get('/v1/operations/:op', async (req) => {
    const q = req.query as Query;
    unknownKeys(q, ['limit', 'marker', 'node_state'], 'an operation');
    const op = await getOperation(db, opId(req));
    const limit = limitParam(q, config.api.max_limit);
    const nodeState = param(q, 'node_state');
    if (nodeState !== undefined && !OPERATION_NODE_STATES.includes(nodeState as OperationNodeState)) {
      throw new InvalidParameterValue(`Invalid node_state "${nodeState}": expected one of ${OPERATION_NODE_STATES.join(', ')}.`);
    }
    const markerId = param(q, 'marker');
    let afterPosition: number | undefined;
    if (markerId !== undefined) {
      afterPosition = isUuid(markerId) ? await positionOf(db, op.id, markerId.toLowerCase()) : undefined;
      if (afterPosition === undefined) throw new InvalidParameterValue(`Marker ${markerId} is not a node of operation ${op.uuid}.`);
    }
    const rows = await listOperationNodes(db, op.id, { limit, afterPosition, state: nodeState as OperationNodeState | undefined });
    const out = { ...(await view(req, op)), nodes: rows.map(nodeRowView) } as Record<string, unknown>;
    const next = nextLink(base(req), `operations/${op.uuid}`, q, rows.length, limit, rows.at(-1)?.nodeUuid);
    if (next) out.next = next;
    return out;
  });

  app.post('/v1/operations/:op/cancel', async (req) => {
    if (req.body !== undefined && req.body !== null) unknownKeys(requireObject(req.body, 'cancel'), [], 'cancel');
    const op = await withTransaction(db, async (trx) => {
      const locked = await getOperation(trx, opId(req), { forUpdate: true });
      if (locked.state !== 'cancelled' && !(await cancelOperation(trx, locked))) {
        throw new Conflict(`Operation ${locked.uuid} has already ended (${locked.state}); there is nothing to cancel.`);
      }
      return getOperation(trx, locked.uuid);
    });
    wakeConductors();
    return view(req, op);
  });

  app.post('/v1/operations/:op/retry', async (req) => {
    if (req.body !== undefined && req.body !== null) unknownKeys(requireObject(req.body, 'retry'), [], 'retry');
    const op = await withTransaction(db, async (trx) => {
      const locked = await getOperation(trx, opId(req), { forUpdate: true });
      if (locked.finishedAt === null) throw new Conflict(`Operation ${locked.uuid} is still ${locked.state}; retry its failed nodes once it has ended.`);
      const nodes = await retryFailedNodes(trx, locked);
      if (nodes.length === 0) throw new Conflict(`Operation ${locked.uuid} has no failed node to retry.`);
      return getOperation(trx, locked.uuid);
    });
    wakeConductors();
    return view(req, op);
  });
}
