/**
 * Finding a node's ComputerSystem and the chassis that carry its sensors. What is found is
 * kept per BMC (`Endpoint.memo`), so a steady-state call goes straight to the resource it
 * needs: one GET of the system for a power state, where Ironic 21.4 fetches it three times.
 * Links are always followed, never built from an Id (see the mockups' README).
 */
import { BmcBadResponse, BmcRejected, InvalidDriverInfo } from '../../common/errors.js';
import type { RedfishCall, Resource } from './client.js';
import { isObject, lastSegment, linkPath, linkPaths, prop, samePath, str, type Json } from './odata.js';

/** How long discovered paths are trusted before they are looked up again. */
export const TOPOLOGY_TTL_MS = 10 * 60_000;
/**
 * The same for where a node's sensors are, read every sensor interval: a lookup costs a BMC
 * about five GETs, as much as two or three reads, and a path that stops resolving is forgotten
 * at once anyway (`forgetSystem`). Spread by ±20 % per lookup, so that a fleet discovered in
 * one iteration is not looked up again all in one iteration.
 */
export const SENSOR_TOPOLOGY_TTL_MS = 60 * 60_000;

export interface ChassisInfo {
  id: string;
  path: string;
  thermal: string | null;
  power: string | null;
  sensors: string | null;
}

/** Where a node's sensors are: its system's Id, chassis, and SimpleStorage controllers. */
export interface SensorTopology {
  systemId: string;
  chassis: ChassisInfo[];
  storage: string[];
  /**
   * The query that expands a resource's own subordinate resources (not its Links) one level
   * deep, when the service root advertises it in ProtocolFeaturesSupported.ExpandQuery; else null.
   */
  expand: string | null;
}

/**
 * Whether a call's lookups go one request after the other: when the BMC takes one request at
 * a time anyway (requests queued at its semaphore would only hold their state while they
 * wait), and for periodic reads. A fleet loop's first pass discovers thousands of BMCs at
 * once; in turn, each holds one connection and one answer instead of up to
 * `max_concurrent_requests_per_bmc`, and only the first pass is longer.
 */
export function oneAtATime(call: RedfishCall): boolean {
  return call.endpoint.limit === 1 || call.priority === 'periodic';
}

/** Runs `jobs` at once, or one after the other (oneAtATime). */
export async function inTurn<T>(call: RedfishCall, jobs: Array<() => Promise<T>>): Promise<T[]> {
  if (!oneAtATime(call)) return Promise.all(jobs.map((job) => job()));
  const out: T[] = [];
  for (const job of jobs) out.push(await job());
  return out;
}

function memoKey(call: RedfishCall, what: string): string {
  return `sys:${call.info.systemId ?? ''}:${what}`;
}

/** Drops everything learnt about this node's system (a cached path stopped resolving). */
export function forgetSystem(call: RedfishCall): void {
  call.endpoint.forget(`sys:${call.info.systemId ?? ''}:`);
}

/** True for failures that mean "this resource is not there or not usable", not "the BMC is down". */
export function isMissing(err: unknown): boolean {
  return (err instanceof BmcRejected && err.status !== undefined && err.status >= 400 && err.status < 500 && err.status !== 401 && err.status !== 403) || err instanceof BmcBadResponse;
}

async function discoverSystemPath(call: RedfishCall): Promise<string> {
  const id = call.info.systemId;
  if (id?.startsWith('/')) return linkPath(id) ?? id;
  const coll = await call.get('/redfish/v1/Systems');
  const members = linkPaths(prop(coll.body, 'Members'));
  if (id) {
    const byPath = members.find((p) => lastSegment(p).toLowerCase() === id.toLowerCase());
    if (byPath) return byPath;
    // An Id need not be the last segment of its URI: ask the members.
    const bodies = await Promise.all(members.map((p) => call.get(p).catch(() => null)));
    const hit = bodies.find((b) => b && str(b.body.Id) === id);
    if (hit) return hit.path;
    throw new InvalidDriverInfo(`driver_info/redfish_system_id ${id}: the BMC at ${call.info.origin} has no such system (it has ${members.join(', ') || 'none'}).`);
  }
  if (members.length === 1) return members[0];
  if (members.length === 0) throw new BmcBadResponse(`The BMC at ${call.info.origin} lists no ComputerSystem in /redfish/v1/Systems.`);
  throw new InvalidDriverInfo(`driver_info/redfish_system_id is required: the BMC at ${call.info.origin} manages ${members.length} systems (${members.join(', ')}).`);
}

/** The node's system, read now. A remembered path that no longer resolves is looked up again once. */
export async function getSystem(call: RedfishCall): Promise<Resource> {
  const path = await call.endpoint.memo(memoKey(call, 'path'), TOPOLOGY_TTL_MS, (c) => discoverSystemPath(c), call);
  try {
    return await call.get(path);
  } catch (err) {
    if (!(err instanceof BmcRejected && err.status === 404) || call.info.systemId?.startsWith('/')) throw err;
    forgetSystem(call);
    const again = await call.endpoint.memo(memoKey(call, 'path'), TOPOLOGY_TTL_MS, (c) => discoverSystemPath(c), call);
    return call.get(again);
  }
}

interface ChassisRead extends ChassisInfo {
  systems: string[];
}

async function readChassis(call: RedfishCall, path: string): Promise<ChassisRead | null> {
  try {
    const { body } = await call.get(path);
    const links = prop(body, 'Links');
    return {
      id: str(body.Id) ?? lastSegment(path),
      path,
      thermal: linkPath(prop(body, 'Thermal')),
      power: linkPath(prop(body, 'Power')),
      sensors: linkPath(prop(body, 'Sensors')),
      systems: isObject(links) ? linkPaths(prop(links, 'ComputerSystems')) : [],
    };
  } catch (err) {
    // Intel lists a chassis whose body is an error object; a real BMC answers it with 404.
    if (isMissing(err)) {
      call.log.debug({ bmc: call.info.origin, chassis: path, err: (err as Error).message }, 'Redfish chassis skipped');
      return null;
    }
    throw err;
  }
}

const hasSensors = (c: ChassisRead | null): c is ChassisRead => c !== null && (c.thermal !== null || c.power !== null || c.sensors !== null);

/**
 * The chassis that hold the system's sensors: those of `System.Links.Chassis` that have
 * Thermal, Power or Sensors; failing that, the chassis of the collection that have them and
 * name this system in `Links.ComputerSystems` (or all of them when none names any system).
 */
async function discoverChassis(call: RedfishCall, system: SystemLinks): Promise<ChassisInfo[]> {
  const linked = system.chassis;
  const direct = (await inTurn(call, linked.map((p) => () => readChassis(call, p)))).filter(hasSensors);
  if (direct.length) return direct.map(strip);
  let members: string[] = [];
  try {
    members = linkPaths(prop((await call.get('/redfish/v1/Chassis')).body, 'Members')).filter((p) => !linked.some((l) => samePath(l, p)));
  } catch (err) {
    if (!isMissing(err)) throw err;
  }
  const all = (await inTurn(call, members.map((p) => () => readChassis(call, p)))).filter(hasSensors);
  const mine = all.filter((c) => c.systems.some((s) => samePath(s, system.path)));
  if (mine.length) return mine.map(strip);
  return all.every((c) => c.systems.length === 0) ? all.map(strip) : [];
}

function strip(c: ChassisRead): ChassisInfo {
  return { id: c.id, path: c.path, thermal: c.thermal, power: c.power, sensors: c.sensors };
}

async function discoverStorage(call: RedfishCall, path: string | null): Promise<string[]> {
  if (!path) return [];
  try {
    return linkPaths(prop((await call.get(path)).body, 'Members'));
  } catch (err) {
    if (isMissing(err)) return [];
    throw err;
  }
}

/** `$expand=.` (with `$levels=1` when levels are supported) if the service root advertises it. */
async function discoverExpand(call: RedfishCall): Promise<string | null> {
  let root: Json;
  try {
    root = (await call.get('/redfish/v1')).body;
  } catch (err) {
    if (isMissing(err)) return null;
    throw err;
  }
  const features = prop(root, 'ProtocolFeaturesSupported');
  const q = isObject(features) ? prop(features, 'ExpandQuery') : undefined;
  if (!isObject(q) || prop(q, 'NoLinks') !== true) return null;
  return prop(q, 'Levels') === true ? '$expand=.($levels=1)' : '$expand=.';
}

/** What discovery needs of the system resource. */
interface SystemLinks {
  id: string;
  path: string;
  chassis: string[];
  storage: string | null;
}

/**
 * Where this node's sensors are; looked up on the first read, then remembered. Each step (the
 * system, its chassis, its storage, the service root's features) is remembered on its own, so
 * that a BMC too slow to be discovered within one node_timeout is discovered over several
 * reads rather than never: a read cut short keeps the steps it completed.
 */
export async function sensorTopology(call: RedfishCall): Promise<SensorTopology> {
  const step = <T>(what: string, fetch: (c: RedfishCall) => Promise<T>): Promise<T> =>
    call.endpoint.memo(memoKey(call, `sensors:${what}`), SENSOR_TOPOLOGY_TTL_MS * (0.8 + 0.4 * Math.random()), fetch, call);
  const system = await step('system', async (c): Promise<SystemLinks> => {
    const { path, body } = await getSystem(c);
    const links = prop(body, 'Links');
    return {
      id: str(body.Id) ?? lastSegment(path),
      path,
      chassis: isObject(links) ? linkPaths(prop(links, 'Chassis')) : [],
      storage: linkPath(prop(body, 'SimpleStorage')),
    };
  });
  const chassis = () => step('chassis', (c) => discoverChassis(c, system));
  const storage = () => step('storage', (c) => discoverStorage(c, system.storage));
  const expand = () => step('expand', (c) => discoverExpand(c));
  const [ch, st, ex] = oneAtATime(call)
    ? [await chassis(), await storage(), await expand()]
    : await Promise.all([chassis(), storage(), expand()]);
  return { systemId: system.id, chassis: ch, storage: st, expand: ex };
}

/** The Reset action of a system: its target and the reset types the BMC advertises (null: not said). */
export interface ResetInfo {
  target: string;
  allowed: string[] | null;
}

function strings(v: unknown): string[] | null {
  return Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : null;
}

/** Reads the Reset action; allowed values come inline or from `@Redfish.ActionInfo` (fetched once). */
export async function resetInfo(call: RedfishCall, system: Resource): Promise<ResetInfo> {
  const actions = prop(system.body, 'Actions');
  const reset = isObject(actions) ? prop(actions, '#ComputerSystem.Reset') : undefined;
  const action = isObject(reset) ? reset : {};
  const target = linkPath(action.target) ?? `${system.path}/Actions/ComputerSystem.Reset`;
  const inline = strings(action['ResetType@Redfish.AllowableValues']);
  if (inline) return { target, allowed: inline };
  const infoPath = linkPath(action['@Redfish.ActionInfo']);
  if (!infoPath) return { target, allowed: null };
  const allowed = await call.endpoint.memo(
    memoKey(call, `actioninfo:${infoPath}`),
    TOPOLOGY_TTL_MS,
    async (c) => {
      try {
        const params = prop((await c.get(infoPath)).body, 'Parameters');
        if (Array.isArray(params)) {
          for (const p of params) if (isObject(p) && p.Name === 'ResetType') return strings(p.AllowableValues);
        }
        return null;
      } catch (err) {
        if (isMissing(err)) return null;
        throw err;
      }
    },
    call,
  );
  return { target, allowed };
}
