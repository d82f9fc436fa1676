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
  ADOPTING: 'adopting',
  ADOPTFAIL: 'adopt failed',
  // Reached by no interface Galvanic ships, but agents and clients name them.
  RESCUING: 'rescuing',
  RESCUEWAIT: 'rescue wait',
  RESCUEFAIL: 'rescue failed',
  UNRESCUEFAIL: 'unrescue failed',
  DEPLOYHOLD: 'deploy hold',
  CLEANHOLD: 'clean hold',
  SERVICEHOLD: 'service hold',
} as const;
export type ProvisionStateName = (typeof ProvisionState)[keyof typeof ProvisionState];

const S = ProvisionState;

/**
 * The conductor's events (Ironic's states.py machine): what the work in a transitional or
 * waiting state comes to. `wait` hands the node to a ramdisk, `resume` takes it back at its
 * call-back, `done` and `fail` end the work, `timeout` ends a wait whose call-back never came,
 * `abort` ends it by request, `clean` moves a torn-down node on to its cleaning.
 */
export type ProvisionEvent = 'wait' | 'resume' | 'done' | 'fail' | 'timeout' | 'abort' | 'clean';

/** `done` from cleaning leads to the node's target: available (automated) or manageable (manual). */
const TARGET = '<target>';

const EVENTS: Readonly<Record<string, Readonly<Partial<Record<ProvisionEvent, string>>>>> = {
  [S.VERIFYING]: { done: S.MANAGEABLE, fail: S.ENROLL },
  [S.INSPECTING]: { done: S.MANAGEABLE, fail: S.INSPECTFAIL, wait: S.INSPECTWAIT },
  [S.INSPECTWAIT]: { resume: S.INSPECTING, done: S.MANAGEABLE, fail: S.INSPECTFAIL, timeout: S.INSPECTFAIL, abort: S.INSPECTFAIL },
  [S.CLEANING]: { done: TARGET, fail: S.CLEANFAIL, wait: S.CLEANWAIT },
  [S.CLEANWAIT]: { resume: S.CLEANING, done: TARGET, fail: S.CLEANFAIL, timeout: S.CLEANFAIL, abort: S.CLEANFAIL },
  [S.DEPLOYING]: { done: S.ACTIVE, fail: S.DEPLOYFAIL, wait: S.DEPLOYWAIT },
  [S.DEPLOYWAIT]: { resume: S.DEPLOYING, done: S.ACTIVE, fail: S.DEPLOYFAIL, timeout: S.DEPLOYFAIL },
  [S.DELETING]: { clean: S.CLEANING, done: S.AVAILABLE, fail: S.ERROR },
  [S.SERVICING]: { done: S.ACTIVE, fail: S.SERVICEFAIL, wait: S.SERVICEWAIT },
  [S.SERVICEWAIT]: { resume: S.SERVICING, fail: S.SERVICEFAIL, timeout: S.SERVICEFAIL, abort: S.SERVICEFAIL },
  [S.ADOPTING]: { done: S.ACTIVE, fail: S.ADOPTFAIL },
};

/** Whether `event` may happen in `state`. */
export function hasEvent(state: string, event: ProvisionEvent): boolean {
  return Object.hasOwn(EVENTS, state) && EVENTS[state][event] !== undefined;
}

/**
 * The state `event` leads to from `state` (Ironic's process_event); `target` is the node's
 * target_provision_state, which `done` from cleaning goes to.
 * @throws Error for an event the state does not have: a conductor bug, not a user's error
 */
export function nextState(state: string, event: ProvisionEvent, target?: string | null): string {
  const to = hasEvent(state, event) ? EVENTS[state][event]! : undefined;
  if (to === undefined) throw new Error(`No "${event}" event from provision state "${state}".`);
  if (to !== TARGET) return to;
  return target === S.MANAGEABLE ? S.MANAGEABLE : S.AVAILABLE;
}

/** States in which the conductor works on a node, so that it keeps its target. */
const WORKING_STATES: ReadonlySet<string> = new Set(Object.keys(EVENTS));

/**
 * The node fields an event writes, computed in one place: the next state; the target, kept
 * while the node still works or waits; the time of the change.
 */
export function eventChanges(
  node: { provisionState: string; targetProvisionState: string | null }, event: ProvisionEvent, now = new Date(),
): { provisionState: string; targetProvisionState: string | null; provisionUpdatedAt: Date } {
  const provisionState = nextState(node.provisionState, event, node.targetProvisionState);
  const target = event === 'clean' ? S.AVAILABLE : node.targetProvisionState;
  return { provisionState, targetProvisionState: WORKING_STATES.has(provisionState) ? target : null, provisionUpdatedAt: now };
}

/** States that wait for a call-back, each failed (its `timeout` event) after its `[conductor]` timeout. */
export const WAIT_STATES: Readonly<Record<string, { timeoutOption: 'deploy_callback_timeout' | 'inspect_wait_timeout' | 'clean_callback_timeout' | 'service_callback_timeout' }>> = {
  [S.DEPLOYWAIT]: { timeoutOption: 'deploy_callback_timeout' },
  [S.INSPECTWAIT]: { timeoutOption: 'inspect_wait_timeout' },
  [S.CLEANWAIT]: { timeoutOption: 'clean_callback_timeout' },
  [S.SERVICEWAIT]: { timeoutOption: 'service_callback_timeout' },
};

/** States in which a conductor works on a node (not waiting for a call-back): one left there with nobody working fails. */
export const WORKING_NOT_WAITING: readonly string[] = Object.keys(EVENTS).filter((s) => !hasEvent(s, 'resume'));

/*
 * State groups, as Ironic's common/states.py names them, each defined here once.
 */

/** Ironic's DELETE_ALLOWED_STATES: where a node out of maintenance may be deleted ([conductor] allow_deleting_available_nodes adds available). */
export const DELETE_ALLOWED_STATES: readonly string[] = [S.MANAGEABLE, S.ENROLL, S.ADOPTFAIL];

/** Ironic's LOOKUP_ALLOWED_STATES (without fast track): where an agent may look its node up. */
export const LOOKUP_ALLOWED_STATES: ReadonlySet<string> = new Set([
  S.DEPLOYING, S.DEPLOYWAIT, S.CLEANING, S.CLEANWAIT, S.INSPECTING, S.INSPECTWAIT, S.RESCUING, S.RESCUEWAIT, S.SERVICEWAIT,
]);

/** Ironic's HEARTBEAT_ALLOWED: a heartbeat in any other state is dropped (and still answered 202). */
export const HEARTBEAT_ALLOWED_STATES: ReadonlySet<string> = new Set([
  S.DEPLOYWAIT, S.CLEANWAIT, S.RESCUEWAIT, S.DEPLOYING, S.CLEANING, S.RESCUING, S.DEPLOYHOLD, S.CLEANHOLD, S.SERVICING, S.SERVICEWAIT, S.SERVICEHOLD,
]);

/** Ironic's UPDATE_ALLOWED_STATES (with servicing): transitional states in which a node may still be changed. */
export const UPDATE_ALLOWED_STATES: ReadonlySet<string> = new Set([
  S.DEPLOYFAIL, S.INSPECTING, S.INSPECTFAIL, S.INSPECTWAIT, S.CLEANFAIL, S.ERROR, S.VERIFYING, S.ADOPTFAIL, S.RESCUEFAIL,
  S.UNRESCUEFAIL, S.SERVICING, S.SERVICEHOLD, S.SERVICEFAIL,
]);

/**
 * Where a node's ports may change their physical connectivity (local_link_connection,
 * physical_network) or move between port groups, as Ironic's port and port group API allow
 * outside maintenance: before the node is made available.
 */
export const PORT_CONNECTIVITY_STATES: readonly string[] = [S.ENROLL, S.INSPECTING, S.INSPECTWAIT, S.MANAGEABLE];

/** Where a node's instance may be removed although it has an allocation (Ironic's allocation API). */
export const INSTANCE_REMOVAL_STATES: readonly string[] = [S.ENROLL, S.INSPECTING, S.INSPECTWAIT, S.MANAGEABLE, S.AVAILABLE];

/**
 * Ironic's SYNC_EXCLUDED_STATES, which the power sync leaves alone: an enrolled node is not
 * managed yet (its BMC may not even be reachable), and in the wait states a ramdisk may be
 * calling back.
 */
export const SYNC_EXCLUDED_STATES: readonly string[] = [S.DEPLOYWAIT, S.CLEANWAIT, S.ENROLL, S.ADOPTFAIL];

/** Verbs the API accepts on `PUT …/states/provision` (Ironic's full list, for its messages). */
export const KNOWN_VERBS = [
  'manage', 'provide', 'inspect', 'active', 'deploy', 'deleted', 'undeploy', 'rebuild', 'clean',
  'abort', 'adopt', 'rescue', 'unrescue', 'service', 'unhold',
] as const;

/**
 * What the conductor does for a transition. `process_inspection`: an agent's inventory, posted
 * to /v1/continue_inspection, is processed. `clean_up_after_timeout`: what a wait that timed
 * out booted is torn down (queued by the conductor's check, not by a verb).
 */
export type ProvisionWork = 'verify' | 'inspect' | 'process_inspection' | 'clean' | 'deploy' | 'tear_down' | 'none' | 'abort' | 'service' | 'adopt' | 'clean_up_after_timeout';

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
// Adoption (1.17) takes a node that already runs its instance into active without deploying it.
const adopt = t(S.ADOPTING, S.ACTIVE, S.ADOPTFAIL, 'adopt');

/** from-state → verb → transition. Anything not here is refused (Ironic has no manage → manage). */
const TABLE: Record<string, Record<string, Transition>> = {
  [S.ENROLL]: { manage: t(S.VERIFYING, S.MANAGEABLE, S.ENROLL, 'verify') },
  [S.MANAGEABLE]: {
    provide: t(S.CLEANING, S.AVAILABLE, S.CLEANFAIL, 'clean'),
    inspect: t(S.INSPECTING, S.MANAGEABLE, S.INSPECTFAIL, 'inspect'),
    clean: t(S.CLEANING, S.MANAGEABLE, S.CLEANFAIL, 'clean'),
    adopt,
  },
  [S.ADOPTFAIL]: { adopt, manage: t(S.MANAGEABLE, S.MANAGEABLE, S.ADOPTFAIL, 'none') },
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
  // Servicing through the agent waits here for its heartbeats.
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
