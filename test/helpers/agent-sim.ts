/**
 * Helpers for tests that need simulated ironic-python-agents: a Redfish fleet with agents,
 * booting a host into the agent ISO over real Redfish calls, the agent witness and faults,
 * and calls to an agent's command API.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { once } from 'node:events';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { Agent, fetch as undiciFetch, type RequestInit, type Response } from 'undici';
import { startRedfishSim, type RedfishSim, type RedfishSimOptions } from '../../sim/redfish/index.js';
import type { AgentFaults, AgentSimOptions, AgentWitness, CommandResult } from '../../sim/agent/index.js';
import { until } from './until.js';

export type { AgentFaults, AgentWitness, CommandResult };

/** The agents' self-signed certificates (automatic TLS) that this process's calls to agents trust. */
const trusted = new Set<string>();
let trusting: Agent | undefined;

/** Trusts a fleet's certificate for agentFetch, as Galvanic trusts the one a node's agent sent. */
export function trustAgents(certificate: string | null | undefined): void {
  if (!certificate || trusted.has(certificate)) return;
  trusted.add(certificate);
  const old = trusting;
  trusting = undefined;
  void old?.close();
}

/** fetch for an agent's API: its https:// URL is checked against the trusted fleets' certificates. */
export function agentFetch(url: string, init: RequestInit = {}): Promise<Response> {
  trusting ??= new Agent({ connect: { ca: [...trusted] } });
  return undiciFetch(url, { ...init, dispatcher: trusting });
}

/** Starts `count` BMCs whose hosts run an agent when they boot an agent ISO; their certificate is trusted. */
export async function startAgentFleet(count: number, agent: AgentSimOptions, redfish: Partial<RedfishSimOptions> = {}): Promise<RedfishSim> {
  const sim = await startRedfishSim({ count, ...redfish, agent: { bootSeconds: [0, 0], ...agent } });
  trustAgents(sim.agentCertificate);
  return sim;
}

/** `GET /_sim/agent` of a BMC. */
export async function agentWitness(bmcUrl: string): Promise<AgentWitness> {
  const res = await fetch(`${bmcUrl}/_sim/agent`);
  if (!res.ok) throw new Error(`/_sim/agent: ${res.status} ${await res.text()}`);
  return (await res.json()) as AgentWitness;
}

/** Sets (merges) the faults of a BMC's agent; `{}` clears them. */
export async function setAgentFaults(bmcUrl: string, faults: AgentFaults): Promise<AgentFaults> {
  const res = await fetch(`${bmcUrl}/_sim/agent/faults`, { method: 'POST', body: JSON.stringify(faults) });
  if (!res.ok) throw new Error(`/_sim/agent/faults: ${res.status} ${await res.text()}`);
  return (await res.json()) as AgentFaults;
}

const AUTH = { authorization: `Basic ${Buffer.from('admin:password').toString('base64')}`, 'content-type': 'application/json' };
const SYSTEM = '/redfish/v1/Systems/System.Embedded.1';
const CD = '/redfish/v1/Managers/BMC/VirtualMedia/Cd';

async function redfish(bmcUrl: string, method: string, path: string, body?: object): Promise<void> {
  const res = await fetch(`${bmcUrl}${path}`, { method, headers: AUTH, body: body ? JSON.stringify(body) : undefined });
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
}

/** Does what a conductor does to boot a synthetic BMC's host from an ISO: eject, insert, Cd once, restart. */
export async function bootIso(bmcUrl: string, isoUrl: string, reset: 'ForceRestart' | 'On' = 'ForceRestart'): Promise<void> {
  await redfish(bmcUrl, 'POST', `${CD}/Actions/VirtualMedia.EjectMedia`, {});
  await redfish(bmcUrl, 'POST', `${CD}/Actions/VirtualMedia.InsertMedia`, { Image: isoUrl });
  await redfish(bmcUrl, 'PATCH', SYSTEM, { Boot: { BootSourceOverrideTarget: 'Cd', BootSourceOverrideEnabled: 'Once' } });
  await redfish(bmcUrl, 'POST', `${SYSTEM}/Actions/ComputerSystem.Reset`, { ResetType: reset });
}

/** Resets the host (`ForceOff`, `ForceRestart`, `On`, …) through Redfish. */
export function resetHost(bmcUrl: string, type: string): Promise<void> {
  return redfish(bmcUrl, 'POST', `${SYSTEM}/Actions/ComputerSystem.Reset`, { ResetType: type });
}

/** Waits until the BMC's agent runs and holds a token; returns its witness. */
export function waitForAgent(bmcUrl: string, timeoutMs = 10_000): Promise<AgentWitness> {
  return until('the agent to look itself up', async () => {
    const w = await agentWitness(bmcUrl);
    return w.running && w.token ? w : null;
  }, timeoutMs);
}

export interface AgentReply {
  status: number;
  body: unknown;
}

/** `POST {callback}/v1/commands/?wait=…&agent_token=…` with `{name, params}`. */
export async function agentCommand(callbackUrl: string, token: string | null, name: string, params: object = {}, wait = false): Promise<AgentReply> {
  const q = new URLSearchParams({ wait: String(wait) });
  if (token !== null) q.set('agent_token', token);
  const res = await agentFetch(`${callbackUrl}/v1/commands/?${q.toString()}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name, params }) });
  return { status: res.status, body: await res.json().catch(() => null) };
}

/** `GET {callback}/v1/commands/?agent_token=…`: the agent's commands, in order. */
export async function agentCommands(callbackUrl: string, token: string | null): Promise<AgentReply> {
  const q = token === null ? '' : `?agent_token=${encodeURIComponent(token)}`;
  const res = await agentFetch(`${callbackUrl}/v1/commands/${q}`);
  return { status: res.status, body: await res.json().catch(() => null) };
}

/** Waits for the last command of the agent to be done; returns it. */
export function waitForCommand(callbackUrl: string, token: string, timeoutMs = 10_000): Promise<CommandResult> {
  return until('the command to finish', async () => {
    const r = await agentCommands(callbackUrl, token);
    const list = (r.body as { commands?: CommandResult[] } | null)?.commands ?? [];
    const last = list[list.length - 1];
    return last && last.command_status !== 'RUNNING' ? last : null;
  }, timeoutMs);
}

/** `galvanic sim redfish ARGS` as a child process; resolves with it and the JSON line it prints once bound. */
export async function spawnSim(args: string[]): Promise<{ proc: ChildProcessWithoutNullStreams; info: Record<string, unknown>; stop(): Promise<void> }> {
  const proc = spawn(process.execPath, [path.resolve('dist/cli/main.js'), 'sim', 'redfish', ...args], { stdio: 'pipe' });
  const stop = async () => {
    if (proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = new Promise((r) => proc.once('exit', r));
    proc.kill('SIGTERM');
    await exited;
  };
  try {
    // The first line, or the exit that came instead of it.
    const first = once(createInterface({ input: proc.stdout }), 'line') as Promise<[string]>;
    const exit = once(proc, 'exit').then(([code]) => Promise.reject(new Error(`galvanic sim redfish exited with ${String(code)}`)));
    const [line] = await Promise.race([first, exit]);
    // Its later exit (when stopped) is no error.
    exit.catch(() => undefined);
    const info = JSON.parse(line) as Record<string, unknown>;
    trustAgents(info.agentCertificate as string | null);
    return { proc, info, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
