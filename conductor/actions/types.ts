import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { Intent } from '../../db/intents.js';
import type { Node, NodeChanges } from '../../db/nodes.js';
import type { DriverRegistry } from '../../drivers/registry.js';
import type { DriverContext } from '../../drivers/interfaces.js';
import type { Task } from '../task-manager.js';
import type { AgentSession } from '../../drivers/agent/session.js';
import type { Config } from '../../common/config.js';
import type { AgentClient } from '../../drivers/agent/client.js';
import type { ConfigdriveServices } from '../configdrive.js';
import type { ProvisionOptions } from '../../drivers/provision-checks.js';

/** What the conductor gives actions that talk to agents. */
export interface AgentServices {
  client: AgentClient;
  /** The node's agent token, or null. */
  tokenOf(nodeId: number): Promise<string | null>;
  /** Forgets the node's token: its agent's work is over. */
  wipeToken(nodeId: number): Promise<void>;
  /** The MAC addresses of the node's ports, sent to the agent as Ironic sends its ports. */
  portsOf(nodeId: number): Promise<Array<{ address: string }>>;
  config: { agent: Config['agent']; deploy: Config['deploy'] };
}

/** What an action sees: the task holding the node, its driver context, and the registry. */
export interface ActionContext {
  task: Task;
  node: Node;
  intent: Intent;
  driver: DriverContext;
  registry: DriverRegistry;
  log: Logger;
  /** Agent client and token store, where the conductor has them. */
  agent?: AgentServices;
  /** The node's agent for this task, made on its first use (conductor/steps.ts agentOf). */
  agentSession?: AgentSession;
  /** Where deploys build and keep config drives, where the conductor has it. */
  configdrive?: ConfigdriveServices;
  /** The `[conductor]` options the provision rules read when the work runs. */
  conductor: ProvisionOptions;
}

/** The node fields an action changes, applied with the intent's outcome in one transaction. */
export interface ActionResult {
  changes?: NodeChanges;
  result?: unknown;
  history?: { severity: 'INFO' | 'WARNING' | 'ERROR'; eventType: string; event: string };
  /**
   * The work is not over but waits for an event (an agent's heartbeat): the intent goes back to
   * the queue, due at this time at the latest, and the node is released meanwhile.
   */
  requeueAt?: Date;
  /** More rows to write in the outcome's transaction, while the node is still held. */
  write?: (trx: Knex.Transaction, node: Node) => Promise<void>;
}

/** Ironic notification an action emits around its work: `<prefix>.start|end|error`. */
export interface ActionNotification {
  prefix: string;
  payloadName: string;
  extra(ctx: ActionContext): Record<string, unknown>;
}

/**
 * An action runs against the BMC with no transaction open. On failure it may say what
 * the node should look like afterwards (`onFailure`), e.g. a provision state rolled back.
 */
export interface Action {
  run(ctx: ActionContext): Promise<ActionResult>;
  /** Sees only the node and the intent: recovery calls it too, for an intent whose conductor died. */
  onFailure?(ctx: Pick<ActionContext, 'node' | 'intent'>, error: Error, final: boolean): NodeChanges;
  notification?: ActionNotification;
}
