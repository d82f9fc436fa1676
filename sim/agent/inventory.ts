/**
 * The hardware inventory an agent reports, in IPA's shape (`hardware.list_hardware_info`),
 * read from the same Redfish resources its BMC serves, so in-band and out-of-band inspection
 * of one simulated host agree: the NICs' MACs, CPUs, memory, disks, vendor and boot mode.
 */
import { normalisePath, type SimModel } from '../redfish/model.js';
import type { SystemState } from '../redfish/state.js';

type Json = Record<string, unknown>;

/** IPA's `BlockDevice` serialised. */
export interface InventoryDisk {
  name: string;
  model: string;
  size: number;
  rotational: boolean;
  wwn: string | null;
  serial: string | null;
  vendor: string | null;
  wwn_with_extension: string | null;
  wwn_vendor_extension: string | null;
  hctl: string | null;
  by_path: string | null;
  logical_sectors: number;
  physical_sectors: number;
  tran: string | null;
}

/** What an agent knows of its host. */
export interface HostFacts {
  /** The system's UUID as its BMC reports it (lower case). */
  systemUuid: string;
  macs: string[];
  inventory: Json;
  rootDisk: InventoryDisk | null;
}

function parse(text: string | null): Json | null {
  if (text === null) return null;
  try {
    const v: unknown = JSON.parse(text);
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Json) : null;
  } catch {
    return null;
  }
}

function link(body: Json | null, key: string): string | null {
  const v = body?.[key] as Json | undefined;
  return typeof v?.['@odata.id'] === 'string' ? (v['@odata.id'] as string) : null;
}

function members(model: SimModel, index: number, path: string | null): Json[] {
  if (!path) return [];
  const col = parse(model.get(normalisePath(path), '', index));
  const out: Json[] = [];
  for (const m of (col?.Members as Json[] | undefined) ?? []) {
    const body = typeof m['@odata.id'] === 'string' ? parse(model.get(normalisePath(m['@odata.id'] as string), '', index)) : null;
    if (body) out.push(body);
  }
  return out;
}

const ARCH: Record<string, string> = { 'x86-64': 'x86_64', 'ARM-A64': 'aarch64', 'PowerISA': 'ppc64le', 'IA-64': 'ia64', 'x86': 'i686' };
const CPU_FLAGS = ['fpu', 'vme', 'de', 'pse', 'tsc', 'msr', 'pae', 'mce', 'cx8', 'apic', 'sse', 'sse2', 'ht', 'lm', 'vmx', 'aes', 'avx', 'avx2', 'avx512f'];
const GIB = 1024 ** 3;

function diskName(i: number): string {
  return `/dev/sd${String.fromCharCode(97 + (i % 26))}`;
}

function disks(model: SimModel, index: number, system: Json): InventoryDisk[] {
  const found: Array<{ model: string; size: number; serial: string | null; rotational: boolean; tran: string | null }> = [];
  for (const ss of members(model, index, link(system, 'SimpleStorage'))) {
    for (const d of (ss.Devices as Json[] | undefined) ?? []) {
      if (typeof d.CapacityBytes === 'number') found.push({ model: String(d.Model ?? d.Name ?? ''), size: d.CapacityBytes, serial: null, rotational: false, tran: 'sata' });
    }
  }
  if (!found.length) {
    for (const st of members(model, index, link(system, 'Storage'))) {
      for (const ref of (st.Drives as Json[] | undefined) ?? []) {
        const d = typeof ref['@odata.id'] === 'string' ? parse(model.get(normalisePath(ref['@odata.id'] as string), '', index)) : null;
        if (d && typeof d.CapacityBytes === 'number') {
          found.push({ model: String(d.Model ?? d.Name ?? ''), size: d.CapacityBytes, serial: typeof d.SerialNumber === 'string' ? d.SerialNumber : null, rotational: d.MediaType === 'HDD', tran: typeof d.Protocol === 'string' ? d.Protocol.toLowerCase() : null });
        }
      }
    }
  }
  return found.map((d, i) => ({
    name: diskName(i),
    model: d.model,
    size: d.size,
    rotational: d.rotational,
    wwn: `0x5000c500${(index * 16 + i).toString(16).padStart(8, '0')}`,
    serial: d.serial ?? `SIMDISK${String(index).padStart(6, '0')}${i}`,
    vendor: 'ATA',
    wwn_with_extension: null,
    wwn_vendor_extension: null,
    hctl: `${i}:0:0:0`,
    by_path: `/dev/disk/by-path/pci-0000:00:17.0-ata-${i + 1}`,
    logical_sectors: 512,
    physical_sectors: 4096,
    tran: d.tran,
  }));
}

/** IPA's `guess_root_disk`: the smallest disk of at least 4 GiB. */
function rootDisk(list: InventoryDisk[]): InventoryDisk | null {
  const fit = list.filter((d) => d.size >= 4 * GIB).sort((a, b) => a.size - b.size);
  return fit[0] ?? null;
}

/** Reads what the agent of BMC `index`'s system `sysPath` reports. */
export function hostFacts(model: SimModel, index: number, sysPath: string, state: SystemState, bmcAddress: string): HostFacts {
  const system = parse(model.systemBody(sysPath, state, index)) ?? {};
  const nics = members(model, index, link(system, 'EthernetInterfaces'));
  const interfaces = nics
    .filter((n) => typeof n.MACAddress === 'string' && /^([0-9a-f]{2}:){5}[0-9a-f]{2}$/i.test(n.MACAddress as string))
    .map((n, i) => ({
      name: `eth${i}`,
      mac_address: (n.MACAddress as string).toLowerCase(),
      ipv4_address: `192.0.2.${((index + i) % 250) + 2}`,
      ipv6_address: null,
      has_carrier: n.LinkStatus !== 'LinkDown',
      lldp: null,
      vendor: '0x8086',
      product: '0x158b',
      client_id: null,
      biosdevname: null,
      speed_mbps: typeof n.SpeedMbps === 'number' ? n.SpeedMbps : null,
      pci_address: `0000:3b:00.${i}`,
      driver: 'i40e',
    }));
  const cpus = members(model, index, link(system, 'Processors')).filter((p) => p.ProcessorType === undefined || p.ProcessorType === 'CPU');
  const first = cpus[0] ?? {};
  const summary = (system.ProcessorSummary as Json | undefined) ?? {};
  const threads = cpus.reduce((n, p) => n + (typeof p.TotalThreads === 'number' ? p.TotalThreads : 0), 0);
  const gib = Number((system.MemorySummary as Json | undefined)?.TotalSystemMemoryGiB ?? 0);
  const physicalMb = Math.round(gib * 1024);
  const list = disks(model, index, system);
  const mode = (system.Boot as Json | undefined)?.BootSourceOverrideMode;
  const inventory: Json = {
    interfaces,
    cpu: {
      model_name: String(first.Model ?? summary.Model ?? 'Unknown CPU'),
      frequency: String(first.MaxSpeedMHz ?? ''),
      count: threads || Number(summary.LogicalProcessorCount ?? summary.Count ?? 1),
      architecture: ARCH[String(first.InstructionSet ?? 'x86-64')] ?? 'x86_64',
      flags: CPU_FLAGS,
      socket_count: cpus.length || Number(summary.Count ?? 1),
    },
    disks: list,
    // psutil's total leaves out what the kernel reserves; physical_mb is what DMI reports.
    memory: { total: Math.max(0, physicalMb * 1024 * 1024 - 512 * 1024 * 1024), physical_mb: physicalMb },
    bmc_address: bmcAddress,
    bmc_v6address: '::/0',
    system_vendor: {
      product_name: String(system.Model ?? ''),
      serial_number: String(system.SerialNumber ?? ''),
      manufacturer: String(system.Manufacturer ?? ''),
      firmware: { vendor: String(system.Manufacturer ?? ''), version: String(system.BiosVersion ?? '1.0.0'), build_date: '01/01/2026' },
    },
    boot: { current_boot_mode: mode === 'Legacy' ? 'bios' : 'uefi', pxe_interface: null },
    hostname: `sim-${String(system.SerialNumber ?? index).toLowerCase()}`,
  };
  return { systemUuid: String(system.UUID ?? `00000000-0000-4000-8000-${index.toString(16).padStart(12, '0')}`).toLowerCase(), macs: interfaces.map((i) => i.mac_address), inventory, rootDisk: rootDisk(list) };
}
