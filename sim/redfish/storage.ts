/**
 * RAID volumes of a simulated BMC: the Storage controllers the model serves, with their
 * SupportedRAIDTypes, and a live Volumes collection that takes POST (create) and DELETE as a
 * RAID controller does, checking the RAID level against the controller, the drives against the
 * level and the capacity against the drives' free space. Some BMCs (iDRAC, iLO) apply volume
 * changes only at the next boot (`@Redfish.OperationApplyTime` OnReset): they answer 202 with a
 * task that completes when the system next boots. Every change goes to the BMC's event log.
 */
import type { SimModel } from './model.js';
import { normalisePath } from './model.js';
import { parseJsonObject, redfishError, type SimBmc } from './state.js';
import type { Reply } from './vmedia.js';

/** When the controller applies a volume change: at once, or at the system's next boot. */
export type VolumeApplyTime = 'Immediate' | 'OnReset';

export interface StorageOptions {
  applyTime: VolumeApplyTime;
  /** The controller's SupportedRAIDTypes. */
  raidTypes: readonly string[];
}

export const DEFAULT_STORAGE: Readonly<StorageOptions> = Object.freeze({
  applyTime: 'Immediate',
  raidTypes: Object.freeze(['RAID0', 'RAID1', 'RAID5', 'RAID6', 'RAID10', 'RAID50', 'RAID60']),
});

/** Drives a RAID type takes, and how many of them hold redundancy rather than data. */
const LEVELS: Readonly<Record<string, { min: number; max: number; overhead: (n: number) => number; even?: boolean }>> = {
  RAID0: { min: 1, max: 32, overhead: () => 0 },
  RAID1: { min: 2, max: 2, overhead: () => 1 },
  RAID5: { min: 3, max: 32, overhead: () => 1 },
  RAID6: { min: 4, max: 32, overhead: () => 2 },
  RAID10: { min: 4, max: 32, overhead: (n) => n / 2, even: true },
  RAID50: { min: 6, max: 32, overhead: () => 2, even: true },
  RAID60: { min: 8, max: 32, overhead: () => 4, even: true },
};
const VOLUME_TYPES: Readonly<Record<string, string>> = { RAID0: 'StripedWithParity', RAID1: 'Mirrored', RAID10: 'SpannedMirrors' };

interface Drive {
  /** `@odata.id` as served. */
  id: string;
  bytes: number;
}

/** A controller (Storage resource) that has a Volumes collection. */
interface Controller {
  path: string;
  id: string;
  volumesPath: string;
  volumesId: string;
  drives: Map<string, Drive>;
  /** The volumes the model serves, which every BMC starts with. */
  initial: Volume[];
}

interface Volume {
  id: string;
  odataId: string;
  name: string;
  raidType: string;
  capacityBytes: number;
  drives: string[];
  /** Bytes it takes on each of its drives. */
  perDrive: number;
}

type Pending = { op: 'create'; volume: Volume; task: string } | { op: 'delete'; volume: string; task: string };

interface Task {
  id: string;
  odataId: string;
  state: 'Pending' | 'Completed';
  message: string;
}

interface ControllerState {
  volumes: Map<string, Volume>;
  pending: Pending[];
}

/** One BMC's storage. */
interface BmcStorage {
  options: StorageOptions;
  controllers: Map<string, ControllerState>;
  tasks: Map<string, Task>;
  next: number;
}

const TASKS = '/redfish/v1/TaskService/Tasks';

function json(status: number, body: unknown, headers: Record<string, string> = {}): Reply {
  return { status, body: JSON.stringify(body), headers };
}

function refused(status: number, messageId: string, message: string, related?: string[]): Reply {
  return { status, body: redfishError(messageId, message, related) };
}

const ref = (id: string) => ({ '@odata.id': id });

export class Storage {
  private controllers?: Map<string, Controller>;
  private readonly byBmc = new WeakMap<SimBmc, BmcStorage>();

  constructor(
    private readonly model: SimModel,
    private readonly defaults: Readonly<StorageOptions> = DEFAULT_STORAGE,
  ) {}

  /** The model's controllers with a Volumes collection, read once from its bodies. */
  private layout(): Map<string, Controller> {
    if (this.controllers) return this.controllers;
    const out = new Map<string, Controller>();
    const read = (p: string): Record<string, unknown> | null => {
      const text = this.model.get(normalisePath(p), '', 0);
      return text === null ? null : parseJsonObject(text);
    };
    const links = (v: unknown): string[] => (Array.isArray(v) ? v.map((m) => (m as Record<string, unknown>)?.['@odata.id']).filter((x): x is string => typeof x === 'string') : []);
    for (const sys of this.model.systemPaths) {
      const system = parseJsonObject(this.model.systemBody(sys, this.model.initialSystem(sys), 0));
      const storageLink = (system?.Storage as Record<string, unknown> | undefined)?.['@odata.id'];
      if (typeof storageLink !== 'string') continue;
      for (const ctl of links(read(storageLink)?.Members)) {
        const body = read(ctl);
        const volumesId = (body?.Volumes as Record<string, unknown> | undefined)?.['@odata.id'];
        if (!body || typeof volumesId !== 'string') continue;
        const drives = new Map<string, Drive>();
        for (const d of links(body.Drives)) {
          const bytes = read(d)?.CapacityBytes;
          if (typeof bytes === 'number') drives.set(normalisePath(d), { id: d, bytes });
        }
        const initial: Volume[] = [];
        for (const v of links(read(volumesId)?.Members)) {
          const vb = read(v);
          if (!vb || typeof vb.RAIDType !== 'string' || typeof vb.CapacityBytes !== 'number') continue;
          const on = links((vb.Links as Record<string, unknown> | undefined)?.Drives).filter((d) => drives.has(normalisePath(d)));
          initial.push(this.volume(vb.RAIDType, vb.CapacityBytes, on, String(vb.Id), v, String(vb.Name ?? vb.Id)));
        }
        out.set(normalisePath(ctl), { path: normalisePath(ctl), id: String(body.Id), volumesPath: normalisePath(volumesId), volumesId, drives, initial });
      }
    }
    this.controllers = out;
    return out;
  }

  private volume(raidType: string, capacityBytes: number, drives: string[], id: string, odataId: string, name: string): Volume {
    const level = LEVELS[raidType];
    const data = drives.length - (level ? level.overhead(drives.length) : 0);
    return { id, odataId, name, raidType, capacityBytes, drives, perDrive: Math.ceil(capacityBytes / Math.max(1, data)) };
  }

  private state(bmc: SimBmc): BmcStorage {
    let s = this.byBmc.get(bmc);
    if (!s) {
      s = { options: { ...this.defaults }, controllers: new Map(), tasks: new Map(), next: 1 };
      for (const [p, c] of this.layout()) s.controllers.set(p, { volumes: new Map(c.initial.map((v) => [normalisePath(v.odataId), v])), pending: [] });
      this.byBmc.set(bmc, s);
    }
    return s;
  }

  /** The BMC's storage options, changed by `patch` (the control API). @throws Error on a bad value */
  configure(bmc: SimBmc, patch: Record<string, unknown>): StorageOptions & { volumes: Record<string, unknown[]> } {
    const s = this.state(bmc);
    if (patch.applyTime !== undefined) {
      if (patch.applyTime !== 'Immediate' && patch.applyTime !== 'OnReset') throw new Error('applyTime must be Immediate or OnReset');
      s.options.applyTime = patch.applyTime;
    }
    if (patch.raidTypes !== undefined) {
      if (!Array.isArray(patch.raidTypes) || !patch.raidTypes.every((t) => typeof t === 'string' && t in LEVELS)) throw new Error(`raidTypes must be a list of ${Object.keys(LEVELS).join(', ')}`);
      s.options.raidTypes = patch.raidTypes as string[];
    }
    if (patch.initial === true) {
      this.byBmc.delete(bmc);
      return this.configure(bmc, { ...patch, initial: false, applyTime: patch.applyTime ?? s.options.applyTime, raidTypes: patch.raidTypes ?? s.options.raidTypes });
    }
    const volumes: Record<string, unknown[]> = {};
    for (const [p, c] of s.controllers) volumes[p] = [...c.volumes.values()].map((v) => ({ id: v.id, name: v.name, raidType: v.raidType, capacityBytes: v.capacityBytes, drives: v.drives }));
    return { ...s.options, volumes };
  }

  /** Applies the changes waiting for a boot (called as the system boots). */
  booting(bmc: SimBmc): void {
    const s = this.byBmc.get(bmc);
    if (!s) return;
    for (const c of s.controllers.values()) {
      for (const p of c.pending.splice(0)) {
        if (p.op === 'create') c.volumes.set(normalisePath(p.volume.odataId), p.volume);
        else c.volumes.delete(p.volume);
        const task = s.tasks.get(p.task);
        if (task) task.state = 'Completed';
        bmc.event('volume', { op: p.op, applied: 'OnReset', volume: p.op === 'create' ? p.volume.odataId : p.volume });
      }
    }
  }

  /** Drops the volume changes waiting for a boot (an iDRAC's job queue cleared); how many were dropped. */
  discardPending(bmc: SimBmc): number {
    const s = this.byBmc.get(bmc);
    if (!s) return 0;
    let n = 0;
    for (const c of s.controllers.values()) {
      for (const p of c.pending.splice(0)) {
        n++;
        s.tasks.delete(p.task);
        bmc.event('volume', { op: p.op, discarded: true, volume: p.op === 'create' ? p.volume.odataId : p.volume });
      }
    }
    return n;
  }

  /** The answer to a request for a storage resource, or null when the path is not one. */
  route(bmc: SimBmc, method: string, p: string, body: string): Reply | null {
    const layout = this.layout();
    if (!layout.size) return null;
    const s = this.state(bmc);
    const task = s.tasks.get(p);
    if (task) return method === 'GET' ? this.taskReply(task) : refused(405, 'OperationNotAllowed', `${method} is not allowed on a task.`);
    const ctl = layout.get(p);
    if (ctl) return method === 'GET' ? this.controllerBody(ctl, s) : refused(405, 'OperationNotAllowed', `${method} is not allowed on ${ctl.path}.`);
    for (const c of layout.values()) {
      if (p === c.volumesPath) {
        if (method === 'GET') return this.collection(c, s);
        if (method === 'POST') return this.create(bmc, c, s, body);
        return refused(405, 'OperationNotAllowed', `${method} is not allowed on the volume collection.`);
      }
      if (p.startsWith(`${c.volumesPath}/`)) {
        const v = s.controllers.get(c.path)!.volumes.get(p);
        if (!v) return refused(404, 'ResourceMissingAtURI', `The resource at the URI ${p} was not found.`);
        if (method === 'GET') return json(200, this.volumeBody(v));
        if (method === 'DELETE') return this.remove(bmc, c, s, v, body);
        return refused(405, 'OperationNotAllowed', `${method} is not allowed on a volume.`);
      }
    }
    return null;
  }

  private controllerBody(c: Controller, s: BmcStorage): Reply {
    const body = parseJsonObject(this.model.get(c.path, '', 0) ?? '{}') ?? {};
    const controllers = Array.isArray(body.StorageControllers) ? (body.StorageControllers as Array<Record<string, unknown>>) : [];
    body.StorageControllers = controllers.map((sc) => ({ ...sc, SupportedRAIDTypes: s.options.raidTypes }));
    return json(200, body);
  }

  private collection(c: Controller, s: BmcStorage): Reply {
    const members = [...s.controllers.get(c.path)!.volumes.values()].map((v) => ref(v.odataId));
    return json(200, {
      '@odata.type': '#VolumeCollection.VolumeCollection',
      '@odata.id': c.volumesId,
      Name: 'Volume Collection',
      'Members@odata.count': members.length,
      Members: members,
      '@Redfish.OperationApplyTimeSupport': { '@odata.type': '#Settings.v1_3_5.OperationApplyTimeSupport', SupportedValues: [s.options.applyTime] },
    });
  }

  private volumeBody(v: Volume): Record<string, unknown> {
    return {
      '@odata.type': '#Volume.v1_6_2.Volume',
      '@odata.id': v.odataId,
      Id: v.id,
      Name: v.name,
      RAIDType: v.raidType,
      VolumeType: VOLUME_TYPES[v.raidType] ?? 'StripedWithParity',
      CapacityBytes: v.capacityBytes,
      Encrypted: false,
      Links: { Drives: v.drives.map(ref) },
      Status: { State: 'Enabled', Health: 'OK' },
    };
  }

  private taskReply(t: Task): Reply {
    const done = t.state === 'Completed';
    const body = {
      '@odata.type': '#Task.v1_4_3.Task',
      '@odata.id': t.odataId,
      Id: t.id,
      Name: 'Volume configuration',
      TaskState: t.state,
      TaskStatus: 'OK',
      PercentComplete: done ? 100 : 0,
      Messages: [{ MessageId: done ? 'Base.1.8.Success' : 'Base.1.8.OperationTransitionedToJob', Message: done ? t.message : `${t.message}: waiting for the system to restart.` }],
    };
    return json(done ? 200 : 202, body, done ? {} : { location: t.odataId });
  }

  private newTask(s: BmcStorage, bmc: SimBmc, message: string): Task {
    const id = `RAID_${bmc.index}_${s.next++}`;
    const task: Task = { id, odataId: `${TASKS}/${id}`, state: 'Pending', message };
    s.tasks.set(normalisePath(task.odataId), task);
    return task;
  }

  /** An apply time the body asks for; null when it is one the controller does not support. */
  private applyTime(s: BmcStorage, req: Record<string, unknown>): VolumeApplyTime | null {
    const asked = req['@Redfish.OperationApplyTime'];
    if (asked === undefined) return s.options.applyTime;
    return asked === s.options.applyTime ? s.options.applyTime : null;
  }

  /** Bytes still free on each drive of the controller, changes waiting for a boot counted. */
  private free(c: Controller, cs: ControllerState): Map<string, number> {
    const free = new Map([...c.drives].map(([k, d]) => [k, d.bytes]));
    const take = (v: Volume) => {
      for (const d of v.drives) free.set(normalisePath(d), (free.get(normalisePath(d)) ?? 0) - v.perDrive);
    };
    for (const v of cs.volumes.values()) take(v);
    for (const p of cs.pending) if (p.op === 'create') take(p.volume);
    return free;
  }

  private create(bmc: SimBmc, c: Controller, s: BmcStorage, body: string): Reply {
    const req = parseJsonObject(body);
    if (!req) return refused(400, 'MalformedJSON', 'The request body submitted was malformed JSON and could not be parsed by the receiving service.');
    const applyTime = this.applyTime(s, req);
    if (!applyTime) return refused(400, 'PropertyValueNotInList', `The value ${JSON.stringify(req['@Redfish.OperationApplyTime'])} for the property @Redfish.OperationApplyTime is not in the list of acceptable values.`, ['#/@Redfish.OperationApplyTime']);
    const raidType = req.RAIDType;
    if (raidType === undefined) return refused(400, 'PropertyMissing', 'The property RAIDType is a required property and must be included in the request.', ['#/RAIDType']);
    if (typeof raidType !== 'string' || !s.options.raidTypes.includes(raidType)) {
      bmc.event('refused', { call: 'POST Volumes', status: 400, messageId: 'PropertyValueNotInList', raidType });
      return refused(400, 'PropertyValueNotInList', `The value ${JSON.stringify(raidType)} for the property RAIDType is not in the list of acceptable values (${s.options.raidTypes.join(', ')}).`, ['#/RAIDType']);
    }
    const linked = (req.Links as Record<string, unknown> | undefined)?.Drives;
    if (!Array.isArray(linked) || linked.length === 0) return refused(400, 'PropertyMissing', 'The property Links/Drives is a required property and must be included in the request.', ['#/Links/Drives']);
    const drives: string[] = [];
    for (const d of linked) {
      const id = (d as Record<string, unknown> | null)?.['@odata.id'];
      const drive = typeof id === 'string' ? c.drives.get(normalisePath(id)) : undefined;
      if (!drive || drives.includes(drive.id)) return refused(400, 'ResourceMissingAtURI', `The resource at the URI ${JSON.stringify(id)} is not a drive of controller ${c.id}, or is listed twice.`, ['#/Links/Drives']);
      drives.push(drive.id);
    }
    const level = LEVELS[raidType];
    if (drives.length < level.min || drives.length > level.max || (level.even && drives.length % 2 !== 0)) {
      return refused(400, 'PropertyValueIncorrect', `The property Links/Drives with ${drives.length} drives could not be written because ${raidType} takes ${level.min === level.max ? level.min : `${level.min} to ${level.max}`}${level.even ? ', an even number,' : ''} drives.`, ['#/Links/Drives']);
    }
    const cs = s.controllers.get(c.path)!;
    const smallest = Math.min(...drives.map((d) => this.free(c, cs).get(normalisePath(d)) ?? 0));
    const maxBytes = Math.max(0, smallest) * (drives.length - level.overhead(drives.length));
    const asked = req.CapacityBytes;
    if (asked !== undefined && (typeof asked !== 'number' || !Number.isInteger(asked) || asked <= 0)) {
      return refused(400, 'PropertyValueTypeError', `The value ${JSON.stringify(asked)} for the property CapacityBytes is of a different type than the property can accept.`, ['#/CapacityBytes']);
    }
    const capacity = asked ?? maxBytes;
    if (capacity <= 0 || capacity > maxBytes) {
      bmc.event('refused', { call: 'POST Volumes', status: 400, messageId: 'PropertyValueIncorrect', capacity, maxBytes });
      return refused(400, 'PropertyValueIncorrect', `The property CapacityBytes with the requested value of ${capacity} could not be written because the drives have room for ${maxBytes} bytes of ${raidType}.`, ['#/CapacityBytes']);
    }
    if (req.Name !== undefined && typeof req.Name !== 'string') return refused(400, 'PropertyValueTypeError', 'The value for the property Name is of a different type than the property can accept.', ['#/Name']);
    const n = s.next++;
    const id = `Disk.Virtual.${n}`;
    const volume = this.volume(raidType, capacity, drives, id, `${c.volumesId}/${id}`, typeof req.Name === 'string' ? req.Name : `Virtual Disk ${n}`);
    if (applyTime === 'OnReset') {
      const task = this.newTask(s, bmc, `Create volume ${id}`);
      cs.pending.push({ op: 'create', volume, task: normalisePath(task.odataId) });
      bmc.event('volume', { op: 'create', pending: true, volume: volume.odataId, raidType, capacity });
      return this.taskReply(task);
    }
    cs.volumes.set(normalisePath(volume.odataId), volume);
    bmc.event('volume', { op: 'create', volume: volume.odataId, raidType, capacity });
    return json(201, this.volumeBody(volume), { location: volume.odataId });
  }

  private remove(bmc: SimBmc, c: Controller, s: BmcStorage, v: Volume, body: string): Reply {
    const req = body.trim() ? parseJsonObject(body) : {};
    if (!req) return refused(400, 'MalformedJSON', 'The request body submitted was malformed JSON and could not be parsed by the receiving service.');
    const applyTime = this.applyTime(s, req);
    if (!applyTime) return refused(400, 'PropertyValueNotInList', `The value ${JSON.stringify(req['@Redfish.OperationApplyTime'])} for the property @Redfish.OperationApplyTime is not in the list of acceptable values.`, ['#/@Redfish.OperationApplyTime']);
    const cs = s.controllers.get(c.path)!;
    const key = normalisePath(v.odataId);
    if (applyTime === 'OnReset') {
      const task = this.newTask(s, bmc, `Delete volume ${v.id}`);
      cs.pending.push({ op: 'delete', volume: key, task: normalisePath(task.odataId) });
      bmc.event('volume', { op: 'delete', pending: true, volume: v.odataId });
      return this.taskReply(task);
    }
    cs.volumes.delete(key);
    bmc.event('volume', { op: 'delete', volume: v.odataId });
    return { status: 204 };
  }
}
