/**
 * The Dell OEM side of a simulated iDRAC (quirk `idrac`), as sushy-oem-idrac and Ironic's
 * `idrac-redfish` interfaces use it:
 *
 * - the manager's `#OemManager.ImportSystemConfiguration` (a Server Configuration Profile, XML
 *   or JSON, in `ImportBuffer`): answered 202 with a job under `Managers/{id}/Jobs`, which
 *   answers 202 while it runs and 200 once it has ended. The simulator applies the iDRAC
 *   component's `ServerBoot.1#FirstBootDevice` / `ServerBoot.1#BootOnce`, which is how an
 *   iDRAC before firmware 6 boots its virtual CD (`VCD-DVD`). With BIOS settings pending the
 *   import is refused with `LC068` (pending configuration), while another import runs with
 *   `RAC0679` (a job is running): sushy-oem-idrac reboots, or waits, and tries again.
 * - `DellJobService` `DeleteJobQueue` (`JID_CLEARALL` drops every job and the BIOS settings
 *   and volume changes waiting for a boot), `DelliDRACCardService` `iDRACReset` (the BMC drops
 *   every connection and session for `idracResetMs`, then reports itself not ready for a
 *   quarter of that) and `DellLCService` `GetRemoteServicesAPIStatus` (`LCStatus`, and
 *   `RTStatus` Ready only while the host is up: real-time RAID needs a booted host).
 */
import { normalisePath } from './model.js';
import { parseJsonObject, redfishError, type SimBmc, type SystemState } from './state.js';
import type { Reply } from './vmedia.js';

/** What the handler lends the OEM services of one BMC. */
export interface DellEnv {
  systemPath: string;
  system(path: string): SystemState;
  /** Whether BIOS settings wait for the next boot. */
  biosPending(system: SystemState): boolean;
  /** Drops every BIOS setting and volume change waiting for a boot; what was dropped. */
  discardPending(system: SystemState): { bios: string[]; volumes: number };
}

interface Job {
  id: string;
  name: string;
  state: 'Running' | 'Completed' | 'Failed';
  message: string;
  messageId: string;
  start: string;
  end?: string;
}

interface DellState {
  jobs: Map<string, Job>;
  next: number;
  /** Epoch ms until which the iDRAC is resetting (connections dropped). */
  downUntil: number;
  /** Epoch ms until which LCStatus is not Ready after a reset. */
  notReadyUntil: number;
}

/** How long an import runs (long enough to be seen running). */
const IMPORT_MS = 200;
/** Between an iDRACReset's answer and the BMC going away. */
const RESET_GRACE_MS = 100;
const JOB_LIMIT = 32;
const BOOT_DEVICES: Readonly<Record<string, string | null>> = {
  Normal: null, PXE: 'Pxe', HDD: 'Hdd', 'CD-DVD': 'Cd', 'VCD-DVD': 'Cd', BIOS: 'BiosSetup',
};

const json = (status: number, body: unknown, headers?: Record<string, string>): Reply => ({ status, body: JSON.stringify(body), headers });
const error = (status: number, id: string, message: string): Reply => ({ status, body: redfishError(id, message) });
/** An iDRAC error, its MessageId in the IDRAC registry as sushy-oem-idrac matches them. */
function idracError(status: number, code: string, message: string): Reply {
  const info = { MessageId: `IDRAC.2.8.${code}`, Message: message, Severity: 'Warning', Resolution: 'Retry the operation later.' };
  return { status, body: JSON.stringify({ error: { code: 'Base.1.8.GeneralError', message, '@Message.ExtendedInfo': [info] } }) };
}

/** The manager's Dell links and OEM actions, merged into its body by the synthetic model. */
export function dellManagerExtras(manager: string): { Links: object; Actions: object } {
  const oem = `${manager}/Oem/Dell`;
  return {
    Links: {
      Oem: {
        Dell: {
          '@odata.type': '#DellOem.v1_3_0.DellOemLinks',
          DellJobService: { '@odata.id': `${oem}/DellJobService` },
          DelliDRACCardService: { '@odata.id': `${oem}/DelliDRACCardService` },
          DellLCService: { '@odata.id': `${oem}/DellLCService` },
          Jobs: { '@odata.id': `${manager}/Jobs` },
        },
      },
    },
    Actions: {
      Oem: {
        '#OemManager.v1_4_0.OemManager#OemManager.ImportSystemConfiguration': {
          target: `${manager}/Actions/Oem/EID_674_Manager.ImportSystemConfiguration`,
          'ShutdownType@Redfish.AllowableValues': ['Graceful', 'Forced', 'NoReboot'],
          'HostPowerState@Redfish.AllowableValues': ['On', 'Off'],
          ShareParameters: { 'Target@Redfish.AllowableValues': ['ALL', 'IDRAC', 'BIOS', 'NIC', 'RAID'] },
        },
      },
    },
  };
}

/** The attributes of each component of a Server Configuration Profile, XML or JSON; null when it is neither. */
function parseProfile(buffer: string): Map<string, Map<string, string>> | null {
  const out = new Map<string, Map<string, string>>();
  const text = buffer.trim();
  if (text.startsWith('<')) {
    if (!/^<SystemConfiguration[\s>]/.test(text) || !text.endsWith('</SystemConfiguration>')) return null;
    for (const c of text.matchAll(/<Component\s+FQDD="([^"]+)"\s*>([\s\S]*?)<\/Component>/g)) {
      const attrs = new Map<string, string>();
      for (const a of c[2].matchAll(/<Attribute\s+Name="([^"]+)"\s*>([^<]*)<\/Attribute>/g)) attrs.set(a[1], a[2]);
      out.set(c[1], attrs);
    }
    return out;
  }
  const doc = parseJsonObject(text)?.SystemConfiguration as Record<string, unknown> | undefined;
  if (!doc || !Array.isArray(doc.Components)) return null;
  for (const c of doc.Components as Array<Record<string, unknown>>) {
    if (typeof c?.FQDD !== 'string') return null;
    const attrs = new Map<string, string>();
    for (const a of Array.isArray(c.Attributes) ? (c.Attributes as Array<Record<string, unknown>>) : []) {
      if (typeof a?.Name === 'string') attrs.set(a.Name, String(a.Value));
    }
    out.set(c.FQDD, attrs);
  }
  return out;
}

export class DellOem {
  private readonly byBmc = new WeakMap<SimBmc, DellState>();
  private readonly manager: string;
  private readonly fqdd: string;
  private readonly paths: Record<'jobService' | 'clearQueue' | 'card' | 'reset' | 'lc' | 'apiStatus' | 'jobs' | 'import', string>;

  /** `manager`: the manager's `@odata.id` (its Id is the iDRAC's FQDD, `iDRAC.Embedded.1`). */
  constructor(manager: string) {
    this.manager = manager;
    this.fqdd = manager.slice(manager.lastIndexOf('/') + 1);
    const oem = `${manager}/Oem/Dell`;
    const p = (s: string) => s.toLowerCase();
    this.paths = {
      jobService: p(`${oem}/DellJobService`),
      clearQueue: p(`${oem}/DellJobService/Actions/DellJobService.DeleteJobQueue`),
      card: p(`${oem}/DelliDRACCardService`),
      reset: p(`${oem}/DelliDRACCardService/Actions/DelliDRACCardService.iDRACReset`),
      lc: p(`${oem}/DellLCService`),
      apiStatus: p(`${oem}/DellLCService/Actions/DellLCService.GetRemoteServicesAPIStatus`),
      jobs: p(`${manager}/Jobs`),
      import: p(`${manager}/Actions/Oem/EID_674_Manager.ImportSystemConfiguration`),
    };
  }

  private state(bmc: SimBmc): DellState {
    let s = this.byBmc.get(bmc);
    if (!s) {
      s = { jobs: new Map(), next: 1, downUntil: 0, notReadyUntil: 0 };
      this.byBmc.set(bmc, s);
    }
    return s;
  }

  /** Whether the iDRAC is resetting: every connection is dropped unanswered. */
  resetting(bmc: SimBmc): boolean {
    const s = this.byBmc.get(bmc);
    return s !== undefined && Date.now() < s.downUntil;
  }

  /** The answer to a Dell OEM request, or null for any other path. */
  route(bmc: SimBmc, method: string, p: string, body: string, env: DellEnv): Reply | null {
    const s = this.state(bmc);
    const post = (run: () => Reply): Reply => (method === 'POST' ? run() : { ...error(405, 'OperationNotAllowed', 'Actions need POST'), headers: { allow: 'POST' } });
    const get = (run: () => Reply): Reply => (method === 'GET' ? run() : { ...error(405, 'OperationNotAllowed', `${method} is not allowed on ${p}`), headers: { allow: 'GET' } });
    switch (p) {
      case this.paths.jobService:
        return get(() => json(200, this.service('DellJobService', { '#DellJobService.DeleteJobQueue': { target: `${this.manager}/Oem/Dell/DellJobService/Actions/DellJobService.DeleteJobQueue` } })));
      case this.paths.card:
        return get(() => json(200, this.service('DelliDRACCardService', {
          '#DelliDRACCardService.iDRACReset': { target: `${this.manager}/Oem/Dell/DelliDRACCardService/Actions/DelliDRACCardService.iDRACReset`, 'Force@Redfish.AllowableValues': ['Graceful', 'Force'] },
        })));
      case this.paths.lc:
        return get(() => json(200, this.service('DellLCService', {
          '#DellLCService.GetRemoteServicesAPIStatus': { target: `${this.manager}/Oem/Dell/DellLCService/Actions/DellLCService.GetRemoteServicesAPIStatus` },
        })));
      case this.paths.clearQueue:
        return post(() => this.clearQueue(bmc, s, body, env));
      case this.paths.reset:
        return post(() => this.reset(bmc, s, body));
      case this.paths.apiStatus:
        return post(() => this.apiStatus(s, env));
      case this.paths.import:
        return post(() => this.importProfile(bmc, s, body, env));
      case this.paths.jobs:
        return get(() => json(200, {
          '@odata.type': '#DellJobCollection.DellJobCollection', '@odata.id': `${this.manager}/Jobs`, Name: 'JobQueue',
          'Members@odata.count': s.jobs.size, Members: [...s.jobs.keys()].map((id) => ({ '@odata.id': `${this.manager}/Jobs/${id}` })),
        }));
    }
    if (p.startsWith(`${this.paths.jobs}/`)) {
      const job = [...s.jobs.values()].find((j) => j.id.toLowerCase() === p.slice(this.paths.jobs.length + 1));
      if (!job) return error(404, 'ResourceMissingAtURI', `The resource at the URI ${p} was not found.`);
      // A task monitor: 202 while the job runs, the job itself once it has ended.
      return get(() => json(job.state === 'Running' ? 202 : 200, this.jobBody(job), job.state === 'Running' ? { location: `${this.manager}/Jobs/${job.id}` } : undefined));
    }
    return null;
  }

  private service(id: string, actions: object): object {
    return { '@odata.type': `#${id}.v1_1_0.${id}`, '@odata.id': `${this.manager}/Oem/Dell/${id}`, Id: id, Name: id, Actions: actions };
  }

  private jobBody(j: Job): object {
    return {
      '@odata.type': '#DellJob.v1_4_0.DellJob', '@odata.id': `${this.manager}/Jobs/${j.id}`, Id: j.id, Name: j.name, JobType: 'ImportConfiguration',
      JobState: j.state, PercentComplete: j.state === 'Running' ? 50 : 100, Message: j.message, MessageId: j.messageId,
      StartTime: j.start, ...(j.end ? { CompletionTime: j.end } : {}),
      // Read as a Redfish Task too (sushy's task monitor).
      TaskState: j.state === 'Running' ? 'Running' : j.state === 'Completed' ? 'Completed' : 'Exception',
      TaskStatus: j.state === 'Failed' ? 'Critical' : 'OK',
      Messages: [{ Message: j.message, MessageId: `IDRAC.2.8.${j.messageId}`, Severity: j.state === 'Failed' ? 'Critical' : 'OK' }],
    };
  }

  private clearQueue(bmc: SimBmc, s: DellState, body: string, env: DellEnv): Reply {
    const jobId = parseJsonObject(body)?.JobID;
    if (typeof jobId !== 'string' || !jobId) return error(400, 'ActionParameterMissing', 'The action DeleteJobQueue requires the parameter JobID to be present in the request body.');
    if (jobId === 'JID_CLEARALL' || jobId === 'JID_CLEARALL_FORCE') {
      const jobs = [...s.jobs.keys()];
      s.jobs.clear();
      const dropped = env.discardPending(env.system(env.systemPath));
      bmc.event('idrac', { op: 'job-queue-cleared', jobs, bios: dropped.bios, volumes: dropped.volumes });
      return json(200, { '@Message.ExtendedInfo': [{ MessageId: 'IDRAC.2.8.SUP020', Message: 'Successfully deleted the job(s).' }] });
    }
    const job = s.jobs.get(jobId);
    if (!job) return idracError(400, 'SUP011', `Job ID ${jobId} does not exist.`);
    if (job.state === 'Running') return idracError(400, 'SUP017', `Unable to delete the job ${jobId} because it is running.`);
    s.jobs.delete(jobId);
    bmc.event('idrac', { op: 'job-deleted', jobs: [jobId] });
    return json(200, { '@Message.ExtendedInfo': [{ MessageId: 'IDRAC.2.8.SUP020', Message: 'Successfully deleted the job(s).' }] });
  }

  private reset(bmc: SimBmc, s: DellState, body: string): Reply {
    const force = parseJsonObject(body)?.Force;
    if (force !== undefined && force !== 'Graceful' && force !== 'Force') {
      return error(400, 'ActionParameterValueNotInList', `The value ${JSON.stringify(force)} for the parameter Force in the action iDRACReset is not in the list of acceptable values.`);
    }
    const down = bmc.faults.idracResetMs;
    s.downUntil = Date.now() + RESET_GRACE_MS + down;
    s.notReadyUntil = s.downUntil + Math.round(down / 4);
    bmc.event('idrac', { op: 'reset', force: force ?? 'Graceful', downMs: down });
    // A reset iDRAC has forgotten its sessions.
    setTimeout(() => bmc.expireSessions(), RESET_GRACE_MS).unref();
    return json(200, { '@Message.ExtendedInfo': [{ MessageId: 'IDRAC.2.8.RAC064', Message: 'iDRAC restart operation triggered successfully.' }] });
  }

  private apiStatus(s: DellState, env: DellEnv): Reply {
    const system = env.system(env.systemPath);
    const lcReady = Date.now() >= s.notReadyUntil;
    const up = system.power === 'On' && system.running?.phase === 'up';
    return json(200, {
      LCStatus: lcReady ? 'Ready' : 'NotReady',
      RTStatus: lcReady && up ? 'Ready' : 'NotReady',
      Status: lcReady ? 'Ready' : 'NotReady',
      ServerStatus: system.power === 'On' ? (up ? 'OutOfPOST' : 'InPOST') : 'PoweredOff',
    });
  }

  private importProfile(bmc: SimBmc, s: DellState, body: string, env: DellEnv): Reply {
    const args = parseJsonObject(body);
    if (!args) return error(400, 'MalformedJSON', 'The request body submitted was malformed JSON.');
    const buffer = args.ImportBuffer;
    if (typeof buffer !== 'string' || !buffer) return error(400, 'ActionParameterMissing', 'The action ImportSystemConfiguration requires the parameter ImportBuffer to be present in the request body.');
    const target = (args.ShareParameters as Record<string, unknown> | undefined)?.Target;
    if (target !== undefined && !['ALL', 'IDRAC', 'BIOS', 'NIC', 'RAID'].includes(target as string)) {
      return error(400, 'ActionParameterValueNotInList', `The value ${JSON.stringify(target)} for the parameter ShareParameters/Target is not in the list of acceptable values.`);
    }
    const profile = parseProfile(buffer);
    if (!profile) return idracError(400, 'SYS041', 'Unable to import the configuration because the input file is invalid or not well formed.');
    if ([...s.jobs.values()].some((j) => j.state === 'Running')) {
      bmc.event('refused', { call: 'ImportSystemConfiguration', status: 400, messageId: 'RAC0679' });
      return idracError(400, 'RAC0679', 'Unable to perform the operation because a configuration job is already running.');
    }
    const system = env.system(env.systemPath);
    if (env.biosPending(system)) {
      bmc.event('refused', { call: 'ImportSystemConfiguration', status: 400, messageId: 'LC068' });
      return idracError(400, 'LC068', 'Unable to start the configuration import because configuration changes are pending: restart the server or clear the job queue.');
    }
    const id = `JID_${String(Date.now()).slice(-9)}${String(s.next++).padStart(3, '0')}`;
    const job: Job = { id, name: 'Import Configuration', state: 'Running', message: 'Importing Server Configuration Profile.', messageId: 'SYS057', start: new Date().toISOString() };
    s.jobs.set(id, job);
    for (const [old, j] of s.jobs) {
      if (s.jobs.size <= JOB_LIMIT) break;
      if (j.state !== 'Running') s.jobs.delete(old);
    }
    setTimeout(() => this.finishImport(bmc, job, profile, system), IMPORT_MS).unref();
    return json(202, {}, { location: `${this.manager}/Jobs/${id}` });
  }

  /** Applies the iDRAC component's boot attributes; any other component fails the job (the simulator does not model it). */
  private finishImport(bmc: SimBmc, job: Job, profile: Map<string, Map<string, string>>, system: SystemState): void {
    const end = (state: Job['state'], messageId: string, message: string) => {
      Object.assign(job, { state, messageId, message, end: new Date().toISOString() });
      bmc.event('idrac', { op: 'import', job: job.id, state, message });
    };
    const unknown = [...profile.keys()].filter((c) => c !== this.fqdd);
    if (unknown.length) return end('Failed', 'SYS055', `Unable to apply the configuration of ${unknown.join(', ')}: no such component on this simulated server.`);
    const attrs = profile.get(this.fqdd) ?? new Map<string, string>();
    const first = attrs.get('ServerBoot.1#FirstBootDevice');
    const once = attrs.get('ServerBoot.1#BootOnce');
    if (once !== undefined && once !== 'Enabled' && once !== 'Disabled') return end('Failed', 'SYS055', `Value ${once} of ServerBoot.1#BootOnce is not valid.`);
    if (first !== undefined) {
      if (!Object.hasOwn(BOOT_DEVICES, first)) return end('Failed', 'SYS055', `Value ${first} of ServerBoot.1#FirstBootDevice is not valid for this server.`);
      const targetOf = BOOT_DEVICES[first];
      system.boot = targetOf === null
        ? { ...system.boot, BootSourceOverrideTarget: 'None', BootSourceOverrideEnabled: 'Disabled' }
        : { ...system.boot, BootSourceOverrideTarget: targetOf, BootSourceOverrideEnabled: once === 'Disabled' ? 'Continuous' : 'Once' };
      system.virtualCd = first === 'VCD-DVD';
      system.version++;
      bmc.event('boot-override', { target: system.boot.BootSourceOverrideTarget, enabled: system.boot.BootSourceOverrideEnabled, mode: system.boot.BootSourceOverrideMode, via: 'ImportSystemConfiguration', device: first });
    }
    end('Completed', 'SYS053', 'Successfully imported and applied Server Configuration Profile.');
  }

  /** Normalised paths this module answers start with one of these. */
  owns(p: string): boolean {
    return p.startsWith(normalisePath(`${this.manager}/Oem/Dell`)) || p.startsWith(this.paths.jobs) || p === this.paths.import;
  }
}
