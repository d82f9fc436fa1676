import type { Node } from '../db/nodes.js';
import { resourceLinks } from './links.js';
import { maskSecrets } from '../common/masking.js';
import type { ApiVersion } from './versioning.js';
import { NODE_FIELDS, NODE_FIELD_BY_NAME } from './node-fields.js';
import { InvalidParameterValue, NotAcceptable } from '../common/errors.js';

function iso(d: Date | null | undefined): string | null {
  return d ? d.toISOString().replace('Z', '+00:00') : null;
}

/** Every field of the node as Ironic shows it at the newest version. */
function fullView(node: Node, base: string, conductor: string | null, traits: readonly string[]): Record<string, unknown> {
  return {
    uuid: node.uuid,
    name: node.name,
    driver: node.driver,
    driver_info: maskSecrets(node.driverInfo),
    driver_internal_info: maskSecrets(node.driverInternalInfo),
    properties: node.properties,
    instance_info: maskSecrets(node.instanceInfo),
    instance_uuid: node.instanceUuid,
    extra: node.extra,
    chassis_uuid: node.chassisUuid,
    power_state: node.powerState,
    target_power_state: node.targetPowerState,
    provision_state: node.provisionState,
    target_provision_state: node.targetProvisionState,
    provision_updated_at: iso(node.provisionUpdatedAt),
    maintenance: node.maintenance,
    maintenance_reason: node.maintenanceReason,
    console_enabled: node.consoleEnabled,
    last_error: node.lastError,
    reservation: node.reservation,
    inspection_started_at: iso(node.inspectionStartedAt),
    inspection_finished_at: iso(node.inspectionFinishedAt),
    clean_step: node.cleanStep ?? {},
    raid_config: node.raidConfig ?? {},
    target_raid_config: node.targetRaidConfig ?? {},
    network_interface: node.networkInterface,
    resource_class: node.resourceClass,
    boot_interface: node.bootInterface,
    console_interface: node.consoleInterface,
    deploy_interface: node.deployInterface,
    inspect_interface: node.inspectInterface,
    management_interface: node.managementInterface,
    power_interface: node.powerInterface,
    raid_interface: node.raidInterface,
    vendor_interface: node.vendorInterface,
    storage_interface: node.storageInterface,
    traits,
    rescue_interface: node.rescueInterface,
    bios_interface: node.biosInterface,
    fault: node.fault,
    deploy_step: node.deployStep ?? {},
    conductor_group: node.conductorGroup,
    automated_clean: node.automatedClean,
    protected: node.protected,
    protected_reason: node.protectedReason,
    conductor,
    owner: node.owner,
    description: node.description,
    // An allocation gives the node its own UUID as instance_uuid (db/allocations.ts).
    allocation_uuid: node.allocationId !== null ? node.instanceUuid : null,
    retired: node.retired,
    retired_reason: node.retiredReason,
    lessee: node.lessee,
    network_data: node.networkData ?? {},
    boot_mode: null,
    secure_boot: null,
    shard: node.shard,
    parent_node: node.parentNode,
    firmware_interface: node.firmwareInterface,
    service_step: node.serviceStep ?? {},
    disable_power_off: node.disablePowerOff,
    created_at: iso(node.createdAt),
    updated_at: iso(node.updatedAt),
    links: resourceLinks(base, 'nodes', node.uuid),
    ports: resourceLinks(base, 'nodes', node.uuid, 'ports'),
    states: resourceLinks(base, 'nodes', node.uuid, 'states'),
    portgroups: resourceLinks(base, 'nodes', node.uuid, 'portgroups'),
    volume: resourceLinks(base, 'nodes', node.uuid, 'volume'),
  };
}

export interface ViewOptions {
  base: string;
  version: ApiVersion;
  /** Restrict to these fields (validated by parseFields). */
  fields?: readonly string[];
  conductor?: string | null;
  /** The node's traits (db/traits.ts); shown from 1.37. */
  traits?: readonly string[];
}

/**
 * Provision state names as older microversions knew them (Ironic's
 * update_state_in_older_versions): before 1.2 `available` was "no state" (null), before 1.39
 * `inspect wait` was shown as `inspecting`.
 */
export function provisionStateForVersion(state: string | null, version: ApiVersion): string | null {
  if (state === 'available' && !version.atLeast(2)) return null;
  if (state === 'inspect wait' && !version.atLeast(39)) return 'inspecting';
  return state;
}

/** The node as the client's microversion shows it. */
export function nodeView(node: Node, opts: ViewOptions): Record<string, unknown> {
  const full = fullView(node, opts.base, opts.conductor ?? null, opts.traits ?? []);
  full.provision_state = provisionStateForVersion(node.provisionState, opts.version);
  const out: Record<string, unknown> = {};
  if (opts.fields) {
    for (const name of opts.fields) out[name] = full[name];
    return out;
  }
  for (const field of NODE_FIELDS) {
    if (opts.version.atLeast(field.since)) out[field.name] = full[field.name];
  }
  return out;
}

/**
 * Validates `fields=a,b` (available since 1.8): unknown names are a 400, names newer than
 * the requested version a 406, as in Ironic.
 */
export function parseFields(raw: string | undefined, version: ApiVersion): string[] | undefined {
  if (raw === undefined) return undefined;
  if (!version.atLeast(8)) throw new NotAcceptable(`Request not acceptable. The minimal required API version should be 1.8 to use the "fields" parameter.`);
  const names = raw.split(',').map((s) => s.trim()).filter(Boolean);
  if (names.length === 0) throw new InvalidParameterValue('The "fields" parameter must name at least one field.');
  const bad = names.filter((n) => !NODE_FIELD_BY_NAME.has(n));
  if (bad.length) throw new InvalidParameterValue(`Field(s) "${bad.join(', ')}" are not valid`);
  for (const n of names) {
    const since = NODE_FIELD_BY_NAME.get(n)!.since;
    if (!version.atLeast(since)) throw new NotAcceptable(`Field "${n}" requires API version 1.${since} or later.`);
  }
  // Ironic always includes uuid so clients can follow up.
  if (!names.includes('uuid')) names.unshift('uuid');
  return names;
}
