/**
 * The `redfish` inspect interface: out-of-band inspection in one synchronous call, with the
 * node properties Ironic 21.4 writes (ironic/drivers/modules/redfish/inspect.py at 21.4.4):
 * `memory_mb` and `local_gb` as strings, `cpus` as a number, `cpu_arch` as a string, and a
 * `boot_mode` capability unless the node has one. The inventory has IPA's shape, as newer
 * Ironic stores it, with `cpu.frequency` a string as IPA sends it (older gophercloud parses
 * only that). As newer Ironic, an inventory with no valid network interface fails.
 */
import { HardwareInspectionFailure } from '../../common/errors.js';
import type { DriverContext, InspectInterface, InspectionResult } from '../interfaces.js';
import type { RedfishClient } from './client.js';
import { readHardware, type DiskInfo, type Hardware, type ProcessorInfo } from './inventory.js';
import { isObject, prop, str } from './odata.js';

const GIB = 2 ** 30;
/** Ironic 21.4's ESSENTIAL_PROPERTIES (drivers/base.py). */
const ESSENTIAL = ['cpu_arch', 'cpus', 'local_gb', 'memory_mb'] as const;

/** InstructionSet → Ironic's cpu_arch (newer Ironic's PROCESSOR_INSTRUCTION_SET_MAP). */
const BY_INSTRUCTION_SET: Readonly<Record<string, string>> = {
  'x86-64': 'x86_64',
  x86: 'i686',
  'ARM-A64': 'aarch64',
  'ARM-A32': 'arm',
  'IA-64': 'ia64',
  MIPS32: 'mips',
  MIPS64: 'mips64',
  'PowerISA': 'ppc64le',
};
/** ProcessorArchitecture → cpu_arch, for processors without an InstructionSet (Ironic 21.4's CPU_ARCH_MAP). */
const BY_ARCHITECTURE: Readonly<Record<string, string>> = { x86: 'x86_64', 'IA-64': 'ia64', ARM: 'arm', MIPS: 'mips', Power: 'ppc64le', OEM: 'oem' };
const BOOT_MODES: Readonly<Record<string, 'uefi' | 'bios'>> = { UEFI: 'uefi', Legacy: 'bios' };
const MAC = /^([0-9a-f]{2}[-:]){5}[0-9a-f]{2}$/i;

/** The architecture of the first processor that tells it. */
function cpuArch(processors: ProcessorInfo[]): string | null {
  for (const p of processors) {
    const arch = (p.instructionSet && BY_INSTRUCTION_SET[p.instructionSet]) ?? (p.architecture && BY_ARCHITECTURE[p.architecture]);
    if (arch) return arch;
  }
  return null;
}

/** sushy's sorted sizes, then Ironic's "smallest disk of at least 4 GiB", 0 when none. */
function smallestUsable(disks: DiskInfo[] | null, enabledOnly = false): number {
  if (!disks) return 0;
  const sizes = disks
    .filter((d) => d.sizeBytes !== null && (!enabledOnly || d.state === 'Enabled'))
    .map((d) => d.sizeBytes as number)
    .sort((a, b) => a - b);
  return sizes.find((s) => s >= 4 * GIB) ?? 0;
}

/**
 * Ironic's `_detect_local_gb`: SimpleStorage's enabled devices, and Storage volumes (drives
 * when no volume qualifies); the smaller when both give one; in GiB, less one.
 */
export function localGb(hw: Hardware): number {
  const simple = smallestUsable(hw.simpleDevices, true);
  const storage = smallestUsable(hw.storageVolumes) || smallestUsable(hw.storageDrives);
  const bytes = simple && storage ? Math.min(simple, storage) : Math.max(simple, storage);
  return Math.max(0, Math.trunc(bytes / GIB - 1));
}

/** `k:v,k:v` as a map; malformed pieces are kept as keys without a value, as Ironic fails on them elsewhere. */
function parseCapabilities(caps: string | undefined): Map<string, string> {
  const out = new Map<string, string>();
  for (const piece of (caps ?? '').split(',')) {
    if (!piece.trim()) continue;
    const i = piece.indexOf(':');
    out.set(i < 0 ? piece : piece.slice(0, i), i < 0 ? '' : piece.slice(i + 1));
  }
  return out;
}

function normaliseMac(mac: string): string {
  return mac.toLowerCase().replace(/-/g, ':');
}

/** The inspection result of what `readHardware` found; pure, so the rules are testable on their own. */
export function inspectionResult(nodeUuid: string, hw: Hardware, existingCapabilities: string | undefined): InspectionResult {
  const properties: Record<string, unknown> = {};
  const inventory: Record<string, unknown> = {};
  const { system } = hw;

  const memory = prop(system, 'MemorySummary');
  const gib = isObject(memory) ? prop(memory, 'TotalSystemMemoryGiB') : undefined;
  if (typeof gib === 'number' && gib > 0) {
    properties.memory_mb = String(gib * 1024);
    inventory.memory = { physical_mb: gib * 1024 };
  }

  const threads = hw.processors.reduce((n, p) => n + (p.totalThreads ?? 0), 0);
  const arch = cpuArch(hw.processors);
  if (threads > 0) properties.cpus = threads;
  if (arch) properties.cpu_arch = arch;
  const cpu: Record<string, unknown> = { count: threads, architecture: arch ?? '' };
  const first = hw.processors[0];
  if (first?.model) cpu.model_name = first.model;
  if (first?.maxSpeedMHz !== null && first?.maxSpeedMHz !== undefined) cpu.frequency = String(first.maxSpeedMHz);
  inventory.cpu = cpu;

  properties.local_gb = String(localGb(hw));
  const disks = hw.storageDrives?.length ? hw.storageDrives : hw.simpleDevices;
  if (disks) inventory.disks = disks.map((d) => ({ name: d.name, size: d.sizeBytes }));

  const interfaces: Array<Record<string, unknown>> = [];
  const macs: string[] = [];
  for (const nic of hw.nics) {
    if (!nic.mac || !MAC.test(nic.mac)) continue;
    const mac = normaliseMac(nic.mac);
    const entry: Record<string, unknown> = { name: nic.id, mac_address: mac };
    if (nic.speedMbps !== null) entry.speed_mbps = Math.trunc(nic.speedMbps);
    interfaces.push(entry);
    // Ports only for the NICs Ironic 21.4 creates them for (redfish utils.get_enabled_macs).
    if (nic.state === 'Enabled' && nic.health === 'OK' && !macs.includes(mac)) macs.push(mac);
  }
  inventory.interfaces = interfaces;

  const vendor: Record<string, string> = {};
  const put = (key: string, v: unknown) => {
    const s = str(v)?.trim();
    if (s) vendor[key] = s;
  };
  put('product_name', prop(system, 'Model'));
  put('serial_number', prop(system, 'SerialNumber'));
  put('manufacturer', prop(system, 'Manufacturer'));
  put('system_uuid', prop(system, 'UUID'));
  if (Object.keys(vendor).length) inventory.system_vendor = vendor;

  const boot = prop(system, 'Boot');
  const mode = isObject(boot) ? BOOT_MODES[str(prop(boot, 'BootSourceOverrideMode')) ?? ''] : undefined;
  if (mode) {
    const caps = parseCapabilities(existingCapabilities);
    if (!caps.get('boot_mode')) {
      caps.set('boot_mode', mode);
      properties.capabilities = [...caps].map(([k, v]) => `${k}:${v}`).join(',');
    }
    inventory.boot = { current_boot_mode: mode };
  }

  if (!interfaces.length) {
    throw new HardwareInspectionFailure(`Inventory for node ${nodeUuid} is invalid: no valid network interfaces`);
  }
  const missing = ESSENTIAL.filter((k) => !(k in properties));
  if (missing.length) {
    throw new HardwareInspectionFailure(`Failed to inspect hardware. Reason: Failed to discover the following properties: ${missing.join(', ')} on node ${nodeUuid}`);
  }
  return { properties, inventory, pluginData: {}, macs };
}

export class RedfishInspect implements InspectInterface {
  constructor(private readonly client: RedfishClient) {}

  /** @throws InvalidDriverInfo */
  validate(driverInfo: Readonly<Record<string, unknown>>): void {
    this.client.parse(driverInfo);
  }

  /** @throws HardwareInspectionFailure | BmcTimeout | BmcUnreachable | BmcAuthFailed | BmcRejected | BmcBadResponse */
  async inspectHardware(ctx: DriverContext, existingCapabilities: string | undefined): Promise<InspectionResult> {
    const hw = await this.client.run(ctx, readHardware);
    const result = inspectionResult(ctx.nodeUuid, hw, existingCapabilities);
    ctx.log.info({ node: ctx.nodeUuid, properties: result.properties, macs: result.macs.length }, 'Redfish inspection done');
    return result;
  }
}
