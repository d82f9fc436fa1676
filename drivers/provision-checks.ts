/**
 * What a provision verb must pass on a node before it starts: the transition the state machine
 * allows from the node's state, and what Ironic's conductor checks synchronously before it
 * accepts the verb (so that the request fails, not the node). One place for each rule, used by
 * `PUT /v1/nodes/{n}/states/provision`, by group operations when they are created, and by the
 * conductor when an operation's provision step starts. No I/O.
 */
import type { Config } from '../common/config.js';
import { CleaningInMaintenance, GalvanicError, InvalidParameterValue, InvalidState, InvalidStateRequested, NodeInMaintenance, NodeLocked, NodeProtected } from '../common/errors.js';
import { KNOWN_VERBS, ProvisionState, refusedMessage, transitionFor, type Transition } from '../common/states.js';
import type { DriverRegistry } from './registry.js';
import type { BootPort } from './interfaces.js';
import { describeNode, validateForDeploy, validateInterface, type NodeLike } from './validate-node.js';

/** The parts of a node the provision rules read; a node from db/ fits as it is. */
export type ProvisionNode = NodeLike & {
  provisionState: string;
  maintenance: boolean;
  protected: boolean;
  reservation: string | null;
};

/**
 * The transition `verb` starts from the node's state. Refused as Ironic refuses it: a node
 * busy with another transition (held by a conductor, unless `heldByUs`) is "locked", any
 * other is in the wrong state.
 * @throws NodeLocked | InvalidStateRequested
 */
export function provisionTransition(node: ProvisionNode, verb: string, heldByUs = false): Transition {
  const t = (KNOWN_VERBS as readonly string[]).includes(verb) ? transitionFor(node.provisionState, verb) : undefined;
  if (t) return t;
  if (node.reservation && !heldByUs) throw new NodeLocked(node.uuid, node.reservation);
  throw new InvalidStateRequested(refusedMessage(node.uuid, verb, node.provisionState));
}

/** The `[conductor]` options the rules read. */
export type ProvisionOptions = Pick<Config['conductor'], 'allow_provisioning_in_maintenance'>;

/**
 * Maintenance, protection, and the interfaces the work will use, validated against the node's
 * driver_info and instance_info (and its ports, when given: see bootNeedsPorts).
 * @throws NodeInMaintenance | NodeProtected | InvalidParameterValue | MissingParameterValue
 */
export function checkNodeForProvision(registry: DriverRegistry, node: ProvisionNode, verb: string, t: Transition, options: ProvisionOptions, ports?: readonly BootPort[]): void {
  const desc = describeNode(node, ports);
  // Ironic's do_node_clean refuses manual cleaning in maintenance whatever the option says.
  if (verb === 'clean' && node.maintenance) throw new NodeInMaintenance('cleaning', node.uuid);
  // Ironic's do_provisioning_action: refused before the node enters cleaning.
  if (verb === 'provide' && node.maintenance && !options.allow_provisioning_in_maintenance) throw new NodeInMaintenance('providing', node.uuid);
  if (t.work === 'deploy') {
    if (node.maintenance) throw new NodeInMaintenance('provisioning', node.uuid);
    if (verb === 'rebuild' && node.protected) throw new NodeProtected(node.uuid);
    validateForDeploy(registry, desc);
  }
  if (t.work === 'tear_down' && node.protected) throw new NodeProtected(node.uuid);
  if (t.work === 'service') {
    if (node.maintenance) throw new NodeInMaintenance('service', node.uuid);
    try {
      validateInterface(registry, desc, 'power');
      validateInterface(registry, desc, 'network');
    } catch (err) {
      if (!(err instanceof GalvanicError) || err.httpStatus !== 400) throw err;
      throw new InvalidParameterValue(`Validation of node ${node.uuid} for servicing failed: ${err.message}`);
    }
  }
  if (verb === 'abort' && node.provisionState === ProvisionState.SERVICEFAIL && node.maintenance) {
    throw new InvalidState(`Can not abort service on node "${node.uuid}" while it is in maintenance mode. Please remove the node from maintenance prior to issuing the request to abort the service operation.`);
  }
  if (t.work === 'inspect') {
    try {
      validateInterface(registry, desc, 'power');
      validateInterface(registry, desc, 'inspect');
    } catch (err) {
      if (!(err instanceof GalvanicError) || err.httpStatus !== 400) throw err;
      throw new InvalidParameterValue(`RPC inspect_hardware failed to validate inspection or power info. Error: ${err.message}`);
    }
  }
}

/**
 * Whether the run of a node in maintenance pauses where its agent heartbeats: the heartbeat is
 * only recorded, and the first one after maintenance is unset carries the run on (Ironic's
 * _heartbeat_in_maintenance with `[conductor] allow_provisioning_in_maintenance`). When the
 * option is false, the heartbeat aborts the run instead.
 */
export function pausedInMaintenance(node: { maintenance: boolean }, options: ProvisionOptions): boolean {
  return node.maintenance && options.allow_provisioning_in_maintenance;
}

/**
 * Automated cleaning about to start (after provide or a tear-down) on a node in maintenance:
 * refused unless `[conductor] allow_provisioning_in_maintenance` (Ironic's do_node_clean).
 * @throws CleaningInMaintenance
 */
export function checkAutomatedCleaning(node: { maintenance: boolean }, options: ProvisionOptions): void {
  if (node.maintenance && !options.allow_provisioning_in_maintenance) throw new CleaningInMaintenance();
}

/**
 * Ironic's abort in `clean wait` (manager._do_abort): a clean step that is not abortable runs
 * to its end, marked `abort_after`, and the cleaning is aborted once it has ended. Returns the
 * step so marked, or undefined when the cleaning can be aborted now (no step has started yet,
 * or the running one is abortable).
 */
export function cleanStepToAbortAfter(cleanStep: Readonly<Record<string, unknown>> | null): Record<string, unknown> | undefined {
  if (!cleanStep || Object.keys(cleanStep).length === 0 || cleanStep.abortable === true) return undefined;
  return { ...cleanStep, abort_after: true };
}

/**
 * The node fields a started transition writes: Ironic moves the node into the transitional
 * state (clients waiting on the node rely on target_provision_state being set) and clears
 * last_error.
 */
export function transitionStartChanges(t: Transition, now = new Date()): {
  provisionState: string; targetProvisionState: string | null; lastError: null; provisionUpdatedAt: Date;
  inspectionStartedAt?: Date; inspectionFinishedAt?: null;
} {
  // A transition with no work (manage from available) ends here, as Ironic's synchronous event:
  // the node may take its next verb at once, and no later write of this one may undo that.
  const changes = { provisionState: t.via, targetProvisionState: t.work === 'none' ? null : t.target, lastError: null, provisionUpdatedAt: now };
  return t.work === 'inspect' ? { ...changes, inspectionStartedAt: now, inspectionFinishedAt: null } : changes;
}
