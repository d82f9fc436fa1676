import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { Config } from '../../common/config.js';
import { intentArgs } from '../../common/intent-kinds.js';
import { WAIT_STATES, WORKING_NOT_WAITING, eventChanges } from '../../common/states.js';
import { wipeAgentToken } from '../../db/agent-tokens.js';
import { recordHistory } from '../../db/node-history.js';
import { lockStalledNode, stalledNodes, updateNode } from '../../db/nodes.js';
import { enqueueIntents, wakeWaitingSteps, type IntentWake } from '../../db/intents.js';
import { withTransaction } from '../../db/transaction.js';
import type { PeriodicTask } from '../periodic.js';
import { timedOut } from '../wait-timeouts.js';

export interface ProvisionChecksDeps {
  db: Knex;
  config: Readonly<Config>;
  hostname: string;
  log: Logger;
  /** Whether this conductor manages the node (the hash ring). */
  owns(nodeUuid: string): boolean;
  /** Tells this conductor's intent runner of an intent queued here (the poll finds it otherwise). */
  wake?(wake: IntentWake): void;
}

/**
 * Fails what waits too long: nodes in a wait state past its `[conductor]` timeout (Ironic's
 * _check_deploy_timeouts, _check_cleanwait_timeouts, _check_servicewait_timeouts,
 * _check_inspect_wait_timeouts), and nodes left in a transitional state with no work queued and
 * no holder. A wait times out whatever is queued for its node (a group operation's step stays
 * queued while its node waits); only work running on the node holds it off. Each is checked
 * again under its row lock and changed in one transaction with its history. A wait's boot is
 * torn down by the node's conductor, through the intent queued in that transaction
 * (conductor/wait-timeouts.ts): nothing here calls a BMC.
 * As Ironic's, the wait timeouts leave nodes in maintenance alone: a run paused there waits
 * for maintenance to be unset.
 */
export function provisionChecksTask(deps: ProvisionChecksDeps): PeriodicTask {
  const c = deps.config.conductor;
  return {
    name: 'check_provision_states',
    spacingSeconds: c.check_provision_state_interval,
    async run() {
      const now = Date.now();
      const olderThan: Record<string, Date> = {};
      for (const [state, wait] of Object.entries(WAIT_STATES)) {
        const timeout = c[wait.timeoutOption];
        if (timeout > 0) olderThan[state] = new Date(now - timeout * 1000);
      }
      // Work being done holds the node's reservation and a running intent; a node in a working
      // state with neither for this long has nobody working on it (Ironic's _check_orphan_nodes), and fails.
      const grace = new Date(now - Math.max(c.heartbeat_timeout, c.orphaned_intent_timeout) * 1000);
      for (const state of WORKING_NOT_WAITING) olderThan[state] = grace;
      const candidates = (await stalledNodes(deps.db, c.conductor_group, olderThan)).filter((n) => deps.owns(n.uuid));
      let failed = 0;
      for (const cand of candidates) {
        const waiting = Object.hasOwn(WAIT_STATES, cand.provisionState);
        const done = await withTransaction(deps.db, async (trx) => {
          const node = await lockStalledNode(trx, cand.id, cand.provisionState, olderThan[cand.provisionState]);
          if (!node) return undefined;
          if (!waiting) {
            const message = `Node ${node.uuid} was left in "${node.provisionState}" with no conductor working on it; failing it.`;
            const changes = { ...eventChanges(node, 'fail'), lastError: message, deployStep: {}, cleanStep: {}, serviceStep: {} };
            await updateNode(trx, node.id, changes);
            await recordHistory(trx, { nodeId: node.id, severity: 'ERROR', eventType: 'provisioning', conductor: deps.hostname, user: null, operation: null, event: message });
            return { message, to: changes.provisionState, seq: undefined };
          }
          const t = timedOut(node);
          await updateNode(trx, node.id, t.changes);
          // Ironic's wipe_token_and_url: the agent's token goes with the wait, whatever the tear-down comes to.
          await wipeAgentToken(trx, node.id);
          await recordHistory(trx, { nodeId: node.id, severity: 'ERROR', eventType: 'provisioning', conductor: deps.hostname, user: null, operation: null, event: t.message });
          // A group operation's step waiting for this call-back is woken to end with the wait:
          // finding its node failed, it fails with the node's last_error (provision-step.ts),
          // ahead of the tear-down queued behind it, instead of at its next recheck.
          await wakeWaitingSteps(trx, [node.id]);
          // One attempt, as Ironic's handler makes: a BMC that fails leaves its error in last_error, not a queue held by retries.
          const [intent] = await enqueueIntents(trx, node.id, [{ kind: 'provision', args: intentArgs('provision', t.cleanUp), maxAttempts: 1 }]);
          return { message: t.message, to: t.changes.provisionState, seq: intent.seq };
        });
        if (!done) continue;
        failed++;
        deps.log.warn({ node: cand.uuid, state: cand.provisionState, to: done.to }, done.message);
        if (done.seq !== undefined) deps.wake?.({ nodeUuid: cand.uuid, seq: done.seq });
      }
      return { nodes: candidates.length, errors: failed };
    },
  };
}
