/**
 * Deploy and clean steps through ironic-python-agent (Ironic's AgentDeploy, agent_base's
 * HeartbeatMixin and process_next_step, conductor/cleaning.py). Long work is persisted state:
 * the steps to run and the index of the current one live in driver_internal_info, a node
 * waiting for its agent sits in `wait call-back` / `clean wait` (its deadline is
 * provision_updated_at plus the `[conductor]` timeout), and each heartbeat queues an
 * `agent_continue` intent that the node's conductor runs here. No worker waits for an agent.
 */
import { backoffCeilingMs } from '../common/backoff.js';
import { AgentStepFailed, InvalidParameterValue, UnsupportedDriverExtension } from '../common/errors.js';
import { ProvisionState } from '../common/states.js';
import type { Config } from '../common/config.js';
import type { NodeChanges, Node } from '../db/nodes.js';
import { commandError, type AgentClient, type AgentCommand, type AgentTarget } from '../drivers/agent/client.js';
import { agentIso } from '../drivers/agent-boot.js';
import { parseCapabilities } from '../common/capabilities.js';
import { cleanStepsFor, type CleanStep } from './clean-steps.js';
import type { ActionContext } from './actions/types.js';

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

export type StepType = 'deploy' | 'clean';

/** A step as it is kept in driver_internal_info and shown in deploy_step / clean_step. */
export interface AgentStep {
  interface: string;
  step: string;
  priority: number;
  args: Record<string, unknown>;
  abortable?: boolean;
  reboot_requested?: boolean;
  /** Run by the agent (execute_*_step); otherwise by the conductor. */
  inband?: boolean;
}

/**
 * What a step (or the whole run) comes to: wait for the agent, with the node's changes that
 * say so (written with the task's outcome, not apart from it); or done; or, for cleaning,
 * aborted after a step that was not abortable (`abort_after`).
 */
export type StepOutcome = { wait: true; changes: NodeChanges } | { wait: false; abortAfter?: true };

/** The out-of-band deploy steps of `direct` (AgentDeploy), highest priority first. */
export const DIRECT_DEPLOY_STEPS: readonly AgentStep[] = [
  { interface: 'deploy', step: 'deploy', priority: 100, args: {} },
  { interface: 'deploy', step: 'write_image', priority: 80, args: {} },
  { interface: 'deploy', step: 'prepare_instance_boot', priority: 60, args: {} },
  { interface: 'deploy', step: 'tear_down_agent', priority: 40, args: {} },
  { interface: 'deploy', step: 'switch_to_tenant_network', priority: 30, args: {} },
  { interface: 'deploy', step: 'boot_instance', priority: 20, args: {} },
];

const DII_STEPS: Record<StepType, string> = { deploy: 'deploy_steps', clean: 'clean_steps' };
const DII_INDEX: Record<StepType, string> = { deploy: 'deploy_step_index', clean: 'clean_step_index' };
const DII_CACHED: Record<StepType, string> = { deploy: 'agent_cached_deploy_steps', clean: 'agent_cached_clean_steps' };
const DII_VERSION: Record<StepType, string> = { deploy: 'agent_deploy_version', clean: 'agent_clean_version' };
/** What driver_internal_info keeps only while an agent works on the node. */
const AGENT_KEYS = ['agent_url', 'agent_version', 'agent_last_heartbeat', 'agent_verify_ca'];
/**
 * Steps that do nothing here (Galvanic has no tenant networks to switch to): the node is not
 * written to show them, since the next step's write follows at once.
 */
const NO_OP_STEPS: ReadonlySet<string> = new Set(['deploy.switch_to_tenant_network']);

function servicesOf(ctx: ActionContext): AgentServices {
  if (!ctx.agent) throw new UnsupportedDriverExtension('This conductor has no agent client.');
  return ctx.agent;
}

/** Ironic's step_id: `interface.step`. */
export function stepId(step: { interface: string; step: string }): string {
  return `${step.interface}.${step.step}`;
}

/** The step as the node shows it (no internal flags). */
function shown(step: AgentStep): Record<string, unknown> {
  const out: Record<string, unknown> = { interface: step.interface, step: step.step, priority: step.priority, args: step.args };
  if (step.abortable !== undefined) out.abortable = step.abortable;
  if (step.reboot_requested !== undefined) out.reboot_requested = step.reboot_requested;
  return out;
}

function dii(ctx: ActionContext): Record<string, unknown> {
  return ctx.node.driverInternalInfo ?? {};
}

/** driver_internal_info without the agent's connection details and this run's steps. */
export function wipedInternalInfo(info: Record<string, unknown>, type?: StepType): Record<string, unknown> {
  const out = { ...info };
  for (const k of AGENT_KEYS) delete out[k];
  for (const t of type ? [type] : (['deploy', 'clean'] as StepType[])) {
    delete out[DII_STEPS[t]];
    delete out[DII_INDEX[t]];
    delete out[DII_CACHED[t]];
    delete out[DII_VERSION[t]];
  }
  return out;
}

/**
 * The agent's token, read once per task: a run makes several agent calls, and the token changes
 * only at a lookup, which comes after a wipe (`wipeToken` below forgets it).
 */
const taskTokens = new WeakMap<ActionContext['task'], string>();
/** The node's ports, read once per task: the agent gets them with each command, and a task's node keeps its ports. */
const taskPorts = new WeakMap<ActionContext['task'], Array<{ address: string }>>();

async function portsOf(ctx: ActionContext): Promise<Array<{ address: string }>> {
  let ports = taskPorts.get(ctx.task);
  if (ports === undefined) {
    ports = await servicesOf(ctx).portsOf(ctx.node.id);
    taskPorts.set(ctx.task, ports);
  }
  return ports;
}

async function target(ctx: ActionContext): Promise<AgentTarget> {
  const url = dii(ctx).agent_url;
  if (typeof url !== 'string' || !url) throw new AgentStepFailed(`Node ${ctx.node.uuid} has no agent URL: its agent has not heartbeated.`);
  let token = taskTokens.get(ctx.task);
  if (token === undefined) {
    token = (await servicesOf(ctx).tokenOf(ctx.node.id)) ?? undefined;
    if (!token) throw new AgentStepFailed(`Node ${ctx.node.uuid} has no agent token: its agent has not looked itself up.`);
    taskTokens.set(ctx.task, token);
  }
  return { url, token };
}

/** The node's agent token is wiped (Ironic's wipe_token_and_url), and forgotten here with its agent's connections. */
export async function wipeToken(ctx: ActionContext): Promise<void> {
  taskTokens.delete(ctx.task);
  const services = servicesOf(ctx);
  await services.wipeToken(ctx.node.id);
  const url = dii(ctx).agent_url;
  if (typeof url === 'string') services.client.forget(url);
}

/** The node as Ironic sends it to the agent (no secrets: driver_info stays home). */
function nodeForAgent(node: Node): Record<string, unknown> {
  const internal = { ...node.driverInternalInfo };
  return {
    uuid: node.uuid, properties: node.properties, instance_info: node.instanceInfo, driver_internal_info: internal,
    provision_state: node.provisionState, target_provision_state: node.targetProvisionState,
  };
}

/** The node's boot interface. @throws UnsupportedDriverExtension when it is not enabled here */
export function bootOf(ctx: ActionContext) {
  const boot = ctx.registry.impl('boot', ctx.node.bootInterface);
  if (!boot) throw new UnsupportedDriverExtension(`Boot interface ${ctx.node.bootInterface} is not enabled on this conductor.`);
  return boot;
}

/** The node's power interface. @throws UnsupportedDriverExtension when it is not enabled here */
export function powerOf(ctx: ActionContext) {
  const power = ctx.registry.impl('power', ctx.node.powerInterface);
  if (!power) throw new UnsupportedDriverExtension(`Power interface ${ctx.node.powerInterface} is not enabled on this conductor.`);
  return power;
}

function managementOf(ctx: ActionContext) {
  const m = ctx.registry.impl('management', ctx.node.managementInterface);
  if (!m) throw new UnsupportedDriverExtension(`Management interface ${ctx.node.managementInterface} is not enabled on this conductor.`);
  return m;
}

/**
 * Boots the agent (Ironic's prepare_ramdisk + reboot): a new agent gets a new token, so the
 * old one and the old agent URL are forgotten first. Inserts driver_info deploy_iso as the CD
 * for the next boot, and powers the node on (or restarts it).
 */
export async function bootAgent(ctx: ActionContext): Promise<void> {
  await wipeToken(ctx);
  const iso = agentIso(ctx.node, ctx.registry.agentBoot);
  const mode = parseCapabilities(ctx.node.properties.capabilities).boot_mode;
  await bootOf(ctx).prepareInstance(ctx.driver, {
    bootIso: iso, forcePersistentBootDevice: 'Never', ...(mode === 'uefi' || mode === 'bios' ? { bootMode: mode } : {}),
  });
  const power = powerOf(ctx);
  const state = await power.getPowerState(ctx.driver);
  await power.setPowerState(ctx.driver, state === 'power on' ? 'rebooting' : 'power on');
}

/** The user's steps merged into the defaults: same step → their priority and args; priority 0 drops it. */
function mergeUserSteps(defaults: AgentStep[], user: CleanStep[] | undefined): AgentStep[] {
  const steps = defaults.map((s) => ({ ...s }));
  for (const u of user ?? []) {
    const known = steps.find((s) => s.interface === u.interface && s.step === u.step);
    if (known) {
      if (u.priority !== undefined) known.priority = u.priority;
      if (u.args) known.args = u.args;
    } else {
      // An in-band step the agent will have to offer; checked once its steps are known.
      steps.push({ interface: u.interface, step: u.step, priority: u.priority ?? 0, args: u.args ?? {}, inband: true });
    }
  }
  return steps.filter((s) => s.priority > 0).sort((a, b) => b.priority - a.priority);
}

/** The deploy steps of a direct deploy (AgentDeploy's, with the user's deploy_steps, 1.69). */
export function directDeploySteps(user: CleanStep[] | undefined): AgentStep[] {
  return mergeUserSteps(DIRECT_DEPLOY_STEPS.map((s) => ({ ...s, inband: false })), user);
}

/** IPA's get_*_steps result flattened: {step, priority, interface, reboot_requested, abortable}[]. */
function flattenAgentSteps(result: unknown, type: StepType): { steps: AgentStep[]; version: unknown } {
  const r = (result ?? {}) as Record<string, unknown>;
  const byManager = r[`${type}_steps`];
  const steps: AgentStep[] = [];
  if (byManager && typeof byManager === 'object') {
    for (const list of Object.values(byManager as Record<string, unknown>)) {
      if (!Array.isArray(list)) continue;
      for (const s of list as Array<Record<string, unknown>>) {
        if (typeof s?.step !== 'string' || typeof s.interface !== 'string') continue;
        if (steps.some((x) => x.interface === s.interface && x.step === s.step)) continue;
        steps.push({
          interface: s.interface, step: s.step, priority: typeof s.priority === 'number' ? s.priority : 0, args: {},
          abortable: s.abortable === true, reboot_requested: s.reboot_requested === true, inband: true,
        });
      }
    }
  }
  return { steps, version: r.hardware_manager_version ?? null };
}

/** `[deploy] erase_devices_priority` / `erase_devices_metadata_priority` over the agent's own. */
function overriddenPriority(services: AgentServices, step: AgentStep): number {
  const d = services.config.deploy;
  if (step.interface === 'deploy' && step.step === 'erase_devices' && d.erase_devices_priority >= 0) return d.erase_devices_priority;
  if (step.interface === 'deploy' && step.step === 'erase_devices_metadata' && d.erase_devices_metadata_priority >= 0) return d.erase_devices_metadata_priority;
  return step.priority;
}

/** Asks the agent for its steps (refresh_steps) and keeps them in driver_internal_info. */
async function refreshSteps(ctx: ActionContext, type: StepType, info: Record<string, unknown>): Promise<AgentStep[]> {
  const services = servicesOf(ctx);
  const cmd = await services.client.execute(await target(ctx), `${type}.get_${type}_steps`, {
    node: nodeForAgent(ctx.node), ports: await portsOf(ctx),
  }, true);
  if (cmd.command_status !== 'SUCCEEDED') {
    throw new AgentStepFailed(`Agent on node ${ctx.node.uuid} failed to return its ${type} steps: ${commandError(cmd)}`);
  }
  const { steps, version } = flattenAgentSteps(cmd.command_result, type);
  info[DII_CACHED[type]] = steps.map(shown);
  info[DII_VERSION[type]] = version;
  return steps;
}

/** Ironic's _freshly_booted: the agent has run nothing but get_*_steps since it booted. */
function freshlyBooted(commands: AgentCommand[], type: StepType): boolean {
  return commands.every((c) => c.command_name === `get_${type}_steps`);
}

/**
 * Whether an agent command is `current`'s execute_*_step: running, or ended (a success names
 * its step; an earlier step's success means the current one has not reached the agent).
 */
function isStepCommand(cmd: AgentCommand, type: StepType, current: Record<string, unknown>): boolean {
  if (cmd.command_name !== `execute_${type}_step`) return false;
  if (cmd.command_status !== 'SUCCEEDED') return true;
  const result = (cmd.command_result ?? {}) as Record<string, unknown>;
  const step = result[`${type}_step`] as Record<string, unknown> | undefined;
  return step !== undefined && step !== null && step.step === current.step && step.interface === current.interface;
}

/** Ironic's _get_completed_command: the last command, if it is the current step's and done. */
function completedCommand(commands: AgentCommand[], type: StepType, current: Record<string, unknown>): AgentCommand | undefined {
  const last = commands[commands.length - 1];
  return last && last.command_status !== 'RUNNING' && isStepCommand(last, type, current) ? last : undefined;
}

/** A version mismatch: the agent refused the step (its hardware managers changed). */
function isVersionMismatch(cmd: AgentCommand): boolean {
  return cmd.command_status.endsWith('VERSION_MISMATCH');
}

/**
 * The agent commands that change something, and how a run repeated after its conductor died
 * tells that the agent already has one: it is the agent's last command (an agent runs one
 * command at a time, and the node's runs one after the other). Such a command is then waited
 * on, never sent again. A step's command must be `step`'s, and not refused for a version
 * mismatch (that one is sent again, as a heartbeat would). Commands not listed only read
 * (get_*_steps, get_partition_uuids) and are simply sent again.
 */
const SENT_ONCE: Readonly<Record<string, (last: AgentCommand, step: Record<string, unknown>) => boolean>> = {
  'deploy.execute_deploy_step': (last, step) => isStepCommand(last, 'deploy', step) && !isVersionMismatch(last),
  'clean.execute_clean_step': (last, step) => isStepCommand(last, 'clean', step) && !isVersionMismatch(last),
  'image.install_bootloader': (last) => last.command_name === 'install_bootloader',
  'standby.power_off': (last) => last.command_name === 'power_off',
  'system.lockdown': (last) => last.command_name === 'lockdown',
};

/** The agent's last command when SENT_ONCE says it is `name` (for `step`), else undefined. */
function hasAlready(commands: AgentCommand[], name: string, step: Record<string, unknown> = {}): AgentCommand | undefined {
  const last = commands[commands.length - 1];
  const taken = SENT_ONCE[name];
  return last && taken?.(last, step) ? last : undefined;
}

/**
 * The command `name` as the agent already has it, when this run repeats one cut short
 * (`resume`); undefined when it is to be sent.
 */
async function sentAlready(ctx: ActionContext, resume: boolean, name: string, step?: Record<string, unknown>): Promise<AgentCommand | undefined> {
  if (!resume || !SENT_ONCE[name]) return undefined;
  return hasAlready(await servicesOf(ctx).client.getCommands(await target(ctx)), name, step);
}

/** Sends a command that changes something, unless a repeated run finds the agent has it (sentAlready). */
async function sendOnce(ctx: ActionContext, resume: boolean, name: string, params: Record<string, unknown>, wait: boolean, step?: Record<string, unknown>): Promise<AgentCommand> {
  return (await sentAlready(ctx, resume, name, step)) ?? servicesOf(ctx).client.execute(await target(ctx), name, params, wait);
}

/** The command that runs a step on the agent, or undefined for a step the conductor runs. */
function agentCommandOf(type: StepType, step: AgentStep): string | undefined {
  if (step.inband || (type === 'deploy' && step.interface === 'deploy' && step.step === 'write_image')) return `${type}.execute_${type}_step`;
  return undefined;
}

function stepsOf(info: Record<string, unknown>, type: StepType): AgentStep[] {
  const v = info[DII_STEPS[type]];
  return Array.isArray(v) ? (v as AgentStep[]) : [];
}

function failureWords(type: StepType): string {
  return type === 'deploy' ? 'Deploy step' : 'Clean step';
}

/** The node's state while the conductor runs a step, and while it waits for the agent. */
const RUNNING: Record<StepType, string> = { deploy: ProvisionState.DEPLOYING, clean: ProvisionState.CLEANING };
const WAITING: Record<StepType, string> = { deploy: ProvisionState.DEPLOYWAIT, clean: ProvisionState.CLEANWAIT };

/**
 * Runs the steps from `from` on: out-of-band ones here, in-band ones by asking the agent
 * (then the node waits for it). Writes the current step before running it, so that a crash
 * leaves the node showing where it was; the wait that follows an in-band step is the task's
 * outcome to write. `resume`: step `from` may have been started by a run cut short, so its
 * commands are sent once (sendOnce).
 */
async function runSteps(ctx: ActionContext, type: StepType, info: Record<string, unknown>, from: number, resume = false): Promise<StepOutcome> {
  const steps = stepsOf(info, type);
  for (let i = from; i < steps.length; i++) {
    const step = steps[i];
    info[DII_INDEX[type]] = i;
    const noOp = !step.inband && NO_OP_STEPS.has(stepId(step)) && i + 1 < steps.length;
    if (!noOp) {
      await ctx.task.progress({
        provisionState: RUNNING[type], [`${type}Step`]: shown(step), driverInternalInfo: { ...info },
      } as NodeChanges);
    }
    let waited: StepRun;
    try {
      waited = await runStep(ctx, type, step, info, resume && i === from);
    } catch (err) {
      const msg = (err as Error).message;
      throw new AgentStepFailed(msg.includes(stepId(step)) ? msg : `${failureWords(type)} ${stepId(step)} failed: ${msg}`);
    }
    if (waited.wait) return { wait: true, changes: waitChanges(type, info) };
  }
  return { wait: false };
}

/** The node's changes that make it wait for its agent. */
function waitChanges(type: StepType, info: Record<string, unknown>): NodeChanges {
  return { provisionState: WAITING[type], provisionUpdatedAt: new Date(), driverInternalInfo: { ...info } };
}

/** What running a step comes to: the agent has it (wait) or it is done. */
type StepRun = { wait: boolean };

async function runStep(ctx: ActionContext, type: StepType, step: AgentStep, info: Record<string, unknown>, resume: boolean): Promise<StepRun> {
  if (type === 'deploy' && step.interface === 'deploy' && !step.inband) {
    switch (step.step) {
      case 'deploy':
        await bootAgent(ctx);
        return { wait: true };
      case 'write_image':
        return executeInband(ctx, 'deploy', { ...step, args: { ...step.args, ...writeImageArgs(ctx.node) } }, info, resume);
      case 'prepare_instance_boot':
        await prepareInstanceBoot(ctx, info, resume);
        return { wait: false };
      case 'tear_down_agent':
        await tearDownAgent(ctx, resume);
        return { wait: false };
      case 'switch_to_tenant_network':
        return { wait: false };
      case 'boot_instance':
        await powerOf(ctx).setPowerState(ctx.driver, 'power on');
        return { wait: false };
    }
  }
  if (step.inband) return executeInband(ctx, type, step, info, resume);
  const oob = cleanStepsFor(ctx.node).find((s) => s.interface === step.interface && s.step === step.step);
  if (!oob) throw new InvalidParameterValue(`Node ${ctx.node.uuid} has no ${type} step ${stepId(step)}.`);
  await oob.run(ctx, step.args);
  return { wait: false };
}

/** Ironic's agent_base.execute_step: proxied to the agent, asynchronously. */
async function executeInband(ctx: ActionContext, type: StepType, step: AgentStep, info: Record<string, unknown>, resume: boolean): Promise<StepRun> {
  const cmd = await sendOnce(ctx, resume, `${type}.execute_${type}_step`, {
    step: shown(step), node: nodeForAgent(ctx.node), ports: await portsOf(ctx), [`${type}_version`]: info[DII_VERSION[type]] ?? null,
  }, false, shown(step));
  if (cmd.command_status === 'FAILED') throw new AgentStepFailed(commandError(cmd));
  if (cmd.command_status === 'SUCCEEDED') return { wait: false };
  return { wait: true };
}

/**
 * Ironic's images.is_whole_disk_image for an image that is not Glance's: `image_type` says so,
 * else a kernel or ramdisk in instance_info makes it a partition image.
 */
export function isWholeDiskImage(ii: Readonly<Record<string, unknown>>): boolean {
  if (typeof ii.image_type === 'string' && ii.image_type !== '') return ii.image_type !== 'partition';
  return !ii.kernel && !ii.ramdisk;
}

/** Ironic's boot_mode_utils.get_boot_mode: the instance's capability, the node's, else `[deploy] default_boot_mode` (uefi). */
function deployBootMode(node: Node): string {
  return parseCapabilities(node.instanceInfo.capabilities).boot_mode ?? parseCapabilities(node.properties.capabilities).boot_mode ?? 'uefi';
}

/** instance_info fields AgentDeploy.write_image hands the agent for a partition image (PARTITION_IMAGE_LABELS). */
const PARTITION_IMAGE_LABELS = ['kernel', 'ramdisk', 'root_gb', 'root_mb', 'swap_mb', 'ephemeral_mb', 'ephemeral_format', 'configdrive', 'preserve_ephemeral', 'image_type', 'deploy_boot_mode'];

/** image_info for write_image, as AgentDeploy.write_image builds it for an http image. */
function writeImageArgs(node: Node): Record<string, unknown> {
  const ii = node.instanceInfo;
  const source = String(ii.image_source);
  const info: Record<string, unknown> = {
    id: source.split('/').pop() || source, urls: [source], disk_format: ii.image_disk_format ?? 'raw', container_format: 'bare',
    stream_raw_images: true, node_uuid: node.uuid,
  };
  if (ii.image_os_hash_algo && ii.image_os_hash_value) {
    info.os_hash_algo = ii.image_os_hash_algo;
    info.os_hash_value = ii.image_os_hash_value;
  } else if (ii.image_checksum) {
    info.checksum = ii.image_checksum;
  }
  if (!isWholeDiskImage(ii)) {
    for (const label of PARTITION_IMAGE_LABELS) info[label] = ii[label] ?? null;
    // Ironic's build_instance_info_for_deploy gives the agent the root partition's size in MiB.
    if (info.root_mb === null && ii.root_gb !== undefined && ii.root_gb !== null) info.root_mb = 1024 * Number(ii.root_gb);
    info.deploy_boot_mode = deployBootMode(node);
    info.boot_option = 'local';
    const label = parseCapabilities(ii.capabilities).disk_label ?? parseCapabilities(node.properties.capabilities).disk_label;
    if (label) info.disk_label = label;
  }
  return { image_info: info, configdrive: ii.configdrive ?? null };
}

/**
 * prepare_instance_boot: the agent reports the partitions; for a partition image it installs
 * the bootloader on them (AgentDeploy.configure_local_boot, polled); then the node boots from
 * disk.
 */
async function prepareInstanceBoot(ctx: ActionContext, info: Record<string, unknown>, resume: boolean): Promise<void> {
  const services = servicesOf(ctx);
  const agent = await target(ctx);
  const poll = { attempts: services.config.agent.command_wait_attempts, intervalMs: services.config.agent.command_wait_interval * 1000 };
  // An install a run cut short sent is waited for first: the agent takes no other command meanwhile.
  const earlier = await sentAlready(ctx, resume, 'image.install_bootloader');
  const installed = earlier && (await services.client.pollUntilEnded(agent, 'image.install_bootloader', earlier, poll));
  const cmd = await services.client.execute(agent, 'standby.get_partition_uuids', {}, true);
  if (cmd.command_status === 'FAILED') throw new AgentStepFailed(`Failed to get partition UUIDs: ${commandError(cmd)}`);
  const uuids = (cmd.command_result ?? {}) as Record<string, unknown>;
  const root = typeof uuids['root uuid'] === 'string' ? uuids['root uuid'] : undefined;
  if (root) info.root_uuid_or_disk_id = root;
  if (root && !isWholeDiskImage(ctx.node.instanceInfo)) {
    const mode = deployBootMode(ctx.node);
    const arch = ctx.node.properties.cpu_arch;
    const result = installed || await services.client.executeAndPoll(agent, 'image.install_bootloader', {
      root_uuid: root,
      efi_system_part_uuid: mode === 'uefi' ? uuids['efi system partition uuid'] ?? null : null,
      prep_boot_part_uuid: typeof arch === 'string' && arch.startsWith('ppc64') ? uuids['PReP Boot partition uuid'] ?? null : null,
      target_boot_mode: mode,
    }, poll);
    if (result.command_status === 'FAILED') {
      throw new AgentStepFailed(`Failed to install a bootloader when deploying node ${ctx.node.uuid}: ${commandError(result)}`);
    }
  }
  await bootOf(ctx).cleanUpInstance(ctx.driver);
  await managementOf(ctx).setBootDevice(ctx.driver, 'disk', true);
}

/**
 * tear_down_agent: the agent powers the node off (standby.power_off); the BMC is read up to
 * `[agent] post_deploy_get_power_state_retries` times, then the node is forced off. The token
 * and agent URL are forgotten: this agent's work is done.
 */
async function tearDownAgent(ctx: ActionContext, resume: boolean): Promise<void> {
  const services = servicesOf(ctx);
  const power = powerOf(ctx);
  if (ctx.node.disablePowerOff) {
    await sendOnce(ctx, resume, 'system.lockdown', {}, false).catch((err: Error) => {
      ctx.log.warn({ err: err.message }, 'agent lockdown failed');
    });
  } else {
    let off = false;
    try {
      // An agent already gone (powered off, or its token wiped by a run cut short) is forced off below.
      await sendOnce(ctx, resume, 'standby.power_off', {}, false);
      const { post_deploy_get_power_state_retries: retries, post_deploy_get_power_state_retry_interval: interval } = services.config.agent;
      for (let i = 0; i < retries && !off; i++) {
        await new Promise((r) => setTimeout(r, backoffCeilingMs(i + 1, 200, interval * 1000)));
        off = (await power.getPowerState(ctx.driver)) === 'power off';
      }
    } catch (err) {
      ctx.log.warn({ err: (err as Error).message }, 'soft power off through the agent failed; forcing it off');
    }
    if (!off) await power.setPowerState(ctx.driver, 'power off');
  }
  await wipeToken(ctx);
}

/**
 * Starts a direct deploy: the steps are computed and kept, and the first one (deploy.deploy)
 * boots the agent. The node then waits in `wait call-back`.
 */
export async function startDirectDeploy(ctx: ActionContext, userSteps: CleanStep[] | undefined): Promise<StepOutcome> {
  const info = wipedInternalInfo(dii(ctx), 'deploy');
  info[DII_STEPS.deploy] = directDeploySteps(userSteps);
  return runSteps(ctx, 'deploy', info, 0);
}

/** Whether a cleaning run needs the agent (prepare_cleaning boots it). */
export function cleaningNeedsAgent(node: Node, manual: CleanStep[] | undefined, disableRamdisk: boolean): boolean {
  if (node.deployInterface !== 'direct' || disableRamdisk) return false;
  if (!manual) return true;
  const oob = cleanStepsFor(node);
  // Ironic boots no ramdisk when every requested step can run without one.
  return !manual.every((s) => oob.some((o) => o.interface === s.interface && o.step === s.step && !o.requiresRamdisk));
}

/**
 * Starts cleaning through the agent: boots it, and the node waits in `clean wait` with no step
 * yet (the changes returned). `pending` changes go with the write before the boot.
 */
export async function startAgentCleaning(ctx: ActionContext, manual: CleanStep[] | undefined, pending: NodeChanges = {}): Promise<NodeChanges> {
  const info = wipedInternalInfo(dii(ctx), 'clean');
  if (manual) info.clean_steps_requested = manual;
  else delete info.clean_steps_requested;
  await ctx.task.progress({ ...pending, cleanStep: {}, driverInternalInfo: info });
  await bootAgent(ctx);
  return waitChanges('clean', info);
}

/** The clean steps for this run, once the agent's are known (set_node_cleaning_steps). */
function cleaningSteps(ctx: ActionContext, agentSteps: AgentStep[], manual: CleanStep[] | undefined): AgentStep[] {
  const services = servicesOf(ctx);
  const oob: AgentStep[] = cleanStepsFor(ctx.node).map((s) => ({ interface: s.interface, step: s.step, priority: s.priority, args: {}, abortable: s.abortable, inband: false }));
  const all = [...oob, ...agentSteps.filter((a) => !oob.some((o) => o.interface === a.interface && o.step === a.step))];
  if (!manual) {
    return all.map((s) => ({ ...s, priority: s.inband ? overriddenPriority(services, s) : s.priority }))
      .filter((s) => s.priority > 0).sort((a, b) => b.priority - a.priority);
  }
  return manual.map((m) => {
    const known = all.find((s) => s.interface === m.interface && s.step === m.step);
    if (!known) {
      throw new InvalidParameterValue(`Node ${ctx.node.uuid} has no clean step "${m.step}" on its ${m.interface} interface (nor does its agent).`);
    }
    return { ...known, args: m.args ?? {} };
  });
}

/**
 * What a heartbeat asks of the conductor (an `agent_continue` intent): in `wait call-back` and
 * `clean wait`, look at the agent's commands and carry on when the current step is done
 * (Ironic's _heartbeat_deploy_wait / _heartbeat_clean_wait and process_next_step). Returns the
 * node's changes when the run ended ({} while it still waits), or throws to fail it.
 */
export async function continueFromHeartbeat(ctx: ActionContext, type: StepType): Promise<StepOutcome> {
  const services = servicesOf(ctx);
  const info = { ...dii(ctx) };
  if (ctx.node.provisionState === RUNNING[type]) return resumeCutShort(ctx, type, info);
  const agent = await target(ctx);
  if (type === 'clean' && Object.keys(ctx.node.cleanStep ?? {}).length === 0) {
    // The agent just booted for cleaning: its steps decide what runs.
    const agentSteps = await refreshSteps(ctx, 'clean', info);
    const manual = info.clean_steps_requested as CleanStep[] | undefined;
    info[DII_STEPS.clean] = cleaningSteps(ctx, agentSteps, manual);
    delete info.clean_steps_requested;
    return runSteps(ctx, 'clean', info, 0);
  }
  if (type === 'deploy' && !info[DII_CACHED.deploy]) {
    const agentSteps = await refreshSteps(ctx, 'deploy', info);
    // User steps that only the agent has must be among its steps now.
    const steps = stepsOf(info, 'deploy').map((s) => {
      if (!s.inband) return s;
      const found = agentSteps.find((a) => a.interface === s.interface && a.step === s.step);
      if (!found) throw new InvalidParameterValue(`Deploy step ${stepId(s)} has not been found among the agent's steps.`);
      return { ...found, priority: s.priority, args: s.args };
    });
    info[DII_STEPS.deploy] = steps;
  }
  return carryOn(ctx, type, info, await services.client.getCommands(agent));
}

/**
 * The run an `agent_continue` carries on: the node waits for its agent, or shows a step of an
 * agent run still running (its conductor died, see resumeCutShort). Undefined otherwise.
 */
export function runToContinue(node: Node): StepType | undefined {
  for (const type of ['deploy', 'clean'] as const) {
    if (node.provisionState === WAITING[type]) return type;
    const info = node.driverInternalInfo ?? {};
    if (node.provisionState === RUNNING[type] && stepsOf(info, type)[indexOf(info, type)] !== undefined) return type;
  }
  return undefined;
}

function indexOf(info: Record<string, unknown>, type: StepType): number {
  return typeof info[DII_INDEX[type]] === 'number' ? (info[DII_INDEX[type]] as number) : 0;
}

/**
 * Carries on a run whose conductor died while it ran a step: the node still shows it running,
 * at the step recorded before it began (runSteps). A step the agent runs is looked up in the
 * agent's command list first: one the agent has (running or ended) is taken as a heartbeat
 * takes it, so the node waits for it or goes on; else the step runs again. A step the
 * conductor runs (prepare_instance_boot, tear_down_agent) sends its commands once (sendOnce).
 * What the conductor does at the BMC (power, boot device) is simply done again.
 */
async function resumeCutShort(ctx: ActionContext, type: StepType, info: Record<string, unknown>): Promise<StepOutcome> {
  const index = indexOf(info, type);
  const step = stepsOf(info, type)[index];
  const name = agentCommandOf(type, step);
  if (name) {
    const commands = await servicesOf(ctx).client.getCommands(await target(ctx));
    if (hasAlready(commands, name, shown(step))) return carryOn(ctx, type, info, commands);
  }
  ctx.log.info({ step: stepId(step) }, `repeating ${type} step cut short by its conductor's stop`);
  // A step the agent runs was just looked up and is not there: it is sent, not looked up again.
  return runSteps(ctx, type, info, index, name === undefined);
}

/**
 * What the agent's commands say of the current step (Ironic's process_next_step): still running
 * (wait), failed, refused for a version mismatch (run again), or done (the next step).
 */
async function carryOn(ctx: ActionContext, type: StepType, info: Record<string, unknown>, commands: AgentCommand[]): Promise<StepOutcome> {
  const index = indexOf(info, type);
  // A run cut short left the node showing the step running: waiting, it waits again from now.
  const resumed = ctx.node.provisionState === RUNNING[type];
  const current = (type === 'deploy' ? ctx.node.deployStep : ctx.node.cleanStep) ?? {};
  // Ironic's continue_node_clean: the step asked to be aborted after has ended, so the cleaning ends.
  const next = (): Promise<StepOutcome> => (type === 'clean' && current.abort_after === true ? Promise.resolve({ wait: false, abortAfter: true }) : runSteps(ctx, type, info, index + 1));
  if (freshlyBooted(commands, type)) return next();
  const done = completedCommand(commands, type, current);
  if (!done) {
    if (resumed) return { wait: true, changes: waitChanges(type, info) };
    // Still running: the heartbeat already moved the deadline on.
    return { wait: true, changes: info[DII_CACHED[type]] !== dii(ctx)[DII_CACHED[type]] ? { driverInternalInfo: info } : {} };
  }
  if (done.command_status === 'FAILED') {
    throw new AgentStepFailed(`${type === 'deploy' ? 'Deploy' : 'Clean'} step ${stepId(current as { interface: string; step: string })} failed on node ${ctx.node.uuid}. ${commandError(done)}`);
  }
  if (isVersionMismatch(done)) {
    // The agent's hardware managers changed: learn its steps again and run the step again.
    await refreshSteps(ctx, type, info);
    return runSteps(ctx, type, info, index);
  }
  if (done.command_status !== 'SUCCEEDED') {
    throw new AgentStepFailed(`Agent returned unknown status for ${type} step ${stepId(current as { interface: string; step: string })} on node ${ctx.node.uuid} : ${done.command_status}.`);
  }
  const currentStep = stepsOf(info, type)[index];
  if (currentStep?.reboot_requested) {
    await powerOf(ctx).setPowerState(ctx.driver, 'rebooting');
    return { wait: true, changes: resumed ? waitChanges(type, info) : { driverInternalInfo: info, provisionUpdatedAt: new Date() } };
  }
  return next();
}

/**
 * Ironic's tear_down_cleaning: the agent's CD is ejected and the node powered off; the token
 * goes with the agent.
 */
export async function tearDownCleaning(ctx: ActionContext): Promise<void> {
  await bootOf(ctx).cleanUpInstance(ctx.driver);
  if (!ctx.node.disablePowerOff) await powerOf(ctx).setPowerState(ctx.driver, 'power off');
  await wipeToken(ctx);
}

/**
 * Ironic's do_node_clean_abort: the cleaning torn down (the agent's CD ejected, the node off,
 * the token gone), and last_error says which step it stopped at (get_last_error).
 */
export async function abortCleaning(ctx: ActionContext): Promise<NodeChanges> {
  const step = ctx.node.cleanStep;
  await tearDownCleaning(ctx);
  let lastError = 'By request, the clean operation was aborted';
  if (step && Object.keys(step).length) lastError += ` during or after the completion of step "${stepId(step as { interface: string; step: string })}"`;
  const changes: NodeChanges = { lastError, cleanStep: {}, driverInternalInfo: wipedInternalInfo(ctx.node.driverInternalInfo ?? {}, 'clean') };
  if (!ctx.node.disablePowerOff) changes.powerState = 'power off';
  return changes;
}

/** The changes that end an agent run (success or failure): its steps and connection forgotten. */
export function endOfRunChanges(node: Node, type: StepType): NodeChanges {
  return { driverInternalInfo: wipedInternalInfo(node.driverInternalInfo ?? {}, type), [`${type}Step`]: {} } as NodeChanges;
}
