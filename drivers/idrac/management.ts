/**
 * The `idrac-redfish` management interface (Ironic's DracRedfishManagement): the `redfish`
 * management interface, plus the iDRAC's own clean steps through its Dell OEM services:
 * `clear_job_queue` (DellJobService DeleteJobQueue JID_CLEARALL), `reset_idrac`
 * (DelliDRACCardService iDRACReset, then the wait until the iDRAC is back and ready, as
 * sushy-oem-idrac's reset_idrac waits) and `known_good_state` (both). They need no agent.
 */
import { BmcTimeout, BmcUnreachable, RedfishError } from '../../common/errors.js';
import type { RedfishCall, RedfishClient, Resource } from '../redfish/client.js';
import { statusError } from '../redfish/client.js';
import { RedfishManagement } from '../redfish/management.js';
import { isObject, prop, str } from '../redfish/odata.js';
import { getSystem } from '../redfish/system.js';
import type { StepContext, StepDeclaration } from '../steps.js';
import { dellService, onDellManager, serviceAction, waitWithin } from './oem.js';

/**
 * How long each phase of an iDRAC reset may take: going away (sushy-oem-idrac pings 24 times),
 * coming back, and its Lifecycle Controller becoming ready again (96 tries 10 s apart).
 */
const RESET_DOWN_MS = 120_000;
const RESET_UP_MS = 600_000;
const RESET_READY_MS = 960_000;
/** Answers in a row that make an iDRAC back (sushy-oem-idrac's ping count). */
const UP_IN_A_ROW = 3;

/** Ironic's clean steps of the iDRAC: manual (priority 0), out of band. */
function oobStep(step: string, run: (ctx: StepContext) => Promise<void>): StepDeclaration {
  return { step, priority: { clean: 0 }, abortable: false, requiresRamdisk: false, run: async (ctx) => { await run(ctx); return 'done'; } };
}

export class IdracRedfishManagement extends RedfishManagement {
  readonly steps: readonly StepDeclaration[];

  constructor(client: RedfishClient) {
    super(client);
    this.steps = [
      oobStep('clear_job_queue', (ctx) => this.clearJobQueue(ctx)),
      oobStep('reset_idrac', (ctx) => this.resetIdrac(ctx)),
      oobStep('known_good_state', async (ctx) => {
        await this.resetIdrac(ctx);
        await this.clearJobQueue(ctx);
        ctx.log.info({ node: ctx.node.uuid }, `Reset iDRAC to known good state for node ${ctx.node.uuid}`);
      }),
    ];
  }

  /** @throws RedfishError (with "Oem/Dell/DellJobService is missing" on an iDRAC too old for it) */
  private async clearJobQueue(ctx: StepContext): Promise<void> {
    try {
      await this.client.run(ctx.driver, (call) => onDellManager(call, ctx.node.uuid, 'clear job queue', async (manager) => {
        const service = await dellService(call, manager, 'DellJobService');
        const target = serviceAction(service, '#DellJobService.DeleteJobQueue');
        const r = await call.send('POST', target, { body: { JobID: 'JID_CLEARALL' } });
        if (r.status < 200 || r.status >= 300) throw statusError(r, `Deleting the job JID_CLEARALL (${call.info.origin}${target})`);
      }));
    } catch (err) {
      if (err instanceof RedfishError && err.message.includes('Oem/Dell/DellJobService is missing')) {
        ctx.log.warn({ node: ctx.node.uuid }, `iDRAC on node ${ctx.node.uuid} does not support clearing Lifecycle Controller job queue using the idrac-redfish driver. If using iDRAC9, consider upgrading firmware.`);
      }
      throw err;
    }
  }

  /** @throws RedfishError */
  private async resetIdrac(ctx: StepContext): Promise<void> {
    const budget = RESET_DOWN_MS + RESET_UP_MS + RESET_READY_MS;
    try {
      await this.client.run(ctx.driver, async (call) => {
        await onDellManager(call, ctx.node.uuid, 'reset iDRAC', async (manager) => {
          const card = await dellService(call, manager, 'DelliDRACCardService');
          const target = serviceAction(card, '#DelliDRACCardService.iDRACReset');
          const actions = prop(card.body, 'Actions');
          const action = isObject(actions) ? prop(actions, '#DelliDRACCardService.iDRACReset') : undefined;
          const allowed = isObject(action) ? action['Force@Redfish.AllowableValues'] : undefined;
          if (Array.isArray(allowed) && !allowed.includes('Graceful')) {
            throw new RedfishError(`Invalid value Graceful for Force of ${target}: valid values are ${allowed.join(', ')}`);
          }
          const r = await call.send('POST', target, { body: { Force: 'Graceful' } });
          if (r.status < 200 || r.status >= 300) throw statusError(r, `Resetting the iDRAC (${call.info.origin}${target})`);
          call.log.info({ bmc: call.info.origin }, 'The iDRAC is being reset');
          await this.waitUntilBack(call, manager);
        });
        // Ironic's wait_until_get_system_ready.
        await getSystem(call);
      }, budget);
      ctx.log.info({ node: ctx.node.uuid }, `Reset iDRAC for node ${ctx.node.uuid} done`);
    } catch (err) {
      if (err instanceof RedfishError && err.message.includes('Oem/Dell/DelliDRACCardService is missing')) {
        ctx.log.warn({ node: ctx.node.uuid }, `iDRAC on node ${ctx.node.uuid} does not support iDRAC reset using the idrac-redfish driver. If using iDRAC9, consider upgrading firmware.`);
      }
      throw err;
    }
  }

  /**
   * sushy-oem-idrac's wait after a reset: the iDRAC goes away, answers again (several times in
   * a row), and its Lifecycle Controller reports Ready. Polls at [redfish] connection_retry_interval.
   * @throws RedfishError when a phase does not end in time
   */
  private async waitUntilBack(call: RedfishCall, manager: Resource): Promise<void> {
    const interval = Math.max(100, this.client.options.retryIntervalMs);
    const host = call.info.origin;
    const phase = async (limitMs: number, done: () => Promise<boolean>, timeout: string): Promise<void> => {
      const until = Date.now() + limitMs;
      for (;;) {
        if (await done()) return;
        if (Date.now() + interval > until || !(await waitWithin(call, interval, `Waiting for the iDRAC ${host}`))) throw new RedfishError(timeout);
      }
    };
    await phase(RESET_DOWN_MS, async () => !(await this.answers(call)), `Timed out waiting iDRAC ${host} to become not pingable`);
    let inARow = 0;
    await phase(RESET_UP_MS, async () => {
      inARow = (await this.answers(call)) ? inARow + 1 : 0;
      return inARow >= UP_IN_A_ROW;
    }, `Timed out waiting iDRAC ${host} to become pingable`);
    await phase(RESET_READY_MS, () => this.lifecycleReady(call, manager), `Timed out waiting iDRAC ${host} to become ready after reset`);
  }

  /** Whether the iDRAC answers at all (its service root, one try). */
  private async answers(call: RedfishCall): Promise<boolean> {
    try {
      await call.send('GET', '/redfish/v1', { noAuth: true, attempts: 1 });
      return true;
    } catch (err) {
      if (err instanceof BmcUnreachable || (err instanceof BmcTimeout && !call.signal.aborted)) return false;
      throw err;
    }
  }

  /** DellLCService GetRemoteServicesAPIStatus: LCStatus Ready (sushy-oem-idrac's is_idrac_ready); false while it cannot say. */
  private async lifecycleReady(call: RedfishCall, manager: Resource): Promise<boolean> {
    try {
      return await lifecycleStatus(call, manager, 'LCStatus');
    } catch (err) {
      if (err instanceof BmcUnreachable) return false;
      throw err;
    }
  }
}

/**
 * One field of DellLCService GetRemoteServicesAPIStatus is `Ready` (LCStatus: the iDRAC takes
 * commands; RTStatus: real-time operations, e.g. RAID, can be done).
 * @throws RedfishError | DriverError
 */
export async function lifecycleStatus(call: RedfishCall, manager: Resource, field: 'LCStatus' | 'RTStatus'): Promise<boolean> {
  const service = await dellService(call, manager, 'DellLCService');
  const target = serviceAction(service, '#DellLCService.GetRemoteServicesAPIStatus');
  const r = await call.send('POST', target, { body: {} });
  if (r.status !== 200) return false;
  const body = r.json();
  return body !== null && str(body[field]) === 'Ready';
}
