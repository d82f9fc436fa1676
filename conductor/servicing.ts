/**
 * Servicing (API 1.87, Ironic's conductor/servicing.py): steps run on an active node, which
 * returns to active, or goes to `service failed` when a step fails.
 *
 * A step is one the node's interfaces declare for servicing, one of the flow steps Ironic's
 * conductor resolves itself (`power_on`, `power_off`, `reboot`), or one of the agent's own
 * service steps. When a step needs the agent and the deploy interface works through one, the
 * agent is booted (Ironic's prepare_service) and the node waits in `service wait`; its
 * heartbeats carry the run on (conductor/steps.ts), and at its end the instance is booted
 * again (Ironic's tear_down_service). Otherwise, as when every step runs out of band, the steps
 * run at once and the instance stays up.
 */
import { InvalidParameterValue, UnsupportedDriverExtension } from '../common/errors.js';
import { isFlowPowerStep, type UserStep } from '../common/steps.js';
import type { NodeChanges } from '../db/nodes.js';
import { bootAgent } from '../drivers/deploy/agent-base.js';
import { serviceStepRepr, servicingNeedsAgent } from '../drivers/step-plan.js';
import type { BootInterface, ManagementInterface, PowerInterface } from '../drivers/interfaces.js';
import {
  agentOf, declaredStep, dii, enabled, runDeclaredStep, runFlowPowerStep, stepId, taskInterfaces, usesAgent, waitChanges, wipedInternalInfo,
  type RunRecord, type StepOutcome,
} from './steps.js';
import type { ActionContext } from './actions/types.js';

/**
 * Checks every step before any runs (Ironic's _validate_user_steps): declared ones, flow
 * steps, and where an agent will run, steps of the deploy interface its agent may offer (those
 * are checked against its list once it is up). Then runs them: through the agent when one is
 * needed (the node then waits), else at once.
 * @throws InvalidParameterValue for steps the node does not support
 */
export async function runServicing(ctx: ActionContext, steps: readonly UserStep[]): Promise<StepOutcome & { changes?: NodeChanges }> {
  const withAgent = servicingNeedsAgent(ctx.node, ctx.registry, steps);
  const errors = steps.filter((s) => !isFlowPowerStep(s) && !declaredStep(ctx, 'service', s) && !(withAgent && s.interface === 'deploy'))
    .map((s) => `node does not support this service step: ${serviceStepRepr(s)}`);
  if (errors.length) throw new InvalidParameterValue(errors.join('; '));
  if (withAgent) return startServicing(ctx, steps);
  return { wait: false, changes: await runOutOfBand(ctx, steps) };
}

/**
 * The steps run at once, in order, without the agent, on one working copy of
 * driver_internal_info, written with the outcome (a step's reboot writes it too: node-power.ts).
 */
async function runOutOfBand(ctx: ActionContext, steps: readonly UserStep[]): Promise<NodeChanges> {
  const info = { ...dii(ctx) };
  const changes: NodeChanges = { driverInternalInfo: info };
  for (const step of steps) {
    const record: RunRecord = {};
    const decl = isFlowPowerStep(step) ? undefined : declaredStep(ctx, 'service', step);
    if (decl) {
      const { run, powerState } = await runDeclaredStep(ctx, 'service', decl, { interface: step.interface, step: step.step, priority: step.priority ?? 0, args: step.args ?? {} }, info);
      if (run === 'wait') throw new UnsupportedDriverExtension(`Service step ${stepId(step)} hands the node to its agent, and node ${ctx.node.uuid}'s deploy interface ${ctx.node.deployInterface ?? ''} runs none.`);
      if (powerState) changes.powerState = powerState;
      continue;
    }
    await runFlowPowerStep(ctx, step, record, info);
    if (record.powerState) changes.powerState = record.powerState;
  }
  return changes;
}

/**
 * Starts a servicing through the agent (Ironic's do_node_service with prepare_service): the
 * steps asked for kept, the agent booted, and the node waiting in `service wait` with no step
 * yet (the changes returned); the steps are planned once the agent offers its own.
 */
async function startServicing(ctx: ActionContext, requested: readonly UserStep[]): Promise<StepOutcome> {
  const info = wipedInternalInfo(dii(ctx), 'service');
  info.service_steps_requested = requested;
  await ctx.task.progress({ serviceStep: {}, driverInternalInfo: info });
  await bootAgent(taskInterfaces(ctx));
  return { wait: true, changes: { ...waitChanges(ctx, 'service', info), powerState: 'power on' } };
}

/**
 * Ironic's tear_down_inband_service: the node powered off, the agent's boot undone (its token
 * wiped), the instance's boot set up again (the disk: the agent's deploys boot from it) and
 * the node powered on, or rebooted where it may not be powered off. After a failure only the
 * agent's boot is undone: the node is left as the failure left it.
 * @returns the power state it leaves, when it sets one
 */
export async function tearDownService(ctx: ActionContext, failed: boolean): Promise<'power on' | undefined> {
  if (!usesAgent(ctx)) return undefined;
  const boot = enabled(ctx, 'boot') as BootInterface;
  const power = enabled(ctx, 'power') as PowerInterface;
  if (!failed && !ctx.node.disablePowerOff) await power.setPowerState(ctx.driver, 'power off');
  await (boot.cleanUpRamdisk ?? boot.cleanUpInstance).call(boot, ctx.driver);
  if (ctx.agent) await agentOf(ctx).wipeToken();
  if (failed) return undefined;
  await (enabled(ctx, 'management') as ManagementInterface).setBootDevice(ctx.driver, 'disk', true);
  await power.setPowerState(ctx.driver, ctx.node.disablePowerOff ? 'rebooting' : 'power on');
  return 'power on';
}

/**
 * Ironic's do_node_service_abort: the servicing torn down (the instance booted again), and
 * last_error says which step it stopped at (get_last_error).
 */
export async function abortServicing(ctx: ActionContext): Promise<NodeChanges> {
  const step = ctx.node.serviceStep;
  const powerState = await tearDownService(ctx, false);
  let lastError = 'By request, the service operation was aborted';
  if (step && Object.keys(step).length) lastError += ` during or after the completion of step "${stepId(step as { interface: string; step: string })}"`;
  return { lastError, serviceStep: {}, driverInternalInfo: wipedInternalInfo(dii(ctx), 'service'), ...(powerState ? { powerState } : {}) };
}
