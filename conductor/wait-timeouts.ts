/**
 * A wait for a ramdisk that outlived its `[conductor]` timeout, ended as Ironic ends it
 * (_check_deploy_timeouts, _check_cleanwait_timeouts, _check_servicewait_timeouts and
 * _check_inspect_wait_timeouts, whose callbacks cleanup_after_timeout,
 * cleanup_cleanwait_timeout, cleanup_servicewait_timeout and cleanup_inspectwait_timeout run
 * the error handlers), in two halves. The conductor's check fails the node in its transaction,
 * with Ironic's last_error and the rest of the handler's changes, and queues a provision
 * intent; the node's conductor runs it (no BMC is called inside a transaction) and tears down
 * what the wait's boot set up, with the tear-downs a run's own failure or end uses.
 */
import type { ProvisionArgs } from '../common/intent-kinds.js';
import { pyRepr } from '../common/py-repr.js';
import { ProvisionState as S, eventChanges } from '../common/states.js';
import type { Node, NodeChanges } from '../db/nodes.js';
import { agentStepFailureChanges } from './actions/agent-continue.js';
import type { ActionContext, ActionResult } from './actions/types.js';
import { tearDownService } from './servicing.js';
import { cleanUpDeploy, deployCleanUpFailure, tearDownCleaning, tearDownInspectionBoot, type RunKind } from './steps.js';
import { LockLost } from './task-manager.js';

/** What a timed-out wait comes to, written by the check in one transaction. */
export interface TimedOut {
  /** Ironic's last_error. */
  message: string;
  changes: NodeChanges;
  /** The provision intent that tears the wait's boot down. */
  cleanUp: ProvisionArgs;
}

/** Ironic's cleanup_inspectwait_timeout. */
const INSPECT_TIMEOUT = 'Timeout reached while inspecting the node. Please check if the ramdisk responsible for the inspection is running on the node.';

/**
 * How a node whose wait timed out is failed: Ironic's last_error, its error handler's changes
 * (agentStepFailureChanges: the run's step and the agent's traces forgotten; clean or service
 * failed in maintenance when a step was running, as cleaning_error_handler and
 * servicing_error_handler decide), and the clean-up to queue.
 * @throws Error for a node in no wait state: a bug of the caller
 */
export function timedOut(node: Node): TimedOut {
  switch (node.provisionState) {
    case S.DEPLOYWAIT:
      return failedRun(node, 'deploy', `Timeout reached while waiting for callback for node ${node.uuid}`);
    case S.CLEANWAIT:
      return failedRun(node, 'clean', `Timeout reached while cleaning the node. Please check if the ramdisk responsible for the cleaning is running on the node. Failed on step ${pyRepr(node.cleanStep ?? {})}.`);
    case S.SERVICEWAIT:
      return failedRun(node, 'service', `Timeout reached while servicing the node. Please check if the ramdisk responsible for the servicing is running on the node. Failed on step ${pyRepr(node.serviceStep ?? {})}.`);
    case S.INSPECTWAIT: {
      const changes = { ...eventChanges(node, 'timeout'), lastError: INSPECT_TIMEOUT };
      return { message: INSPECT_TIMEOUT, changes, cleanUp: cleanUpArgs(changes.provisionState) };
    }
    default:
      throw new Error(`Node ${node.uuid} waits for no call-back in "${node.provisionState}".`);
  }
}

function failedRun(node: Node, kind: RunKind, message: string): TimedOut {
  const changes = agentStepFailureChanges(node, kind, new Error(message));
  return { message, changes, cleanUp: cleanUpArgs(changes.provisionState as string) };
}

function cleanUpArgs(failed: string): ProvisionArgs {
  return { verb: 'timeout', target: failed, onFail: failed, work: 'clean_up_after_timeout' };
}

interface TearDown {
  /** Undoes the wait's boot; the power state it leaves, when it sets one. */
  run(ctx: ActionContext): Promise<'power on' | 'power off' | undefined>;
  /** How Ironic's handler words its failure after the timeout's last_error. */
  also(node: Pick<Node, 'uuid'>, err: Error): string;
}

/** By the state the timeout left the node in. */
const TEAR_DOWNS: Readonly<Record<string, TearDown>> = {
  // deploying_error_handler with clean_up: the deploy interface's clean_up.
  [S.DEPLOYFAIL]: {
    run: cleanUpDeploy,
    also: (_node, err) => deployCleanUpFailure(err),
  },
  // cleaning_error_handler: tear_down_cleaning.
  [S.CLEANFAIL]: {
    run: async (ctx) => ((await tearDownCleaning(ctx)).poweredOff ? 'power off' : undefined),
    also: (node, err) => `Also Failed to tear down cleaning on node ${node.uuid}, reason: ${err.message}`,
  },
  // servicing_error_handler: tear_down_service, which boots the instance again unless a step failed.
  [S.SERVICEFAIL]: {
    run: (ctx) => tearDownService(ctx, ctx.node.fault === 'service failure'),
    also: () => 'Also failed to tear down servicing.',
  },
  // inspecting_error_handler: the inspection's abort.
  [S.INSPECTFAIL]: {
    run: async (ctx) => (await tearDownInspectionBoot(ctx, true)).powerState as 'power on' | 'power off' | undefined,
    also: (node, err) => `Also Failed to abort inspection on node ${node.uuid}, reason: ${err.message}`,
  },
};

function tearDownOf(failed: string): TearDown {
  if (!Object.hasOwn(TEAR_DOWNS, failed)) throw new Error(`No wait times out into "${failed}".`);
  return TEAR_DOWNS[failed];
}

/**
 * The last_error a failed clean-up leaves: the timeout's, with the handler's words for the
 * failure. Undefined once the node has moved on (a verb the API took meanwhile, such as
 * `manage` from clean failed, cleared it): that last_error is not the timeout's any more.
 */
function failedCleanUpError(node: Pick<Node, 'uuid' | 'provisionState' | 'lastError'>, failed: string, err: Error): string | undefined {
  if (node.provisionState !== failed) return undefined;
  const also = tearDownOf(failed).also(node, err);
  return node.lastError ? `${node.lastError}. ${also}` : also;
}

/**
 * The intent's work: what the wait booted torn down, once. A BMC that fails (or any other
 * failure) is not retried, as Ironic's handler tries once: its error goes into last_error and
 * history, the intent ends and the node is free for the next verb. The node may have moved on
 * since the check failed it (a verb the API took, whose own work waits behind this intent): the
 * boot is torn down all the same, as Ironic tears it down before any verb can come, but its
 * state and last_error are the verb's (and commitTasks drops a state written over a later verb's).
 */
export async function cleanUpAfterTimeout(ctx: ActionContext, failed: string): Promise<ActionResult> {
  const tearDown = tearDownOf(failed);
  try {
    const powerState = await tearDown.run(ctx);
    return { changes: powerState ? { powerState } : {} };
  } catch (err) {
    if (err instanceof LockLost) throw err;
    const error = err instanceof Error ? err : new Error(String(err));
    const lastError = failedCleanUpError(ctx.node, failed, error);
    const event = lastError ?? `Tearing down after the timeout failed on node ${ctx.node.uuid}: ${error.message}`;
    ctx.log.error({ node: ctx.node.uuid, err: error.message }, event);
    return {
      changes: lastError === undefined ? {} : { lastError },
      result: { error: error.message },
      history: { severity: 'ERROR', eventType: 'provisioning', event },
    };
  }
}

/**
 * The node's changes when the intent failed without an outcome of its own (its conductor died
 * while it ran): the failure in last_error as a failed tear-down's, never a state.
 */
export function cleanUpFailureChanges(node: Pick<Node, 'uuid' | 'provisionState' | 'lastError'>, failed: string, err: Error): NodeChanges {
  return { lastError: failedCleanUpError(node, failed, err) ?? node.lastError };
}
