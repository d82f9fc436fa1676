/**
 * Provision states and the one transition table (Ironic's names, the part before deploy).
 * An API verb moves a stable state into a transitional one with a target; the conductor
 * ends the transition with `done` or `fail`.
 */

export const ProvisionState = {
  ENROLL: 'enroll',
  VERIFYING: 'verifying',
  MANAGEABLE: 'manageable',
  CLEANING: 'cleaning',
  CLEANFAIL: 'clean failed',
  AVAILABLE: 'available',
  ACTIVE: 'active',
} as const;
export type ProvisionStateName = (typeof ProvisionState)[keyof typeof ProvisionState];

export const STABLE_STATES: ReadonlySet<string> = new Set([
  ProvisionState.ENROLL, ProvisionState.MANAGEABLE, ProvisionState.AVAILABLE, ProvisionState.ACTIVE,
  ProvisionState.CLEANFAIL,
]);

/** Verbs the API accepts on `PUT …/states/provision` (Ironic's full list, for its messages). */
export const KNOWN_VERBS = [
  'manage', 'provide', 'inspect', 'active', 'deploy', 'deleted', 'undeploy', 'rebuild', 'clean',
  'abort', 'adopt', 'rescue', 'unrescue', 'service', 'unhold',
] as const;

interface Transition {
  /** State while the conductor works. */
  via: string;
  /** Stable state on success. */
  target: string;
  /** Stable state on failure. */
  onFail: string;
}

/** from-state → verb → transition. Anything not here is refused. */
const TABLE: Record<string, Record<string, Transition>> = {
  [ProvisionState.ENROLL]: {
    manage: { via: ProvisionState.VERIFYING, target: ProvisionState.MANAGEABLE, onFail: ProvisionState.ENROLL },
  },
  [ProvisionState.MANAGEABLE]: {
    // Galvanic has no cleaning ramdisk: cleaning here is the (empty) automated clean.
    provide: { via: ProvisionState.CLEANING, target: ProvisionState.AVAILABLE, onFail: ProvisionState.CLEANFAIL },
    manage: { via: ProvisionState.VERIFYING, target: ProvisionState.MANAGEABLE, onFail: ProvisionState.MANAGEABLE },
  },
  [ProvisionState.AVAILABLE]: {
    manage: { via: ProvisionState.MANAGEABLE, target: ProvisionState.MANAGEABLE, onFail: ProvisionState.AVAILABLE },
  },
  [ProvisionState.CLEANFAIL]: {
    manage: { via: ProvisionState.MANAGEABLE, target: ProvisionState.MANAGEABLE, onFail: ProvisionState.CLEANFAIL },
  },
};

/** The transition for `verb` from `state`, or undefined when the verb is not allowed there. */
export function transitionFor(state: string, verb: string): Transition | undefined {
  return TABLE[state]?.[verb];
}

/** Ironic's message for a verb refused in the node's current state. */
export function refusedMessage(nodeUuid: string, verb: string, state: string): string {
  return `The requested action "${verb}" can not be performed on node "${nodeUuid}" while it is in state "${state}".`;
}

export const PowerState = {
  ON: 'power on',
  OFF: 'power off',
  REBOOT: 'rebooting',
  SOFT_OFF: 'soft power off',
  SOFT_REBOOT: 'soft rebooting',
  ERROR: 'error',
} as const;
export type PowerStateName = (typeof PowerState)[keyof typeof PowerState];
