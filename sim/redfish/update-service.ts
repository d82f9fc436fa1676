/**
 * The UpdateService of a simulated BMC: a FirmwareInventory (BIOS, BMC, a NIC), the
 * `#UpdateService.SimpleUpdate` action and the TaskService's tasks that follow it. As real
 * BMCs do, the BMC fetches the image from ImageURI itself (an image server's 404 ends the
 * task in Exception with the BMC's message), a BMC image takes effect as soon as it is
 * applied and a BIOS or NIC image only at the system's next boot.
 *
 * A firmware image here is a JSON document naming the inventory member it is for and the
 * version it carries: `{"Component": "BIOS", "Version": "2.1.0"}`. Anything else is refused
 * as a real BMC refuses a package for another device.
 *
 * Served only where the model has no UpdateService of its own (the synthetic model): a
 * recorded mockup's UpdateService stays the static body it was recorded as.
 */
import type { SimModel } from './model.js';
import { parseJsonObject, redfishError, type SimBmc } from './state.js';
import type { Reply } from './vmedia.js';

const V1 = '/redfish/v1';
const SERVICE = `${V1}/UpdateService`;
const INVENTORY = `${SERVICE}/FirmwareInventory`;
const SIMPLE_UPDATE = `${SERVICE}/Actions/UpdateService.SimpleUpdate`;
const TASK_SERVICE = `${V1}/TaskService`;
const TASKS = `${TASK_SERVICE}/Tasks`;
const TRANSFER_PROTOCOLS = ['CIFS', 'FTP', 'SFTP', 'HTTP', 'HTTPS', 'NFS', 'SCP', 'TFTP', 'OEM'];
const FETCH_TIMEOUT_MS = 10_000;
/** How long flashing takes once the image is fetched: long enough to be seen Running. */
const APPLY_MS = 300;
/** Tasks kept per BMC; the oldest ended ones go first. */
const TASK_LIMIT = 32;

/** When a component's new image takes effect. */
type Activation = 'Immediate' | 'OnReset';

interface Component {
  id: string;
  name: string;
  version: string;
  activation: Activation;
  related: string;
}

/** The inventory a simulated server starts with; the synthetic model shows the same versions. */
export const SIM_FIRMWARE: readonly Component[] = [
  { id: 'BIOS', name: 'System BIOS', version: '1.0.0', activation: 'OnReset', related: `${V1}/Systems/System.Embedded.1/Bios` },
  { id: 'BMC', name: 'BMC Firmware', version: '1.0.0-sim', activation: 'Immediate', related: `${V1}/Managers/BMC` },
  { id: 'NIC.Slot.1', name: 'Network Adapter Firmware', version: '22.31.6', activation: 'OnReset', related: `${V1}/Chassis/Enclosure` },
];
export const SIM_BIOS_VERSION = SIM_FIRMWARE[0].version;
export const SIM_BMC_VERSION = SIM_FIRMWARE[1].version;

interface Message {
  MessageId: string;
  Message: string;
  MessageArgs: string[];
  Severity: 'OK' | 'Warning' | 'Critical';
}

interface Task {
  id: string;
  state: 'New' | 'Running' | 'Completed' | 'Exception';
  status: 'OK' | 'Warning' | 'Critical';
  percent: number;
  start: string;
  end?: string;
  messages: Message[];
  image: string;
}

/** One BMC's firmware: what runs, what waits for the next boot, and its tasks. */
interface FirmwareState {
  versions: Map<string, string>;
  pending: Map<string, string>;
  tasks: Map<string, Task>;
  nextTask: number;
}

function message(id: string, text: string, args: string[], severity: Message['Severity']): Message {
  return { MessageId: `Update.1.0.${id}`, Message: text, MessageArgs: args, Severity: severity };
}

function json(status: number, body: object, headers?: Record<string, string>): Reply {
  return { status, body: JSON.stringify(body), headers };
}

function error(status: number, id: string, text: string): Reply {
  return { status, body: redfishError(id, text) };
}

const ref = (p: string) => ({ '@odata.id': p });

export class UpdateService {
  private readonly state = new WeakMap<SimBmc, FirmwareState>();
  /** Whether this simulator serves the UpdateService (the model has none of its own). */
  readonly active: boolean;

  constructor(private readonly model: SimModel) {
    this.active = model.get(SERVICE.toLowerCase(), '', 0) === null;
  }

  /** Whether a normalised path is ours to answer. */
  owns(p: string): boolean {
    return this.active && (p === '/redfish/v1/updateservice' || p.startsWith('/redfish/v1/updateservice/') || p === '/redfish/v1/taskservice' || p.startsWith('/redfish/v1/taskservice/'));
  }

  private of(bmc: SimBmc): FirmwareState {
    let s = this.state.get(bmc);
    if (!s) {
      const versions = new Map(SIM_FIRMWARE.map((c) => [c.id, c.version]));
      if (this.model.bmcFirmwareVersion) versions.set('BMC', this.model.bmcFirmwareVersion);
      s = { versions, pending: new Map(), tasks: new Map(), nextTask: 1 };
      this.state.set(bmc, s);
    }
    return s;
  }

  async route(bmc: SimBmc, method: string, p: string, body: string): Promise<Reply> {
    if (p === SIMPLE_UPDATE.toLowerCase()) {
      if (method !== 'POST') return { ...error(405, 'OperationNotAllowed', 'Actions need POST'), headers: { allow: 'POST' } };
      return this.simpleUpdate(bmc, body);
    }
    if (method !== 'GET') return { ...error(405, 'OperationNotAllowed', `${method} is not allowed on ${p}`), headers: { allow: 'GET' } };
    const s = this.of(bmc);
    if (p === SERVICE.toLowerCase()) return json(200, this.serviceBody());
    if (p === INVENTORY.toLowerCase()) {
      return json(200, { '@odata.type': '#SoftwareInventoryCollection.SoftwareInventoryCollection', '@odata.id': INVENTORY, Name: 'Firmware Inventory Collection', 'Members@odata.count': SIM_FIRMWARE.length, Members: SIM_FIRMWARE.map((c) => ref(`${INVENTORY}/${c.id}`)) });
    }
    const c = SIM_FIRMWARE.find((x) => `${INVENTORY}/${x.id}`.toLowerCase() === p);
    if (c) return json(200, this.inventoryBody(s, c));
    if (p === TASK_SERVICE.toLowerCase()) {
      return json(200, { '@odata.type': '#TaskService.v1_2_0.TaskService', '@odata.id': TASK_SERVICE, Id: 'TaskService', Name: 'Task Service', ServiceEnabled: true, CompletedTaskOverWritePolicy: 'Oldest', Status: { State: 'Enabled', Health: 'OK' }, Tasks: ref(TASKS) });
    }
    if (p === TASKS.toLowerCase()) {
      const members = [...s.tasks.keys()].map((id) => ref(`${TASKS}/${id}`));
      return json(200, { '@odata.type': '#TaskCollection.TaskCollection', '@odata.id': TASKS, Name: 'Task Collection', 'Members@odata.count': members.length, Members: members });
    }
    const t = p.startsWith(`${TASKS.toLowerCase()}/`) ? s.tasks.get(p.slice(TASKS.length + 1)) : undefined;
    if (t) return json(200, taskBody(t));
    return error(404, 'ResourceMissingAtURI', `The resource at the URI ${p} was not found.`);
  }

  private serviceBody(): object {
    return {
      '@odata.type': '#UpdateService.v1_11_2.UpdateService',
      '@odata.id': SERVICE,
      Id: 'UpdateService',
      Name: 'Update Service',
      Status: { State: 'Enabled', Health: 'OK' },
      ServiceEnabled: true,
      FirmwareInventory: ref(INVENTORY),
      Actions: {
        '#UpdateService.SimpleUpdate': { target: SIMPLE_UPDATE, 'TransferProtocol@Redfish.AllowableValues': ['HTTP', 'HTTPS'] },
      },
    };
  }

  private inventoryBody(s: FirmwareState, c: Component): object {
    return {
      '@odata.type': '#SoftwareInventory.v1_9_0.SoftwareInventory',
      '@odata.id': `${INVENTORY}/${c.id}`,
      Id: c.id,
      Name: c.name,
      Status: { State: 'Enabled', Health: 'OK' },
      Updateable: true,
      Manufacturer: 'Galvanic',
      Version: s.versions.get(c.id),
      RelatedItem: [ref(c.related)],
    };
  }

  private simpleUpdate(bmc: SimBmc, raw: string): Reply {
    const args = parseJsonObject(raw);
    if (!args) return error(400, 'MalformedJSON', 'The request body submitted was malformed JSON.');
    const uri = args.ImageURI;
    if (uri === undefined) return error(400, 'ActionParameterMissing', 'The action UpdateService.SimpleUpdate requires the parameter ImageURI to be present in the request body.');
    if (typeof uri !== 'string' || !uri) return error(400, 'ActionParameterValueTypeError', `The value ${JSON.stringify(uri)} for the parameter ImageURI in the action UpdateService.SimpleUpdate is of a different type than the parameter can accept.`);
    const protocol = args.TransferProtocol;
    if (protocol !== undefined && (typeof protocol !== 'string' || !TRANSFER_PROTOCOLS.includes(protocol))) {
      return error(400, 'ActionParameterValueNotInList', `The value ${JSON.stringify(protocol)} for the parameter TransferProtocol in the action UpdateService.SimpleUpdate is not in the list of acceptable values.`);
    }
    const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(uri)?.[1].toUpperCase();
    const via = (protocol as string | undefined) ?? scheme;
    if (via !== 'HTTP' && via !== 'HTTPS') {
      return error(400, 'ActionParameterNotSupported', `The parameter TransferProtocol with value ${JSON.stringify(via ?? null)} is not supported by the action UpdateService.SimpleUpdate: this service fetches images over HTTP or HTTPS only.`);
    }
    const targets = args.Targets;
    if (targets !== undefined && (!Array.isArray(targets) || targets.some((t) => typeof t !== 'string' || !this.model.systemPaths.has(t.toLowerCase())))) {
      return error(400, 'ActionParameterValueError', `The value ${JSON.stringify(targets)} for the parameter Targets in the action UpdateService.SimpleUpdate is invalid.`);
    }
    const s = this.of(bmc);
    const id = String(s.nextTask++);
    const task: Task = { id, state: 'Running', status: 'OK', percent: 0, start: new Date().toISOString(), messages: [message('TransferringToComponent', `Image '${uri}' is being transferred.`, [uri], 'OK')], image: uri };
    s.tasks.set(id, task);
    for (const [old, t] of s.tasks) {
      if (s.tasks.size <= TASK_LIMIT) break;
      if (t.state !== 'Running') s.tasks.delete(old);
    }
    bmc.event('firmware-task', { task: id, image: uri, state: task.state });
    void this.carryOut(bmc, s, task);
    return json(202, taskBody(task), { location: `${TASKS}/${id}` });
  }

  /** The BMC's side of an update: fetch, check, flash, and stage or activate. */
  private async carryOut(bmc: SimBmc, s: FirmwareState, task: Task): Promise<void> {
    const end = (state: 'Completed' | 'Exception', msg: Message) => {
      task.state = state;
      task.status = state === 'Completed' ? 'OK' : 'Critical';
      task.percent = 100;
      task.end = new Date().toISOString();
      task.messages.push(msg);
      bmc.event('firmware-task', { task: task.id, image: task.image, state, message: msg.Message });
    };
    let text: string;
    try {
      const res = await fetch(task.image, { signal: AbortSignal.timeout(FETCH_TIMEOUT_MS) });
      text = await res.text();
      if (!res.ok) return end('Exception', message('TransferFailed', `Transfer of image '${task.image}' failed: the image server answered HTTP ${res.status}.`, [task.image, String(res.status)], 'Critical'));
    } catch (err) {
      return end('Exception', message('TransferFailed', `Transfer of image '${task.image}' failed: ${(err as Error).message}.`, [task.image], 'Critical'));
    }
    task.percent = 50;
    const pkg = parseJsonObject(text);
    const target = typeof pkg?.Component === 'string' ? SIM_FIRMWARE.find((c) => c.id.toLowerCase() === (pkg.Component as string).toLowerCase()) : undefined;
    const version = pkg?.Version;
    if (!target || typeof version !== 'string' || !version) {
      return end('Exception', message('ApplyFailed', `Installing or applying image '${task.image}' failed: it is not a firmware package for a device of this server.`, [task.image], 'Critical'));
    }
    await new Promise((r) => setTimeout(r, APPLY_MS).unref());
    if (target.activation === 'Immediate') {
      s.versions.set(target.id, version);
      return end('Completed', message('UpdateSuccessful', `Device '${target.name}' successfully updated with image '${task.image}'.`, [target.name, task.image], 'OK'));
    }
    s.pending.set(target.id, version);
    end('Completed', message('AwaitToActivate', `Awaiting for an action to proceed with activating image '${task.image}' on '${target.name}'.`, [task.image, target.name], 'OK'));
  }

  /** A system boots: images waiting for a reset take effect. */
  booted(bmc: SimBmc): void {
    const s = this.state.get(bmc);
    if (!s || s.pending.size === 0) return;
    for (const [id, version] of s.pending) s.versions.set(id, version);
    bmc.event('firmware-activated', { components: Object.fromEntries(s.pending) });
    s.pending.clear();
  }

  /**
   * A system's or manager's body with the versions that run now, where an update changed
   * them (a BMC never updated shows the model's body as it is).
   */
  decorate(bmc: SimBmc, p: string, text: string): string {
    const s = this.active ? this.state.get(bmc) : undefined;
    if (!s) return text;
    if (this.model.systemPaths.has(p)) return JSON.stringify({ ...JSON.parse(text), BiosVersion: s.versions.get('BIOS') });
    if (/^\/redfish\/v1\/managers\/[^/]+$/.test(p)) return JSON.stringify({ ...JSON.parse(text), FirmwareVersion: s.versions.get('BMC') });
    return text;
  }
}

function taskBody(t: Task): object {
  return {
    '@odata.type': '#Task.v1_7_0.Task',
    '@odata.id': `${TASKS}/${t.id}`,
    Id: t.id,
    Name: `Task ${t.id}`,
    TaskState: t.state,
    TaskStatus: t.status,
    PercentComplete: t.percent,
    StartTime: t.start,
    ...(t.end ? { EndTime: t.end } : {}),
    Payload: { TargetUri: SIMPLE_UPDATE, HttpOperation: 'POST', JsonBody: JSON.stringify({ ImageURI: t.image }) },
    Messages: t.messages,
  };
}
