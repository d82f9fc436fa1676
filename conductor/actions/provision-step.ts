import { ProvisionState, transitionFor, type Transition } from '../../common/states.js';
import { checkNodeForProvision, provisionTransition, transitionStartChanges } from '../../drivers/provision-checks.js';
import type { Node, NodeChanges } from '../../db/nodes.js';
import type { Intent } from '../../db/intents.js';
import { provisionAction } from './provision.js';
import { argsOf, intentArgs, type ProvisionArgs, type ProvisionStepArgs } from '../../common/intent-kinds.js';
import type { Task } from '../task-manager.js';
import type { Action, ActionContext, ActionResult } from './types.js';

function stepArgs(intent: Intent): ProvisionStepArgs {
  return argsOf(intent, 'provision_step');
}

const ALL_STATES = Object.values(ProvisionState);

/** Steps refused before their transition started, whose node must be left as it is. */
const refused = new WeakSet<Intent>();

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
    task, registry: ctx.registry, log: ctx.log, driver: ctx.driver,
    intent: { ...ctx.intent, args: intentArgs('provision', args) },
    get node() {
      return ctx.node;
    },
  };
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
    let t = ctx.intent.attempts > 1 ? startedTransition(ctx.node, args.verb) : undefined;
    if (!t) {
      try {
        t = provisionTransition(ctx.node, args.verb, true);
        checkNodeForProvision(ctx.registry, ctx.node, args.verb, t);
      } catch (err) {
        refused.add(ctx.intent);
        throw err;
      }
      const start = transitionStartChanges(t);
      // A deploy records its step before any BMC call: the start goes with that write, one
      // transaction fewer per node (a group deploy makes thousands of them at once).
      if (t.work === 'deploy') return provisionAction.run(withArgs(ctx, provisionArgs(ctx.node, args, t), start));
      await ctx.task.progress(start);
    }
    return provisionAction.run(withArgs(ctx, provisionArgs(ctx.node, args, t)));
  },

  onFailure(ctx, error, final) {
    const args = stepArgs(ctx.intent);
    // Refused before it started (the node had moved on): the node is left as it is.
    const t = refused.has(ctx.intent) ? undefined : startedTransition(ctx.node, args.verb);
    if (!t || !provisionAction.onFailure) return {};
    const intent = { ...ctx.intent, args: intentArgs('provision', provisionArgs(ctx.node, args, t)) };
    return provisionAction.onFailure({ node: ctx.node, intent }, error, final);
  },
};
