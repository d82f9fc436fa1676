/**
 * What every deploy interface that works through ironic-python-agent shares (Ironic's
 * agent_base: AgentBaseMixin, AgentOobStepsMixin, and the deploy step that boots the agent):
 * booting the agent, its core `deploy` step, and the out-of-band steps that end a deploy.
 */
import { InvalidParameterValue } from '../../common/errors.js';
import { bootModeOf, parseCapabilities } from '../../common/capabilities.js';
import { backoffCeilingMs } from '../../common/backoff.js';
import type { BootInterface, BootValidation } from '../interfaces.js';
import { validateBoot } from '../validate-node.js';
import type { StepContext, StepDeclaration } from '../steps.js';

/** `[agent]` options the agent's deploy steps read. */
export interface AgentDeployOptions {
  /** `[agent] post_deploy_get_power_state_retries`. */
  powerOffRetries: number;
  /** `[agent] post_deploy_get_power_state_retry_interval`, in ms. */
  powerOffRetryIntervalMs: number;
}

/** The node's boot mode when its capabilities name one. */
export function capabilityBootMode(properties: Readonly<Record<string, unknown>>): 'uefi' | 'bios' | undefined {
  const mode = parseCapabilities(properties.capabilities).boot_mode;
  return mode === 'uefi' || mode === 'bios' ? mode : undefined;
}

/**
 * Boots the agent (Ironic's prepare_agent_boot + REBOOT): the boot interface sets the agent's
 * image up for the next boot, and the node is rebooted (powered on when it is off). The reboot
 * is what forgets the old agent's URL and token (the conductor's power path), so that the new
 * agent gets a token of its own.
 */
export async function bootAgent(ctx: Pick<StepContext, 'node' | 'driver' | 'boot' | 'power'>, purpose: 'deploy' | 'inspect' = 'deploy'): Promise<void> {
  if (!ctx.boot.prepareRamdisk) throw new InvalidParameterValue(AGENT_BOOT_UNSUPPORTED);
  const mode = capabilityBootMode(ctx.node.properties);
  const vendor = ctx.node.properties.vendor;
  await ctx.boot.prepareRamdisk(ctx.driver, {
    purpose, instanceKernelAppendParams: ctx.node.instanceInfo?.kernel_append_params, ...(mode ? { bootMode: mode } : {}),
    ...(typeof vendor === 'string' && vendor ? { vendor } : {}),
  });
  await ctx.power.setPowerState(ctx.driver, 'rebooting');
}

const AGENT_BOOT_UNSUPPORTED = 'Invalid configuration: the boot interface cannot boot the agent; use one that can (redfish-virtual-media, ipxe, pxe).';

/** The boot interface can boot the agent, and finds the agent's image. @throws InvalidParameterValue | MissingParameterValue */
export function validateAgentBoot(node: BootValidation, boot: BootInterface | undefined): void {
  if (!boot?.prepareRamdisk || !boot.validateRamdisk) throw new InvalidParameterValue(AGENT_BOOT_UNSUPPORTED);
  validateBoot(boot, node);
  boot.validateRamdisk(node.uuid, node.driverInfo);
}

/**
 * tear_down_agent: the agent powers the node off (standby.power_off); the BMC is read up to
 * `powerOffRetries` times, then the node is forced off. With disable_power_off the agent locks
 * the node down instead. The token and agent URL are forgotten: this agent's work is done.
 */
async function tearDownAgent(ctx: StepContext, opts: AgentDeployOptions): Promise<void> {
  const agent = ctx.agent();
  if (ctx.node.disablePowerOff) {
    await agent.sendOnce(ctx.resume, 'system.lockdown', {}, false).catch((err: Error) => {
      ctx.log.warn({ err: err.message }, 'agent lockdown failed');
    });
  } else {
    try {
      await agent.sendOnce(ctx.resume, 'standby.power_off', {}, false);
    } catch (err) {
      // An agent already gone (powered off, or its token wiped by a run cut short), or an answer lost.
      ctx.log.warn({ err: (err as Error).message }, `Failed to soft power off node ${ctx.node.uuid}`);
    }
    // Read either way, as Ironic's tear_down_agent does: the power off may have come through
    // without its answer.
    let off = false;
    for (let i = 0; i < opts.powerOffRetries && !off; i++) {
      await new Promise((r) => setTimeout(r, backoffCeilingMs(i + 1, 200, opts.powerOffRetryIntervalMs)));
      off = await ctx.power.getPowerState(ctx.driver).then((state) => state === 'power off', () => false);
    }
    if (!off) {
      const seconds = Math.round((opts.powerOffRetries * opts.powerOffRetryIntervalMs) / 1000);
      ctx.log.warn(`Failed to soft power off node ${ctx.node.uuid} in at least ${seconds} seconds. Forcing hard power off and proceeding.`);
      await ctx.power.setPowerState(ctx.driver, 'power off');
    }
  }
  await agent.wipeToken();
}

/** The core deploy step of an agent deploy: the agent is booted, and its heartbeats carry the run on. */
export const BOOT_AGENT_STEP: StepDeclaration = {
  step: 'deploy', priority: { deploy: 100 },
  async run(ctx) {
    await bootAgent(ctx);
    return 'wait';
  },
};

/**
 * The instance boots from its disk (Ironic's prepare_instance for a local boot): the agent's
 * boot undone (its medium ejected, its network boot files and DHCP entries gone) and the disk
 * made the boot device for good, in the node's boot mode.
 */
export async function bootFromDisk(ctx: Pick<StepContext, 'node' | 'driver' | 'boot' | 'management'>): Promise<void> {
  await ctx.boot.cleanUpInstance(ctx.driver);
  const mode = bootModeOf(ctx.node);
  await ctx.management.setBootDevice(ctx.driver, 'disk', true, mode === 'uefi' || mode === 'bios' ? { bootMode: mode } : {});
}

/** CustomAgentDeploy.prepare_instance_boot: the instance's boot prepared (from the disk). */
export const PREPARE_INSTANCE_BOOT_STEP: StepDeclaration = {
  step: 'prepare_instance_boot', priority: { deploy: 60 }, powersOffOnFailure: true,
  async run(ctx) {
    await bootFromDisk(ctx);
    return 'done';
  },
};

/**
 * Ironic's AgentOobStepsMixin: the out-of-band steps that end an agent deploy; as there, a
 * failure of one powers the node off.
 */
export function agentOobSteps(opts: AgentDeployOptions): StepDeclaration[] {
  return [
    {
      step: 'tear_down_agent', priority: { deploy: 40 }, powersOffOnFailure: true,
      async run(ctx) {
        await tearDownAgent(ctx, opts);
        return 'done';
      },
    },
    // Galvanic has no tenant networks to switch to.
    { step: 'switch_to_tenant_network', priority: { deploy: 30 }, noOp: true, run: async () => 'done' },
    {
      step: 'boot_instance', priority: { deploy: 20 }, powersOffOnFailure: true,
      async run(ctx) {
        await ctx.power.setPowerState(ctx.driver, 'power on');
        return 'done';
      },
    },
  ];
}

/** Ironic's AgentDeploy.tear_down (and RamdiskDeploy's): the boot undone, the node powered off. */
export async function tearDownInstance(ctx: Pick<StepContext, 'node' | 'driver' | 'boot' | 'power'>): Promise<{ poweredOff: boolean }> {
  await ctx.boot.cleanUpInstance(ctx.driver);
  if (ctx.node.disablePowerOff) return { poweredOff: false };
  await ctx.power.setPowerState(ctx.driver, 'power off');
  return { poweredOff: true };
}
