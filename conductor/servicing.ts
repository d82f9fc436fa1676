/**
 * Servicing (API 1.87, Ironic's conductor/servicing.py): steps run on an active node, which
 * returns to active, or goes to `service failed` when a step fails.
 *
 * A step is one the node's interfaces declare for servicing (conductor/steps.ts), or one of
 * the flow steps Ironic's conductor resolves itself (RESERVED_STEP_HANDLER_MAPPING):
 * `power_on`, `power_off` and `reboot`, run through the node's power interface. A step that
 * would hand the node to an agent (`service wait`) is not supported yet.
 */
import { InvalidParameterValue, PowerOffDisabled, UnsupportedDriverExtension } from '../common/errors.js';
import type { UserStep } from '../common/steps.js';
import { pyRepr } from '../common/py-repr.js';
import type { NodeChanges } from '../db/nodes.js';
import type { PowerTarget } from '../drivers/interfaces.js';
import { declaredStep, runDeclaredStep, stepId, taskInterfaces } from './steps.js';
import type { ActionContext } from './actions/types.js';

const FLOW_POWER: Readonly<Record<string, PowerTarget>> = { power_on: 'power on', power_off: 'power off', reboot: 'rebooting' };

/** A step in the order Ironic's API builds it (interface, step, args, priority). */
function repr(step: UserStep): string {
  const ordered: Record<string, unknown> = { interface: step.interface, step: step.step };
  if (step.args !== undefined) ordered.args = step.args;
  if (step.priority !== undefined) ordered.priority = step.priority;
  return pyRepr(ordered);
}

/** Checks every step before any runs (Ironic's _validate_user_steps), then runs them in order. */
export async function runServiceSteps(ctx: ActionContext, steps: readonly UserStep[]): Promise<NodeChanges> {
  const errors = steps.filter((s) => !Object.hasOwn(FLOW_POWER, s.step) && !declaredStep(ctx, 'service', s))
    .map((s) => `node does not support this service step: ${repr(s)}`);
  if (errors.length) throw new InvalidParameterValue(errors.join('; '));
  const changes: NodeChanges = {};
  for (const step of steps) {
    const decl = Object.hasOwn(FLOW_POWER, step.step) ? undefined : declaredStep(ctx, 'service', step);
    if (decl) {
      const { run, powerState } = await runDeclaredStep(ctx, 'service', decl, { interface: step.interface, step: step.step, priority: step.priority ?? 0, args: step.args ?? {} });
      if (run === 'wait') throw new UnsupportedDriverExtension(`Service step ${stepId(step)} hands the node to its agent, which servicing does not support yet.`);
      if (powerState) changes.powerState = powerState;
      continue;
    }
    const target = FLOW_POWER[step.step];
    if (target === 'power off' && ctx.node.disablePowerOff) throw new PowerOffDisabled(target);
    await taskInterfaces(ctx).power.setPowerState(ctx.driver, target);
    changes.powerState = target === 'power off' ? 'power off' : 'power on';
  }
  return changes;
}
