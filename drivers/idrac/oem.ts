/**
 * The Dell OEM extension of an iDRAC's manager, as Ironic's `idrac-redfish` interfaces reach it
 * through sushy-oem-idrac (ironic/drivers/modules/drac/utils.py `execute_oem_manager_method`):
 * the managers of the node's system, each tried in turn until one succeeds; the Dell services
 * linked from `Links.Oem.Dell`, the OEM actions under `Actions.Oem`, and the jobs the iDRAC
 * answers with a task monitor.
 */
import { DriverError, RedfishError } from '../../common/errors.js';
import { statusError, type RedfishCall, type Reply, type Resource } from '../redfish/client.js';
import { pause } from '../redfish/http.js';
import { isObject, linkPath, linkPaths, messageIds, prop, str, type Json } from '../redfish/odata.js';
import { getSystem } from '../redfish/system.js';

/** Between two reads of a job's task monitor: at once, then backing off to 1 s (sushy-oem-idrac polls every second). */
const JOB_POLL_MS = [100, 200, 500, 1000];

/** The managers of the node's system (`Links.ManagedBy`), read now. */
async function managersOf(call: RedfishCall): Promise<{ system: Resource; managers: Resource[] }> {
  const system = await getSystem(call);
  const links = prop(system.body, 'Links');
  const paths = isObject(links) ? linkPaths(prop(links, 'ManagedBy')) : [];
  const managers: Resource[] = [];
  for (const p of paths) managers.push(await call.get(p));
  return { system, managers };
}

function identity(r: Resource): string {
  return str(r.body.UUID) ?? str(r.body.Id) ?? r.path;
}

/**
 * Runs `fn` on the Dell OEM extension of the system's managers, the first one that succeeds
 * (Ironic's execute_oem_manager_method, with its messages).
 * @throws RedfishError when the system has no manager, one has no Dell extension, or every one failed
 */
export async function onDellManager<T>(call: RedfishCall, node: string, what: string, fn: (manager: Resource) => Promise<T>): Promise<T> {
  const { system, managers } = await managersOf(call);
  if (!managers.length) throw new RedfishError(`System ${identity(system)} has no managers`);
  const errors: string[] = [];
  for (const manager of managers) {
    const oem = prop(manager.body, 'Oem');
    const links = prop(manager.body, 'Links');
    const linksOem = isObject(links) ? prop(links, 'Oem') : undefined;
    const actions = prop(manager.body, 'Actions');
    const actionsOem = isObject(actions) ? prop(actions, 'Oem') : undefined;
    // sushy looks the extension up by the vendor's key in the resource's Oem sections.
    const dell = [oem, linksOem].some((o) => isObject(o) && isObject(prop(o, 'Dell'))) || (isObject(actionsOem) && Object.keys(actionsOem).some((k) => k.includes('OemManager')));
    if (!dell) {
      throw new RedfishError(`Search for the Dell OEM extension of manager ${manager.path} failed for node ${node}: the BMC at ${call.info.origin} shows no Dell OEM section. Is it an iDRAC?`);
    }
    try {
      const result = await fn(manager);
      call.log.info({ bmc: call.info.origin, manager: manager.path, node }, `Completed: ${what}`);
      return result;
    } catch (err) {
      if (!(err instanceof DriverError) || call.signal.aborted) throw err;
      call.log.debug({ bmc: call.info.origin, manager: manager.path, node, err: err.message }, `Failed: ${what}; trying the next manager, if any`);
      errors.push(`Manager ${identity(manager)}: ${err.message}`);
    }
  }
  throw new RedfishError(`In system ${identity(system)} for node ${node} all managers failed: ${what}. Errors: [${errors.map((e) => `'${e}'`).join(', ')}]`);
}

/** The target of an OEM action of the manager whose key ends with `#OemManager.<name>` (sushy-oem-idrac's matching). */
export function oemManagerAction(manager: Resource, name: string): string | null {
  const actions = prop(manager.body, 'Actions');
  const oem = isObject(actions) ? prop(actions, 'Oem') : undefined;
  if (!isObject(oem)) return null;
  const key = Object.keys(oem).find((k) => k.endsWith(`#OemManager.${name}`));
  const action = key ? oem[key] : undefined;
  return isObject(action) ? linkPath(action.target) : null;
}

/**
 * A Dell service linked from the manager (`Links.Oem.Dell.<name>`), read now.
 * @throws RedfishError naming the missing attribute as sushy does (Ironic matches "Oem/Dell/<name> is missing")
 */
export async function dellService(call: RedfishCall, manager: Resource, name: string): Promise<Resource> {
  const links = prop(manager.body, 'Links');
  const oem = isObject(links) ? prop(links, 'Oem') : undefined;
  const dell = isObject(oem) ? prop(oem, 'Dell') : undefined;
  const path = isObject(dell) ? linkPath(prop(dell, name)) : null;
  if (!path) throw new RedfishError(`The attribute Links/Oem/Dell/${name} is missing from the resource ${manager.path}`);
  return call.get(path);
}

/** The target of one of a Dell service's actions (`#<Service>.<Action>`). @throws RedfishError when it has none */
export function serviceAction(service: Resource, name: string): string {
  const actions = prop(service.body, 'Actions');
  const action = isObject(actions) ? prop(actions, name) : undefined;
  const target = isObject(action) ? linkPath(action.target) : null;
  if (!target) throw new RedfishError(`The attribute Actions/${name}/target is missing from the resource ${service.path}`);
  return target;
}

/** The MessageIds of an iDRAC's error answer (`IDRAC.2.8.LC068`, …). */
export function idracMessageIds(r: Reply): string[] {
  return messageIds(r.json());
}

function location(r: Reply): string | null {
  const raw = r.headers.location;
  const v = Array.isArray(raw) ? raw[0] : raw;
  if (!v) return null;
  try {
    return new URL(v, 'http://bmc').pathname;
  } catch {
    return null;
  }
}

/**
 * Follows an accepted request's task monitor until it stops answering 202 (sushy-oem-idrac's
 * asynchronous.http_call), then checks how the job ended: a job or task that failed is an
 * error with the iDRAC's message, where sushy-oem-idrac would not look.
 * @throws RedfishError | BmcTimeout | DriverError
 */
export async function followJob(call: RedfishCall, accepted: Reply, what: string): Promise<Json | null> {
  let r = accepted;
  let monitor = location(r);
  for (let i = 0; r.status === 202; i++) {
    monitor = location(r) ?? monitor;
    if (!monitor) throw new RedfishError(`${what}: the BMC answered 202 without a Location to follow`);
    await pause(JOB_POLL_MS[Math.min(i, JOB_POLL_MS.length - 1)], call, `${what}: waiting for ${monitor}`);
    r = await call.send('GET', monitor);
  }
  if (r.status >= 400) throw statusError(r, `${what} (${monitor ?? 'no task monitor'})`);
  const body = r.json();
  if (!body) return null;
  const state = str(body.JobState) ?? str(body.TaskState);
  if (state && ['Failed', 'Exception', 'Killed', 'Cancelled', 'CompletedWithErrors'].includes(state)) {
    const messages = Array.isArray(body.Messages) ? body.Messages.map((m) => (isObject(m) ? str(m.Message) : null)).filter(Boolean) : [];
    throw new RedfishError(`${what} failed: job ${str(body.Id) ?? monitor ?? ''} ended ${state}: ${str(body.Message) ?? messages.join(', ')}`);
  }
  return body;
}

/** Sleeps `ms` unless the call's deadline comes first (then false). */
export async function waitWithin(call: RedfishCall, ms: number, what: string): Promise<boolean> {
  if (Date.now() + ms >= call.deadline) return false;
  await pause(ms, call, what);
  return true;
}
