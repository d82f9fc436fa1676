/**
 * IPA's `extensions/base.py`: commands as the agent keeps them, what an extension's commands
 * reach of their agent, and `execute_command` (the busy check, the dispatch to an extension,
 * the record of the result).
 */
import type { SoftRaidDevice } from '../raid.js';
import { randomUUID } from 'node:crypto';
import { IpaError, agentIsBusy, executionError, invalidCommand, invalidParams, notFound } from '../ipa.js';
import type { HostFacts } from '../inventory.js';
import type { Life } from '../life.js';
import type { AgentEnv, AgentFaults, CommandResult, DiskState } from '../types.js';

/** A command as the agent keeps it: the serialised result plus how to wait for it. */
export interface Command {
  result: CommandResult;
  done: Promise<void>;
  /** Synchronous commands are answered only once done, whatever `wait` says. */
  sync: boolean;
}

export interface CommandSpec {
  async: boolean;
  required: readonly string[];
  /** Runs before the command is recorded: its IpaError refuses the call (IPA's command validators). */
  validate?(params: Record<string, unknown>): void;
  run(params: Record<string, unknown>, life: Life): Promise<unknown> | unknown;
}

/** One command namespace (`standby`, `clean`, …): its commands by name. */
export type Extension = Record<string, CommandSpec>;

/** What the commands reach of the agent that runs them, as IPA's extensions reach `self.agent`. */
export interface ExtensionAgent {
  readonly env: AgentEnv;
  readonly facts: HostFacts;
  /** The ramdisk now running, or null. */
  readonly life: Life | null;
  faults: AgentFaults;
  /** What the host's disk holds; it outlives the agent. */
  disk: DiskState | null;
  /** The software RAID devices the agent built on the host's disks; they outlive the agent too. */
  softwareRaid: SoftRaidDevice[] | null;
  /** The image of the config drive on the disk, or null. */
  configdriveImage: Buffer | null;
  /** The version the hardware manager reports. */
  hwVersion: string;
  /** The commands of the current (or last) agent. */
  lastCommands: Command[];
  /** The agent locked itself down (system.lockdown). */
  lockedDown: boolean;
  /** Records one of the agent's calls, served requests or command runs: what, from (epoch ms). */
  record(what: string, from: number): void;
  /** After an async command: a heartbeat soon. */
  forceHeartbeat(life: Life): void;
  /** The host's OS asks its BMC for a reset. */
  power(type: 'ForceOff' | 'ForceRestart'): void;
  kill(why: string): void;
}

/** `execute_command`: busy check, dispatch, and the record of the result. @throws IpaError */
export function executeCommand(agent: ExtensionAgent, extensions: Record<string, Extension>, life: Life, name: string, params: Record<string, unknown>): Command {
  const last = [...life.commands.values()].pop();
  if (last && last.result.command_status === 'RUNNING') throw agentIsBusy(last.result.command_name);
  const dot = name.indexOf('.');
  if (dot < 0) throw invalidCommand('Command name must be of the form <extension>.<name>');
  const ext = name.slice(0, dot);
  const command = name.slice(dot + 1);
  const specs = extensions[ext];
  if (!specs) throw notFound('Extension', ext);
  const spec = Object.prototype.hasOwnProperty.call(specs, command) ? specs[command] : undefined;
  if (!spec) throw invalidCommand(`Unknown command: ${command}`);
  const missing = spec.required.filter((k) => !(k in params));
  if (missing.length) throw invalidParams(`${name}() missing required argument(s): ${missing.join(', ')}`);
  spec.validate?.(params);
  const result: CommandResult = { id: randomUUID(), command_name: command, command_status: 'RUNNING', command_error: null, command_result: null };
  const finish = (value: unknown, err?: unknown) => {
    if (err === undefined) {
      result.command_status = 'SUCCEEDED';
      result.command_result = value ?? null;
      return;
    }
    const e = err instanceof IpaError ? err : executionError(String((err as Error)?.message ?? err));
    result.command_status = e.type === 'VersionMismatch' ? 'CLEAN_VERSION_MISMATCH' : 'FAILED';
    result.command_error = e.serialize();
    result.command_result = null;
  };
  // A synchronous command's errors are FAILED results too (IPA's SyncCommandResult).
  const from = Date.now();
  const done = (async () => {
    try {
      const value = await spec.run(params, life);
      if (!life.dead) finish(value);
    } catch (err) {
      if (!life.dead) finish(undefined, err);
    }
    if (spec.async) {
      agent.record(`run ${name}`, from);
      agent.forceHeartbeat(life);
    }
  })();
  const cmd: Command = { result, done, sync: !spec.async };
  life.commands.set(result.id, cmd);
  agent.lastCommands = [...life.commands.values()];
  return cmd;
}
