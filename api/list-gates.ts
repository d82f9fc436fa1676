import { InvalidParameterValue, NotAcceptable } from '../common/errors.js';
import { NODE_FIELD_BY_NAME } from './node-fields.js';
import type { Query } from './query.js';
import type { ApiVersion } from './versioning.js';

/**
 * Every state of Ironic's provision state machine (`states.machine.states`): what the
 * `provision_state` filter accepts, even for states Galvanic never enters.
 */
export const IRONIC_PROVISION_STATES: ReadonlySet<string> = new Set([
  'enroll', 'manageable', 'available', 'active', 'error', 'rescue', 'verifying', 'deploying',
  'wait call-back', 'deploy failed', 'cleaning', 'clean wait', 'clean failed', 'deleting',
  'inspecting', 'inspect failed', 'inspect wait', 'adopting', 'adopt failed', 'rescuing',
  'rescue wait', 'rescue failed', 'unrescuing', 'unrescue failed', 'deploy hold', 'clean hold',
  'servicing', 'service wait', 'service failed', 'service hold',
]);

/** Ironic's `faults.VALID_FAULTS`, in its order (the message shows them as a Python tuple). */
export const VALID_FAULTS = ['power failure', 'clean failure', 'rescue abort failure'] as const;

/** Ironic's message for a filter below its microversion. */
function minimal(minor: number): NotAcceptable {
  return new NotAcceptable(`Request not acceptable. The minimal required API version should be 1.${minor}`);
}

/** Filters gated by Ironic's check_allow_* helpers, with the version each needs. */
const FILTER_SINCE: ReadonlyArray<[string, number]> = [
  ['driver', 16], ['resource_class', 21], ['fault', 42], ['conductor_group', 46], ['conductor', 49],
  ['owner', 50], ['lessee', 65],
  ['shard', 82], ['sharded', 82], ['include_children', 83], ['parent_node', 83],
];

/**
 * The microversion and value checks of Ironic's `NodesController.get_all`, in its order:
 * `fields` (1.8) and fields newer than the version, the sort key likewise, `provision_state`
 * (1.9, and a state of the machine), then each filter's own gate, `fault` with its values.
 */
export function checkNodeListQuery(q: Query, v: ApiVersion, fields: string | undefined): void {
  const names = fields?.split(',').map((s) => s.trim()).filter(Boolean);
  if (names !== undefined && !v.atLeast(8)) throw new NotAcceptable('Request not acceptable.');
  for (const name of [...(names ?? []), ...(typeof q.sort_key === 'string' ? [q.sort_key] : [])]) {
    const field = NODE_FIELD_BY_NAME.get(name);
    if (field && !v.atLeast(field.since)) throw new NotAcceptable('Request not acceptable.');
  }
  const state = q.provision_state;
  if (state !== undefined) {
    if (!v.atLeast(9)) throw new NotAcceptable('Request not acceptable.');
    if (typeof state === 'string' && !IRONIC_PROVISION_STATES.has(state)) {
      throw new InvalidParameterValue(`Provision state "${state}" is not valid`);
    }
  }
  for (const [name, since] of FILTER_SINCE) {
    if (q[name] !== undefined && !v.atLeast(since)) throw minimal(since);
  }
  const fault = q.fault;
  if (typeof fault === 'string' && !(VALID_FAULTS as readonly string[]).includes(fault)) {
    throw new InvalidParameterValue(`Unrecognized fault "${fault}" is specified, allowed faults are (${VALID_FAULTS.map((f) => `'${f}'`).join(', ')})`);
  }
  const detail = q.detail;
  if (detail !== undefined && !v.atLeast(43)) {
    // Ironic shows the parsed boolean (Python's True/False) in this message.
    const shown = typeof detail === 'string' && ['true', '1', 'yes', 'on', 't', 'y'].includes(detail.toLowerCase()) ? 'True' : 'False';
    throw new InvalidParameterValue(`Invalid query parameter ?detail=${shown} received.`);
  }
}
