import { AgentStepFailed, DeployStepCleanedUp, GalvanicError } from '../../common/errors.js';
import { ProvisionState, eventChanges, hasEvent, nextState } from '../../common/states.js';
import type { NodeChanges } from '../../db/nodes.js';
import { abortCleaning, agentOf, continueFromHeartbeat, endOfRunChanges, runToContinue, tearDownCleaning, type RunKind } from '../steps.js';
import { taskPower } from '../node-power.js';
import type { Action, ActionContext, ActionResult } from './types.js';
import { tearDownService } from '../servicing.js';
import { pausedInMaintenance } from '../../drivers/provision-checks.js';

/** Ironic's last_error for a run aborted by a heartbeat of its node in maintenance. */
const IN_MAINTENANCE: Readonly<Record<RunKind, string>> = {
  deploy: 'Deploy aborted as node is in maintenance mode',
  clean: 'Cleaning aborted as node is in maintenance mode',
  service: 'Service aborted as node is in maintenance mode',
};

/** The run a node's state belongs to, when it waits for (or works with) an agent. */
function runOf(state: string): RunKind | undefined {
  if (state === ProvisionState.DEPLOYWAIT || state === ProvisionState.DEPLOYING) return 'deploy';
  if (state === ProvisionState.CLEANWAIT || state === ProvisionState.CLEANING) return 'clean';
  if (state === ProvisionState.SERVICEWAIT || state === ProvisionState.SERVICING) return 'service';
  return undefined;
}

/**
 * What a heartbeat queued: the node's conductor looks at its agent and carries the deploy, the
 * cleaning or the servicing on (conductor/steps.ts); run again after its conductor died, it finds the
 * node showing the step it was at, and carries on from there. A heartbeat that finds the node
 * in another state (the run ended, was aborted) does nothing. Failures fail the run as Ironic's error handlers
 * do: deploy failed (powered off, or the agent's boot cleaned up after a deploy step that failed,
 * conductor/steps.ts), or clean failed with the node in maintenance. A node in
 * maintenance pauses its run, or has it aborted ([conductor] allow_provisioning_in_maintenance).
 */
export const agentContinueAction: Action = {
  async run(ctx: ActionContext): Promise<ActionResult> {
    const state = ctx.node.provisionState;
    const type = runToContinue(ctx.node);
    if (!type) return { result: { skipped: `node is ${state}` } };
    try {
      if (ctx.node.maintenance) {
        // Ironic's _heartbeat_in_maintenance: paused, nothing asked of the agent or the BMC, until
        // a heartbeat after maintenance is unset; or, not allowed, aborted.
        if (pausedInMaintenance(ctx.node, ctx.conductor)) return { result: { skipped: 'node is in maintenance' } };
        throw new AgentStepFailed(IN_MAINTENANCE[type]);
      }
      const outcome = await continueFromHeartbeat(ctx, type);
      if (outcome.wait) return { changes: outcome.changes };
      if (outcome.abortAfter) {
        // Ironic fails the cleaning, then aborts it: clean failed, not in maintenance.
        const changes: NodeChanges = { ...(await abortCleaning(ctx)), ...eventChanges(ctx.node, 'fail') };
        return { changes, history: { severity: 'INFO', eventType: 'provisioning', event: changes.lastError as string } };
      }
      const node = ctx.node;
      // Ironic's machine has no done from service wait: the heartbeat's resume comes first.
      const from = type === 'service' && node.provisionState === ProvisionState.SERVICEWAIT ? { ...node, provisionState: nextState(node.provisionState, 'resume') } : node;
      const changes: NodeChanges = { ...endOfRunChanges(node, type), ...eventChanges(from, 'done') };
      if (type === 'deploy') {
        changes.powerState = 'power on';
        return { changes, history: { severity: 'INFO', eventType: 'provisioning', event: `Deployed (${node.deployInterface} deploy), node is ${changes.provisionState}.` } };
      }
      if (type === 'service') {
        const powerState = await tearDownService(ctx, false);
        if (powerState) changes.powerState = powerState;
        return { changes, history: { severity: 'INFO', eventType: 'provisioning', event: `Servicing through the agent done, node is ${changes.provisionState}.` } };
      }
      if ((await tearDownCleaning(ctx)).poweredOff) changes.powerState = 'power off';
      return { changes, history: { severity: 'INFO', eventType: 'provisioning', event: `Cleaning through the agent done, node is ${changes.provisionState}.` } };
    } catch (err) {
      await failRun(ctx, type, err);
      throw err;
    }
  },

  onFailure(ctx, error, final) {
    if (!final) return {};
    const type = runOf(ctx.node.provisionState);
    if (!type) return {};
    return agentStepFailureChanges(ctx.node, type, error);
  },
};

/**
 * Ironic's set_failed_state / cleaning_error_handler side effects on the hardware, best effort,
 * the power state they leave recorded as node_power_action records it. A deploy step whose
 * failure the deploy interface has cleaned up after (DeployStepCleanedUp) has had its handler.
 */
async function failRun(ctx: ActionContext, type: RunKind, err: unknown): Promise<void> {
  try {
    let powerState: 'power on' | 'power off' | undefined;
    if (type === 'clean') {
      if ((await tearDownCleaning(ctx, { stepFailed: stepWasRunning(ctx.node, type) })).poweredOff) powerState = 'power off';
    } else if (type === 'service') {
      powerState = await tearDownService(ctx, true);
    } else if (!(err instanceof DeployStepCleanedUp)) {
      if (ctx.agent) await agentOf(ctx).wipeToken();
      if (!ctx.node.disablePowerOff) {
        await taskPower(ctx).setPowerState(ctx.driver, 'power off');
        powerState = 'power off';
      }
    }
    if (powerState) await ctx.task.progress({ powerState });
  } catch (e) {
    ctx.log.warn({ err: (e as Error).message, cause: err instanceof GalvanicError ? err.code : 'error' }, `tearing down after a failed ${type} failed`);
  }
}

/** A step of the run was running when it failed: the error handlers then set maintenance and a fault. */
function stepWasRunning(node: ActionContext['node'], type: RunKind): boolean {
  return Object.keys(node[`${type}Step`] ?? {}).length > 0;
}

/**
 * How a failed agent run leaves the node: deploy failed; or clean failed, and in maintenance
 * with fault `clean failure` when a step was running (Ironic's cleaning_error_handler).
 */
export function agentStepFailureChanges(node: ActionContext['node'], type: RunKind, error: Error): NodeChanges {
  const reason = error.message || String(error);
  const failed = hasEvent(node.provisionState, 'fail') ? nextState(node.provisionState, 'fail') : { deploy: ProvisionState.DEPLOYFAIL, clean: ProvisionState.CLEANFAIL, service: ProvisionState.SERVICEFAIL }[type];
  const changes: NodeChanges = { ...endOfRunChanges(node, type), provisionState: failed, targetProvisionState: null, provisionUpdatedAt: new Date(), lastError: reason };
  if (type === 'deploy') return changes;
  // Ironic's cleaning_error_handler and servicing_error_handler: a step was running, so maintenance.
  if (stepWasRunning(node, type)) {
    changes.maintenance = true;
    changes.fault = type === 'clean' ? 'clean failure' : 'service failure';
    if (!node.maintenanceReason) changes.maintenanceReason = reason;
  }
  return changes;
}
