/**
 * A node's target RAID configuration as Ironic defines it (ironic/drivers/raid_config_schema.json):
 * `{"logical_disks": [{"size_gb": 100 | "MAX", "raid_level": "1", …}, …]}`, validated as
 * Ironic's raid.validate_configuration validates it (json-schema.ts: jsonschema's messages,
 * which clients and operators are used to reading).
 */
import { updatedCapabilities } from './capabilities.js';
import { InvalidParameterValue, MissingParameterValue } from './errors.js';
import { schemaError, type Schema } from './json-schema.js';

/**
 * Ironic's RAID configuration schema (ironic/drivers/raid_config_schema.json), the contract
 * between users and every RAID interface; the logical disk properties' descriptions are what
 * `GET /v1/drivers/{d}/raid/logical_disk_properties` lists.
 */
const RAID_CONFIG_SCHEMA: Schema = {
  type: 'object',
  properties: {
    logical_disks: {
      type: 'array',
      items: {
        type: 'object',
        properties: {
          raid_level: {
            type: 'string',
            enum: ['JBOD', '0', '1', '2', '5', '6', '1+0', '5+0', '6+0'],
            description: 'RAID level for the logical disk. Valid values are \'JBOD\', \'0\', \'1\', \'2\', \'5\', \'6\', \'1+0\', \'5+0\' and \'6+0\'. Required.',
          },
          size_gb: {
            anyOf: [{
              type: 'integer',
              minimum: 0,
            }, {
              type: 'string',
              enum: ['MAX'],
            }],
            description: 'Size in GiB (Integer) for the logical disk. Use \'MAX\' as size_gb if this logical disk is supposed to use the rest of the space available. Required.',
          },
          volume_name: {
            type: 'string',
            description: 'Name of the volume to be created. If this is not specified, it will be auto-generated. Optional.',
          },
          is_root_volume: {
            type: 'boolean',
            description: 'Specifies whether this disk is a root volume. By default, this is False. Optional.',
          },
          share_physical_disks: {
            type: 'boolean',
            description: 'Specifies whether other logical disks can share physical disks with this logical disk. By default, this is False. Optional.',
          },
          disk_type: {
            type: 'string',
            enum: ['hdd', 'ssd'],
            description: 'The type of disk preferred. Valid values are \'hdd\' and \'ssd\'. If this is not specified, disk type will not be a selection criterion for choosing backing physical disks. Optional.',
          },
          interface_type: {
            type: 'string',
            enum: ['sata', 'scsi', 'sas'],
            description: 'The interface type of disk. Valid values are \'sata\', \'scsi\' and \'sas\'. If this is not specified, interface type will not be a selection criterion for choosing backing physical disks. Optional.',
          },
          number_of_physical_disks: {
            type: 'integer',
            minimum: 0,
            exclusiveMinimum: true,
            description: 'Number of physical disks to use for this logical disk. By default, the driver uses the minimum number of disks required for that RAID level. Optional.',
          },
          controller: {
            type: 'string',
            description: 'Controller to use for this logical disk. If not specified, the driver will choose a suitable RAID controller on the bare metal node. Optional.',
          },
          physical_disks: {
            anyOf: [{
              type: 'array',
              items: {
                type: 'string',
              },
            }, {
              type: 'array',
              items: {
                type: 'object',
              },
              minItems: 2,
            }],
            description: 'The physical disks to use for this logical disk. If not specified, the driver will choose suitable physical disks to use. Optional.',
          },
        },
        required: ['raid_level', 'size_gb'],
        additionalProperties: false,
        dependencies: {
          physical_disks: ['controller'],
        },
      },
      minItems: 1,
    },
  },
  required: ['logical_disks'],
  additionalProperties: false,
};

const LOGICAL_DISK_SCHEMA = (RAID_CONFIG_SCHEMA.properties as Record<string, Schema>).logical_disks.items as Schema;

/** Each logical disk property and its description, as Ironic's schema has them (GET /v1/drivers/{d}/raid/logical_disk_properties). */
export const LOGICAL_DISK_PROPERTIES: Readonly<Record<string, string>> = Object.freeze(
  Object.fromEntries(Object.entries(LOGICAL_DISK_SCHEMA.properties ?? {}).map(([name, p]) => [name, p.description ?? ''])),
);

/**
 * Ironic's raid.validate_configuration: a RAID configuration against the schema, and at most
 * one logical disk the root volume.
 * @throws InvalidParameterValue
 */
export function validateRaidConfig(config: unknown): void {
  const error = schemaError(config, RAID_CONFIG_SCHEMA);
  if (error) throw new InvalidParameterValue(`RAID config validation error: ${error}`);
  const roots = ((config as Record<string, unknown>).logical_disks as Array<Record<string, unknown>>).filter((d) => d.is_root_volume).length;
  if (roots > 1) {
    throw new InvalidParameterValue(`Raid config cannot have more than one root volume. ${roots} root volumes were specified`);
  }
}

/** Python's str(datetime.utcnow()), as Ironic's raid_config.last_updated shows it. */
export function raidTimestamp(): string {
  return `${new Date().toISOString().replace('T', ' ').replace('Z', '')}000`;
}

/**
 * Ironic's filter_target_raid_config: the node's target without the root volume, or without
 * the others, as a step's arguments ask.
 * @throws MissingParameterValue when there is no target, or nothing is left of it
 */
export function filterTargetRaidConfig(node: string, target: Readonly<Record<string, unknown>>, createRoot: boolean, createNonRoot: boolean): Record<string, unknown> {
  if (!Object.keys(target).length) throw new MissingParameterValue(`Node ${node} has no target RAID configuration.`);
  let disks = Array.isArray(target.logical_disks) ? (target.logical_disks as Array<Record<string, unknown>>) : [];
  const skipped: string[] = [];
  if (!createRoot) {
    disks = disks.filter((d) => !d.is_root_volume);
    skipped.push('skipping root volume');
  }
  if (!createNonRoot) {
    disks = disks.filter((d) => d.is_root_volume);
    skipped.push('skipping non-root volumes');
  }
  if (!disks.length) throw new MissingParameterValue(`Node ${node} has empty target RAID configuration after ${skipped.join(' and ')}.`);
  return { ...target, logical_disks: disks };
}

/**
 * Ironic's update_raid_info: the node's raid_config becomes `config` (stamped), and a root
 * volume sets the node's local_gb (unless MAX), its root_device hint (when it names one) and
 * the raid_level capability.
 * @throws InvalidParameterValue for more than one root volume
 */
export function updateRaidInfo(properties: Readonly<Record<string, unknown>>, config: Readonly<Record<string, unknown>>): { raidConfig: Record<string, unknown>; properties?: Record<string, unknown> } {
  const raidConfig = { ...config, last_updated: raidTimestamp() };
  const disks = Array.isArray(config.logical_disks) ? (config.logical_disks as Array<Record<string, unknown>>) : [];
  const roots = disks.filter((d) => d.is_root_volume);
  if (roots.length > 1) throw new InvalidParameterValue(`Raid config cannot have more than one root volume. ${roots.length} root volumes were specified`);
  const root = roots[0];
  if (!root) return { raidConfig };
  const props: Record<string, unknown> = { ...properties };
  if (root.size_gb !== 'MAX') props.local_gb = root.size_gb;
  if (Object.hasOwn(root, 'root_device_hint')) props.root_device = root.root_device_hint;
  props.capabilities = updatedCapabilities(props.capabilities ?? '', { raid_level: String(root.raid_level) });
  return { raidConfig, properties: props };
}
