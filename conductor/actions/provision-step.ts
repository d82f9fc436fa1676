import { ProvisionState, transitionFor, type Transition } from '../../common/states.js';
import { checkNodeForProvision, provisionTransition, transitionStartChanges } from '../../drivers/provision-checks.js';
import type { Node, NodeChanges } from '../../db/nodes.js';
import type { Intent } from '../../db/intents.js';
import { provisionAction } from './provision.js';
import { argsOf, intentArgs, processInspectionArgs, type ProvisionArgs, type ProvisionStepArgs } from '../../common/intent-kinds.js';
import type { Task } from '../task-manager.js';
import type { Action, ActionContext, ActionResult } from './types.js';
import { agentContinueAction } from './agent-continue.js';
import { AgentStepFailed } from '../../common/errors.js';
import { WAIT_STATES } from '../../common/states.js';

function stepArgs(intent: Intent): ProvisionStepArgs {
  return argsOf(intent, 'provision_step');
}

const ALL_STATES = Object.values(ProvisionState);

/**
 * Marks the error of a step refused before its transition started: the node must be left as
 * it is. The mark travels with the error to onFailure, which sees nothing else of the run.
 */
const REFUSED_BEFORE_START = Symbol('refused before its transition started');

function refusedBeforeStart(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as Record<symbol, unknown>)[REFUSED_BEFORE_START] === true;
}

/**
 * The transition an earlier attempt of this step started, read back from the node: a retry
 * after a transient BMC failure finds the node still in the transitional state (a tear-down
 * that reached its cleaning in `cleaning`), and carries on with the same transition.
 */
function startedTransition(node: Node, verb: string): Transition | undefined {
  if (node.targetProvisionState === null) return undefined;
  for (const from of ALL_STATES) {
    const t = transitionFor(from, verb);
    if (!t || t.target !== node.targetProvisionState) continue;
    if (t.via === node.provisionState) return t;
    if (t.work === 'tear_down' && node.provisionState === ProvisionState.CLEANING) return t;
  }
  return undefined;
}

/** The provision action's arguments for a transition, as the API would have queued them. */
function provisionArgs(node: Node, args: ProvisionStepArgs, t: Transition): ProvisionArgs {
  return { verb: args.verb, target: t.target, onFail: t.onFail, work: t.work, automatedClean: node.automatedClean ?? args.automatedCleanDefault };
}

/**
 * The context the provision action sees: the same task and node, with its own arguments;
 * `pending` changes go with the action's first progress write.
 */
function withArgs(ctx: ActionContext, args: ProvisionArgs, pending?: NodeChanges): ActionContext {
  let task = ctx.task;
  if (pending) {
    const held = ctx.task;
    let first: NodeChanges | undefined = pending;
    task = Object.create(held) as Task;
    task.progress = (changes: NodeChanges) => {
      const merged = first ? { ...first, ...changes } : changes;
      first = undefined;
      return held.progress(merged);
    };
  }
  return {
    task, registry: ctx.registry, log: ctx.log, driver: ctx.driver, agent: ctx.agent, configdrive: ctx.configdrive, conductor: ctx.conductor,
    intent: { ...ctx.intent, args: intentArgs('provision', args) },
    get node() {
      return ctx.node;
    },
  };
}

/** How long a step waiting for an agent sleeps when no heartbeat wakes it: its state's deadline settles it. */
const WAIT_RECHECK_MS = 60_000;

function isWaiting(intent: Intent): boolean {
  return intent.attempts > 1 && typeof (intent.result as { waiting?: unknown } | null)?.waiting === 'string';
}

/**
 * A step whose node waits for its agent (wait call-back, clean wait) is not done: it goes back
 * to the queue, and the agent's heartbeats wake it (api/ramdisk.ts), so that the operation
 * counts the node done only once the run has ended.
 */
function untilDone(res: ActionResult, ctx: ActionContext): ActionResult {
  // An in-band inspection leaves its node in inspect wait without saying so (the agent may have answered already).
  const state = res.changes?.provisionState ?? (ctx.node.provisionState === ProvisionState.INSPECTWAIT ? ProvisionState.INSPECTWAIT : undefined);
  if (state === undefined || !Object.hasOwn(WAIT_STATES, state)) return res;
  return { ...res, result: { waiting: state }, requeueAt: new Date(Date.now() + WAIT_RECHECK_MS) };
}

/** The processing of the inspection data the agent posted, handed to this waiting step by the API. */
function processingOf(ctx: Pick<ActionContext, 'node' | 'intent'>): ProvisionArgs | undefined {
  const data = stepArgs(ctx.intent).inspection;
  return data && ctx.node.provisionState === ProvisionState.INSPECTING ? processInspectionArgs(data) : undefined;
}

/** A waiting step woken (by a heartbeat or its recheck): carries the run on, or ends with it. */
async function continueWaiting(ctx: ActionContext): Promise<ActionResult> {
  const node = ctx.node;
  const processing = processingOf(ctx);
  if (processing) return provisionAction.run(withArgs(ctx, processing));
  if (Object.hasOwn(WAIT_STATES, node.provisionState)) {
    const res = await agentContinueAction.run(ctx);
    const ended = res.changes?.provisionState !== undefined && !Object.hasOwn(WAIT_STATES, res.changes.provisionState);
    if (!ended) return { ...res, result: { waiting: node.provisionState }, requeueAt: new Date(Date.now() + WAIT_RECHECK_MS) };
    // Ended in failure (an abort after a step that was not abortable): the step fails with it.
    if (typeof res.changes?.lastError === 'string') {
      await ctx.task.progress(res.changes);
      throw new AgentStepFailed(res.changes.lastError);
    }
    return res;
  }
  // The wait ended without it: its deadline failed the node (or an abort), or it is done.
  if (node.targetProvisionState === null && node.lastError === null) return {};
  throw new AgentStepFailed(node.lastError ?? `Node ${node.uuid} is ${node.provisionState}.`);
}

/**
 * A provision verb run as a step of a group operation. Unlike `PUT …/states/provision`, which
 * starts the transition when it accepts the verb, the step starts it when the node's turn
 * comes (a node waiting for admission stays as it is), checked again by the same rules the API
 * applied when the operation was created, since the node may have changed meanwhile. Then it
 * does the provision action's work, so that the step ends, and the node counts as done, only
 * once the node has reached the verb's target state (deploy: `active`), or failed into its
 * failure state.
 */
export const provisionStepAction: Action = {
  notification: provisionAction.notification,

  async run(ctx: ActionContext): Promise<ActionResult> {
    const args = stepArgs(ctx.intent);
    if (isWaiting(ctx.intent)) return continueWaiting(ctx);
    let t = ctx.intent.attempts > 1 ? startedTransition(ctx.node, args.verb) : undefined;
    if (!t) {
      try {
        t = provisionTransition(ctx.node, args.verb, true);
        checkNodeForProvision(ctx.registry, ctx.node, args.verb, t, ctx.conductor);
      } catch (err) {
        if (typeof err === 'object' && err !== null) (err as Record<symbol, unknown>)[REFUSED_BEFORE_START] = true;
        throw err;
      }
      const start = transitionStartChanges(t);
      // A deploy records its step before any BMC call: the start goes with that write, one
      // transaction fewer per node (a group deploy makes thousands of them at once).
      if (t.work === 'deploy') return untilDone(await provisionAction.run(withArgs(ctx, provisionArgs(ctx.node, args, t), start)), ctx);
      await ctx.task.progress(start);
    }
    return untilDone(await provisionAction.run(withArgs(ctx, provisionArgs(ctx.node, args, t))), ctx);
  },

  onFailure(ctx, error, final) {
    if (isWaiting(ctx.intent)) {
      // Processing the agent's inspection data fails as its own intent would; otherwise as the agent's run fails.
      const processing = processingOf(ctx);
      if (processing) return provisionAction.onFailure?.({ node: ctx.node, intent: { ...ctx.intent, args: intentArgs('provision', processing) } }, error, final) ?? {};
      return agentContinueAction.onFailure?.(ctx, error, final) ?? {};
    }
    const args = stepArgs(ctx.intent);
    // Refused before it started (the node had moved on): the node is left as it is.
    const t = refusedBeforeStart(error) ? undefined : startedTransition(ctx.node, args.verb);
    if (!t || !provisionAction.onFailure) return {};
    const intent = { ...ctx.intent, args: intentArgs('provision', provisionArgs(ctx.node, args, t)) };
    return provisionAction.onFailure({ node: ctx.node, intent }, error, final);
  },
};
