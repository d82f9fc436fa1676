/**
 * IPA's GenericHardwareManager RAID steps (hardware.py): software RAID, the only RAID the
 * generic manager builds. `create_configuration` builds the node's `target_raid_config` when
 * its logical disks have `controller: software` (else it returns `{}`: nothing for it to do),
 * `apply_configuration` builds a given one (deleting first unless told not to),
 * `delete_configuration` removes every md device. The checks and messages are IPA's
 * (validate_configuration, get_block_devices_for_raid, the partitions check); the md devices
 * live on the host, like its disk, across agents.
 */
import type { InventoryDisk } from './inventory.js';
import { IpaError, pyRepr } from './ipa.js';

/** One md device the agent built. */
export interface SoftRaidDevice {
  name: string;
  raidLevel: string;
  sizeGb: number | 'MAX';
  /** The disks holding a partition of it. */
  holders: string[];
  volumeName: string | null;
}

/** What the RAID steps read of the host and change on it. */
export interface RaidHost {
  readonly disks: readonly InventoryDisk[];
  /** Disks that hold partitions now (an image written, or RAID members). */
  partitioned(): string[];
  softwareRaid: SoftRaidDevice[] | null;
}

type LogicalDisk = Record<string, unknown>;

const GIB = 1024 ** 3;
/** IPA's SUPPORTED_SOFTWARE_RAID_LEVELS. */
const SUPPORTED_LEVELS = ['0', '1', '1+0', '5', '6'];

const softwareRaidError = (details: string) => new IpaError('SoftwareRAIDError', 500, 'Software RAID caused unknown error', details);

function logicalDisksOf(config: unknown): LogicalDisk[] {
  const disks = config !== null && typeof config === 'object' ? (config as Record<string, unknown>).logical_disks : undefined;
  return Array.isArray(disks) ? (disks as LogicalDisk[]) : [];
}

/** IPA's validate_configuration. @throws SoftwareRAIDError */
export function validateConfiguration(config: unknown, node: Record<string, unknown>, deviceCount: number): void {
  const disks = logicalDisksOf(config);
  if (!disks.length) throw softwareRaidError('RAID config contains no logical disks');
  const errors: string[] = [];
  if (disks.length !== 1 && disks.length !== 2) errors.push('Software RAID configuration requires one or two logical disks');
  const names: string[] = [];
  let root = false;
  for (const d of disks) {
    if (d.controller !== 'software') errors.push("Software RAID configuration requires all logical disks to have 'controller'='software'");
    if (typeof d.volume_name === 'string') {
      if (names.includes(d.volume_name)) errors.push(`Duplicate software RAID device name ${d.volume_name} detected`);
      else names.push(d.volume_name);
    }
    if (d.is_root_volume) {
      if (root) errors.push('Software RAID configuration allows only one logical disk to be marked as is_root_volume');
      root = true;
    }
    const physical = d.physical_disks;
    if (physical !== undefined && physical !== null) {
      if (!Array.isArray(physical) || physical.length < 2) {
        errors.push('The physical_disks parameter for software RAID must be a list with at least 2 items, each specifying a disk in the device hints format');
      }
      if (Array.isArray(physical) && physical.some((p) => p === null || typeof p !== 'object' || Array.isArray(p))) {
        errors.push('The physical_disks parameter for software RAID must be a list of device hints (dictionaries)');
      }
    }
  }
  if (disks[0].raid_level !== '1') errors.push('Software RAID Configuration requires RAID-1 for the first logical disk');
  if (disks.length === 2) {
    if (disks[0].size_gb === 'MAX' && disks[1].size_gb === 'MAX') errors.push("Software RAID can have only one RAID device with size 'MAX'");
    const level = String(disks[1].raid_level);
    if (!SUPPORTED_LEVELS.includes(level)) errors.push(`Software RAID configuration does not support RAID level ${level}`);
    if (level === '5' && deviceCount < 3) errors.push(`Software RAID configuration is not possible for RAID level 5 with only ${deviceCount} block devices found.`);
    if (level === '6' && deviceCount < 4) errors.push(`Software RAID configuration is not possible for RAID level 6 with only ${deviceCount} block devices found.`);
  }
  if (errors.length) throw softwareRaidError(`Could not validate Software RAID config for ${String(node.uuid)}: ${errors.join('; ')}`);
}

/** ironic-lib's device hints, the ones a simulated disk can answer: name, size (GiB, or with an operator), model, serial, wwn, vendor, rotational. */
function matchesHints(disk: InventoryDisk, hints: Record<string, unknown>): boolean {
  for (const [key, want] of Object.entries(hints)) {
    if (key === 'name') {
      const n = String(want);
      if (disk.name !== n && disk.name !== `/dev/${n}`) return false;
    } else if (key === 'size') {
      const gib = Math.floor(disk.size / GIB);
      const m = /^\s*(<=|>=|==|<|>|=)?\s*(\d+)\s*$/.exec(String(want));
      if (!m) return false;
      const n = Number(m[2]);
      const ok = { '<=': gib <= n, '>=': gib >= n, '<': gib < n, '>': gib > n, '==': gib === n, '=': gib === n, '': gib === n }[m[1] ?? ''];
      if (!ok) return false;
    } else if (key === 'rotational') {
      if (Boolean(want) !== disk.rotational) return false;
    } else if (['model', 'serial', 'wwn', 'vendor'].includes(key)) {
      if (String((disk as unknown as Record<string, unknown>)[key] ?? '') !== String(want)) return false;
    }
  }
  return true;
}

/** IPA's raid_utils.get_block_devices_for_raid: the disks each logical disk spans. @throws SoftwareRAIDError */
function blockDevicesFor(disks: readonly InventoryDisk[], logical: LogicalDisk[]): Array<{ ld: LogicalDisk; devices: string[] }> {
  const serialized = disks.map((d) => ({ name: d.name, size: d.size, model: d.model, serial: d.serial, wwn: d.wwn, vendor: d.vendor, rotational: d.rotational }));
  return logical.map((ld) => {
    const physical = ld.physical_disks;
    if (!Array.isArray(physical) || !physical.length) return { ld, devices: disks.map((d) => d.name) };
    const matching: string[] = [];
    for (const hints of physical as Array<Record<string, unknown>>) {
      const candidates = disks.filter((d) => matchesHints(d, hints)).map((d) => d.name);
      if (!candidates.length) throw softwareRaidError(`No candidates for physical disk ${pyRepr(hints)} from the list ${pyRepr(serialized)}`);
      const next = candidates.find((c) => !matching.includes(c));
      if (!next) throw softwareRaidError(`No candidates left for physical disk ${pyRepr(hints)} from the list ${pyRepr(candidates)} after picking ${pyRepr(matching)} for previous volumes`);
      matching.push(next);
    }
    return { ld, devices: matching };
  });
}

/** IPA's _do_create_configuration: the md devices built on partitions of their disks. @throws SoftwareRAIDError */
function build(host: RaidHost, node: Record<string, unknown>, config: Record<string, unknown>): Record<string, unknown> {
  const logical = logicalDisksOf(config);
  if (!logical.some((d) => d.controller === 'software')) return {};
  validateConfiguration(config, node, host.disks.length);
  const plan = blockDevicesFor(host.disks, logical);
  const used = [...new Set(plan.flatMap((p) => p.devices))];
  const withParts = used.filter((d) => host.partitioned().includes(d));
  if (withParts.length) throw softwareRaidError(`Partitions detected on devices ${withParts.join(', ')} during RAID config`);
  // Fixed sizes first, MAX last, each partition taken from every disk of its device (parted fails past a disk's end).
  const ordered = [...plan.filter((p) => p.ld.size_gb !== 'MAX'), ...plan.filter((p) => p.ld.size_gb === 'MAX')];
  const usedGib = new Map<string, number>();
  for (const p of ordered) {
    if (p.ld.size_gb === 'MAX') continue;
    for (const dev of p.devices) {
      const total = (usedGib.get(dev) ?? 0) + Number(p.ld.size_gb);
      const capacity = (host.disks.find((d) => d.name === dev)?.size ?? 0) / GIB;
      if (total > capacity) throw softwareRaidError(`Failed to create partitions on ${dev}: Error: The location ${total}GiB is outside of the device ${dev}.`);
      usedGib.set(dev, total);
    }
  }
  host.softwareRaid = ordered.map((p, i) => ({
    name: `/dev/md${i}`, raidLevel: String(p.ld.raid_level), sizeGb: p.ld.size_gb === 'MAX' ? 'MAX' : Number(p.ld.size_gb), holders: p.devices,
    volumeName: typeof p.ld.volume_name === 'string' ? p.ld.volume_name : null,
  }));
  return config;
}

/** `create_configuration`: the node's target_raid_config built; `{}` when it has none or none is software. */
export function createConfiguration(host: RaidHost, node: Record<string, unknown>): Record<string, unknown> {
  const target = node.target_raid_config;
  if (target === null || typeof target !== 'object' || !Object.keys(target).length) return {};
  return build(host, node, target as Record<string, unknown>);
}

/** `delete_configuration`: every md device gone, its partitions with it. */
export function deleteConfiguration(host: RaidHost): null {
  host.softwareRaid = null;
  return null;
}

/** `apply_configuration`: `raid_config` validated, the old devices deleted unless told not to, then built. */
export function applyConfiguration(host: RaidHost, node: Record<string, unknown>, raidConfig: unknown, deleteExisting: unknown): Record<string, unknown> {
  validateConfiguration(raidConfig, node, host.disks.length);
  if (deleteExisting !== false) deleteConfiguration(host);
  return build(host, node, raidConfig as Record<string, unknown>);
}
