import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { Config } from '../../common/config.js';
import { ProvisionState, WAIT_STATES, WORKING_NOT_WAITING, eventChanges, nextState } from '../../common/states.js';
import { recordHistory } from '../../db/node-history.js';
import { lockStalledNode, stalledNodes, updateNode } from '../../db/nodes.js';
import { enqueueIntents } from '../../db/intents.js';
import { withTransaction } from '../../db/transaction.js';
import type { PeriodicTask } from '../periodic.js';

/** Ironic's last_error for an inspection whose agent never answered (cleanup_inspectwait_timeout). */
const INSPECT_TIMEOUT = 'Timeout reached while inspecting the node. Please check if the ramdisk responsible for the inspection is running on the node.';

export interface ProvisionChecksDeps {
  db: Knex;
  config: Readonly<Config>;
  hostname: string;
  log: Logger;
  /** Whether this conductor manages the node (the hash ring). */
  owns(nodeUuid: string): boolean;
}

/**
 * Fails what waits too long: nodes in a wait state past its `[conductor]` timeout (Ironic's
 * _check_deploy_timeouts, _check_cleanwait_timeouts, _check_inspect_wait_timeouts), and nodes
 * left in a transitional state with no work queued and no holder. Each is checked again under
 * its row lock and changed in one transaction with its history. As Ironic's, the wait timeouts
 * leave nodes in maintenance alone: a run paused there waits for maintenance to be unset.
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
      const waits = Object.keys(WAIT_STATES);
      const candidates = (await stalledNodes(deps.db, c.conductor_group, olderThan, waits)).filter((n) => deps.owns(n.uuid));
      let failed = 0;
      for (const cand of candidates) {
        const wait = Object.hasOwn(WAIT_STATES, cand.provisionState) ? WAIT_STATES[cand.provisionState] : undefined;
        const event = wait ? 'timeout' : 'fail';
        const onFail = nextState(cand.provisionState, event);
        const inspecting = cand.provisionState === ProvisionState.INSPECTWAIT;
        const message = inspecting ? INSPECT_TIMEOUT : wait
          ? `Timeout reached while waiting for callback for node ${cand.uuid} (${wait.what}, [conductor] ${wait.timeoutOption} = ${c[wait.timeoutOption]} s).`
          : `Node ${cand.uuid} was left in "${cand.provisionState}" with no conductor working on it; failing it.`;
        const done = await withTransaction(deps.db, async (trx) => {
          const node = await lockStalledNode(trx, cand.id, cand.provisionState, olderThan[cand.provisionState], wait !== undefined);
          if (!node) return false;
          await updateNode(trx, node.id, { ...eventChanges(node, event), lastError: message, deployStep: {}, cleanStep: {}, serviceStep: {} });
          await recordHistory(trx, { nodeId: node.id, severity: 'ERROR', eventType: 'provisioning', conductor: deps.hostname, user: null, operation: null, event: message });
          // The agent's boot is torn down as an abort tears it down (eject, power off), by the node's conductor.
          if (inspecting) {
            await enqueueIntents(trx, node.id, [{
              kind: 'provision',
              args: { verb: 'abort', target: ProvisionState.INSPECTFAIL, onFail: ProvisionState.INSPECTFAIL, work: 'abort' },
              maxAttempts: c.intent_max_attempts,
            }]);
          }
          return true;
        });
        if (done) {
          failed++;
          deps.log.warn({ node: cand.uuid, state: cand.provisionState, to: onFail }, message);
        }
      }
      return { nodes: candidates.length, errors: failed };
    },
  };
}
