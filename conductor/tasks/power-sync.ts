import type { Knex } from 'knex';
import type { Logger } from 'pino';
import { lazyChild } from '../../common/logger.js';
import type { Config } from '../../common/config.js';
import { NodeLocked } from '../../common/errors.js';
import type { Notifier } from '../../common/notifier.js';
import { recordHistory } from '../../db/node-history.js';
import { nodesForPowerSync, SYNC_EXCLUDED_STATES, type Node } from '../../db/nodes.js';
import type { DriverRegistry } from '../../drivers/registry.js';
import { nodePayload } from '../node-payload.js';
import type { PeriodicTask } from '../periodic.js';
import type { TaskManager } from '../task-manager.js';

export interface PowerSyncDeps {
  db: Knex;
  tasks: TaskManager;
  registry: DriverRegistry;
  notifier: Notifier;
  log: Logger;
  hostname: string;
  config: Readonly<Config>;
  owns(nodeUuid: string): boolean;
}

/**
 * Keeps `power_state` true to the hardware, as Ironic's _sync_power_states does. Nodes
 * with intents queued or running are skipped (their intent will set the state). On a
 * mismatch the BMC's state is recorded, or with force_power_state_during_sync the
 * database's state is pushed back to the BMC. After power_state_sync_max_retries failed
 * reads in a row, or as many forced changes the BMC did not keep, the node goes into
 * maintenance with fault "power failure".
 */
export function powerSyncTask(deps: PowerSyncDeps): PeriodicTask {
  const c = deps.config.conductor;
  /** Failed reads, or forced changes the BMC did not keep, per node since its states last agreed. */
  const failures = new Map<string, number>();

  /** Ironic's handle_sync_power_state_max_retries_exceeded: maintenance, fault "power failure". */
  async function giveUp(node: Node, actual: string | null, error?: Error): Promise<void> {
    const task = await deps.tasks.acquire(node.id, { mode: 'exclusive', purpose: 'power state sync failure' });
    const message = error
      ? `During sync_power_state, max retries exceeded for node ${node.uuid}, node state ${node.powerState} does not match expected state 'None'. Updating DB state to 'None' Switching node to maintenance mode. Error: ${error.message}`
      : `During sync_power_state, max retries exceeded for node ${node.uuid}, node state ${actual} does not match expected state '${node.powerState}'. Updating DB state to '${actual}' Switching node to maintenance mode.`;
    await task.commit({ maintenance: true, fault: 'power failure', maintenanceReason: message, lastError: message, powerState: actual }, async (trx) => {
      await recordHistory(trx, { nodeId: node.id, severity: 'ERROR', eventType: 'power', event: message, conductor: deps.hostname });
    }, { maintenanceBumpsAccess: deps.config.console.maintenance_closes_console });
    failures.delete(node.uuid);
  }

  async function syncOne(nodeId: number): Promise<boolean> {
    const shared = await deps.tasks.acquire(nodeId, { mode: 'shared', purpose: 'power state sync' });
    const node = shared.node;
    // Listed before an enrollment or a wait state began: Ironic skips these too.
    if (SYNC_EXCLUDED_STATES.includes(node.provisionState)) return true;
    const power = deps.registry.power(node.powerInterface ?? '');
    if (!power) return true;
    const log = lazyChild(deps.log, { node: node.uuid, purpose: 'power state sync' });
    let actual: string;
    try {
      power.validate(node.driverInfo);
      actual = await power.getPowerState({ nodeUuid: node.uuid, driverInfo: node.driverInfo, log });
    } catch (err) {
      const count = (failures.get(node.uuid) ?? 0) + 1;
      failures.set(node.uuid, count);
      log.warn({ err: (err as Error).message, count }, 'reading the power state failed');
      if (count >= c.power_state_sync_max_retries && !node.maintenance) await giveUp(node, null, err as Error);
      return false;
    }
    if (actual === node.powerState) {
      failures.delete(node.uuid);
      return true;
    }
    if (node.maintenance) {
      // Ironic records but never corrects a node in maintenance.
      return true;
    }
    const task = await deps.tasks.acquire(nodeId, { mode: 'exclusive', purpose: 'power state sync' });
    try {
      // Re-checked under the lock, as Ironic's do_sync_power_state does after upgrade_lock.
      if (SYNC_EXCLUDED_STATES.includes(task.node.provisionState)) return true;
      // A node that must never be powered off is not forced either way (Ironic's do_sync_power_state).
      if (c.force_power_state_during_sync && node.powerState && !task.node.disablePowerOff) {
        // Each forced change counts until a read finds the states agreeing: a BMC that does
        // not keep the state (or refuses it) ends in maintenance instead of flapping forever.
        const count = failures.get(node.uuid) ?? 0;
        if (count >= c.power_state_sync_max_retries) {
          await task.release();
          await giveUp(node, actual);
          return false;
        }
        failures.set(node.uuid, count + 1);
        try {
          await power.setPowerState({ nodeUuid: node.uuid, driverInfo: node.driverInfo, log }, node.powerState as 'power on' | 'power off');
        } catch (err) {
          log.warn({ err: (err as Error).message, count: count + 1 }, 'forcing the power state back failed');
          return false;
        }
        log.info({ from: actual, to: node.powerState }, 'power state forced back to the database state');
        return true;
      }
      const from = node.powerState;
      const updated = await task.commit({ powerState: actual }, async (trx) => {
        await recordHistory(trx, { nodeId, severity: 'WARNING', eventType: 'power', conductor: deps.hostname,
          event: `Power state of node ${node.uuid} corrected from ${from} to ${actual} (read from the BMC).` });
      });
      failures.delete(node.uuid);
      deps.notifier.emit('baremetal.node.power_state_corrected.success', 'info', 'NodeCorrectedPowerStatePayload', nodePayload(updated, { from_power: from }));
      return true;
    } finally {
      await task.release();
    }
  }

  return {
    name: 'sync_power_states',
    spacingSeconds: c.sync_power_state_interval,
    async run(signal) {
      const candidates = (await nodesForPowerSync(deps.db, c.conductor_group)).filter((n) => deps.owns(n.uuid));
      let errors = 0;
      let next = 0;
      const worker = async () => {
        while (next < candidates.length && !signal.aborted) {
          const n = candidates[next++];
          try {
            if (!(await syncOne(n.id))) errors++;
          } catch (err) {
            // Taken by an intent since we listed it: that intent will set the state.
            if (!(err instanceof NodeLocked)) {
              errors++;
              deps.log.error({ err, node: n.uuid }, 'power state sync failed');
            }
          }
        }
      };
      await Promise.all(Array.from({ length: Math.min(c.sync_power_state_workers, candidates.length) }, worker));
      return { nodes: candidates.length, errors };
    },
  };
}
