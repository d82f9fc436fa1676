/**
 * Reading what out-of-band inspection needs from a ComputerSystem: memory, the Processors
 * collection, SimpleStorage devices, Storage drives and volumes, EthernetInterfaces
 * (the sushy attributes Ironic's redfish inspect interface reads). A linked resource that is
 * missing or broken is treated as absent: inspection then reports what it could not find.
 */
import type { RedfishCall } from './client.js';
import { int, isObject, lastSegment, linkPath, linkPaths, num, prop, str, type Json } from './odata.js';
import { getSystem, inTurn, isMissing } from './system.js';

export interface ProcessorInfo {
  totalThreads: number | null;
  architecture: string | null;
  instructionSet: string | null;
  model: string | null;
  maxSpeedMHz: number | null;
}

export interface NicInfo {
  id: string;
  mac: string | null;
  speedMbps: number | null;
  state: string | null;
  health: string | null;
}

export interface DiskInfo {
  name: string;
  sizeBytes: number | null;
  /** SimpleStorage devices carry a state; only Enabled ones count for local_gb (sushy). */
  state: string | null;
}

/** What was read of one system. */
export interface Hardware {
  system: Json;
  processors: ProcessorInfo[];
  nics: NicInfo[];
  /** SimpleStorage devices, null when the system has no SimpleStorage. */
  simpleDevices: DiskInfo[] | null;
  /** Storage drives and volumes, null when the system has no Storage. */
  storageDrives: DiskInfo[] | null;
  storageVolumes: DiskInfo[] | null;
}

/** GET that answers null for a resource that is not there (404, an error body). */
async function tryGet(call: RedfishCall, path: string): Promise<Json | null> {
  try {
    return (await call.get(path)).body;
  } catch (err) {
    if (isMissing(err)) {
      call.log.debug({ bmc: call.info.origin, path, err: (err as Error).message }, 'Redfish resource skipped during inspection');
      return null;
    }
    throw err;
  }
}

/** The bodies of a collection's members (each link once), or null when the collection is absent. */
async function members(call: RedfishCall, path: string | null): Promise<Json[] | null> {
  if (!path) return null;
  const coll = await tryGet(call, path);
  if (!coll) return null;
  const links = [...new Set(linkPaths(prop(coll, 'Members')))];
  const bodies = await inTurn(call, links.map((l) => () => tryGet(call, l)));
  return bodies.filter((b): b is Json => b !== null);
}

function status(body: Json): { state: string | null; health: string | null } {
  const s = prop(body, 'Status');
  return isObject(s) ? { state: str(prop(s, 'State')), health: str(prop(s, 'Health')) } : { state: null, health: null };
}

function nameOf(body: Json, fallback: string): string {
  return str(prop(body, 'Name')) ?? str(prop(body, 'Id')) ?? fallback;
}

async function readStorage(call: RedfishCall, path: string | null): Promise<{ drives: DiskInfo[]; volumes: DiskInfo[] } | null> {
  const storages = await members(call, path);
  if (!storages) return null;
  const drives: DiskInfo[] = [];
  const volumes: DiskInfo[] = [];
  for (const s of storages) {
    // Intel lists one drive link 32 times.
    const driveLinks = [...new Set(linkPaths(prop(s, 'Drives')))];
    for (const d of await inTurn(call, driveLinks.map((l) => () => tryGet(call, l)))) {
      if (d) drives.push({ name: nameOf(d, 'drive'), sizeBytes: num(prop(d, 'CapacityBytes')), state: status(d).state });
    }
    for (const v of (await members(call, linkPath(prop(s, 'Volumes')))) ?? []) {
      volumes.push({ name: nameOf(v, 'volume'), sizeBytes: num(prop(v, 'CapacityBytes')), state: status(v).state });
    }
  }
  return { drives, volumes };
}

async function readSimpleStorage(call: RedfishCall, path: string | null): Promise<DiskInfo[] | null> {
  const controllers = await members(call, path);
  if (!controllers) return null;
  const devices: DiskInfo[] = [];
  for (const c of controllers) {
    const list = prop(c, 'Devices');
    if (!Array.isArray(list)) continue;
    for (const d of list) {
      if (isObject(d)) devices.push({ name: nameOf(d, 'device'), sizeBytes: num(prop(d, 'CapacityBytes')), state: status(d).state });
    }
  }
  return devices;
}

/** The system's EthernetInterfaces. @throws BmcTimeout | BmcUnreachable | BmcAuthFailed | BmcBadResponse */
export async function readNics(call: RedfishCall, system: Json): Promise<NicInfo[]> {
  return ((await members(call, linkPath(prop(system, 'EthernetInterfaces')))) ?? []).map((e): NicInfo => ({
    id: str(prop(e, 'Id')) ?? lastSegment(str(e['@odata.id']) ?? 'nic'),
    mac: str(prop(e, 'MACAddress')),
    speedMbps: num(prop(e, 'SpeedMbps')),
    ...status(e),
  }));
}

/**
 * Reads the node's system and the collections it links to.
 * @throws BmcTimeout | BmcUnreachable | BmcAuthFailed | BmcRejected (the system itself) | BmcBadResponse
 */
export async function readHardware(call: RedfishCall): Promise<Hardware> {
  const { body: system } = await getSystem(call);
  const processors = ((await members(call, linkPath(prop(system, 'Processors')))) ?? []).map((p): ProcessorInfo => ({
    totalThreads: int(prop(p, 'TotalThreads')),
    architecture: str(prop(p, 'ProcessorArchitecture')),
    instructionSet: str(prop(p, 'InstructionSet')),
    model: str(prop(p, 'Model'))?.trim() || null,
    maxSpeedMHz: num(prop(p, 'MaxSpeedMHz')),
  }));
  const nics = await readNics(call, system);
  const simpleDevices = await readSimpleStorage(call, linkPath(prop(system, 'SimpleStorage')));
  const storage = await readStorage(call, linkPath(prop(system, 'Storage')));
  return { system, processors, nics, simpleDevices, storageDrives: storage?.drives ?? null, storageVolumes: storage?.volumes ?? null };
}
