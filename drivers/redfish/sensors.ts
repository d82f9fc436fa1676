/**
 * One sensor read: the remembered chassis' Thermal and Power (or their Sensors collection when
 * they have neither) and the system's SimpleStorage controllers, all requested at once within
 * the per-BMC limit. Where the service root advertises `$expand=.`, a chassis' Thermal and
 * Power come inline in one GET of the chassis. Steady state: one GET per chassis (two without
 * $expand) plus one per storage controller, in one round trip; Ironic 21.4 makes 6 strictly
 * sequential GETs.
 */
import { BmcBadResponse } from '../../common/errors.js';
import type { SensorData } from '../interfaces.js';
import { statusError, type RedfishCall } from './client.js';
import { isObject, linkPaths, prop, type Json } from './odata.js';
import { emptySensorData, parsePower, parseSensors, parseSimpleStorage, parseThermal } from './sensor-parse.js';
import { forgetSystem, isMissing, sensorTopology, type ChassisInfo } from './system.js';

/** Asks for the members inline; DMTF's README: avoids 41-120 round trips where supported. */
const EXPAND = '$expand=.($levels=1)';

/**
 * GETs a resource that may have gone: null (and a rediscovery next time) instead of an error.
 * A garbled answer is not a missing resource: it fails the read, so that a BMC sending
 * garbage is counted as such instead of reporting no sensors.
 */
async function optionalGet(call: RedfishCall, path: string): Promise<Json | null> {
  try {
    return (await call.get(path)).body;
  } catch (err) {
    if (!isMissing(err) || err instanceof BmcBadResponse) throw err;
    call.log.debug({ bmc: call.info.origin, path, err: (err as Error).message }, 'Redfish sensor resource skipped');
    forgetSystem(call);
    return null;
  }
}

/**
 * GETs `path` with an $expand query: the body when the BMC answers it with 2xx, null when it
 * refuses the query (any other 4xx). @throws on 401/403, 5xx and a body that is not JSON, as any GET would
 */
async function getExpanded(call: RedfishCall, path: string, query: string): Promise<Json | null> {
  const r = await call.send('GET', `${path}?${query}`);
  if (r.status >= 200 && r.status < 300) {
    const body = r.json();
    if (!body) throw new BmcBadResponse(`Redfish GET ${call.info.origin}${path}?${query}: the answer is not a JSON object (${JSON.stringify(r.text.slice(0, 60))})`);
    return body;
  }
  if (r.status === 401 || r.status === 403 || r.status >= 500) throw statusError(r, `Redfish GET ${call.info.origin}${path}`);
  return null;
}

/** A subordinate resource given inline (expanded), not as a bare link. */
function inline(v: unknown): Json | null {
  return isObject(v) && Object.keys(v).some((k) => !k.startsWith('@odata.')) ? v : null;
}

async function readSensorCollection(call: RedfishCall, path: string): Promise<Json[]> {
  const ep = call.endpoint;
  if (!ep.noExpand) {
    const body = await getExpanded(call, path, EXPAND);
    if (body) {
      const items = prop(body, 'Members');
      const list = Array.isArray(items) ? items.filter(isObject) : [];
      // A server that ignores $expand sends bare links: fetch them one by one from now on.
      if (list.every((m) => Object.keys(m).some((k) => k !== '@odata.id'))) return list;
      ep.noExpand = true;
      return fetchMembers(call, linkPaths(list));
    }
    ep.noExpand = true;
  }
  const coll = await optionalGet(call, path);
  return coll ? fetchMembers(call, linkPaths(prop(coll, 'Members'))) : [];
}

async function fetchMembers(call: RedfishCall, paths: string[]): Promise<Json[]> {
  const bodies = await Promise.all(paths.map((p) => optionalGet(call, p)));
  return bodies.filter((b): b is Json => b !== null);
}

/** Thermal and Power inline in one GET of the chassis; false when the BMC did not expand them. */
async function readChassisExpanded(call: RedfishCall, c: ChassisInfo, query: string, out: SensorData): Promise<boolean> {
  const body = await getExpanded(call, c.path, query);
  const thermal = body && inline(prop(body, 'Thermal'));
  const power = body && inline(prop(body, 'Power'));
  if ((c.thermal && !thermal) || (c.power && !power)) return false;
  if (thermal) parseThermal(thermal, c.id, out);
  if (power) parsePower(power, c.id, out);
  return true;
}

async function readChassis(call: RedfishCall, c: ChassisInfo, expand: string | null, out: SensorData): Promise<void> {
  if (c.thermal || c.power) {
    if (expand && !call.endpoint.noChassisExpand) {
      if (await readChassisExpanded(call, c, expand, out)) return;
      // Advertised but not done: the separate GETs from now on.
      call.endpoint.noChassisExpand = true;
    }
    const [thermal, power] = await Promise.all([c.thermal ? optionalGet(call, c.thermal) : null, c.power ? optionalGet(call, c.power) : null]);
    if (thermal) parseThermal(thermal, c.id, out);
    if (power) parsePower(power, c.id, out);
    return;
  }
  if (c.sensors) parseSensors(await readSensorCollection(call, c.sensors), c.id, out);
}

/**
 * Reads the node's sensors into Ironic's structure.
 * @throws BmcTimeout | BmcUnreachable | BmcAuthFailed | BmcRejected | BmcBadResponse
 */
export async function readSensors(call: RedfishCall): Promise<SensorData> {
  const topo = await sensorTopology(call);
  const out = emptySensorData();
  const jobs: Array<() => Promise<void>> = topo.chassis.map((c) => () => readChassis(call, c, topo.expand, out));
  for (const s of topo.storage) {
    jobs.push(async () => {
      const body = await optionalGet(call, s);
      if (body) parseSimpleStorage(body, topo.systemId, out);
    });
  }
  if (call.endpoint.limit === 1) {
    // One request at a time anyway: issued one after the other, the others hold no state while they wait.
    for (const job of jobs) await job();
    return out;
  }
  // Wait for every request before failing, so none outlives the call.
  const results = await Promise.allSettled(jobs.map((job) => job()));
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
  return out;
}
