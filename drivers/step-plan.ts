/**
 * Planning a run from a node's steps (Ironic's conductor/steps.py): the steps its interfaces
 * declare, the user's steps and the config's overrides over them, priority 0 left out, sorted
 * with Ironic's interface tie-break. Pure: the API validates a request with it, the conductor
 * plans the run it starts with it (conductor/steps.ts).
 */
import { InvalidParameterValue } from '../common/errors.js';
import { isFlowPowerStep, sortSteps, type UserStep } from '../common/steps.js';
import { pyRepr } from '../common/py-repr.js';
import type { DeployInterface, GenericInterface, InterfaceKind } from './interfaces.js';
import type { DriverRegistry } from './registry.js';
import { stepId, type PlannedStep, type StepDeclaration, type StepKind } from './steps.js';

/** The node's interfaces, as planning reads them; a node from db/ fits as it is. */
export type StepPlanNode = { uuid: string } & { [K in `${InterfaceKind}Interface`]?: string | null };

/** A step an interface of the node declares, with the interface it is on. */
export interface Declared {
  interface: InterfaceKind;
  decl: StepDeclaration;
}

/** The interfaces whose declarations a node's steps come from. */
const STEP_INTERFACE_KINDS: readonly InterfaceKind[] = ['vendor', 'power', 'management', 'firmware', 'deploy', 'bios', 'raid'];

/** Every step of `kind` the node's enabled interfaces declare (Ironic's _get_steps). */
export function declaredSteps(node: StepPlanNode, registry: DriverRegistry, kind: StepKind): Declared[] {
  const out: Declared[] = [];
  for (const iface of STEP_INTERFACE_KINDS) {
    const impl = registry.impl(iface, node[`${iface}Interface`]) as GenericInterface | DeployInterface | undefined;
    for (const decl of impl?.steps ?? []) {
      if (decl.priority[kind] !== undefined) out.push({ interface: iface, decl });
    }
  }
  return out;
}

/** Whether the node's deploy interface works through the agent (false when it is not enabled here). */
export function usesAgent(node: StepPlanNode, registry: DriverRegistry): boolean {
  return (registry.impl('deploy', node.deployInterface) as DeployInterface | undefined)?.usesAgent === true;
}

function planned(d: Declared, kind: StepKind): PlannedStep {
  const s: PlannedStep = { interface: d.interface, step: d.decl.step, priority: d.decl.priority[kind] ?? 0, args: {}, inband: false };
  if (kind === 'clean') s.abortable = d.decl.abortable === true;
  return s;
}

/**
 * Checks the user's arguments against a declared step's argsinfo (Ironic's _validate_user_step);
 * a declaration without argsinfo takes any.
 */
function checkArgs(kind: StepKind, user: UserStep, decl: StepDeclaration | undefined): string[] {
  const info = decl?.argsInfo;
  if (!info) return [];
  const errors: string[] = [];
  const args = user.args ?? {};
  const unexpected = Object.keys(args).filter((a) => !Object.hasOwn(info, a));
  if (unexpected.length) errors.push(`${kind} step ${stepId(user)} has these unexpected arguments: ${unexpected.join(', ')}`);
  if (kind !== 'deploy' || (user.priority ?? 1) > 0) {
    const missing = Object.entries(info).filter(([a, i]) => i.required && !Object.hasOwn(args, a))
      .map(([a, i]) => (i.description ? `${a} (${i.description})` : a));
    if (missing.length) errors.push(`${kind} step ${stepId(user)} is missing these required arguments: ${missing.join(', ')}`);
  }
  return errors;
}

/**
 * The deploy steps of a deploy (Ironic's set_node_deployment_steps): the deploy interface's and
 * the other interfaces' declarations, the user's deploy_steps (1.69) over them (same step →
 * their priority and args; priority 0 leaves it out), sorted. A user step no interface declares
 * must be one of the agent's in-band steps, checked once they are known; without an agent it
 * is refused.
 * @throws InvalidParameterValue for a step the node cannot run, or bad arguments
 */
export function deploySteps(node: StepPlanNode, registry: DriverRegistry, user: readonly UserStep[] | undefined): PlannedStep[] {
  const declared = declaredSteps(node, registry, 'deploy');
  const steps = declared.map((d) => planned(d, 'deploy'));
  const agent = usesAgent(node, registry);
  const errors: string[] = [];
  for (const u of user ?? []) {
    const i = steps.findIndex((s) => s.interface === u.interface && s.step === u.step);
    if (i >= 0) {
      errors.push(...checkArgs('deploy', u, declared[i].decl));
      if (u.priority !== undefined) steps[i].priority = u.priority;
      if (u.args) steps[i].args = u.args;
    } else if (agent && u.interface === 'deploy') {
      // Only the deploy interface takes the agent's own steps (Ironic's AgentDeployMixin.get_deploy_steps).
      steps.push({ interface: u.interface, step: u.step, priority: u.priority ?? 0, args: u.args ?? {}, inband: true });
    } else {
      errors.push(agent
        ? `Node ${node.uuid} has no deploy step ${stepId(u)}: its ${u.interface} interface (${node[`${u.interface}Interface` as `${InterfaceKind}Interface`] ?? 'none'}) does not offer it.`
        : `Node ${node.uuid} has no deploy step ${stepId(u)}: its deploy interface ${node.deployInterface ?? '(none)'} runs no agent that could offer it.`);
    }
  }
  if (errors.length) throw new InvalidParameterValue(errors.join('; '));
  return sortSteps(steps.filter((s) => s.priority > 0));
}

/**
 * The clean steps of a cleaning (Ironic's set_node_cleaning_steps): automated, the declared and
 * the agent's steps (when the agent runs) with `overrides` (step id → priority), priority 0 left
 * out, sorted; manual, the steps asked for in their order, each of which must exist.
 * @throws InvalidParameterValue for a step that does not exist, or bad arguments
 */
export function cleanSteps(
  node: StepPlanNode, registry: DriverRegistry, agentSteps: readonly PlannedStep[], manual: readonly UserStep[] | undefined,
  overrides: Readonly<Record<string, number>> = {},
): PlannedStep[] {
  const declared = declaredSteps(node, registry, 'clean');
  const oob = declared.map((d) => planned(d, 'clean'));
  // The agent's steps are the deploy interface's (Ironic's AgentBaseMixin.get_clean_steps keeps
  // those of interface `deploy`): its RAID or BIOS steps belong to agent RAID/BIOS interfaces,
  // which Galvanic does not have, so a no-raid node does not run them.
  const inband = agentSteps.filter((a) => a.interface === 'deploy' && !oob.some((o) => o.interface === a.interface && o.step === a.step));
  const all = [...oob, ...inband];
  if (!manual) {
    return sortSteps(all.map((s) => ({ ...s, priority: Object.hasOwn(overrides, stepId(s)) ? overrides[stepId(s)] : s.priority })).filter((s) => s.priority > 0));
  }
  const errors: string[] = [];
  const steps: PlannedStep[] = [];
  for (const m of manual) {
    const known = all.find((s) => s.interface === m.interface && s.step === m.step);
    if (!known) {
      const name = node[`${m.interface}Interface` as `${InterfaceKind}Interface`] ?? 'none';
      errors.push(`Node ${node.uuid} has no clean step "${m.step}" on its ${m.interface} interface${usesAgent(node, registry) ? ' (nor does its agent)' : ` (${name})`}.`);
      continue;
    }
    errors.push(...checkArgs('clean', m, declared.find((d) => d.interface === m.interface && d.decl.step === m.step)?.decl));
    steps.push({ ...known, args: m.args ?? {} });
  }
  if (errors.length) throw new InvalidParameterValue(errors.join('; '));
  return steps;
}

/** Whether a cleaning needs the agent booted (Ironic's prepare_cleaning, all_steps_disable_ramdisk). */
export function cleaningNeedsAgent(node: StepPlanNode, registry: DriverRegistry, manual: readonly UserStep[] | undefined, disableRamdisk: boolean): boolean {
  if (!usesAgent(node, registry) || disableRamdisk) return false;
  if (!manual) return true;
  const declared = declaredSteps(node, registry, 'clean');
  // Ironic boots no ramdisk when every requested step can run without one.
  return !manual.every((s) => declared.some((d) => d.interface === s.interface && d.decl.step === s.step && d.decl.requiresRamdisk === false));
}

/** A service step in the order Ironic's API builds it (interface, step, args, priority), as its messages show it. */
export function serviceStepRepr(step: UserStep): string {
  const ordered: Record<string, unknown> = { interface: step.interface, step: step.step };
  if (step.args !== undefined) ordered.args = step.args;
  if (step.priority !== undefined) ordered.priority = step.priority;
  return pyRepr(ordered);
}

/**
 * The steps of a servicing, in the order asked (Ironic's set_node_service_steps): each a flow
 * step, a service step the node's interfaces declare, or (when the agent runs) one of the
 * agent's service steps of the deploy interface.
 * @throws InvalidParameterValue naming every step the node does not support
 */
export function serviceSteps(node: StepPlanNode, registry: DriverRegistry, agentSteps: readonly PlannedStep[], requested: readonly UserStep[]): PlannedStep[] {
  const declared = declaredSteps(node, registry, 'service');
  const errors: string[] = [];
  const steps: PlannedStep[] = [];
  for (const u of requested) {
    const args = u.args ?? {};
    if (isFlowPowerStep(u)) {
      steps.push({ interface: u.interface, step: u.step, priority: u.priority ?? 0, args, inband: false });
      continue;
    }
    const d = declared.find((x) => x.interface === u.interface && x.decl.step === u.step);
    if (d) {
      errors.push(...checkArgs('service', u, d.decl));
      steps.push({ ...planned(d, 'service'), args });
      continue;
    }
    const a = agentSteps.find((x) => x.interface === 'deploy' && x.interface === u.interface && x.step === u.step);
    if (a) steps.push({ ...a, args });
    else errors.push(`node does not support this service step: ${serviceStepRepr(u)}`);
  }
  if (errors.length) throw new InvalidParameterValue(errors.join('; '));
  return steps;
}

/**
 * Whether a servicing needs the agent booted: the deploy interface works through it and a step
 * is not a flow step and does not declare that it runs without the ramdisk (an undeclared step
 * can only be the agent's). Ironic boots it for every servicing; the steps that run out of
 * band without it are run so here, as they were before servicing knew the agent.
 */
export function servicingNeedsAgent(node: StepPlanNode, registry: DriverRegistry, requested: readonly UserStep[]): boolean {
  if (!usesAgent(node, registry)) return false;
  const declared = declaredSteps(node, registry, 'service');
  return requested.some((u) => !isFlowPowerStep(u) && declared.find((d) => d.interface === u.interface && d.decl.step === u.step)?.decl.requiresRamdisk !== false);
}
