/**
 * How the `redfish` RAID interface turns a node's target_raid_config into volumes to create:
 * Ironic's disk matching (ironic/drivers/modules/redfish/raid.py, `_find_configuration` and
 * its helpers), kept as Ironic has it — the same RAID level table, 64 MiB stripes, search
 * order and messages — so that a configuration Ironic accepts or refuses is accepted or
 * refused here, on the same disks. No I/O: the drives come from the BMC (raid.ts).
 */
import { InvalidParameterValue, RaidConfigError } from '../../common/errors.js';

const KI = 1024;
const GI = 2 ** 30;
const STRIPE_KB = 64 * KI;

interface SimpleLevel {
  type: 'simple';
  minDisks: number;
  maxDisks: number;
  raidType: string;
  overhead: number;
}
interface SpannedLevel {
  type: 'spanned';
  raidType: string;
  spanType: string;
}

/** Ironic's RAID_LEVELS. */
export const RAID_LEVELS: Readonly<Record<string, SimpleLevel | SpannedLevel>> = {
  '0': { type: 'simple', minDisks: 1, maxDisks: 1000, raidType: 'RAID0', overhead: 0 },
  '1': { type: 'simple', minDisks: 2, maxDisks: 2, raidType: 'RAID1', overhead: 1 },
  '5': { type: 'simple', minDisks: 3, maxDisks: 1000, raidType: 'RAID5', overhead: 1 },
  '6': { type: 'simple', minDisks: 4, maxDisks: 1000, raidType: 'RAID6', overhead: 2 },
  '1+0': { type: 'spanned', raidType: 'RAID10', spanType: '1' },
  '5+0': { type: 'spanned', raidType: 'RAID50', spanType: '5' },
  '6+0': { type: 'spanned', raidType: 'RAID60', spanType: '6' },
};

/** The Ironic RAID level of a Redfish RAIDType, if it has one. */
export function raidLevelOf(raidType: string): string | undefined {
  return Object.keys(RAID_LEVELS).find((k) => RAID_LEVELS[k].raidType === raidType);
}

/** sushy's protocol → Ironic's interface_type (PROTOCOL_MAP). */
const PROTOCOLS: Readonly<Record<string, string>> = { SAS: 'sas', SATA: 'sata' };

/** A drive of a controller that can hold volumes. */
export interface PhysicalDisk {
  /** The drive's Id (what physical_disks name). */
  id: string;
  /** Its `@odata.id`. */
  path: string;
  capacityBytes: number;
  mediaType: string | null;
  protocol: string | null;
  /** The Id of the Storage it belongs to. */
  storage: string;
}

/** A logical disk as the steps work on it: target_raid_config's, with size_gb made size_bytes. */
export type LogicalDisk = Record<string, unknown> & {
  raid_level: string;
  size_bytes: number | 'MAX';
  physical_disks?: string[];
  controller?: string;
  is_root_volume?: boolean;
  share_physical_disks?: boolean;
  volume_name?: string;
};

type Free = Map<PhysicalDisk, number>;

/** Ironic's convert_drive_units: size_gb → size_bytes. @throws InvalidParameterValue for MAX without physical_disks */
export function convertDriveUnits(disks: ReadonlyArray<Record<string, unknown>>, nodeUuid: string): LogicalDisk[] {
  return disks.map((d) => {
    const out: Record<string, unknown> = { ...d };
    if (d.size_gb === 'MAX' && !('physical_disks' in d)) {
      throw new InvalidParameterValue(
        `create_configuration called with invalid target_raid_configuration for node ${nodeUuid}. 'physical_disks' is missing from logical_disk while 'size_gb'='MAX' was requested: ${JSON.stringify(d)}`,
      );
    }
    out.size_bytes = d.size_gb === 'MAX' ? 'MAX' : (d.size_gb as number) * GI;
    delete out.size_gb;
    return out as LogicalDisk;
  });
}

function levelOf(raidLevel: string): SimpleLevel | SpannedLevel {
  const level = RAID_LEVELS[raidLevel];
  if (!level) throw new RaidConfigError(`RAID level ${raidLevel} is not supported by the driver. Supported RAID levels: ${Object.keys(RAID_LEVELS).join(', ')}`);
  return level;
}

/** The simple level a level's spans are made of; the level itself when it is not spanned. */
function spanLevel(raidLevel: string, spans: number): SimpleLevel {
  const level = levelOf(raidLevel);
  if (level.type === 'simple') return level;
  if (spans <= 1) throw new RaidConfigError('Spanned RAID volumes cannot contain a single span');
  return RAID_LEVELS[level.spanType] as SimpleLevel;
}

const overheadOf = (raidLevel: string, spans = 1) => spanLevel(raidLevel, spans).overhead * spans;
const minDisksOf = (raidLevel: string, spans = 1) => spanLevel(raidLevel, spans).minDisks * spans;
const maxDisksOf = (raidLevel: string, spans = 1) => spanLevel(raidLevel, spans).maxDisks * spans;

function spansOf(raidLevel: string, disks: number): number {
  if (['0', '1', '5', '6'].includes(raidLevel)) return 1;
  if (['5+0', '6+0'].includes(raidLevel)) return 2;
  if (raidLevel === '1+0') return disks >> 1;
  throw new RaidConfigError(`Cannot calculate spans for RAID level "${raidLevel}"`);
}

function usableDisks(raidLevel: string, disks: number): number {
  if (['0', '1', '5', '6'].includes(raidLevel)) return disks;
  if (['5+0', '6+0', '1+0'].includes(raidLevel)) return (disks >> 1) << 1;
  levelOf(raidLevel);
  throw new RaidConfigError(`RAID level ${raidLevel} is not supported by the driver.`);
}

function maxVolumeBytes(raidLevel: string, disks: PhysicalDisk[], free: Free, spans: number): number {
  const sizeKb = Math.floor(Math.min(...disks.map((d) => free.get(d) ?? 0)) / KI);
  const stripesPerDisk = Math.floor(sizeKb / STRIPE_KB);
  const overhead = overheadOf(raidLevel, spans);
  if (disks.length <= overhead) {
    throw new RaidConfigError(`The number of physical drives (${disks.length}) is too few for the required number of overhead drives (${overhead})`);
  }
  return stripesPerDisk * STRIPE_KB * (disks.length - overhead) * KI;
}

function usagePerDisk(raidLevel: string, sizeBytes: number, disks: number, spans: number): number {
  const stripesPerVolume = Math.ceil(Math.floor(sizeBytes / KI) / STRIPE_KB);
  const stripesPerDisk = Math.ceil(stripesPerVolume / (disks - overheadOf(raidLevel, spans)));
  return stripesPerDisk * STRIPE_KB * KI;
}

/** Ironic's _calculate_volume_props: checks the volume fits its disks and takes its space from `free`. */
function volumeProps(ld: LogicalDisk, disks: readonly PhysicalDisk[], free: Free): void {
  const wanted = ld.physical_disks ?? [];
  const selected = disks.filter((d) => wanted.includes(d.id));
  if (!selected.length) throw new RaidConfigError(`None of the physical disks ${wanted.join(', ')} is a drive of a RAID controller of the node`);
  const spans = spansOf(ld.raid_level, selected.length);
  if (spans === 0 || selected.length % spans !== 0) {
    throw new RaidConfigError(`For RAID level ${ld.raid_level}, the number of physical disks provided (${selected.length}) must be a multiple of the spans count (${spans})`);
  }
  const max = maxVolumeBytes(ld.raid_level, selected, free, spans);
  let size: number;
  if (ld.size_bytes === 'MAX') {
    if (max === 0) throw new RaidConfigError("size set to 'MAX' but could not allocate physical disk space");
    size = max;
  } else {
    if (max < ld.size_bytes) throw new RaidConfigError(`The physical disk space (${max} bytes) is not enough for the size of the logical disk (${ld.size_bytes} bytes)`);
    size = ld.size_bytes;
  }
  const usage = usagePerDisk(ld.raid_level, size, selected.length, spans);
  for (const d of selected) {
    const left = free.get(d) ?? 0;
    if (left < usage) throw new RaidConfigError(`The free space of a disk (${left} bytes) is not enough for the per-disk size of the logical disk (${usage} bytes)`);
    free.set(d, left - usage);
  }
  if (!('controller' in ld)) ld.controller = selected[0].storage;
}

interface DiskGroup {
  mediaType: string | null;
  protocol: string | null;
  disks: PhysicalDisk[];
}

/** Ironic's _assign_disks_to_volume: a backtracking search over disk types and counts. */
function assign(queue: LogicalDisk[], byType: Map<string, DiskGroup>, free: Free): [boolean, Free] {
  const ld = queue.shift()!;
  const level = ld.raid_level;
  for (const group of byType.values()) {
    if (typeof ld.disk_type === 'string' && ld.disk_type.toLowerCase() !== (group.mediaType ?? '').toLowerCase()) continue;
    if (typeof ld.interface_type === 'string' && ld.interface_type.toLowerCase() !== (PROTOCOLS[group.protocol ?? ''] ?? '')) continue;
    let disks = group.disks.filter((d) => (free.get(d) ?? 0) > 0).sort((a, b) => (free.get(a) ?? 0) - (free.get(b) ?? 0));
    if (!ld.share_physical_disks) disks = disks.filter((d) => d.capacityBytes === free.get(d));
    const maxSpans = spansOf(level, disks.length);
    const minSpans = Math.min(2, maxSpans);
    const minDisks = minDisksOf(level, minSpans);
    const candidateMax = Math.min(maxDisksOf(level, maxSpans), disks.length);
    for (let count = minDisks; count <= candidateMax; count++) {
      if ('number_of_physical_disks' in ld && ld.number_of_physical_disks !== count) continue;
      if (count !== usableDisks(level, count)) continue;
      const selected = disks.slice(0, count);
      const candidate: LogicalDisk = { ...ld, physical_disks: selected.map((d) => d.id) };
      let candidateFree = new Map(free);
      try {
        volumeProps(candidate, selected, candidateFree);
      } catch (err) {
        if (err instanceof RaidConfigError) continue;
        throw err;
      }
      if (queue.length > 0) {
        let result: boolean;
        try {
          [result, candidateFree] = assign(queue, byType, candidateFree);
        } catch (err) {
          if (err instanceof RaidConfigError) continue;
          throw err;
        }
        if (result) {
          queue.push(candidate);
          return [true, candidateFree];
        }
      } else {
        queue.push(candidate);
        return [true, candidateFree];
      }
    }
  }
  queue.unshift(ld);
  return [false, free];
}

/**
 * Ironic's _find_configuration: the logical disks with their physical disks and controller
 * chosen. Disks named by the operator with a size first, then those without disks (matched
 * by type, shared MAX disks kept for last), then those named with size MAX.
 * @throws RaidConfigError when the disks cannot hold them
 */
export function findConfiguration(logicalDisks: LogicalDisk[], physical: readonly PhysicalDisk[]): LogicalDisk[] {
  const named = (v: LogicalDisk) => 'physical_disks' in v;
  const reservedVolumes = logicalDisks.filter((v) => named(v) && v.size_bytes === 'MAX' && v.share_physical_disks === true);
  const reserved = new Set(physical.filter((d) => reservedVolumes.some((v) => v.physical_disks!.includes(d.id))));
  const byType = new Map<string, DiskGroup>();
  const reservedByType = new Map<string, PhysicalDisk[]>();
  const free: Free = new Map();
  const typeKey = (d: PhysicalDisk) => JSON.stringify([d.mediaType, d.protocol, d.capacityBytes]);
  for (const d of physical) {
    // As in Ironic, a drive's free space is its capacity: volumes already on it are not counted.
    free.set(d, d.capacityBytes);
    const key = typeKey(d);
    if (!byType.has(key)) {
      byType.set(key, { mediaType: d.mediaType, protocol: d.protocol, disks: [] });
      reservedByType.set(key, []);
    }
    (reserved.has(d) ? reservedByType.get(key)! : byType.get(key)!.disks).push(d);
  }
  // Disks the operator gave to a volume that does not share them are not matched to others.
  for (const v of logicalDisks) {
    if (!named(v) || v.share_physical_disks === true) continue;
    for (const d of physical) {
      if (!v.physical_disks!.includes(d.id)) continue;
      const group = byType.get(typeKey(d))!;
      group.disks = group.disks.filter((x) => x !== d);
    }
  }
  const processed: LogicalDisk[] = [];
  let space = free;
  for (const v of logicalDisks.filter((x) => named(x) && x.size_bytes !== 'MAX')) {
    volumeProps(v, physical, space);
    processed.push(v);
  }
  const unnamed = logicalDisks.filter((x) => !named(x));
  if (unnamed.length) {
    let result: boolean;
    [result, space] = assign(unnamed, byType, space);
    if (!result) {
      for (const [key, group] of byType) group.disks.push(...reservedByType.get(key)!);
      [result, space] = assign(unnamed, byType, space);
      if (!result) throw new RaidConfigError('failed to find matching physical disks for all logical disks');
    }
  }
  processed.push(...unnamed);
  for (const v of logicalDisks.filter((x) => named(x) && x.size_bytes === 'MAX')) {
    volumeProps(v, physical, space);
    processed.push(v);
  }
  return processed;
}

/** Ironic's _filter_logical_disks. */
export function filterLogicalDisks(disks: readonly LogicalDisk[], root: boolean, nonRoot: boolean): LogicalDisk[] {
  const out: LogicalDisk[] = [];
  for (const d of disks) {
    if (root && d.is_root_volume === true) out.push(d);
    if (nonRoot && d.is_root_volume !== true) out.push(d);
  }
  return out;
}
