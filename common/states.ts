/**
 * Provision states and the one transition table (Ironic 21.4's state machine, the parts a
 * standalone deployment reaches). An API verb moves a stable state into a transitional one
 * with a target; the conductor ends the transition (`target` on success, `onFail` on failure)
 * or moves it into a wait state that a later event or a timeout ends.
 */

export const ProvisionState = {
  ENROLL: 'enroll',
  VERIFYING: 'verifying',
  MANAGEABLE: 'manageable',
  INSPECTING: 'inspecting',
  INSPECTWAIT: 'inspect wait',
  INSPECTFAIL: 'inspect failed',
  CLEANING: 'cleaning',
  CLEANWAIT: 'clean wait',
  CLEANFAIL: 'clean failed',
  AVAILABLE: 'available',
  DEPLOYING: 'deploying',
  DEPLOYWAIT: 'wait call-back',
  DEPLOYFAIL: 'deploy failed',
  ACTIVE: 'active',
  DELETING: 'deleting',
  ERROR: 'error',
  SERVICING: 'servicing',
  SERVICEWAIT: 'service wait',
  SERVICEFAIL: 'service failed',
} as const;
export type ProvisionStateName = (typeof ProvisionState)[keyof typeof ProvisionState];

const S = ProvisionState;

/** States that wait for a call-back, each failed after its `[conductor]` timeout. */
export const WAIT_STATES: Readonly<Record<string, { timeoutOption: 'deploy_callback_timeout' | 'inspect_wait_timeout' | 'clean_callback_timeout'; onTimeout: string; what: string }>> = {
  [S.DEPLOYWAIT]: { timeoutOption: 'deploy_callback_timeout', onTimeout: S.DEPLOYFAIL, what: 'deploy' },
  [S.INSPECTWAIT]: { timeoutOption: 'inspect_wait_timeout', onTimeout: S.INSPECTFAIL, what: 'inspection' },
  [S.CLEANWAIT]: { timeoutOption: 'clean_callback_timeout', onTimeout: S.CLEANFAIL, what: 'cleaning' },
};

/** Verbs the API accepts on `PUT …/states/provision` (Ironic's full list, for its messages). */
export const KNOWN_VERBS = [
  'manage', 'provide', 'inspect', 'active', 'deploy', 'deleted', 'undeploy', 'rebuild', 'clean',
  'abort', 'adopt', 'rescue', 'unrescue', 'service', 'unhold',
] as const;

/** What the conductor does for a transition. */
/** `process_inspection`: an agent's inventory, posted to /v1/continue_inspection, is processed. */
export type ProvisionWork = 'verify' | 'inspect' | 'process_inspection' | 'clean' | 'deploy' | 'tear_down' | 'none' | 'abort' | 'service';

export interface Transition {
  /** State while the conductor works. */
  via: string;
  /** Stable state on success. */
  target: string;
  /** Stable state on failure. */
  onFail: string;
  work: ProvisionWork;
}

const t = (via: string, target: string, onFail: string, work: ProvisionWork): Transition => ({ via, target, onFail, work });
const deploy = t(S.DEPLOYING, S.ACTIVE, S.DEPLOYFAIL, 'deploy');
// Undeploy: deleting, then automated cleaning (the conductor moves on to cleaning), then available.
const tearDown = t(S.DELETING, S.AVAILABLE, S.ERROR, 'tear_down');
// Servicing (1.87) runs steps on a deployed node and returns it to active.
const service = t(S.SERVICING, S.ACTIVE, S.SERVICEFAIL, 'service');

/** from-state → verb → transition. Anything not here is refused (Ironic has no manage → manage). */
const TABLE: Record<string, Record<string, Transition>> = {
  [S.ENROLL]: { manage: t(S.VERIFYING, S.MANAGEABLE, S.ENROLL, 'verify') },
  [S.MANAGEABLE]: {
    provide: t(S.CLEANING, S.AVAILABLE, S.CLEANFAIL, 'clean'),
    inspect: t(S.INSPECTING, S.MANAGEABLE, S.INSPECTFAIL, 'inspect'),
    clean: t(S.CLEANING, S.MANAGEABLE, S.CLEANFAIL, 'clean'),
  },
  [S.AVAILABLE]: {
    manage: t(S.MANAGEABLE, S.MANAGEABLE, S.AVAILABLE, 'none'),
    active: deploy, deploy,
  },
  [S.CLEANFAIL]: { manage: t(S.MANAGEABLE, S.MANAGEABLE, S.CLEANFAIL, 'none') },
  [S.INSPECTFAIL]: {
    manage: t(S.MANAGEABLE, S.MANAGEABLE, S.INSPECTFAIL, 'none'),
    inspect: t(S.INSPECTING, S.MANAGEABLE, S.INSPECTFAIL, 'inspect'),
  },
  [S.INSPECTWAIT]: { abort: t(S.INSPECTFAIL, S.INSPECTFAIL, S.INSPECTFAIL, 'abort') },
  [S.CLEANWAIT]: { abort: t(S.CLEANFAIL, S.CLEANFAIL, S.CLEANFAIL, 'abort') },
  [S.ACTIVE]: { rebuild: deploy, deleted: tearDown, undeploy: tearDown, service },
  // Ironic's abort from service failed goes straight back to active (do_node_service_abort).
  [S.SERVICEFAIL]: { service, abort: t(S.ACTIVE, S.ACTIVE, S.SERVICEFAIL, 'none'), deleted: tearDown, undeploy: tearDown },
  // Entered only by a step that waits for a ramdisk, which no interface Galvanic ships has.
  [S.SERVICEWAIT]: { abort: t(S.SERVICEFAIL, S.SERVICEFAIL, S.SERVICEFAIL, 'abort'), deleted: tearDown, undeploy: tearDown },
  [S.DEPLOYFAIL]: { active: deploy, deploy, rebuild: deploy, deleted: tearDown, undeploy: tearDown },
  [S.DEPLOYWAIT]: { deleted: tearDown, undeploy: tearDown },
  [S.ERROR]: { rebuild: deploy, deleted: tearDown, undeploy: tearDown },
};

/** The transition for `verb` from `state`, or undefined when the verb is not allowed there. */
export function transitionFor(state: string, verb: string): Transition | undefined {
  const row = Object.hasOwn(TABLE, state) ? TABLE[state] : undefined;
  return row && Object.hasOwn(row, verb) ? row[verb] : undefined;
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
