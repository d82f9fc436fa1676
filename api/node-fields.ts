/**
 * The node resource as Ironic's API shows it: every field, the microversion that
 * introduced it, its JSON type, and whether clients may write it. One table serves
 * create, PATCH, `fields=` validation and the response view.
 */

export type FieldType = 'string' | 'uuid' | 'object' | 'boolean' | 'interface' | 'datetime' | 'any';

export interface NodeField {
  name: string;
  /** Minor microversion that introduced it. */
  since: number;
  type: FieldType;
  /** Settable on create and by PATCH. */
  writable: boolean;
  maxLength?: number;
  nullable?: boolean;
}

const f = (name: string, since: number, type: FieldType, writable: boolean, extra: Partial<NodeField> = {}): NodeField =>
  ({ name, since, type, writable, nullable: true, ...extra });

export const NODE_FIELDS: readonly NodeField[] = [
  f('uuid', 1, 'uuid', false),
  f('name', 5, 'string', true, { maxLength: 255 }),
  f('driver', 1, 'string', true, { maxLength: 255, nullable: false }),
  f('driver_info', 1, 'object', true, { nullable: false }),
  f('driver_internal_info', 3, 'object', false),
  f('properties', 1, 'object', true, { nullable: false }),
  f('instance_info', 1, 'object', true, { nullable: false }),
  f('instance_uuid', 1, 'uuid', true),
  f('extra', 1, 'object', true, { nullable: false }),
  f('chassis_uuid', 1, 'uuid', true),
  f('power_state', 1, 'string', false),
  f('target_power_state', 1, 'string', false),
  f('provision_state', 1, 'string', false),
  f('target_provision_state', 1, 'string', false),
  f('provision_updated_at', 1, 'datetime', false),
  f('maintenance', 1, 'boolean', false),
  f('maintenance_reason', 1, 'string', false),
  f('console_enabled', 1, 'boolean', false),
  f('last_error', 1, 'string', false),
  f('reservation', 1, 'string', false),
  f('inspection_started_at', 6, 'datetime', false),
  f('inspection_finished_at', 6, 'datetime', false),
  f('clean_step', 7, 'object', false),
  f('raid_config', 12, 'object', false),
  f('target_raid_config', 12, 'object', false),
  f('network_interface', 20, 'interface', true),
  f('resource_class', 21, 'string', true, { maxLength: 80 }),
  f('boot_interface', 31, 'interface', true),
  f('console_interface', 31, 'interface', true),
  f('deploy_interface', 31, 'interface', true),
  f('inspect_interface', 31, 'interface', true),
  f('management_interface', 31, 'interface', true),
  f('power_interface', 31, 'interface', true),
  f('raid_interface', 31, 'interface', true),
  f('vendor_interface', 31, 'interface', true),
  f('storage_interface', 33, 'interface', true),
  f('traits', 37, 'any', false),
  f('rescue_interface', 38, 'interface', true),
  f('bios_interface', 40, 'interface', true),
  f('fault', 42, 'string', false),
  f('deploy_step', 44, 'object', false),
  f('conductor_group', 46, 'string', true, { maxLength: 255, nullable: false }),
  f('automated_clean', 47, 'boolean', true),
  f('protected', 48, 'boolean', true, { nullable: false }),
  f('protected_reason', 48, 'string', true),
  f('conductor', 49, 'string', false),
  f('owner', 50, 'string', true, { maxLength: 255 }),
  f('description', 51, 'string', true, { maxLength: 4096 }),
  f('allocation_uuid', 52, 'uuid', false),
  f('retired', 61, 'boolean', true, { nullable: false }),
  f('retired_reason', 61, 'string', true),
  f('lessee', 65, 'string', true, { maxLength: 255 }),
  f('network_data', 66, 'object', true, { nullable: false }),
  f('boot_mode', 75, 'string', false),
  f('secure_boot', 75, 'boolean', false),
  f('firmware_interface', 86, 'interface', true),
  f('disable_power_off', 95, 'boolean', true, { nullable: false }),
  f('created_at', 1, 'datetime', false),
  f('updated_at', 1, 'datetime', false),
  f('links', 1, 'any', false),
  f('ports', 1, 'any', false),
  f('states', 1, 'any', false),
  f('portgroups', 24, 'any', false),
  f('volume', 32, 'any', false),
];

export const NODE_FIELD_BY_NAME: ReadonlyMap<string, NodeField> = new Map(NODE_FIELDS.map((x) => [x.name, x]));

/** What `GET /v1/nodes` shows without `detail` or `fields` (Ironic's _DEFAULT_RETURN_FIELDS). */
export const DEFAULT_LIST_FIELDS = ['uuid', 'name', 'instance_uuid', 'power_state', 'provision_state', 'maintenance', 'links'];


