/**
 * A node vendor passthru call (Ironic's ConductorManager.vendor_passthru): the method found
 * again on the node as it is now, its checks that need the BMC, then its work. A failure
 * fails the request and leaves the node alone: Ironic records nothing on the node either.
 */
import { argsOf } from '../../common/intent-kinds.js';
import { vendorMethod } from '../../drivers/vendor-passthru.js';
import type { Action } from './types.js';

export const vendorPassthruAction: Action = {
  async run(ctx) {
    const a = argsOf(ctx.intent, 'vendor_passthru');
    const method = vendorMethod(ctx.registry, ctx.node, a.method, a.http_method);
    method.validate?.(a.args);
    const value = await method.run(ctx.driver, a.args);
    // Wrapped: a method that returns nothing answers an empty body, not "null".
    return { result: { return: value ?? null } };
  },
  onFailure(ctx) {
    return { lastError: ctx.node.lastError };
  },
};
