/**
 * Steps as interfaces declare them (Ironic's `@clean_step`, `@deploy_step`, `@service_step`
 * decorators in drivers/base.py): a name, a priority for each kind of run it belongs to, and
 * what runs it. The conductor's step framework (conductor/steps.ts) collects a node's
 * declarations, plans a run from them and runs it; an interface only says what it offers.
 */
import type { Logger } from 'pino';
import type { AgentSession } from './agent/session.js';
import type { AgentCommand } from './agent/client.js';
import type { BiosSetting } from '../common/bios.js';
import type { BootInterface, DriverContext, FirmwareComponentReading, ManagementInterface, PowerInterface } from './interfaces.js';

export type StepKind = 'deploy' | 'clean' | 'service';

/** One argument a step takes (Ironic's argsinfo entry). */
export interface StepArgInfo {
  description: string;
  required?: boolean;
}

/** What a step comes to: done, or handed to the agent, whose heartbeats say when it has ended. */
export type StepRun = 'done' | 'wait';

/** The node as a step sees it. The conductor's node fits as it is. */
export interface StepNode {
  readonly uuid: string;
  readonly properties: Readonly<Record<string, unknown>>;
  readonly instanceInfo: Readonly<Record<string, unknown>>;
  readonly driverInfo: Readonly<Record<string, unknown>>;
  readonly driverInternalInfo: Readonly<Record<string, unknown>> | null;
  readonly targetRaidConfig: Readonly<Record<string, unknown>>;
  /** What the node's disks hold now (raid_config). */
  readonly raidConfig?: Readonly<Record<string, unknown>>;
  readonly provisionState: string;
  readonly targetProvisionState: string | null;
  readonly disablePowerOff: boolean;
}

/** A step of a run as it is kept in driver_internal_info and shown in deploy_step / clean_step. */
export interface PlannedStep {
  interface: string;
  step: string;
  priority: number;
  args: Record<string, unknown>;
  abortable?: boolean;
  reboot_requested?: boolean;
  /** Offered by the agent (get_*_steps) and run by it (execute_*_step); otherwise declared here. */
  inband?: boolean;
}

/** RAID configurations a step sets on the node. */
export interface RaidRecord {
  /** What the node's disks now hold (raid_config). */
  raidConfig?: Record<string, unknown>;
  /** The configuration asked for (target_raid_config), as a step given one sets it. */
  targetRaidConfig?: Record<string, unknown>;
  /** The node's properties as the configuration changes them (Ironic's update_raid_info: local_gb, root_device, raid_level). */
  properties?: Record<string, unknown>;
}

/**
 * What a step hands the conductor to keep (drivers know nothing of the database), written at
 * once while the task holds the node, as Ironic saves the node there: a later step's failure
 * does not undo what the hardware now holds.
 */
export interface StepRecorder {
  /** The node's BIOS settings as just read: the conductor's cache of them becomes this. */
  biosSettings(settings: readonly BiosSetting[]): Promise<void>;
  raid(changes: RaidRecord): Promise<void>;
  /** The node's firmware components as just read: cached now, as Ironic's cache_firmware_components. */
  firmware(components: readonly FirmwareComponentReading[]): Promise<void>;
}

/** What a step's `run` gets: the node's interfaces and its agent, no database. */
export interface StepContext {
  readonly node: StepNode;
  readonly driver: DriverContext;
  readonly log: Logger;
  readonly power: PowerInterface;
  readonly boot: BootInterface;
  readonly management: ManagementInterface;
  /** The node's agent for this task. @throws UnsupportedDriverExtension where the conductor has no agent client */
  agent(): AgentSession;
  /** The kind of run the step is part of (a step declared for several runs may differ in them). */
  readonly kind: StepKind;
  /** The step being run, as the node shows it. */
  readonly step: PlannedStep;
  /** This run's driver_internal_info, written with the step's outcome; a step may record in it. */
  readonly info: Record<string, unknown>;
  /**
   * The node's config drive as the agent or a BMC takes it (Ironic's get_configdrive_image): a
   * URL, or gzip + base64, built now from the JSON form instance_info keeps; undefined when none.
   * @throws ImageCreationFailed
   */
  configdrive(): Promise<string | undefined>;
  /** The step may have been started by a run its conductor's death cut short: send agent commands once. */
  readonly resume: boolean;
  readonly record: StepRecorder;
}

/** A step an interface offers (Ironic's decorated method). */
export interface StepDeclaration {
  step: string;
  /** Its priority in each kind of run it is a step of; 0 runs only when asked for. */
  priority: Partial<Record<StepKind, number>>;
  /** Whether cleaning may be aborted while it runs. */
  abortable?: boolean;
  /** Whether it needs the agent booted (Ironic's requires_ramdisk, true unless said otherwise). */
  requiresRamdisk?: boolean;
  argsInfo?: Readonly<Record<string, StepArgInfo>>;
  /**
   * The step is carried out by an agent command (execute_*_step) that its `run` sends: a run cut
   * short looks the command up among the agent's before it runs the step again.
   */
  sendsAgentStep?: boolean;
  /** Does nothing here: the node is not written to show it when another step follows at once. */
  noOp?: boolean;
  /**
   * A deploy step that fails the deploy itself when it fails (Ironic's
   * log_and_raise_deployment_error, through set_failed_state): the node is powered off and its
   * boot left as it is. Any other deploy step's failure has the deploy interface clean up after
   * it and leaves the power alone (do_next_deploy_step's deploying_error_handler).
   */
  powersOffOnFailure?: boolean;
  run(ctx: StepContext, args: Record<string, unknown>): Promise<StepRun>;
  /**
   * For a step whose `run` rebooted the node into the agent and answered `wait` (Ironic's
   * reboot_to_finish_step): called when that agent first heartbeats, to check and finish the
   * step (Ironic's post-reboot hooks, e.g. the BIOS settings applied). Absent: the step is done.
   */
  afterReboot?(ctx: StepContext, args: Record<string, unknown>): Promise<StepRun>;
  /**
   * For a step whose agent command (`sendsAgentStep`) has succeeded: what it did, recorded
   * before the run goes on (Ironic's post_clean_step_hook / post_deploy_step_hook).
   * @throws DriverError to fail the step
   */
  afterCommand?(ctx: StepContext, command: AgentCommand): Promise<void>;
}

/**
 * Whether the run has the node's agent up (it has heartbeated: its URL is known). Servicing
 * runs its out-of-band steps without one when none of them needs it.
 */
export function agentRunning(ctx: Pick<StepContext, 'info'>): boolean {
  return typeof ctx.info.agent_url === 'string' && ctx.info.agent_url !== '';
}

/** Ironic's step_id: `interface.step`. */
export function stepId(step: { interface: string; step: string }): string {
  return `${step.interface}.${step.step}`;
}
