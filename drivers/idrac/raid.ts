/**
 * The `idrac-redfish` RAID interface (Ironic's DracRedfishRAID): the `redfish` RAID interface,
 * whose create and delete steps need no agent on an iDRAC and first wait until the iDRAC can
 * take real-time operations (DellLCService RTStatus Ready: the PERC controllers configure
 * volumes at once, but not before the host has finished POST). A node powered off is powered
 * on for it, as Ironic does when the cleaning runs without the agent. An iDRAC still not ready
 * after the tries is used anyway, as Ironic does.
 */
import { RedfishRaid } from '../redfish/raid.js';
import type { StepContext, StepDeclaration } from '../steps.js';
import { lifecycleStatus } from './management.js';
import { onDellManager, waitWithin } from './oem.js';

/** Ironic's _retry_till_realtime_ready: 30 tries, 10 s apart (here at [redfish] connection_retry_interval, at most 10 s). */
const REALTIME_TRIES = 30;
const REALTIME_MAX_INTERVAL_MS = 10_000;

/** Which of the redfish RAID steps wait for real-time readiness, and the runs Ironic declares them for on an iDRAC. */
const IDRAC_STEPS: Readonly<Record<string, StepDeclaration['priority'] | null>> = {
  create_configuration: { clean: 0 },
  delete_configuration: { clean: 0, deploy: 0 },
  // Inherited as it is (deploy and service), through create_configuration's wait.
  apply_configuration: null,
};

export class IdracRedfishRaid extends RedfishRaid {
  protected override declareSteps(): StepDeclaration[] {
    return super.declareSteps().map((d): StepDeclaration => {
      if (!Object.hasOwn(IDRAC_STEPS, d.step)) return d;
      const priority = IDRAC_STEPS[d.step];
      return {
        ...d,
        ...(priority ? { priority, requiresRamdisk: false } : {}),
        run: async (ctx, args) => {
          await this.waitRealtimeReady(ctx);
          return d.run(ctx, args);
        },
      };
    });
  }

  /** Ironic's _wait_till_realtime_ready. @throws RedfishError | DriverError */
  private async waitRealtimeReady(ctx: StepContext): Promise<void> {
    if ((await ctx.power.getPowerState(ctx.driver)) === 'power off') await ctx.power.setPowerState(ctx.driver, 'power on');
    const interval = Math.min(REALTIME_MAX_INTERVAL_MS, Math.max(100, this.client.options.retryIntervalMs));
    const ready = await this.client.run(ctx.driver, (call) => onDellManager(call, ctx.node.uuid, 'get real-time ready status', async (manager) => {
      for (let i = 1; ; i++) {
        if (await lifecycleStatus(call, manager, 'RTStatus')) return true;
        if (i >= REALTIME_TRIES || !(await waitWithin(call, interval, 'Waiting for the iDRAC to be ready for real-time operations'))) return false;
      }
    }), REALTIME_TRIES * interval);
    if (!ready) ctx.log.debug({ node: ctx.node.uuid }, `Retries exceeded while waiting for real-time ready for node ${ctx.node.uuid}. Will proceed with out real-time ready state`);
  }
}
