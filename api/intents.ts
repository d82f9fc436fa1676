import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import {
  Conflict, InvalidParameterValue, NodeNotFound, PowerOffDisabled,
} from '../common/errors.js';
import {
  INTENT_CHANNEL, intentWakePayload, cancelIntent, clearSettledPowerTarget, enqueueIntentsOfNodes, findIntentByKey, getIntent, listNodeIntents, skipRestOfBatch, type Intent, type NewIntent,
} from '../db/intents.js';
import { getNode, getNodeById, isUuid, lockNodesByIdent, updateLockedNodes, type Node, type NodeChanges } from '../db/nodes.js';
import { Batcher, type BatchOutcome } from '../common/batcher.js';
import { withTransaction, isUniqueViolation } from '../db/transaction.js';
import type { ApiDeps } from './deps.js';
import { IntentWaiter } from './intent-waiter.js';
import { PgNotifyBatcher } from '../db/notify.js';
import { baseUrl, resourceLinks } from './links.js';
import { limitParam, param, type Query } from './query.js';
import { requireObject } from './body.js';
import { errorBody, statusOfCode } from './error-handler.js';
import { STEP_KINDS, parseBootDeviceArgs, parsePowerArgs, parseStepArgs, type PowerArgs } from '../common/intent-kinds.js';

/** The longest a request may wait for its intent. */
const MAX_WAIT_SECONDS = 3600;

function iso(d: Date | null): string | null {
  return d ? d.toISOString().replace('Z', '+00:00') : null;
}

/** What a failed intent's result records about its error. */
interface RecordedFailure {
  error_code?: string;
  /** Written by earlier versions only; see failureStatus. */
  http_status?: number;
}

/**
 * The HTTP status of a failed (or cancelled) intent. The conductor records the error's code
 * and the API maps it, as it maps a thrown error. Earlier versions recorded the status too,
 * and their rows keep it: it is what that version decided, and the code beside it may not name
 * the same class now (PatchError was once recorded as SCHEMA_BEHIND, a 400 that now maps to 500).
 */
export function failureStatus(result: unknown): number {
  const recorded = (result ?? {}) as RecordedFailure;
  if (typeof recorded.http_status === 'number') return recorded.http_status;
  return typeof recorded.error_code === 'string' ? statusOfCode(recorded.error_code) : 500;
}

/**
 * An intent's result as clients see it: a failure's shows its status beside its code, as
 * when the conductor recorded both.
 */
function resultView(i: Intent): unknown {
  const result = i.result ?? null;
  if (i.state !== 'failed' || result === null || typeof result !== 'object') return result;
  const recorded = result as RecordedFailure;
  if (typeof recorded.error_code !== 'string' || recorded.http_status !== undefined) return result;
  return { ...result, http_status: failureStatus(result) };
}

export function intentView(i: Intent, nodeUuid: string, base: string): Record<string, unknown> {
  return {
    uuid: i.uuid,
    node_uuid: nodeUuid,
    seq: i.seq,
    action: i.kind,
    args: i.args,
    state: i.state,
    attempts: i.attempts,
    max_attempts: i.maxAttempts,
    not_before: iso(i.notBefore),
    conductor: i.conductor,
    error: i.error,
    result: resultView(i),
    batch: i.batch,
    step_index: i.stepIndex,
    operation: i.operation,
    requester: i.requester,
    request_id: i.requestId,
    created_at: iso(i.createdAt),
    started_at: iso(i.startedAt),
    finished_at: iso(i.finishedAt),
    links: resourceLinks(base, 'intents', i.uuid),
  };
}

/** `?wait=N` or `Prefer: wait=N`; undefined when neither is given. */
export function requestedWait(req: FastifyRequest): number | undefined {
  let raw = param(req.query as Query, 'wait');
  if (raw === undefined) {
    const prefer = req.headers.prefer;
    const m = /(?:^|[,;\s])wait=(\S+?)(?:$|[,;\s])/i.exec(Array.isArray(prefer) ? prefer.join(',') : prefer ?? '');
    if (m) raw = m[1];
  }
  if (raw === undefined) return undefined;
  if (!/^\d+$/.test(raw) || Number(raw) > MAX_WAIT_SECONDS) {
    throw new InvalidParameterValue(`Invalid wait "${raw}": expected whole seconds from 0 to ${MAX_WAIT_SECONDS}.`);
  }
  return Number(raw);
}

/** Checks `steps` (`[{action, args}]`, 1 to 100) and returns them as intent kinds and arguments. */
export function parseSteps(raw: unknown, req: FastifyRequest): Array<{ kind: string; args: Record<string, unknown> }> {
  if (!Array.isArray(raw) || raw.length === 0 || raw.length > 100) {
    throw new InvalidParameterValue('"steps" must be a list of 1 to 100 steps.');
  }
  return raw.map((item, i) => {
    const step = requireObject(item, `step ${i}`);
    const unknown = Object.keys(step).filter((k) => k !== 'action' && k !== 'args');
    if (unknown.length) throw new InvalidParameterValue(`Unknown attribute(s) in step ${i}: ${unknown.join(', ')}`);
    // A list, not an object's keys: "constructor" or "__proto__" finds nothing.
    const kind = STEP_KINDS.find((k) => k === step.action);
    if (!kind) throw new InvalidParameterValue(`Step ${i}: unknown action ${JSON.stringify(step.action)}; known actions are ${STEP_KINDS.join(', ')}.`);
    const args = step.args === undefined ? {} : requireObject(step.args, `step ${i} args`);
    return { kind, args: parseStepArgs(kind, args, req.apiVersion)! };
  });
}

/** The checked arguments of a power state change (the intent kind's parser). */
export function checkPowerArgs(body: Record<string, unknown>, req: FastifyRequest): PowerArgs {
  return parsePowerArgs(body, req.apiVersion);
}

/**
 * Refuses a boot device the node's management interface cannot take, when the interface
 * knows its devices without asking the BMC: refused here, the request writes nothing (no
 * intent, no last_error, no history), as Ironic's synchronous call does.
 */
export function checkBootDeviceSupported(registry: ApiDeps['registry'], node: Node, device: string): void {
  const supported = registry.management(node.managementInterface ?? '')?.staticBootDevices;
  if (supported && !supported.includes(device)) {
    throw new InvalidParameterValue(`Invalid boot device ${device} specified, valid boot devices are: ${supported.join(', ')}.`);
  }
}

export interface AcceptOptions {
  steps: Array<{ kind: string; args: Record<string, unknown> }>;
  /** Checks against the locked node and returns the node changes made with the acceptance. */
  prepare?(node: Node): NodeChanges | undefined;
  /**
   * Instead of `prepare`, for steps that depend on the locked node and on other rows (read
   * with `trx`): checks, and returns the node changes and the steps to queue.
   */
  resolve?(node: Node, trx: Knex.Transaction): Promise<{ changes?: NodeChanges; steps: AcceptOptions['steps'] }>;
}

/** One request's acceptance, as the batch sees it. */
interface AcceptJob {
  nodeIdent: string;
  opts: AcceptOptions;
  idempotencyKey?: string;
  requester: string | null;
  requestId: string;
}

type Accepted = { node: Node; intents: Intent[] };

/**
 * Accepts the jobs in one transaction, each as if alone in its own, in order: a job that
 * fails (unknown node, refused by `prepare`) writes nothing and leaves the others alone; a
 * later job for the same node sees the earlier ones' changes and queues behind their intents.
 * Statements: the nodes' row locks, the repeats' lookup (when keys are given), the node
 * changes, the intents: set-based, whatever the number of jobs.
 */
async function acceptJobs(trx: Knex.Transaction, jobs: readonly AcceptJob[], maxAttempts: number): Promise<Array<BatchOutcome<Accepted>>> {
  const locked = await lockNodesByIdent(trx, jobs.map((j) => j.nodeIdent));
  const byIdent = new Map<string, Node>();
  for (const n of locked) {
    byIdent.set(n.uuid, n);
    if (n.name !== null) byIdent.set(n.name, n);
  }
  const nodeOf = (j: AcceptJob) => byIdent.get(isUuid(j.nodeIdent) ? j.nodeIdent.toLowerCase() : j.nodeIdent);
  const state = new Map<number, { before: Node; current: Node; changes: NodeChanges }>();
  const outcomes: Array<BatchOutcome<Accepted> | { nodeId: number; from: number; count: number } | { sameAs: number }> = [];
  const queued: Array<{ nodeId: number; intent: NewIntent }> = [];
  const firstWithKey = new Map<string, number>();
  for (const [index, job] of jobs.entries()) {
    const node = nodeOf(job);
    if (!node) {
      outcomes.push({ error: new NodeNotFound(job.nodeIdent) });
      continue;
    }
    if (job.idempotencyKey) {
      const first = await findIntentByKey(trx, node.id, job.idempotencyKey);
      if (first) {
        const batch = first.batch ? (await listNodeIntents(trx, node.id, 1000, first.seq - 1)).filter((i) => i.batch === first.batch) : [first];
        outcomes.push({ value: { node: state.get(node.id)?.current ?? node, intents: batch } });
        continue;
      }
      const same = firstWithKey.get(`${node.id}/${job.idempotencyKey}`);
      if (same !== undefined) {
        outcomes.push({ sameAs: same });
        continue;
      }
      firstWithKey.set(`${node.id}/${job.idempotencyKey}`, index);
    }
    let s = state.get(node.id);
    if (!s) state.set(node.id, (s = { before: node, current: node, changes: {} }));
    let changes: NodeChanges | undefined;
    let steps = job.opts.steps;
    try {
      if (job.opts.resolve) ({ changes, steps } = await job.opts.resolve(s.current, trx));
      else changes = job.opts.prepare?.(s.current);
    } catch (error) {
      outcomes.push({ error });
      continue;
    }
    if (changes) {
      s.current = { ...s.current, ...changes };
      Object.assign(s.changes, changes);
    }
    const batch = steps.length > 1 ? randomUUID() : undefined;
    outcomes.push({ nodeId: node.id, from: queued.length, count: steps.length });
    steps.forEach((step, i) => queued.push({
      nodeId: node.id,
      intent: {
        kind: step.kind, args: step.args, maxAttempts, batch, stepIndex: batch ? i : undefined,
        requester: job.requester, requestId: job.requestId,
        // The key marks the first intent of the request; a repeat finds it there.
        idempotencyKey: i === 0 ? job.idempotencyKey : undefined,
      },
    }));
  }
  const changed = [...state.values()].filter((s) => Object.keys(s.changes).length > 0);
  const updated = new Map((await updateLockedNodes(trx, changed.map((s) => ({ before: s.before, changes: s.changes })))).map((n) => [n.id, n]));
  const intents = await enqueueIntentsOfNodes(trx, queued);
  const resolved: Array<BatchOutcome<Accepted>> = [];
  for (const o of outcomes) {
    if ('sameAs' in o) resolved.push(resolved[o.sameAs]);
    else if ('nodeId' in o) {
      const node = updated.get(o.nodeId) ?? (state.get(o.nodeId) as { before: Node }).before;
      resolved.push({ value: { node, intents: intents.slice(o.from, o.from + o.count) } });
    } else resolved.push(o);
  }
  return resolved;
}

/** Accepts intents for nodes: validation, node changes and the queue in one transaction. */
export class IntentAcceptor {
  readonly waiter: IntentWaiter;
  /** Wakes the conductors once a request's intents are committed. */
  readonly wake: PgNotifyBatcher;
  /** Concurrent requests share a transaction (group commit); see acceptJobs. */
  private readonly batcher: Batcher<AcceptJob, Accepted>;

  constructor(private readonly deps: ApiDeps) {
    this.waiter = new IntentWaiter(deps.db, deps.connectionString, deps.log);
    this.wake = new PgNotifyBatcher(deps.db, deps.log);
    this.batcher = new Batcher((jobs) => this.acceptBatch(jobs), 200);
  }

  async close(): Promise<void> {
    await this.wake.close();
    await this.waiter.close();
  }

  async accept(req: FastifyRequest, nodeIdent: string, opts: AcceptOptions): Promise<Accepted> {
    const key = req.headers['idempotency-key'];
    const accepted = await this.batcher.submit({
      nodeIdent, opts, requester: req.user ?? null, requestId: String(req.id),
      idempotencyKey: typeof key === 'string' && key ? key.slice(0, 255) : undefined,
    });
    // The newest seq lets the node's conductor tell this intent from one it already claimed.
    const seq = accepted.intents.reduce((max, i) => Math.max(max, i.seq), 0);
    this.wake.notify(INTENT_CHANNEL, intentWakePayload({ nodeUuid: accepted.node.uuid, seq: seq > 0 ? seq : undefined }));
    return accepted;
  }

  /**
   * A batch in one transaction; when that transaction fails as a whole (a database error, or
   * a repeat racing its first request on another server), each job runs again on its own, so
   * one job's trouble is never another's.
   */
  private async acceptBatch(jobs: AcceptJob[]): Promise<Array<BatchOutcome<Accepted>>> {
    const { db, config } = this.deps;
    const max = config.conductor.intent_max_attempts;
    const once = (batch: AcceptJob[]) => withTransaction(db, (trx: Knex.Transaction) => acceptJobs(trx, batch, max));
    try {
      return await once(jobs);
    } catch (err) {
      if (jobs.length === 1 && !(jobs[0].idempotencyKey && isUniqueViolation(err))) throw err;
    }
    return Promise.all(jobs.map(async (job): Promise<BatchOutcome<Accepted>> => {
      try {
        return (await once([job]))[0];
      } catch (err) {
        // Two requests with one key raced: the loser's second run finds the winner's intents.
        if (!(job.idempotencyKey && isUniqueViolation(err))) return { error: err };
        try {
          return (await once([job]))[0];
        } catch (again) {
          return { error: again };
        }
      }
    }));
  }

  /** The last intent of a request once all have ended (or the wait expired). */
  async waitAll(intents: Intent[], seconds: number): Promise<Intent[]> {
    const deadline = Date.now() + seconds * 1000;
    const out: Intent[] = [];
    for (const i of intents) out.push(await this.waiter.wait(i, Math.max(0, deadline - Date.now())));
    return out;
  }
}

/**
 * Answers an action: 202 with Location when not waited for or not finished in time;
 * otherwise `onSuccess` for a success, and the intent's error as an Ironic error body
 * (with the status of its error's code, see failureStatus) for a failure.
 */
export function replyFor(
  reply: FastifyReply,
  req: FastifyRequest,
  base: string,
  node: Node,
  intents: Intent[],
  onSuccess: (last: Intent) => unknown,
  accepted: (intents: Intent[]) => unknown = () => undefined,
): unknown {
  const last = intents[intents.length - 1];
  reply.header('Location', `${base}/v1/intents/${intents[0].uuid}`);
  const failed = intents.find((i) => i.state === 'failed' || i.state === 'cancelled');
  if (failed) {
    const status = failureStatus(failed.result);
    return reply.code(status).send(errorBody(status, failed.error ?? `Intent ${failed.uuid} was ${failed.state}.`));
  }
  if (intents.every((i) => i.state === 'succeeded')) return onSuccess(last);
  reply.code(202);
  const body = accepted(intents);
  return body === undefined ? reply.send() : body;
}

export function registerIntentRoutes(app: FastifyInstance, deps: ApiDeps, acceptor: IntentAcceptor): void {
  const { db, config } = deps;
  const base = (req: FastifyRequest) => baseUrl(req, config.api.public_endpoint);
  const nodeIdent = (req: FastifyRequest) => (req.params as { node: string }).node;

  app.put('/v1/nodes/:node/states/power', async (req, reply) => {
    const args = checkPowerArgs(requireObject(req.body, 'power state change'), req);
    const wait = requestedWait(req) ?? 0;
    const { node, intents } = await acceptor.accept(req, nodeIdent(req), {
      steps: [{ kind: 'power', args: { ...args } }],
      prepare: (n) => {
        if (n.provisionState === 'cleaning' || n.provisionState === 'clean wait') {
          throw new InvalidParameterValue(`Can not change power state of node ${n.uuid} while it is in state ${n.provisionState}.`);
        }
        if (n.disablePowerOff && (args.target === 'power off' || args.target === 'soft power off')) throw new PowerOffDisabled(args.target);
        return { targetPowerState: args.target, lastError: null };
      },
    });
    const done = await acceptor.waitAll(intents, wait);
    return replyFor(reply, req, base(req), node, done, (last) => intentView(last, node.uuid, base(req)),
      (all) => (wait > 0 ? intentView(all[all.length - 1], node.uuid, base(req)) : undefined));
  });

  app.put('/v1/nodes/:node/management/boot_device', async (req, reply) => {
    const args = parseBootDeviceArgs(requireObject(req.body, 'boot device'));
    // Ironic's call is synchronous: wait by default.
    const wait = requestedWait(req) ?? 60;
    const { node, intents } = await acceptor.accept(req, nodeIdent(req), {
      steps: [{ kind: 'set_boot_device', args: { ...args } }],
      prepare: (n) => {
        checkBootDeviceSupported(deps.registry, n, args.boot_device);
        return undefined;
      },
    });
    const done = await acceptor.waitAll(intents, wait);
    return replyFor(reply, req, base(req), node, done, () => reply.code(204).send(),
      (all) => intentView(all[all.length - 1], node.uuid, base(req)));
  });

  const readViaIntent = (kind: string) => async (req: FastifyRequest, reply: FastifyReply) => {
    const wait = requestedWait(req) ?? 60;
    const { node, intents } = await acceptor.accept(req, nodeIdent(req), { steps: [{ kind, args: {} }] });
    const done = await acceptor.waitAll(intents, wait);
    return replyFor(reply, req, base(req), node, done, (last) => last.result,
      (all) => intentView(all[all.length - 1], node.uuid, base(req)));
  };
  app.get('/v1/nodes/:node/management/boot_device', readViaIntent('get_boot_device'));
  app.get('/v1/nodes/:node/management/boot_device/supported', readViaIntent('get_supported_boot_devices'));

  const maintenance = (on: boolean) => async (req: FastifyRequest, reply: FastifyReply) => {
    let reason: string | null = null;
    if (on) {
      const body = req.body === undefined || req.body === null ? {} : requireObject(req.body, 'maintenance');
      const extra = Object.keys(body).filter((k) => k !== 'reason');
      if (extra.length) throw new InvalidParameterValue(`Unknown attribute(s) for maintenance: ${extra.join(', ')}`);
      if (body.reason !== undefined && body.reason !== null && typeof body.reason !== 'string') {
        throw new InvalidParameterValue('Invalid input for field/attribute reason. Expected a string.');
      }
      reason = (body.reason as string | undefined) ?? null;
    }
    // Ironic applies maintenance before answering: wait for our turn in the queue by default.
    const wait = requestedWait(req) ?? 30;
    const { node, intents } = await acceptor.accept(req, nodeIdent(req), { steps: [{ kind: 'maintenance', args: { maintenance: on, reason } }] });
    const done = await acceptor.waitAll(intents, wait);
    return replyFor(reply, req, base(req), node, done, () => reply.code(202).send());
  };
  app.put('/v1/nodes/:node/maintenance', maintenance(true));
  app.delete('/v1/nodes/:node/maintenance', maintenance(false));

  app.post('/v1/nodes/:node/intents', async (req, reply) => {
    const body = requireObject(req.body, 'intents');
    const extra = Object.keys(body).filter((k) => k !== 'steps');
    if (extra.length) throw new InvalidParameterValue(`Unknown attribute(s) for intents: ${extra.join(', ')}`);
    const steps = parseSteps(body.steps, req);
    const wait = requestedWait(req) ?? 0;
    const { node, intents } = await acceptor.accept(req, nodeIdent(req), {
      steps,
      prepare: (n) => {
        for (const s of steps) if (s.kind === 'set_boot_device') checkBootDeviceSupported(deps.registry, n, s.args.boot_device as string);
        const power = steps.filter((s) => s.kind === 'power').at(-1);
        return power ? { targetPowerState: power.args.target as string, lastError: null } : undefined;
      },
    });
    const done = await acceptor.waitAll(intents, wait);
    const b = base(req);
    const all = { intents: done.map((i) => intentView(i, node.uuid, b)) };
    reply.header('Location', `${b}/v1/intents/${intents[0].uuid}`);
    const finished = done.every((i) => i.state !== 'queued' && i.state !== 'running');
    return reply.code(finished ? 200 : 202).send(all);
  });

  app.get('/v1/nodes/:node/intents', async (req) => {
    const q = req.query as Query;
    const node = await getNode(db, nodeIdent(req));
    const limit = limitParam(q, config.api.max_limit);
    const marker = param(q, 'marker');
    const after = marker !== undefined ? (await getIntent(db, marker)).seq : undefined;
    const intents = await listNodeIntents(db, node.id, limit, after);
    return { intents: intents.map((i) => intentView(i, node.uuid, base(req))) };
  });

  app.get('/v1/intents/:intent', async (req) => {
    const intent = await getIntent(db, (req.params as { intent: string }).intent);
    const node = await getNodeById(db, intent.nodeId);
    const wait = requestedWait(req) ?? 0;
    return intentView(await acceptor.waiter.wait(intent, wait * 1000), node.uuid, base(req));
  });

  app.delete('/v1/intents/:intent', async (req) => {
    const intent = await getIntent(db, (req.params as { intent: string }).intent);
    const node = await getNodeById(db, intent.nodeId);
    const cancelled = await withTransaction(db, async (trx) => {
      // The node's row lock orders this with requests appending intents (and their targets).
      const locked = await getNode(trx, node.uuid, { forUpdate: true });
      const ok = await cancelIntent(trx, intent.id);
      if (ok && intent.batch !== null && intent.stepIndex !== null) await skipRestOfBatch(trx, intent.batch, intent.stepIndex);
      // No power intent left to reach target_power_state: nothing is pending any more.
      if (ok) await clearSettledPowerTarget(trx, locked);
      return ok;
    });
    if (!cancelled) throw new Conflict(`Intent ${intent.uuid} is ${(await getIntent(db, intent.uuid)).state} and can no longer be cancelled.`);
    return intentView(await getIntent(db, intent.uuid), node.uuid, base(req));
  });

}
