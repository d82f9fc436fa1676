/**
 * The step framework (Ironic's conductor/steps.py, deployments.py and cleaning.py, with
 * agent_base's heartbeat handling): one place that collects a node's steps from its
 * interfaces' declarations and its agent, plans a run (config overrides, the user's steps,
 * priority 0 left out, Ironic's interface tie-break), and runs it.
 *
 * A run is persisted state: its steps and the index of the current one live in
 * driver_internal_info, the current step is written before it runs, and a step handed to the
 * agent leaves the node waiting (`wait call-back`, `clean wait`) until a heartbeat queues an
 * `agent_continue` intent that carries the run on here. No worker waits for an agent.
 */
import { AgentStepFailed, DeployStepCleanedUp, GalvanicError, InvalidParameterValue, PowerOffDisabled, UnsupportedDriverExtension } from '../common/errors.js';
import { ProvisionState, eventChanges, nextState } from '../common/states.js';
import { FLOW_POWER_STEPS, isFlowPowerStep, type UserStep } from '../common/steps.js';
import { cleanSteps, cleaningNeedsAgent, declaredSteps, deploySteps, serviceSteps, usesAgent as planUsesAgent } from '../drivers/step-plan.js';
import type { Node, NodeChanges } from '../db/nodes.js';
import type { AgentCommand } from '../drivers/agent/client.js';
import { AgentSession, completedCommand, freshlyBooted, isVersionMismatch, shownStep, type AgentStepKind } from '../drivers/agent/session.js';
import { commandError } from '../drivers/agent/client.js';
import { bootAgent } from '../drivers/deploy/agent-base.js';
import type { BootInterface, DeployInterface, InterfaceKind, ManagementInterface, PowerInterface } from '../drivers/interfaces.js';
import { stepId, type PlannedStep, type StepContext, type StepDeclaration, type StepKind, type StepRecorder } from '../drivers/steps.js';
import { syncBiosSettings } from '../db/bios-settings.js';
import { syncFirmware } from '../db/firmware-components.js';
import type { ActionContext } from './actions/types.js';
import { pyRepr } from '../common/py-repr.js';
import { configdriveImage } from './configdrive.js';
import { nodeAsDict } from './node-dict.js';
import { taskPower } from './node-power.js';
import { LockLost } from './task-manager.js';


export { stepId, type PlannedStep } from '../drivers/steps.js';


/** The kinds of run that go through the agent and persist their steps. */
export type RunKind = AgentStepKind;

/**
 * What a run (or a step of it) comes to: wait for the agent, with the node's changes that say
 * so (written with the task's outcome, not apart from it); or done; or, for cleaning, aborted
 * after a step that was not abortable (`abort_after`).
 */
export type StepOutcome = { wait: true; changes: NodeChanges } | { wait: false; abortAfter?: true; powerState?: RunRecord['powerState'] };

const DII_STEPS: Record<RunKind, string> = { deploy: 'deploy_steps', clean: 'clean_steps', service: 'service_steps' };
const DII_INDEX: Record<RunKind, string> = { deploy: 'deploy_step_index', clean: 'clean_step_index', service: 'service_step_index' };
const DII_CACHED: Record<RunKind, string> = { deploy: 'agent_cached_deploy_steps', clean: 'agent_cached_clean_steps', service: 'agent_cached_service_steps' };
const DII_VERSION: Record<RunKind, string> = { deploy: 'agent_deploy_version', clean: 'agent_clean_version', service: 'agent_service_version' };
/** How messages name a run's steps. */
const STEP_WORD: Record<RunKind, string> = { deploy: 'Deploy', clean: 'Clean', service: 'Service' };
/** What driver_internal_info keeps only while an agent works on the node. */
const AGENT_KEYS = ['agent_url', 'agent_version', 'agent_last_heartbeat', 'agent_verify_ca'];

/** The node's state while the conductor runs a step, and while it waits for the agent. */
const RUNNING: Record<RunKind, string> = { deploy: ProvisionState.DEPLOYING, clean: ProvisionState.CLEANING, service: ProvisionState.SERVICING };
const WAITING: Record<RunKind, string> = { deploy: nextState(RUNNING.deploy, 'wait'), clean: nextState(RUNNING.clean, 'wait'), service: nextState(RUNNING.service, 'wait') };

export function dii(ctx: ActionContext): Record<string, unknown> {
  return ctx.node.driverInternalInfo ?? {};
}

/** driver_internal_info without the agent's connection details and this run's steps. */
export function wipedInternalInfo(info: Record<string, unknown>, kind?: RunKind): Record<string, unknown> {
  const out = { ...info };
  for (const k of AGENT_KEYS) delete out[k];
  for (const t of kind ? [kind] : (['deploy', 'clean', 'service'] as RunKind[])) {
    delete out[DII_STEPS[t]];
    delete out[DII_INDEX[t]];
    delete out[DII_CACHED[t]];
    delete out[DII_VERSION[t]];
  }
  return out;
}

/** The changes that end a run (success or failure): its steps and the agent's connection forgotten. */
export function endOfRunChanges(node: Node, kind: RunKind): NodeChanges {
  return { driverInternalInfo: wipedInternalInfo(node.driverInternalInfo ?? {}, kind), [`${kind}Step`]: {} } as NodeChanges;
}

export function enabled<K extends InterfaceKind>(ctx: ActionContext, kind: K) {
  const name = ctx.node[`${kind}Interface`];
  const impl = ctx.registry.impl(kind, name);
  if (!impl) throw new UnsupportedDriverExtension(`${kind[0].toUpperCase()}${kind.slice(1)} interface ${name} is not enabled on this conductor.`);
  return impl;
}

/** The node's deploy interface. @throws UnsupportedDriverExtension when it is not enabled here */
export function deployOf(ctx: ActionContext): DeployInterface {
  return enabled(ctx, 'deploy') as DeployInterface;
}

/**
 * The node's agent for this task (its token and ports read once), made on first use.
 * @throws UnsupportedDriverExtension where the conductor has no agent client
 */
export function agentOf(ctx: ActionContext): AgentSession {
  if (ctx.agentSession) return ctx.agentSession;
  const services = ctx.agent;
  if (!services) throw new UnsupportedDriverExtension('This conductor has no agent client.');
  const id = ctx.node.id;
  const { command_wait_attempts: attempts, command_wait_interval: interval } = services.config.agent;
  ctx.agentSession = new AgentSession(() => ctx.node, {
    client: services.client,
    tokenOf: () => (ctx.task.agentToken.value !== undefined ? Promise.resolve(ctx.task.agentToken.value) : services.tokenOf(id)),
    wipeToken: () => {
      ctx.task.agentToken.value = undefined;
      return services.wipeToken(id);
    },
    portsOf: () => services.portsOf(id),
    nodeAsDict: () => nodeAsDict(ctx.node),
    poll: { attempts, intervalMs: interval * 1000 },
    verifyCa: services.config.agent.verify_ca,
  });
  return ctx.agentSession;
}

/** What a run learns of the node as its steps go: the power state they last set. */
export interface RunRecord {
  powerState?: 'power on' | 'power off';
}

/**
 * The task's power interface (conductor/node-power.ts: a power off or reboot wipes the agent's
 * traces from the run's `info` too), with what it is asked to set recorded, so that the run's
 * outcome says it.
 */
function recordingPower(ctx: ActionContext, record: RunRecord, info?: Record<string, unknown>): PowerInterface {
  const power = taskPower(ctx, info);
  return {
    ...power,
    async setPowerState(d, target, timeout) {
      await power.setPowerState(d, target, timeout);
      record.powerState = target === 'power off' || target === 'soft power off' ? 'power off' : 'power on';
    },
  };
}

/** Where a step's readings go: written while the task holds the node. */
function stepRecorder(ctx: ActionContext): StepRecorder {
  return {
    biosSettings: async (settings) => void (await ctx.task.progressWith({}, (trx, held) => syncBiosSettings(trx, held.id, settings))),
    raid: async (changes) => {
      await ctx.task.progress({ ...changes });
    },
    firmware: async (components) => {
      await ctx.task.progressWith({}, (trx, node) => syncFirmware(trx, node.id, components));
    },
  };
}

/**
 * The task's node, interfaces and agent as a step or a deploy interface sees them, resolved
 * when first used; `info` is the run's working copy of driver_internal_info, if one is at work.
 */
export function taskInterfaces(ctx: ActionContext, record: RunRecord = {}, info?: Record<string, unknown>): Omit<StepContext, 'kind' | 'step' | 'info' | 'resume'> {
  return {
    get node() {
      return ctx.node;
    },
    driver: ctx.driver, log: ctx.log,
    get power() {
      return recordingPower(ctx, record, info);
    },
    get boot() {
      return enabled(ctx, 'boot') as BootInterface;
    },
    get management() {
      return enabled(ctx, 'management') as ManagementInterface;
    },
    agent: () => agentOf(ctx),
    configdrive: () => configdriveImage(ctx, ctx.configdrive),
    record: stepRecorder(ctx),
  };
}

/** What a step's `run` sees of the task. */
function stepContext(ctx: ActionContext, kind: StepKind, step: PlannedStep, info: Record<string, unknown>, resume: boolean, record: RunRecord): StepContext {
  return Object.assign(taskInterfaces(ctx, record, info), { kind, step, info, resume });
}

function stepsOf(info: Record<string, unknown>, kind: RunKind): PlannedStep[] {
  const v = info[DII_STEPS[kind]];
  return Array.isArray(v) ? (v as PlannedStep[]) : [];
}

function indexOf(info: Record<string, unknown>, kind: RunKind): number {
  return typeof info[DII_INDEX[kind]] === 'number' ? (info[DII_INDEX[kind]] as number) : 0;
}

/** The node's changes that make it wait for its agent (its run's `wait` event). */
export function waitChanges(ctx: ActionContext, kind: RunKind, info: Record<string, unknown>): NodeChanges {
  return { ...eventChanges({ provisionState: RUNNING[kind], targetProvisionState: ctx.node.targetProvisionState }, 'wait'), driverInternalInfo: { ...info } };
}

/** The agent command that carries a step out, or undefined for one run by the conductor alone. */
function agentCommandOf(ctx: ActionContext, kind: RunKind, step: PlannedStep): string | undefined {
  if (step.inband || declarationOf(ctx, kind, step)?.sendsAgentStep) return `${kind}.execute_${kind}_step`;
  return undefined;
}

/** Whether the node's deploy interface works through the agent (false when it is not enabled here). */
export function usesAgent(ctx: Pick<ActionContext, 'node' | 'registry'>): boolean {
  return planUsesAgent(ctx.node, ctx.registry);
}

/**
 * Priority overrides from the config (Ironic's `[deploy] erase_devices_priority` and
 * `erase_devices_metadata_priority`, applied to the agent's steps of those names).
 */
function priorityOverrides(ctx: ActionContext): Record<string, number> {
  const d = ctx.agent?.config.deploy;
  const out: Record<string, number> = {};
  if (d && d.erase_devices_priority >= 0) out['deploy.erase_devices'] = d.erase_devices_priority;
  if (d && d.erase_devices_metadata_priority >= 0) out['deploy.erase_devices_metadata'] = d.erase_devices_metadata_priority;
  return out;
}

function declarationOf(ctx: ActionContext, kind: StepKind, step: { interface: string; step: string }): StepDeclaration | undefined {
  return declaredSteps(ctx.node, ctx.registry, kind).find((d) => d.interface === step.interface && d.decl.step === step.step)?.decl;
}

/** The declaration of a step of `kind` on the node's interfaces, if one declares it. */
export function declaredStep(ctx: ActionContext, kind: StepKind, step: { interface: string; step: string }): StepDeclaration | undefined {
  return declarationOf(ctx, kind, step);
}

/**
 * Runs a declared step outside a persisted run (servicing's steps, which no agent carries on).
 * @returns what it came to, and the power state it left
 */
export async function runDeclaredStep(
  ctx: ActionContext, kind: StepKind, decl: StepDeclaration, step: PlannedStep, info: Record<string, unknown> = { ...dii(ctx) },
): Promise<{ run: 'done' | 'wait'; powerState?: RunRecord['powerState'] }> {
  const record: RunRecord = {};
  const run = await decl.run(stepContext(ctx, kind, step, info, false, record), step.args);
  return { run, powerState: record.powerState };
}

/**
 * A flow step of servicing (power_on, power_off, reboot), which Ironic's conductor runs itself.
 * @throws PowerOffDisabled for power_off of a node that may not be powered off
 */
export async function runFlowPowerStep(ctx: ActionContext, step: { step: string }, record: RunRecord, info?: Record<string, unknown>): Promise<void> {
  const target = FLOW_POWER_STEPS[step.step];
  if (target === 'power off' && ctx.node.disablePowerOff) throw new PowerOffDisabled(target);
  await taskInterfaces(ctx, record, info).power.setPowerState(ctx.driver, target);
}

/** Runs one step: an in-band one on the agent, a declared one through its interface. */
async function runStep(ctx: ActionContext, kind: RunKind, step: PlannedStep, info: Record<string, unknown>, resume: boolean, record: RunRecord): Promise<'done' | 'wait'> {
  if (step.inband) return agentOf(ctx).executeStep(kind, step, info[DII_VERSION[kind]], resume);
  if (kind === 'service' && isFlowPowerStep(step)) {
    await runFlowPowerStep(ctx, step, record, info);
    return 'done';
  }
  const decl = declarationOf(ctx, kind, step);
  if (!decl) throw new InvalidParameterValue(`Node ${ctx.node.uuid} has no ${kind} step ${stepId(step)}.`);
  return decl.run(stepContext(ctx, kind, step, info, resume, record), step.args);
}

/**
 * Runs the steps from `from` on. Writes the current step before running it, so that a crash
 * leaves the node showing where it was; the wait that follows a step handed to the agent is
 * the task's outcome to write. `resume`: step `from` may have been started by a run cut short,
 * so its agent commands are sent once.
 */
async function runSteps(ctx: ActionContext, kind: RunKind, info: Record<string, unknown>, from: number, resume = false): Promise<StepOutcome> {
  const steps = stepsOf(info, kind);
  const record: RunRecord = {};
  for (let i = from; i < steps.length; i++) {
    const step = steps[i];
    info[DII_INDEX[kind]] = i;
    const quiet = !step.inband && declarationOf(ctx, kind, step)?.noOp === true && i + 1 < steps.length;
    if (!quiet) {
      await ctx.task.progress({ provisionState: RUNNING[kind], [`${kind}Step`]: shownStep(step), driverInternalInfo: { ...info } } as NodeChanges);
    }
    let run: 'done' | 'wait';
    try {
      run = await runStep(ctx, kind, step, info, resume && i === from, record);
    } catch (err) {
      // A run without an agent fails as its BMC call did (retried when that may help); an agent
      // run's failure names its step, and is not retried: the agent has moved on meanwhile.
      if (!usesAgent(ctx)) throw err;
      const msg = (err as Error).message;
      const reason = msg.includes(stepId(step)) ? msg : `${STEP_WORD[kind]} step ${stepId(step)} failed: ${msg}`;
      // Ironic's do_next_deploy_step hands a failed step to deploying_error_handler; a step that
      // fails the deploy itself is powered off by the run's end.
      if (declarationOf(ctx, kind, step)?.powersOffOnFailure) throw new AgentStepFailed(reason);
      throw await stepFailure(ctx, kind, reason, err);
    }
    if (run === 'wait') return { wait: true, changes: waitChanges(ctx, kind, info) };
  }
  return record.powerState ? { wait: false, powerState: record.powerState } : { wait: false };
}

/** Asks the agent for its steps and keeps them in driver_internal_info. */
async function refreshSteps(ctx: ActionContext, kind: RunKind, info: Record<string, unknown>): Promise<PlannedStep[]> {
  const { steps, version } = await agentOf(ctx).getSteps(kind);
  info[DII_CACHED[kind]] = steps.map(shownStep);
  info[DII_VERSION[kind]] = version;
  return steps;
}

/**
 * Starts a deploy: its steps planned and kept, then run from the first (the deploy
 * interface's core `deploy` step). An agent deploy then waits in `wait call-back`.
 */
export async function startDeploy(ctx: ActionContext, user: readonly UserStep[] | undefined): Promise<StepOutcome> {
  const info = wipedInternalInfo(dii(ctx), 'deploy');
  info[DII_STEPS.deploy] = deploySteps(ctx.node, ctx.registry, user);
  return runSteps(ctx, 'deploy', info, 0);
}

/**
 * Starts a cleaning. Through the agent: it is booted, and the node waits in `clean wait` with
 * no step yet (the changes returned), its steps decided once the agent offers its own.
 * Otherwise the declared steps run now. `pending` changes go with the cleaning's first write.
 */
export async function startCleaning(ctx: ActionContext, manual: readonly UserStep[] | undefined, disableRamdisk: boolean, pending: NodeChanges = {}): Promise<StepOutcome> {
  const info = wipedInternalInfo(dii(ctx), 'clean');
  if (cleaningNeedsAgent(ctx.node, ctx.registry, manual, disableRamdisk)) {
    if (manual) info.clean_steps_requested = manual;
    else delete info.clean_steps_requested;
    await ctx.task.progress({ ...pending, cleanStep: {}, driverInternalInfo: info });
    await bootAgent(taskInterfaces(ctx, {}, info));
    return { wait: true, changes: { ...waitChanges(ctx, 'clean', info), powerState: 'power on' } };
  }
  info[DII_STEPS.clean] = cleanSteps(ctx.node, ctx.registry, [], manual);
  if (Object.keys(pending).length) await ctx.task.progress(pending);
  return runSteps(ctx, 'clean', info, 0);
}

/**
 * What a heartbeat asks of the conductor (an `agent_continue` intent): in `wait call-back` and
 * `clean wait`, look at the agent's commands and carry on when the current step is done
 * (Ironic's _heartbeat_deploy_wait / _heartbeat_clean_wait and process_next_step).
 */
export async function continueFromHeartbeat(ctx: ActionContext, kind: RunKind): Promise<StepOutcome> {
  const info = { ...dii(ctx) };
  if (ctx.node.provisionState === RUNNING[kind]) return resumeCutShort(ctx, kind, info);
  if (typeof info.agent_url !== 'string') {
    // The agent whose heartbeat queued this was powered off or rebooted since (its URL wiped,
    // conductor/node-power.ts): the next agent's heartbeat carries the run on.
    ctx.log.debug('the agent that heartbeated is gone (powered off or rebooted): waiting for the next one');
    return { wait: true, changes: {} };
  }
  if (kind === 'clean' && Object.keys(ctx.node.cleanStep ?? {}).length === 0) {
    // The agent just booted for cleaning: its steps decide what runs.
    const agentSteps = await refreshSteps(ctx, 'clean', info);
    info[DII_STEPS.clean] = cleanSteps(ctx.node, ctx.registry, agentSteps, info.clean_steps_requested as UserStep[] | undefined, priorityOverrides(ctx));
    delete info.clean_steps_requested;
    return runSteps(ctx, 'clean', info, 0);
  }
  if (kind === 'service' && Object.keys(ctx.node.serviceStep ?? {}).length === 0) {
    // The agent just booted for servicing: the steps asked for are checked against its own too.
    const agentSteps = await refreshSteps(ctx, 'service', info);
    info[DII_STEPS.service] = serviceSteps(ctx.node, ctx.registry, agentSteps, (info.service_steps_requested as UserStep[] | undefined) ?? []);
    delete info.service_steps_requested;
    return runSteps(ctx, 'service', info, 0);
  }
  if (kind === 'deploy' && !info[DII_CACHED.deploy]) {
    const agentSteps = await refreshSteps(ctx, 'deploy', info);
    // User steps that only the agent has must be among its steps now.
    const planned = stepsOf(info, 'deploy').map((s) => ({ s, found: s.inband ? agentSteps.find((a) => a.interface === s.interface && a.step === s.step) : undefined }));
    const missing = planned.find((p) => p.s.inband && !p.found);
    // Ironic's continue_node_deploy: steps the agent cannot run fail the deploy through deploying_error_handler.
    if (missing) throw await stepFailure(ctx, 'deploy', `Deploy step ${stepId(missing.s)} has not been found among the agent's steps.`);
    info[DII_STEPS.deploy] = planned.map(({ s, found }) => (found ? { ...found, priority: s.priority, args: s.args } : s));
  }
  return carryOn(ctx, kind, info, await agentOf(ctx).getCommands());
}

/**
 * The run an `agent_continue` carries on: the node waits for its agent, or shows a step of a
 * run still running (its conductor died, see resumeCutShort). Undefined otherwise.
 */
export function runToContinue(node: Node): RunKind | undefined {
  for (const kind of ['deploy', 'clean', 'service'] as const) {
    if (node.provisionState === WAITING[kind]) return kind;
    const info = node.driverInternalInfo ?? {};
    if (node.provisionState === RUNNING[kind] && stepsOf(info, kind)[indexOf(info, kind)] !== undefined) return kind;
  }
  return undefined;
}

/**
 * Carries on a run whose conductor died while it ran a step: the node still shows it running,
 * at the step recorded before it began (runSteps). A step the agent carries out is looked up
 * in the agent's command list first: one the agent has (running or ended) is taken as a
 * heartbeat takes it, so the node waits for it or goes on; else the step runs again. A step the
 * conductor runs sends its agent commands once (AgentSession.sendOnce). What the conductor
 * does at the BMC (power, boot device) is simply done again.
 */
async function resumeCutShort(ctx: ActionContext, kind: RunKind, info: Record<string, unknown>): Promise<StepOutcome> {
  const index = indexOf(info, kind);
  const step = stepsOf(info, kind)[index];
  const name = agentCommandOf(ctx, kind, step);
  if (name) {
    const agent = agentOf(ctx);
    const commands = await agent.getCommands();
    if (agent.hasAlready(commands, name, shownStep(step))) return carryOn(ctx, kind, info, commands);
  }
  ctx.log.info({ step: stepId(step) }, `repeating ${kind} step cut short by its conductor's stop`);
  // A step the agent runs was just looked up and is not there: it is sent, not looked up again.
  return runSteps(ctx, kind, info, index, name === undefined);
}

/**
 * What the agent's commands say of the current step (Ironic's process_next_step): still running
 * (wait), failed, refused for a version mismatch (run again), or done (the next step).
 */
async function carryOn(ctx: ActionContext, kind: RunKind, info: Record<string, unknown>, commands: AgentCommand[]): Promise<StepOutcome> {
  const index = indexOf(info, kind);
  // A run cut short left the node showing the step running: waiting, it waits again from now.
  const resumed = ctx.node.provisionState === RUNNING[kind];
  const current = ctx.node[`${kind}Step`] ?? {};
  // Ironic's continue_node_clean: the step asked to be aborted after has ended, so the cleaning ends.
  const next = (): Promise<StepOutcome> => (kind === 'clean' && current.abort_after === true ? Promise.resolve({ wait: false, abortAfter: true }) : runSteps(ctx, kind, info, index + 1));
  if (freshlyBooted(commands, kind)) {
    // The agent just came up: the current step booted it (deploy.deploy), or rebooted into it to finish.
    const step = stepsOf(info, kind)[index];
    const decl = step && !step.inband ? declarationOf(ctx, kind, step) : undefined;
    if (decl?.afterReboot) {
      let run: 'done' | 'wait';
      try {
        run = await decl.afterReboot(stepContext(ctx, kind, step, info, false, {}), step.args);
      } finally {
        // What the hook changed in driver_internal_info (its reboot's state cleared) outlives
        // it, whether the step ends here, fails, or is the run's last.
        await ctx.task.progress({ driverInternalInfo: { ...info } });
      }
      if (run === 'wait') return { wait: true, changes: waitChanges(ctx, kind, info) };
    }
    return next();
  }
  const done = completedCommand(commands, kind, current);
  const what = `${STEP_WORD[kind]} step ${stepId(current as { interface: string; step: string })}`;
  if (!done) {
    if (resumed) return { wait: true, changes: waitChanges(ctx, kind, info) };
    // Still running: the heartbeat already moved the deadline on.
    return { wait: true, changes: info[DII_CACHED[kind]] !== dii(ctx)[DII_CACHED[kind]] ? { driverInternalInfo: info } : {} };
  }
  if (done.command_status === 'FAILED') throw await stepFailure(ctx, kind, `${what} failed on node ${ctx.node.uuid}. ${commandError(done)}`);
  if (isVersionMismatch(done)) {
    // The agent's hardware managers changed: learn its steps again and run the step again.
    await refreshSteps(ctx, kind, info);
    return runSteps(ctx, kind, info, index);
  }
  if (done.command_status !== 'SUCCEEDED') {
    throw await stepFailure(ctx, kind, `Agent returned unknown status for ${kind} step ${stepId(current as { interface: string; step: string })} on node ${ctx.node.uuid} : ${done.command_status}.`);
  }
  const ended = stepsOf(info, kind)[index];
  const hook = ended && !ended.inband ? declarationOf(ctx, kind, ended)?.afterCommand : undefined;
  if (hook) {
    try {
      await hook(stepContext(ctx, kind, ended, info, false, {}), done);
    } catch (err) {
      // Ironic's words (agent_base._process_next_step), less the Python method's name.
      throw await stepFailure(ctx, kind, `For node ${ctx.node.uuid}, post ${kind} step hook failed for ${kind} step ${pyRepr(current)}.${(err as Error).name}: ${(err as Error).message}`, err);
    }
  }
  if (stepsOf(info, kind)[index]?.reboot_requested) {
    // Ironic's _post_step_reboot (reboot_to_finish_step): the node boots the agent again; the
    // new agent's first heartbeat finds it freshly booted, and the next step runs.
    try {
      await bootAgent(taskInterfaces(ctx, {}, info));
    } catch (err) {
      throw await stepFailure(ctx, kind, `Reboot requested by ${kind} step ${stepId(current as { interface: string; step: string })} failed for node ${ctx.node.uuid}: ${(err as Error).message}`, err);
    }
    return { wait: true, changes: resumed ? waitChanges(ctx, kind, info) : { driverInternalInfo: info, provisionUpdatedAt: new Date() } };
  }
  return next();
}

/**
 * Ironic's tear_down_cleaning (tear_down_inband_cleaning): the agent's boot undone and the node
 * powered off, unless it may not be or a clean step failed on it (fault `clean failure`: it is
 * left as the failure left it, for whoever looks into it); the token goes with the agent.
 * @returns whether it powered the node off
 */
export async function tearDownCleaning(ctx: ActionContext, opts: { stepFailed?: boolean } = {}): Promise<{ poweredOff: boolean }> {
  const boot = enabled(ctx, 'boot') as BootInterface;
  await (boot.cleanUpRamdisk ?? boot.cleanUpInstance).call(boot, ctx.driver);
  // A step that failed leaves the node on for the operator (Ironic's tear_down_inband_cleaning
  // reads the fault cleaning_error_handler has set by then: `stepFailed` says it will be set).
  const powerOff = !ctx.node.disablePowerOff && !opts.stepFailed && ctx.node.fault !== 'clean failure';
  if (powerOff) await taskPower(ctx).setPowerState(ctx.driver, 'power off');
  await agentOf(ctx).wipeToken();
  return { poweredOff: powerOff };
}

/**
 * Ironic's do_node_clean_abort: the cleaning torn down, and last_error says which step it
 * stopped at (get_last_error).
 */
export async function abortCleaning(ctx: ActionContext): Promise<NodeChanges> {
  const step = ctx.node.cleanStep;
  const { poweredOff } = await tearDownCleaning(ctx);
  let lastError = 'By request, the clean operation was aborted';
  if (step && Object.keys(step).length) lastError += ` during or after the completion of step "${stepId(step as { interface: string; step: string })}"`;
  const changes: NodeChanges = { lastError, cleanStep: {}, driverInternalInfo: wipedInternalInfo(ctx.node.driverInternalInfo ?? {}, 'clean') };
  if (poweredOff) changes.powerState = 'power off';
  return changes;
}

/**
 * Boots the agent for in-band inspection (Ironic's managed boot of the inspector): the boot
 * interface must be able to boot it.
 */
export async function bootAgentForInspection(ctx: ActionContext): Promise<void> {
  await bootAgent(taskInterfaces(ctx), 'inspect');
}

/** Ironic's tear_down_managed_boot: the agent's boot undone, its token wiped. */
export async function tearDownAgentBoot(ctx: ActionContext): Promise<void> {
  const boot = enabled(ctx, 'boot') as BootInterface;
  await (boot.cleanUpRamdisk ?? boot.cleanUpInstance).call(boot, ctx.driver);
  if (ctx.agent) await agentOf(ctx).wipeToken();
}

/**
 * Ironic's tear_down_managed_boot for in-band inspection: the agent ISO ejected, and the node
 * powered off ([inspector] power_off), or rebooted when it may not be powered off.
 */
export async function tearDownInspectionBoot(ctx: ActionContext, powerOff: boolean): Promise<NodeChanges> {
  await tearDownAgentBoot(ctx);
  if (!powerOff) return {};
  const power = taskInterfaces(ctx).power;
  if (ctx.node.disablePowerOff) {
    await power.setPowerState(ctx.driver, 'rebooting');
    return { powerState: 'power on' };
  }
  await power.setPowerState(ctx.driver, 'power off');
  return { powerState: 'power off' };
}

/** How Ironic's deploying_error_handler words a clean-up that failed, after the deploy's last_error. */
export function deployCleanUpFailure(err: Error): string {
  return err instanceof GalvanicError ? `Also failed to clean up due to: ${err.message}`
    : 'An unhandled exception was encountered while aborting. More information may be found in the log file.';
}

/**
 * Ironic's _step_failure_handler (and do_next_deploy_step's handling of a step that failed): a
 * deploy's step failure goes to deploying_error_handler (cleanUpFailedDeploy) at once; another
 * run's, or one whose task lost its lock, fails as its run's end handles it.
 * @returns the error that fails the run
 */
async function stepFailure(ctx: ActionContext, kind: RunKind, reason: string, cause?: unknown): Promise<AgentStepFailed> {
  if (kind !== 'deploy' || cause instanceof LockLost) return new AgentStepFailed(reason);
  return cleanUpFailedDeploy(ctx, reason);
}

/**
 * Ironic's deploying_error_handler after a deploy step that failed: its
 * clean_up undoes the agent's boot (cleanUpDeploy), tried once; the power state it leaves is
 * recorded now, since the failure's outcome carries none.
 * @returns the error that fails the deploy, with the clean-up's own failure added to it
 */
async function cleanUpFailedDeploy(ctx: ActionContext, reason: string): Promise<DeployStepCleanedUp> {
  try {
    const powerState = await cleanUpDeploy(ctx);
    if (powerState) await ctx.task.progress({ powerState });
    return new DeployStepCleanedUp(reason);
  } catch (err) {
    if (err instanceof LockLost) throw err;
    ctx.log.error({ err: (err as Error).message }, `Cleanup failed for node ${ctx.node.uuid}`);
    return new DeployStepCleanedUp(`${reason}. ${deployCleanUpFailure(err as Error)}`);
  }
}

/**
 * Ironic's clean_up of an agent deploy interface (AgentBaseMixin.clean_up), after a deploy that
 * failed: the agent's boot undone (its medium ejected and withdrawn from the HTTP root, its
 * network boot files and DHCP entries removed, its token wiped). The node is not powered off;
 * one that may not be is rebooted, so that it no longer runs what it booted.
 * @returns the power state it leaves, when it sets one
 */
export async function cleanUpDeploy(ctx: ActionContext): Promise<'power on' | undefined> {
  await tearDownAgentBoot(ctx);
  if (!ctx.node.disablePowerOff) return undefined;
  await taskPower(ctx).setPowerState(ctx.driver, 'rebooting');
  return 'power on';
}
