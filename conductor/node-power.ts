/**
 * The conductor's one door to a node's power (Ironic's node_power_action, as far as the node's
 * agent goes). Every power change the conductor makes goes through `nodePowerAction`: a user's
 * power intent, the steps and deploy interfaces (through the power interface they are given),
 * the tear-downs, the power sync.
 *
 * A power off or a reboot ends the agent that runs on the node. The one that boots next is a
 * new process: it may have another address, it makes a new certificate (automatic TLS), and it
 * looks itself up for a token of its own. So before the BMC is asked, the agent's URL, its
 * certificate and the steps it offered are forgotten and its token deleted (Ironic's
 * wipe_internal_info_on_power_off), in one transaction, while the task holds the node:
 * - a heartbeat of the old agent that comes later is refused (its token is gone), so it
 *   cannot bring the old URL or certificate back;
 * - no token is minted while the task holds the node (db/agent-tokens.ts mintAgentToken), so
 *   the old agent cannot take the new one's token between the wipe and the reset;
 * - heartbeats are recorded only once the task has let the node go (api/ramdisk.ts): the first
 *   one is the new agent's, with its own URL and certificate.
 * It is done even when the node already is in the state asked for: it may have been powered
 * off behind the conductor's back.
 */
import { UnsupportedDriverExtension } from '../common/errors.js';
import { LOOKUP_ALLOWED_STATES } from '../common/states.js';
import { wipeAgentToken } from '../db/agent-tokens.js';
import type { DriverContext, PowerInterface, PowerTarget } from '../drivers/interfaces.js';
import type { ActionContext } from './actions/types.js';
import type { Task } from './task-manager.js';

/** What driver_internal_info keeps of an agent only while it lives. */
const AGENT_LIFE_KEYS = ['agent_url', 'agent_verify_ca', 'agent_cached_deploy_steps', 'agent_cached_clean_steps', 'agent_cached_service_steps'] as const;

/** Whether a power change ends the agent running on the node (all but a power on do). */
export function endsAgent(target: PowerTarget): boolean {
  return target !== 'power on';
}

/** What a power change acts on. */
export interface NodePowerTarget {
  /** The exclusive task holding the node. */
  task: Task;
  power: PowerInterface;
  driver: DriverContext;
  /**
   * A run's working copy of driver_internal_info (conductor/steps.ts), which the run writes
   * again later: it is wiped in place and written as it is, so that what the run writes next
   * keeps the wipe. Without it, the node's own driver_internal_info is wiped.
   */
  info?: Record<string, unknown>;
  /** The agent that was at this URL is gone: its connections can be closed. */
  agentGone?(url: string): void;
}

/**
 * Drives the node's power to `target` through its power interface, the agent's traces wiped
 * first when the change ends the agent.
 * @throws what the power interface throws; LockLost when the task no longer holds the node
 */
export async function nodePowerAction(t: NodePowerTarget, target: PowerTarget, timeout?: number): Promise<void> {
  if (endsAgent(target)) await wipeAgent(t);
  await t.power.setPowerState(t.driver, target, timeout);
}

/**
 * Whether the node may have an agent to forget: traces of one in driver_internal_info, or a
 * state in which an agent may have looked itself up (its token minted, no heartbeat yet). A
 * node out of those states with no trace gets no write: a power intent then touches the
 * database only for its outcome, which waits out an outage (a write before the BMC call would
 * fail the intent instead), and the power path costs no transaction.
 */
function mayHaveAgent(t: NodePowerTarget): boolean {
  const info = t.info ?? t.task.node.driverInternalInfo ?? {};
  return AGENT_LIFE_KEYS.some((k) => info[k] !== undefined) || LOOKUP_ALLOWED_STATES.has(t.task.node.provisionState);
}

async function wipeAgent(t: NodePowerTarget): Promise<void> {
  if (!mayHaveAgent(t)) return;
  const url = t.task.node.driverInternalInfo?.agent_url ?? t.info?.agent_url;
  const info = t.info ?? { ...t.task.node.driverInternalInfo };
  for (const k of AGENT_LIFE_KEYS) delete info[k];
  t.task.agentToken.value = undefined;
  await t.task.progressWith({ driverInternalInfo: { ...info } }, (trx, node) => wipeAgentToken(trx, node.id));
  if (typeof url === 'string') t.agentGone?.(url);
}

/**
 * The node's power interface as an action and its steps use it: each change through
 * nodePowerAction, `info` being the run's working copy of driver_internal_info, if any.
 * @throws UnsupportedDriverExtension when the node's power interface is not enabled here
 */
export function taskPower(ctx: ActionContext, info?: Record<string, unknown>): PowerInterface {
  const power = ctx.registry.impl('power', ctx.node.powerInterface);
  if (!power) throw new UnsupportedDriverExtension(`Power interface ${ctx.node.powerInterface} is not enabled on this conductor.`);
  return {
    validate: (driverInfo) => power.validate(driverInfo),
    getPowerState: (d) => power.getPowerState(d),
    getSupportedPowerStates: (d) => power.getSupportedPowerStates(d),
    setPowerState: (driver, target, timeout) => nodePowerAction({
      task: ctx.task, power, driver, info,
      agentGone: (url) => {
        // The task's agent session holds the old token: the next use reads the node again.
        ctx.agentSession = undefined;
        ctx.agent?.client.forget(url);
      },
    }, target, timeout),
  };
}
