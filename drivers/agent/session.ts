/**
 * One task's conversation with its node's agent (Ironic's agent_client calls as agent_base
 * makes them): where the agent is and its token, read once per task; the node and ports sent
 * with each step; and how a run repeated after its conductor died tells that the agent
 * already has a command (SENT_ONCE). It knows nothing of the database: the token and the
 * ports come through the callbacks the conductor hands it.
 */
import { readFile } from 'node:fs/promises';
import { boolFromString } from '../../common/bool-string.js';
import { AgentStepFailed, InvalidParameterValue } from '../../common/errors.js';
import { MASK, maskSecrets } from '../../common/masking.js';
import { commandError, type AgentClient, type AgentCommand, type AgentTarget, type AgentVerify } from './client.js';
import type { PlannedStep, StepKind, StepNode } from '../steps.js';

/** What the conductor gives a session. */
export interface AgentSessionDeps {
  client: AgentClient;
  /** The node's agent token, or null. */
  tokenOf(): Promise<string | null>;
  /** Forgets the node's token: its agent's work is over. */
  wipeToken(): Promise<void>;
  /** The MAC addresses of the node's ports, sent to the agent as Ironic sends its ports. */
  portsOf(): Promise<Array<{ address: string }>>;
  /** The node as it is now, as Ironic's Node.as_dict() gives it: every field, unmasked. */
  nodeAsDict(): Record<string, unknown>;
  /** `[agent] command_wait_attempts` and `command_wait_interval` (ms), for commands polled until they end. */
  poll: { attempts: number; intervalMs: number };
  /** `[agent] verify_ca`: True, False, or the path of a CA bundle. */
  verifyCa: string;
}

/**
 * Ironic's AgentClient._get_verify: the certificate the agent sent in its heartbeat
 * (driver_internal_info agent_verify_ca, kept here as the PEM itself, not a file: any
 * conductor may take the node over), else driver_info agent_verify_ca, else `[agent]
 * verify_ca`; each a boolean or the path of a CA bundle.
 * @throws InvalidParameterValue for a value that is neither (Ironic's message)
 */
export async function agentVerify(node: StepNode, configured: string): Promise<AgentVerify> {
  const pinned = node.driverInternalInfo?.agent_verify_ca;
  if (typeof pinned === 'string' && pinned.includes('-----BEGIN')) return { ca: pinned };
  const given = node.driverInfo.agent_verify_ca;
  const value = given === undefined || given === null ? configured : given;
  if (typeof value === 'boolean') return value;
  if (typeof value !== 'string') throw new InvalidParameterValue(`Agent CA ${JSON.stringify(value)} is neither a path nor a boolean`);
  const b = boolFromString(value);
  if (b !== undefined) return b;
  try {
    return { ca: await readFile(value, 'utf8') };
  } catch {
    throw new InvalidParameterValue(`Agent CA ${value} is neither a path nor a boolean`);
  }
}

/**
 * The node as Ironic's Node.as_dict(secure=True) hands it to the agent: every field of `node`
 * (an as_dict), with driver_info, instance_info and driver_internal_info masked. The config
 * drive is masked too, but for execute_deploy_step (`keepConfigdrive`, Ironic's
 * mask_configdrive=False): a deploy step such as Metal3's install_coreos reads it from there,
 * JSON as it was given. Other secrets an agent needs reach it in the step's own arguments
 * (write_image's image_info), never through the node.
 */
export function secureNode(node: Readonly<Record<string, unknown>>, keepConfigdrive: boolean): Record<string, unknown> {
  const { configdrive, ...instanceInfo } = (node.instance_info ?? {}) as Record<string, unknown>;
  const out: Record<string, unknown> = {
    ...node,
    driver_info: maskSecrets((node.driver_info ?? {}) as Record<string, unknown>),
    instance_info: maskSecrets(instanceInfo),
    driver_internal_info: maskSecrets((node.driver_internal_info ?? {}) as Record<string, unknown>),
  };
  if (configdrive !== undefined && configdrive !== null) (out.instance_info as Record<string, unknown>).configdrive = keepConfigdrive ? configdrive : MASK;
  return out;
}

/** The kinds of run the agent has steps for. */
export type AgentStepKind = StepKind;

/** A step as the node shows it (no internal flags). */
export function shownStep(step: PlannedStep): Record<string, unknown> {
  const out: Record<string, unknown> = { interface: step.interface, step: step.step, priority: step.priority, args: step.args };
  if (step.abortable !== undefined) out.abortable = step.abortable;
  if (step.reboot_requested !== undefined) out.reboot_requested = step.reboot_requested;
  return out;
}

/**
 * Whether an agent command is `current`'s execute_*_step: running, or ended (a success names
 * its step; an earlier step's success means the current one has not reached the agent).
 */
export function isStepCommand(cmd: AgentCommand, kind: AgentStepKind, current: Record<string, unknown>): boolean {
  if (cmd.command_name !== `execute_${kind}_step`) return false;
  if (cmd.command_status !== 'SUCCEEDED') return true;
  const result = (cmd.command_result ?? {}) as Record<string, unknown>;
  const step = result[`${kind}_step`] as Record<string, unknown> | undefined;
  return step !== undefined && step !== null && step.step === current.step && step.interface === current.interface;
}

/** A version mismatch: the agent refused the step (its hardware managers changed). */
export function isVersionMismatch(cmd: AgentCommand): boolean {
  return cmd.command_status.endsWith('VERSION_MISMATCH');
}

/** Ironic's _freshly_booted: the agent has run nothing but get_*_steps since it booted. */
export function freshlyBooted(commands: AgentCommand[], kind: AgentStepKind): boolean {
  return commands.every((c) => c.command_name === `get_${kind}_steps`);
}

/** Ironic's _get_completed_command: the last command, if it is the current step's and done. */
export function completedCommand(commands: AgentCommand[], kind: AgentStepKind, current: Record<string, unknown>): AgentCommand | undefined {
  const last = commands[commands.length - 1];
  return last && last.command_status !== 'RUNNING' && isStepCommand(last, kind, current) ? last : undefined;
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
  'service.execute_service_step': (last, step) => isStepCommand(last, 'service', step) && !isVersionMismatch(last),
  'image.install_bootloader': (last) => last.command_name === 'install_bootloader',
  'standby.power_off': (last) => last.command_name === 'power_off',
  'system.lockdown': (last) => last.command_name === 'lockdown',
};

/** IPA's get_*_steps result flattened: {step, priority, interface, reboot_requested, abortable}[]. */
function flattenAgentSteps(result: unknown, kind: AgentStepKind): { steps: PlannedStep[]; version: unknown } {
  const r = (result ?? {}) as Record<string, unknown>;
  const byManager = r[`${kind}_steps`];
  const steps: PlannedStep[] = [];
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

export class AgentSession {
  #token: string | undefined;
  #verify: { pinned: unknown; verify: AgentVerify } | undefined;
  #ports: Array<{ address: string }> | undefined;

  /** `node` reads the task's node as it is now (its driver_internal_info holds the agent's URL). */
  constructor(private readonly node: () => StepNode, private readonly deps: AgentSessionDeps) {}

  get poll(): { attempts: number; intervalMs: number } {
    return this.deps.poll;
  }

  private async target(): Promise<AgentTarget> {
    const node = this.node();
    const url = node.driverInternalInfo?.agent_url;
    if (typeof url !== 'string' || !url) throw new AgentStepFailed(`Node ${node.uuid} has no agent URL: its agent has not heartbeated.`);
    if (this.#token === undefined) {
      // Read once: the token changes only at a lookup, which comes after a wipe (wipeToken).
      const token = await this.deps.tokenOf();
      if (!token) throw new AgentStepFailed(`Node ${node.uuid} has no agent token: its agent has not looked itself up.`);
      this.#token = token;
    }
    // Read again when a heartbeat brought another certificate (a new agent) during the task.
    const pinned = node.driverInternalInfo?.agent_verify_ca;
    if (!this.#verify || this.#verify.pinned !== pinned) this.#verify = { pinned, verify: await agentVerify(node, this.deps.verifyCa) };
    return { url, token: this.#token, verify: this.#verify.verify };
  }

  private async ports(): Promise<Array<{ address: string }>> {
    this.#ports ??= await this.deps.portsOf();
    return this.#ports;
  }

  /** The node sent with a command of `kind` (secureNode); only a deploy step sees the config drive. */
  private nodeForAgent(kind: AgentStepKind, executing: boolean): Record<string, unknown> {
    return secureNode(this.deps.nodeAsDict(), executing && kind === 'deploy');
  }

  /** The node's agent token is wiped (Ironic's wipe_token_and_url), and its agent's connections closed. */
  async wipeToken(): Promise<void> {
    this.#token = undefined;
    await this.deps.wipeToken();
    const url = this.node().driverInternalInfo?.agent_url;
    if (typeof url === 'string') this.deps.client.forget(url);
  }

  async getCommands(): Promise<AgentCommand[]> {
    return this.deps.client.getCommands(await this.target());
  }

  async execute(name: string, params: Record<string, unknown>, wait: boolean): Promise<AgentCommand> {
    return this.deps.client.execute(await this.target(), name, params, wait);
  }

  /** Runs a command and reads the command list until it has ended (Ironic's `_command(poll=True)`). */
  async executeAndPoll(name: string, params: Record<string, unknown>): Promise<AgentCommand> {
    return this.deps.client.executeAndPoll(await this.target(), name, params, this.deps.poll);
  }

  async pollUntilEnded(name: string, sent: AgentCommand): Promise<AgentCommand> {
    return this.deps.client.pollUntilEnded(await this.target(), name, sent, this.deps.poll);
  }

  /** The agent's last command when SENT_ONCE says it is `name` (for `step`), else undefined. */
  hasAlready(commands: AgentCommand[], name: string, step: Record<string, unknown> = {}): AgentCommand | undefined {
    const last = commands[commands.length - 1];
    const taken = SENT_ONCE[name];
    return last && taken?.(last, step) ? last : undefined;
  }

  /** The command `name` as the agent already has it, when this run repeats one cut short (`resume`). */
  async sentAlready(resume: boolean, name: string, step?: Record<string, unknown>): Promise<AgentCommand | undefined> {
    if (!resume || !SENT_ONCE[name]) return undefined;
    return this.hasAlready(await this.getCommands(), name, step);
  }

  /** Sends a command that changes something, unless a repeated run finds the agent has it (sentAlready). */
  async sendOnce(resume: boolean, name: string, params: Record<string, unknown>, wait: boolean, step?: Record<string, unknown>): Promise<AgentCommand> {
    return (await this.sentAlready(resume, name, step)) ?? this.execute(name, params, wait);
  }

  /** Asks the agent for its steps of a kind (get_*_steps). @throws AgentStepFailed */
  async getSteps(kind: AgentStepKind): Promise<{ steps: PlannedStep[]; version: unknown }> {
    const cmd = await this.execute(`${kind}.get_${kind}_steps`, { node: this.nodeForAgent(kind, false), ports: await this.ports() }, true);
    if (cmd.command_status !== 'SUCCEEDED') {
      throw new AgentStepFailed(`Agent on node ${this.node().uuid} failed to return its ${kind} steps: ${commandError(cmd)}`);
    }
    return flattenAgentSteps(cmd.command_result, kind);
  }

  /**
   * Ironic's agent_base.execute_step: the step proxied to the agent, asynchronously; `wait`
   * while it runs there. @throws AgentStepFailed when the agent refuses it
   */
  async executeStep(kind: AgentStepKind, step: PlannedStep, version: unknown, resume: boolean): Promise<'done' | 'wait'> {
    const shown = shownStep(step);
    const cmd = await this.sendOnce(resume, `${kind}.execute_${kind}_step`, {
      step: shown, node: this.nodeForAgent(kind, true), ports: await this.ports(), [`${kind}_version`]: version ?? null,
    }, false, shown);
    if (cmd.command_status === 'FAILED') throw new AgentStepFailed(commandError(cmd));
    return cmd.command_status === 'SUCCEEDED' ? 'done' : 'wait';
  }
}
