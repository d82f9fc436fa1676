import { ProvisionState } from '../../common/states.js';
import { InvalidDriverInfo } from '../../common/errors.js';
import type { Action, ActionContext } from './types.js';

interface ProvisionArgs {
  verb: string;
  target: string;
  onFail: string;
}

/**
 * Ends a provision transition the API started. `manage` from enroll verifies: the power
 * interface must accept driver_info and answer a power-state read.
 */
export const provisionAction: Action = {
  notification: {
    prefix: 'baremetal.node.provision_set',
    payloadName: 'NodeSetProvisionStatePayload',
    extra: (ctx) => ({ event: (ctx.intent.args as unknown as ProvisionArgs).verb, previous_provision_state: ctx.node.provisionState }),
  },

  async run(ctx: ActionContext) {
    const args = ctx.intent.args as unknown as ProvisionArgs;
    const changes: Record<string, unknown> = { provisionState: args.target, targetProvisionState: null, provisionUpdatedAt: new Date() };
    if (ctx.node.provisionState === ProvisionState.VERIFYING) {
      const power = ctx.registry.power(ctx.node.powerInterface ?? '');
      if (!power) throw new InvalidDriverInfo(`Power interface ${ctx.node.powerInterface} is not enabled on this conductor.`);
      power.validate(ctx.node.driverInfo);
      changes.powerState = await power.getPowerState(ctx.driver);
    }
    return {
      changes,
      history: { severity: 'INFO', eventType: 'provisioning', event: `Node moved to ${args.target} (${args.verb}).` },
    };
  },

  onFailure(ctx: Pick<ActionContext, 'node' | 'intent'>, error: Error, final: boolean) {
    if (!final) return {};
    const args = ctx.intent.args as unknown as ProvisionArgs;
    const what = ctx.node.provisionState === ProvisionState.VERIFYING ? 'Failed to verify node' : `Failed to ${args.verb} node`;
    return {
      provisionState: args.onFail,
      targetProvisionState: null,
      provisionUpdatedAt: new Date(),
      lastError: `${what} ${ctx.node.uuid}: ${error.message}`,
    };
  },
};
