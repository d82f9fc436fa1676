/**
 * What the API and the conductor both know of steps: the interfaces a step may name, and the
 * order of two steps of the same priority (Ironic's conductor/steps.py *_INTERFACE_PRIORITY:
 * the step of the interface ranked higher runs first).
 */

/** A step as a user gives it (clean_steps, deploy_steps, service_steps, templates, runbooks). */
export interface UserStep {
  interface: string;
  step: string;
  args?: Record<string, unknown>;
  priority?: number;
}

/** Ironic's CLEANING_INTERFACE_PRIORITY (and DEPLOYING_INTERFACE_PRIORITY, the same). */
export const STEP_INTERFACE_PRIORITY: Readonly<Record<string, number>> = {
  vendor: 7, power: 6, management: 5, firmware: 4, deploy: 3, bios: 2, raid: 1,
};

/** The interfaces a step may name, in Ironic's order (its step schemas' enum). */
export const STEP_INTERFACES: readonly string[] = Object.keys(STEP_INTERFACE_PRIORITY);

/** Ironic's _sorted_steps: higher priority first, then the higher-ranked interface; otherwise as given. */
export function sortSteps<S extends { interface: string; priority: number }>(steps: readonly S[]): S[] {
  const rank = (s: S) => (Object.hasOwn(STEP_INTERFACE_PRIORITY, s.interface) ? STEP_INTERFACE_PRIORITY[s.interface] : 0);
  return [...steps].sort((a, b) => b.priority - a.priority || rank(b) - rank(a));
}

/**
 * The flow steps Ironic's conductor runs itself, on any interface, in servicing (its
 * RESERVED_STEP_HANDLER_MAPPING, less hold and wait), and the power action of each.
 */
export const FLOW_POWER_STEPS: Readonly<Record<string, 'power on' | 'power off' | 'rebooting'>> = { power_on: 'power on', power_off: 'power off', reboot: 'rebooting' };

/** Whether a step is one of FLOW_POWER_STEPS. */
export function isFlowPowerStep(step: { step: string }): boolean {
  return Object.hasOwn(FLOW_POWER_STEPS, step.step);
}
