import { InvalidParameterValue, PowerOffDisabled, UnsupportedDriverExtension } from '../../common/errors.js';
import type { PowerTarget } from '../../drivers/interfaces.js';
import { argsOf, POWER_TARGETS } from '../../common/intent-kinds.js';
import { taskPower } from '../node-power.js';
import type { Action, ActionContext } from './types.js';

/** The state a node is in once `target` has been reached. */
export function resultingPowerState(target: PowerTarget): 'power on' | 'power off' {
  return target === 'power off' || target === 'soft power off' ? 'power off' : 'power on';
}

function powerOf(ctx: ActionContext) {
  const power = ctx.registry.power(ctx.node.powerInterface ?? '');
  if (!power) throw new UnsupportedDriverExtension(`Power interface ${ctx.node.powerInterface} is not enabled on this conductor.`);
  return power;
}

/** Drives the node's power through its power interface (the conductor's power path, conductor/node-power.ts). */
export const powerAction: Action = {
  notification: {
    prefix: 'baremetal.node.power_set',
    payloadName: 'NodeSetPowerStatePayload',
    extra: (ctx) => ({ to_power: (argsOf(ctx.intent, 'power')).target }),
  },

  async run(ctx) {
    const { target, timeout } = argsOf(ctx.intent, 'power');
    if (!POWER_TARGETS.includes(target)) throw new InvalidParameterValue(`Invalid power target ${target}`);
    // Ironic's node_power_action refuses it under the lock, whatever the API saw.
    if (ctx.node.disablePowerOff && resultingPowerState(target) === 'power off') throw new PowerOffDisabled(target);
    const power = taskPower(ctx);
    power.validate(ctx.node.driverInfo);
    await power.setPowerState(ctx.driver, target, timeout);
    const state = resultingPowerState(target);
    return {
      changes: { powerState: state, targetPowerState: null, lastError: null },
      result: { power_state: state },
      history: { severity: 'INFO', eventType: 'power', event: `Power set to ${target}.` },
    };
  },

  onFailure(ctx, error, final) {
    if (!final) return {};
    const { target } = argsOf(ctx.intent, 'power');
    return { targetPowerState: null, lastError: `Failed to change power state to '${target}': ${error.message}` };
  },
};

/** Reads the power state (used by steps and power sync). */
export const getPowerStateAction: Action = {
  async run(ctx) {
    const state = await powerOf(ctx).getPowerState(ctx.driver);
    return { changes: { powerState: state }, result: { power_state: state } };
  },
};
