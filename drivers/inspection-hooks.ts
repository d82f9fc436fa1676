/**
 * Ironic's inspection hooks for in-band (agent) inspection: what the inventory an agent posts
 * to `/v1/continue_inspection` changes on its node (ironic/drivers/modules/inspector/hooks/,
 * run as inspect_utils.run_inspection_hooks runs them: every hook's preprocess, then every
 * hook). Pure: it reads the node and its ports and says what to write; the conductor writes it.
 * Messages are Ironic's, Python reprs included, since operators and tools match on them.
 */
import { ConfigError, HardwareInspectionFailure } from '../common/errors.js';
import { expandHooks, hooksProblem } from '../common/inspection-hook-list.js';

export type AddPorts = 'all' | 'active' | 'pxe' | 'disabled';
export type KeepPorts = 'all' | 'present' | 'added';

/** The `[inspector]` options the hooks read. */
export interface HookOptions {
  hooks: readonly string[];
  addPorts: AddPorts;
  keepPorts: KeepPorts;
  updatePxeEnabled: boolean;
  diskPartitioningSpacing: boolean;
}

/**
 * `[inspector] hooks` with `$default_hooks` expanded. The config schema refuses a list Ironic
 * would not load (common/inspection-hook-list.ts), so a config from loadConfig always passes.
 * @throws ConfigError naming what is wrong, for a config made some other way
 */
export function parseHooks(hooks: string, defaultHooks: string): string[] {
  const names = expandHooks(hooks, defaultHooks);
  const problem = hooksProblem(names);
  if (problem !== undefined) throw new ConfigError([`[inspector] hooks: ${problem}`]);
  return names;
}

/** A port of the node as the hooks see it. */
export interface ExistingPort {
  id: number;
  address: string;
  pxeEnabled: boolean;
  extra: Record<string, unknown>;
}

/** What processing an inventory changes. */
export interface HooksOutcome {
  /** The node's properties after the hooks (the whole object). */
  properties: Record<string, unknown>;
  /** Plugin data as Ironic stores it after processing (with all_interfaces, valid_interfaces, macs…). */
  pluginData: Record<string, unknown>;
  /** Ports to create unless their MAC has one already (on any node). */
  createPorts: Array<{ address: string; pxeEnabled: boolean; extra: Record<string, unknown> }>;
  deletePortIds: number[];
  updatePorts: Array<{ id: number; pxeEnabled?: boolean; extra?: Record<string, unknown> }>;
}

type Obj = Record<string, unknown>;

const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Python's repr of a JSON value, as Ironic's messages interpolate them. */
export function pyRepr(v: unknown): string {
  if (v === null || v === undefined) return 'None';
  if (v === true) return 'True';
  if (v === false) return 'False';
  if (typeof v === 'string') return `'${v.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
  if (Array.isArray(v)) return `[${v.map(pyRepr).join(', ')}]`;
  if (isObj(v)) return `{${Object.entries(v).map(([k, x]) => `${pyRepr(k)}: ${pyRepr(x)}`).join(', ')}}`;
  return String(v);
}

/** A hook's failure other than HardwareInspectionFailure, with the Python class Ironic names. */
class HookError extends Error {
  constructor(readonly pyClass: string, message: string) {
    super(message);
  }
}

const invalidInventory = (uuid: string, reason: string) => new HookError('InvalidNodeInventory', `Inventory for node ${uuid} is invalid: ${reason}`);
/** HardwareInspectionFailure's text (its _msg_fmt). */
const inspectionFailure = (error: string) => `Failed to inspect hardware. Reason: ${error}`;

const MAC = /^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/;

function normalizeMac(mac: string): string {
  return mac.toLowerCase();
}

/** The PXE NIC's MAC from inventory.boot.pxe_interface (pxelinux's 01-aa-bb-… form too). */
function pxeMac(inventory: Obj): string | null {
  const boot = isObj(inventory.boot) ? inventory.boot : {};
  let mac = typeof boot.pxe_interface === 'string' && boot.pxe_interface ? boot.pxe_interface : null;
  if (mac && mac.includes('-')) mac = mac.split('-').slice(1).join('-').replace(/-/g, ':');
  return mac ? normalizeMac(mac) : null;
}

function isLoopback(ip: string): boolean {
  return /^127\./.test(ip) || ip === '::1';
}

interface Iface extends Obj {
  mac_address: string;
  pxe_enabled: boolean;
}

/** validate-interfaces' get_interfaces: the named interfaces with a valid MAC. */
function getInterfaces(uuid: string, inventory: Obj): Record<string, Iface> {
  const pxe = pxeMac(inventory);
  if (!Array.isArray(inventory.interfaces)) throw invalidInventory(uuid, 'no interfaces present in inventory');
  const out: Record<string, Iface> = {};
  for (const iface of inventory.interfaces) {
    if (!isObj(iface) || !iface.name || typeof iface.name !== 'string') continue;
    const raw = iface.mac_address;
    if (!raw || typeof raw !== 'string') continue;
    const mac = normalizeMac(raw);
    if (!MAC.test(mac)) continue;
    let v6 = iface.ipv6_address;
    if (typeof v6 === 'string' && v6.includes('%')) v6 = v6.split('%')[0];
    out[iface.name] = { ...iface, mac_address: mac, pxe_enabled: mac === pxe, ipv6_address: v6 ?? null };
  }
  return out;
}

/** validate-interfaces' validate_interfaces: those [inspector] add_ports selects. */
function validInterfaces(uuid: string, inventory: Obj, all: Record<string, Iface>, addPorts: AddPorts): Record<string, Iface> {
  if (Object.keys(all).length === 0) throw invalidInventory(uuid, 'no valid network interfaces');
  const pxe = pxeMac(inventory);
  const out: Record<string, Iface> = {};
  for (const [name, iface] of Object.entries(all)) {
    const ip = (iface.ipv4_address || iface.ipv6_address) as string | null | undefined;
    if (name === 'lo' || (ip && isLoopback(ip))) continue;
    if (addPorts === 'pxe' && pxe && !iface.pxe_enabled) continue;
    if (addPorts === 'active' && !ip) continue;
    out[name] = { ...iface };
  }
  if (Object.keys(out).length === 0) throw invalidInventory(uuid, `no network interfaces match the configuration (add_ports set to "${addPorts}")`);
  return out;
}

/** Ironic's get_updated_capabilities: `k:v,…` with the new values set (existing keys keep their place). */
function updatedCapabilities(current: unknown, updates: Record<string, string>): string {
  const caps = new Map<string, string>();
  if (typeof current === 'string') {
    for (const piece of current.split(',')) {
      if (!piece.trim()) continue;
      const i = piece.indexOf(':');
      caps.set(i < 0 ? piece : piece.slice(0, i), i < 0 ? '' : piece.slice(i + 1));
    }
  }
  for (const [k, v] of Object.entries(updates)) caps.set(k, v);
  return [...caps].map(([k, v]) => `${k}:${v}`).join(',');
}

const GIB = 2 ** 30;

/** The disks of the inventory that match every root device hint given (the common hints, exactly). */
function matchRootDevice(disks: Obj[], hints: Obj): Obj | undefined {
  return disks.find((d) => Object.entries(hints).every(([k, want]) => {
    if (k === 'size') return typeof d.size === 'number' && Math.trunc(d.size / GIB) === Number(want);
    if (k === 'name') return d.name === want || d.name === `/dev/${String(want)}` || `/dev/${String(d.name)}` === want;
    if (typeof d[k] === 'string' && typeof want === 'string') return (d[k] as string).toLowerCase() === want.toLowerCase();
    return d[k] === want;
  }));
}

/**
 * Runs the configured hooks over an inventory.
 * @throws HardwareInspectionFailure with run_inspection_hooks' message ("Failed to inspect hardware. Reason: …")
 */
export function runInspectionHooks(
  node: { uuid: string; properties: Readonly<Obj> },
  inventory: Obj,
  pluginDataIn: Obj,
  ports: readonly ExistingPort[],
  opts: HookOptions,
): HooksOutcome {
  const uuid = node.uuid;
  const properties: Obj = { ...node.properties };
  const pluginData: Obj = { ...pluginDataIn };
  const out: HooksOutcome = { properties, pluginData, createPorts: [], deletePortIds: [], updatePorts: [] };

  // Every preprocess runs; their failures are reported together.
  const failures: string[] = [];
  for (const hook of opts.hooks) {
    try {
      if (hook === 'ramdisk-error' && pluginData.error) {
        throw new HardwareInspectionFailure(inspectionFailure(`Ramdisk reported error: ${String(pluginData.error)}`));
      }
      if (hook === 'validate-interfaces') {
        const all = getInterfaces(uuid, inventory);
        const valid = validInterfaces(uuid, inventory, all, opts.addPorts);
        pluginData.all_interfaces = all;
        pluginData.valid_interfaces = valid;
        pluginData.macs = Object.values(valid).map((i) => i.mac_address);
      }
    } catch (err) {
      failures.push(err instanceof HookError
        ? `Unexpected exception ${err.pyClass} during preprocess hook ${hook}: ${err.message}`
        : `Error in preprocess hook ${hook}: ${(err as Error).message}`);
    }
  }
  if (failures.length) {
    throw new HardwareInspectionFailure(inspectionFailure(`The following failures happened while running preprocess hooks for node ${uuid}:\n${failures.join('\n')}`));
  }

  try {
    for (const hook of opts.hooks) {
      if (hook === 'ports') portsHook(out, ports, opts);
      if (hook === 'architecture') {
        const cpu = inventory.cpu;
        if (!isObj(cpu) || !('architecture' in cpu)) {
          throw invalidInventory(uuid, `Inventory has malformed or missing CPU architecture information: ${pyRepr(cpu)} for node ${uuid}.`);
        }
        properties.cpu_arch = cpu.architecture;
      }
      if (hook === 'memory') {
        const mem = inventory.memory;
        if (!isObj(mem) || !('physical_mb' in mem)) {
          throw invalidInventory(uuid, `Inventory has missing memory information: ${pyRepr(mem)} for node ${uuid}.`);
        }
        properties.memory_mb = mem.physical_mb;
      }
      if (hook === 'cpus') {
        const count = Math.trunc(Number((isObj(inventory.cpu) ? inventory.cpu.count : 0) ?? 0));
        if (Number.isFinite(count) && count !== 0) properties.cpus = count;
      }
      if (hook === 'boot-mode') {
        const mode = isObj(inventory.boot) ? inventory.boot.current_boot_mode : undefined;
        if (mode !== undefined && mode !== null) properties.capabilities = updatedCapabilities(properties.capabilities, { boot_mode: String(mode) });
      }
      if (hook === 'root-device') rootDeviceHook(uuid, properties, inventory, pluginData, opts);
    }
  } catch (err) {
    if (err instanceof HardwareInspectionFailure) throw err;
    const cls = err instanceof HookError ? err.pyClass : (err as Error).name;
    throw new HardwareInspectionFailure(inspectionFailure(`Unexpected exception ${cls} during processing for node: ${uuid}. Error: ${(err as Error).message}`));
  }
  return out;
}

/** The ports hook: add_ports' creations, then keep_ports' deletions and the pxe_enabled/client-id updates. */
function portsHook(out: HooksOutcome, ports: readonly ExistingPort[], opts: HookOptions): void {
  const all = out.pluginData.all_interfaces as Record<string, Iface>;
  const valid = out.pluginData.valid_interfaces as Record<string, Iface>;
  const validMacs = out.pluginData.macs as string[];
  if (opts.addPorts !== 'disabled') {
    for (const iface of Object.values(valid)) {
      const extra: Obj = iface.client_id ? { 'client-id': iface.client_id } : {};
      out.createPorts.push({ address: iface.mac_address, pxeEnabled: iface.pxe_enabled, extra });
    }
  }
  const expected = opts.keepPorts === 'present' ? new Set(Object.values(all).map((i) => i.mac_address))
    : opts.keepPorts === 'added' ? new Set(validMacs) : null;
  const pxeMacs = new Set(Object.values(all).filter((i) => i.pxe_enabled).map((i) => i.mac_address));
  const clientIds = new Map(Object.values(all).map((i) => [i.mac_address, i.client_id as string | undefined]));
  for (const port of ports) {
    // An empty expectation keeps every port, as Ironic's `if expected_macs and …` does.
    if (expected && expected.size && !expected.has(port.address)) {
      out.deletePortIds.push(port.id);
      continue;
    }
    const change: { id: number; pxeEnabled?: boolean; extra?: Obj } = { id: port.id };
    if (opts.updatePxeEnabled && pxeMacs.has(port.address) !== port.pxeEnabled) change.pxeEnabled = pxeMacs.has(port.address);
    const cid = clientIds.get(port.address);
    if (cid && cid !== port.extra['client-id']) change.extra = { ...port.extra, 'client-id': cid };
    if (change.pxeEnabled !== undefined || change.extra) out.updatePorts.push(change);
  }
}

/** The root-device hook: the disk the hints name (or the agent's root_disk), its size in GiB as local_gb. */
function rootDeviceHook(uuid: string, properties: Obj, inventory: Obj, pluginData: Obj, opts: HookOptions): void {
  const hints = properties.root_device;
  if (isObj(hints) && Object.keys(hints).length) {
    const disks = Array.isArray(inventory.disks) ? inventory.disks.filter(isObj) : [];
    const found = matchRootDevice(disks, hints);
    if (!found) throw new HardwareInspectionFailure(inspectionFailure(`No disks satisfied root device hints for node ${uuid}`));
    pluginData.root_disk = found;
  }
  const root = pluginData.root_disk;
  let localGb = 0;
  if (isObj(root)) {
    localGb = Math.floor(Number(root.size) / GIB) || 0;
    if (localGb && opts.diskPartitioningSpacing) localGb -= 1;
  }
  pluginData.local_gb = localGb;
  properties.local_gb = localGb;
}
