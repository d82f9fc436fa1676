/**
 * A node's target RAID configuration as Ironic defines it (ironic/drivers/raid_config_schema.json):
 * `{"logical_disks": [{"size_gb": 100 | "MAX", "raid_level": "1", …}, …]}`. Validated by
 * hand against that schema, with jsonschema's messages, since clients and operators are used
 * to reading those.
 */
import { InvalidParameterValue } from './errors.js';

const RAID_LEVELS = ['JBOD', '0', '1', '2', '5', '6', '1+0', '5+0', '6+0'];
const DISK_TYPES = ['hdd', 'ssd'];
const INTERFACE_TYPES = ['sata', 'scsi', 'sas'];

/** Each logical disk property and its description, as Ironic's schema has them (GET /v1/drivers/{d}/raid/logical_disk_properties). */
export const LOGICAL_DISK_PROPERTIES: Readonly<Record<string, string>> = Object.freeze({
  raid_level: "RAID level for the logical disk. Valid values are 'JBOD', '0', '1', '2', '5', '6', '1+0', '5+0' and '6+0'. Required.",
  size_gb: "Size in GiB (Integer) for the logical disk. Use 'MAX' as size_gb if this logical disk is supposed to use the rest of the space available. Required.",
  volume_name: 'Name of the volume to be created. If this is not specified, it will be auto-generated. Optional.',
  is_root_volume: 'Specifies whether this disk is a root volume. By default, this is False. Optional.',
  share_physical_disks: 'Specifies whether other logical disks can share physical disks with this logical disk. By default, this is False. Optional.',
  disk_type: "The type of disk preferred. Valid values are 'hdd' and 'ssd'. If this is not specified, disk type will not be a selection criterion for choosing backing physical disks. Optional.",
  interface_type: "The interface type of disk. Valid values are 'sata', 'scsi' and 'sas'. If this is not specified, interface type will not be a selection criterion for choosing backing physical disks. Optional.",
  number_of_physical_disks: 'Number of physical disks to use for this logical disk. By default, the driver uses the minimum number of disks required for that RAID level. Optional.',
  controller: 'Controller to use for this logical disk. If not specified, the driver will choose a suitable RAID controller on the bare metal node. Optional.',
  physical_disks: 'The physical disks to use for this logical disk. If not specified, the driver will choose suitable physical disks to use. Optional.',
});

/** A value as Python prints it, which is what jsonschema's messages show. */
function py(v: unknown): string {
  if (v === null || v === undefined) return 'None';
  if (v === true) return 'True';
  if (v === false) return 'False';
  if (typeof v === 'string') return `'${v.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
  if (Array.isArray(v)) return `[${v.map(py).join(', ')}]`;
  if (typeof v === 'object') return `{${Object.entries(v).map(([k, x]) => `${py(k)}: ${py(x)}`).join(', ')}}`;
  return String(v);
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);
const isInteger = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v);

function fail(message: string): never {
  throw new InvalidParameterValue(`RAID config validation error: ${message}`);
}

function checkType(v: unknown, type: 'string' | 'boolean' | 'integer' | 'object' | 'array'): void {
  const ok = type === 'integer' ? isInteger(v) : type === 'object' ? isObject(v) : type === 'array' ? Array.isArray(v) : typeof v === type;
  if (!ok) fail(`${py(v)} is not of type '${type}'`);
}

function checkEnum(v: unknown, allowed: readonly string[]): void {
  checkType(v, 'string');
  if (!allowed.includes(v as string)) fail(`${py(v)} is not one of ${py(allowed)}`);
}

function checkLogicalDisk(disk: unknown): void {
  checkType(disk, 'object');
  const d = disk as Record<string, unknown>;
  for (const required of ['raid_level', 'size_gb']) {
    if (!(required in d)) fail(`'${required}' is a required property`);
  }
  const extra = Object.keys(d).filter((k) => !(k in LOGICAL_DISK_PROPERTIES));
  if (extra.length) fail(`Additional properties are not allowed (${extra.map(py).join(', ')} ${extra.length > 1 ? 'were' : 'was'} unexpected)`);
  if ('physical_disks' in d && !('controller' in d)) fail("'controller' is a dependency of 'physical_disks'");
  checkEnum(d.raid_level, RAID_LEVELS);
  const size = d.size_gb;
  if (!((isInteger(size) && size >= 0) || size === 'MAX')) fail(`${py(size)} is not valid under any of the given schemas`);
  for (const k of ['volume_name', 'controller'] as const) if (k in d) checkType(d[k], 'string');
  for (const k of ['is_root_volume', 'share_physical_disks'] as const) if (k in d) checkType(d[k], 'boolean');
  if ('disk_type' in d) checkEnum(d.disk_type, DISK_TYPES);
  if ('interface_type' in d) checkEnum(d.interface_type, INTERFACE_TYPES);
  if ('number_of_physical_disks' in d) {
    checkType(d.number_of_physical_disks, 'integer');
    if ((d.number_of_physical_disks as number) <= 0) fail(`${py(d.number_of_physical_disks)} is less than or equal to the minimum of 0`);
  }
  if ('physical_disks' in d) {
    const p = d.physical_disks;
    const strings = Array.isArray(p) && p.every((x) => typeof x === 'string');
    const objects = Array.isArray(p) && p.length >= 2 && p.every(isObject);
    if (!strings && !objects) fail(`${py(p)} is not valid under any of the given schemas`);
  }
}

/**
 * Checks a target RAID configuration against Ironic's schema, and that at most one logical
 * disk is the root volume. An empty object is valid: it clears the target.
 * @throws InvalidParameterValue
 */
export function validateRaidConfig(config: Record<string, unknown>): void {
  if (Object.keys(config).length === 0) return;
  if (!('logical_disks' in config)) fail("'logical_disks' is a required property");
  const extra = Object.keys(config).filter((k) => k !== 'logical_disks');
  if (extra.length) fail(`Additional properties are not allowed (${extra.map(py).join(', ')} ${extra.length > 1 ? 'were' : 'was'} unexpected)`);
  const disks = config.logical_disks;
  checkType(disks, 'array');
  if ((disks as unknown[]).length === 0) fail('[] is too short');
  for (const disk of disks as unknown[]) checkLogicalDisk(disk);
  const roots = (disks as Array<Record<string, unknown>>).filter((d) => d.is_root_volume === true).length;
  if (roots > 1) {
    throw new InvalidParameterValue(`Raid config cannot have more than one root volume. ${roots} root volumes were specified`);
  }
}
