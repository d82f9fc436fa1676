import { UnsupportedDriverExtension } from '../../common/errors.js';
import { argsOf } from '../../common/intent-kinds.js';
import type { Action } from './types.js';

/**
 * Turns a node's console on or off. It only records the wish (`console_enabled`); the
 * console manager of the conductor that owns the node starts or stops the process when the
 * change is committed. Disabling bumps the access epoch (db/nodes.ts): sessions close.
 */
export const consoleAction: Action = {
  notification: { prefix: 'baremetal.node.console_set', payloadName: 'NodePayload', extra: () => ({}) },
  async run(ctx) {
    const { enabled } = argsOf(ctx.intent, 'console');
    if (enabled) {
      const name = ctx.node.consoleInterface ?? '';
      const iface = ctx.registry.console(name);
      if (!iface) throw new UnsupportedDriverExtension(`Console interface ${name} is not enabled on this conductor.`);
      iface.validate(ctx.node.driverInfo);
      if (!iface.command(ctx.node.uuid, ctx.node.driverInfo)) {
        throw new UnsupportedDriverExtension(`Node ${ctx.node.uuid} has console interface ${name}, which provides no console.`);
      }
    }
    return {
      changes: { consoleEnabled: enabled },
      result: { console_enabled: enabled },
      history: { severity: 'INFO', eventType: 'console', event: enabled ? 'Console enabled.' : 'Console disabled.' },
    };
  },
};
