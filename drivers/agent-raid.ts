/**
 * The `agent` RAID interface (Ironic's AgentRAID, drivers/modules/agent.py): RAID built by the
 * agent itself, which for ironic-python-agent's GenericHardwareManager means software RAID
 * (logical disks with `controller: software`, made with mdadm). `raid.create_configuration`
 * and `raid.delete_configuration` (clean) and `raid.apply_configuration` (deploy, service)
 * are carried out by the agent's steps of those names; when one succeeds, what it returned
 * becomes the node's raid_config (Ironic's post-step hooks and update_raid_info).
 */
import { IronicException } from '../common/errors.js';
import { pyRepr } from '../common/py-repr.js';
import { filterTargetRaidConfig, updateRaidInfo, validateRaidConfig } from '../common/raid.js';
import type { Config } from '../common/config.js';
import type { AgentCommand } from './agent/client.js';
import type { RaidInterface } from './interfaces.js';
import type { StepArgInfo, StepContext, StepDeclaration, StepKind } from './steps.js';

/** `[deploy] create_configuration_priority` and `delete_configuration_priority`; null keeps the agent's own (0). */
export interface AgentRaidOptions {
  createPriority: number | null;
  deletePriority: number | null;
}

/** The [deploy] options of the agent's RAID steps (-1: unset). */
export function agentRaidOptions(config: Readonly<Config>): AgentRaidOptions {
  const d = config.deploy;
  return {
    createPriority: d.create_configuration_priority >= 0 ? d.create_configuration_priority : null,
    deletePriority: d.delete_configuration_priority >= 0 ? d.delete_configuration_priority : null,
  };
}

/** Ironic's _RAID_APPLY_CONFIGURATION_ARGSINFO (agent.py). */
const APPLY_ARGS: Readonly<Record<string, StepArgInfo>> = {
  raid_config: { description: 'The RAID configuration to apply.', required: true },
  delete_existing: {
    description: "Setting this to 'True' indicates to delete existing RAID configuration prior to creating the new configuration. Default value is 'True'.",
    required: false,
  },
};

/** The agent's result of a RAID step (`clean_result` or `deploy_result`). */
function resultOf(command: AgentCommand, kind: StepKind): unknown {
  const r = command.command_result;
  if (r === null || typeof r !== 'object') return undefined;
  return (r as Record<string, unknown>)[`${kind}_result`];
}

export class AgentRaid implements RaidInterface {
  readonly supported = true;
  readonly steps: readonly StepDeclaration[];

  constructor(opts: AgentRaidOptions) {
    const execute = (ctx: StepContext, args: Record<string, unknown>) =>
      ctx.agent().executeStep(ctx.kind, { ...ctx.step, args }, ctx.info[`agent_${ctx.kind}_version`], ctx.resume);
    this.steps = [
      {
        step: 'create_configuration', priority: { clean: opts.createPriority ?? 0 }, abortable: true, argsInfo: {}, sendsAgentStep: true,
        run: (ctx, args) => {
          // What would be built, kept for the record; the agent reads the node's target itself.
          ctx.info.target_raid_config = filterTargetRaidConfig(ctx.node.uuid, ctx.node.targetRaidConfig, true, true);
          return execute(ctx, args);
        },
        afterCommand: (ctx, command) => this.created(ctx, command),
      },
      {
        step: 'delete_configuration', priority: { clean: opts.deletePriority ?? 0 }, abortable: true, argsInfo: {}, sendsAgentStep: true,
        run: execute,
        afterCommand: (ctx) => this.deleted(ctx),
      },
      {
        step: 'apply_configuration', priority: { deploy: 0, service: 0 }, argsInfo: APPLY_ARGS, sendsAgentStep: true,
        run: (ctx, args) => {
          validateRaidConfig(args.raid_config);
          return execute(ctx, args);
        },
        // Ironic has post-step hooks for cleaning and deploying only: servicing leaves raid_config as it was.
        afterCommand: (ctx, command) => (ctx.kind === 'service' ? Promise.resolve() : this.created(ctx, command)),
      },
    ];
  }

  validate(): void {}

  /** Ironic's _create_configuration_final: what the agent built becomes raid_config. @throws IronicException | InvalidParameterValue */
  private async created(ctx: StepContext, command: AgentCommand): Promise<void> {
    const result = resultOf(command, ctx.kind);
    if (!result || typeof result !== 'object' || Object.keys(result).length === 0) {
      throw new IronicException(`Agent ramdisk didn't return a proper command result while building RAID on ${ctx.node.uuid}. It returned '${pyRepr(command)}' after command execution.`);
    }
    await ctx.record.raid(updateRaidInfo(ctx.node.properties, result as Record<string, unknown>));
  }

  /** Ironic's _delete_configuration_final: no raid_config, no root device hint. */
  private async deleted(ctx: StepContext): Promise<void> {
    const { root_device: _gone, ...properties } = ctx.node.properties;
    await ctx.record.raid({ raidConfig: {}, properties });
  }
}
