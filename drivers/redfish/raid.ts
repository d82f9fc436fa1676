/**
 * The `redfish` RAID interface (Ironic's RedfishRAID, ironic/drivers/modules/redfish/raid.py):
 * `create_configuration` builds the node's target_raid_config as Volumes on its Storage
 * controllers, `delete_configuration` deletes every RAID volume, `apply_configuration` (deploy
 * and service) sets the target first. A BMC that applies volume changes only at the next boot
 * (`@Redfish.OperationApplyTime` OnReset) answers with a task: the step then reboots the node
 * into the agent and finishes in `afterReboot` (Ironic's periodic check of `raid_configs`),
 * one volume per controller and boot, as Ironic submits them. When all is done the node's
 * raid_config lists the RAID volumes the BMC has.
 */
import { MissingParameterValue, InvalidParameterValue, RaidConfigError } from '../../common/errors.js';
import { raidTimestamp, validateRaidConfig } from '../../common/raid.js';
import { bootAgent } from '../deploy/agent-base.js';
import type { RaidInterface } from '../interfaces.js';
import type { StepArgInfo, StepContext, StepDeclaration, StepRun } from '../steps.js';
import { statusError, type RedfishCall, type RedfishClient, type Reply } from './client.js';
import { convertDriveUnits, filterLogicalDisks, findConfiguration, raidLevelOf, RAID_LEVELS, type LogicalDisk, type PhysicalDisk } from './raid-plan.js';
import { isObject, linkPath, linkPaths, num, prop, str, type Json } from './odata.js';
import { getSystem } from './system.js';

const GI = 2 ** 30;
/** Where a run waiting for the BMC keeps what is left to do (Ironic's driver_internal_info key). */
const RAID_CONFIGS = 'raid_configs';

type ApplyTime = 'Immediate' | 'OnReset' | null;

/** What is waiting for a boot: the BMC's tasks, and the volumes still to submit. */
interface RaidConfigs {
  operation: 'create' | 'delete';
  /** create: logical disks still to submit by controller; delete: whether volumes are left. */
  pending: Record<string, LogicalDisk[]> | boolean;
  task_monitor_uri?: string[];
}

/** A Storage resource with what the interface reads of it. */
interface StorageInfo {
  id: string;
  path: string;
  /** False for a controller that lists SupportedRAIDTypes and none (an HBA): Ironic skips it. */
  raidCapable: boolean;
  /** Whether a controller is listed (Ironic keys volumes to delete by the storage only then). */
  hasController: boolean;
  volumesPath: string | null;
  drives: PhysicalDisk[];
}

const CREATE_ARGS: Readonly<Record<string, StepArgInfo>> = {
  create_root_volume: { description: 'This specifies whether to create the root volume. Defaults to `True`.', required: false },
  create_nonroot_volumes: { description: 'This specifies whether to create the non-root volumes. Defaults to `True`.', required: false },
  delete_existing: {
    description: 'Setting this to `True` indicates to delete existing RAID configuration prior to creating the new configuration. Default value is `False`.',
    required: false,
  },
};

/** Ironic's RAID_APPLY_CONFIGURATION_ARGSINFO. */
const APPLY_ARGS: Readonly<Record<string, StepArgInfo>> = {
  raid_config: { description: 'The RAID configuration to apply.', required: true },
  create_root_volume: { description: "Setting this to 'False' indicates not to create root volume that is specified in 'raid_config'. Default value is 'True'.", required: false },
  create_nonroot_volumes: {
    description: "Setting this to 'False' indicates not to create non-root volumes (all except the root volume) in 'raid_config'. Default value is 'True'.",
    required: false,
  },
  delete_existing: {
    description: "Setting this to 'True' indicates to delete existing RAID configuration prior to creating the new configuration. Default value is 'True'.",
    required: false,
  },
};

function flag(args: Record<string, unknown>, name: string, dflt: boolean): boolean {
  const v = args[name];
  if (v === undefined) return dflt;
  if (typeof v === 'boolean') return v;
  if (typeof v === 'string' && ['true', 'false', '1', '0', 'yes', 'no', 'on', 'off'].includes(v.toLowerCase())) return ['true', '1', 'yes', 'on'].includes(v.toLowerCase());
  throw new InvalidParameterValue(`${name} must be a boolean, got ${JSON.stringify(v)}.`);
}

/** Ironic's _get_apply_time: Immediate when the collection offers it, else OnReset, else unsaid. */
function applyTimeOf(collection: Json): ApplyTime {
  const support = prop(collection, '@Redfish.OperationApplyTimeSupport');
  const values = isObject(support) && Array.isArray(support.SupportedValues) ? support.SupportedValues : [];
  if (values.includes('Immediate')) return 'Immediate';
  if (values.includes('OnReset')) return 'OnReset';
  return null;
}


export class RedfishRaid implements RaidInterface {
  readonly supported = true;
  readonly steps: readonly StepDeclaration[];

  constructor(protected readonly client: RedfishClient) {
    this.steps = this.declareSteps();
  }

  /** The steps this interface offers (a vendor's interface adjusts them). */
  protected declareSteps(): StepDeclaration[] {
    const afterReboot = (ctx: StepContext) => this.checkRaidConfigs(ctx);
    return [
      {
        step: 'create_configuration', priority: { clean: 0 }, abortable: false, argsInfo: CREATE_ARGS,
        run: (ctx, args) => this.create(ctx, args, true), afterReboot,
      },
      { step: 'delete_configuration', priority: { clean: 0, deploy: 0, service: 0 }, run: (ctx) => this.delete(ctx), afterReboot },
      {
        step: 'apply_configuration', priority: { deploy: 0, service: 0 }, argsInfo: APPLY_ARGS,
        run: (ctx, args) => this.apply(ctx, args), afterReboot,
      },
    ];
  }

  validate(driverInfo: Readonly<Record<string, unknown>>): void {
    this.client.parse(driverInfo);
  }

  /** Ironic's validate_raid_config for this interface: the schema, and no `scsi` disks. @throws InvalidParameterValue */
  validateRaidConfig(config: Record<string, unknown>): void {
    validateRaidConfig(config);
    const disks = Array.isArray(config.logical_disks) ? (config.logical_disks as Array<Record<string, unknown>>) : [];
    if (disks.some((d) => d.interface_type === 'scsi')) throw new InvalidParameterValue('interface type `scsi` not supported by Redfish RAID');
  }

  private async apply(ctx: StepContext, args: Record<string, unknown>): Promise<StepRun> {
    const config = args.raid_config;
    if (!isObject(config)) throw new InvalidParameterValue('apply_configuration needs raid_config, a RAID configuration object.');
    this.validateRaidConfig(config);
    await ctx.record.raid({ targetRaidConfig: config });
    // Ironic's apply_configuration defaults: no non-root volumes unless asked.
    return this.create(ctx, { ...args, create_nonroot_volumes: args.create_nonroot_volumes ?? false }, false, config);
  }

  /**
   * Ironic's create_configuration; `delete_existing` is taken and, as in Ironic's redfish
   * interface, not acted on.
   */
  private async create(ctx: StepContext, args: Record<string, unknown>, nonRootDefault: boolean, target = ctx.node.targetRaidConfig): Promise<StepRun> {
    const root = flag(args, 'create_root_volume', true);
    const nonRoot = flag(args, 'create_nonroot_volumes', nonRootDefault);
    flag(args, 'delete_existing', false);
    const wanted = target.logical_disks;
    if (!Array.isArray(wanted) || wanted.length === 0) throw new MissingParameterValue(`Node ${ctx.node.uuid} has no target RAID configuration.`);
    const logical = convertDriveUnits(wanted as Array<Record<string, unknown>>, ctx.node.uuid);
    return this.client.run(ctx.driver, async (call) => {
      const storages = await readStorage(call);
      const physical = storages.filter((s) => s.raidCapable).flatMap((s) => s.drives);
      const planned = filterLogicalDisks(findConfiguration(logical, physical), root, nonRoot);
      const grouped: Record<string, LogicalDisk[]> = {};
      for (const ld of [...planned].sort((a, b) => String(a.controller ?? '').localeCompare(String(b.controller ?? '')))) {
        (grouped[String(ld.controller ?? '')] ??= []).push(ld);
      }
      const { configs, rebootRequired } = await submitCreate(call, storages, grouped, ctx.node.uuid);
      return this.settle(ctx, call, configs, rebootRequired);
    });
  }

  /** Ironic's delete_configuration: every volume with a RAID type deleted. */
  private delete(ctx: StepContext): Promise<StepRun> {
    return this.client.run(ctx.driver, async (call) => {
      const { configs, rebootRequired } = await submitDelete(call, await readStorage(call));
      return this.settle(ctx, call, configs, rebootRequired);
    });
  }

  /** Done: raid_config from the BMC. Waiting for the BMC: what is left kept, and the node rebooted to apply it. */
  private async settle(ctx: StepContext, call: RedfishCall, configs: RaidConfigs, rebootRequired: boolean): Promise<StepRun> {
    if (rebootRequired) {
      ctx.info[RAID_CONFIGS] = configs;
      // Ironic's reboot_to_finish_step: the BMC applies the change as the node boots into the
      // agent again, a new agent with a new token (as Ironic's power action wipes it).
      await bootAgent(ctx);
      return 'wait';
    }
    await ctx.record.raid({ raidConfig: await currentRaidConfig(call) });
    return 'done';
  }

  /** Ironic's _check_node_raid_config, once the agent is back: the BMC's tasks ended, what is left submitted. */
  private async checkRaidConfigs(ctx: StepContext): Promise<StepRun> {
    const configs = ctx.info[RAID_CONFIGS] as RaidConfigs | undefined;
    if (!configs) return 'done';
    return this.client.run(ctx.driver, async (call) => {
      const running: string[] = [];
      for (const uri of configs.task_monitor_uri ?? []) if (await inProgress(ctx, call, uri, configs.operation)) running.push(uri);
      configs.task_monitor_uri = running;
      if (running.length) return 'wait';
      const pending = configs.pending;
      if (pending && (typeof pending !== 'object' || Object.keys(pending).length)) {
        const storages = await readStorage(call);
        const next = configs.operation === 'create' ? await submitCreate(call, storages, pending as Record<string, LogicalDisk[]>, ctx.node.uuid) : await submitDelete(call, storages);
        if (next.rebootRequired) return this.settle(ctx, call, next.configs, true);
      }
      delete ctx.info[RAID_CONFIGS];
      ctx.log.info({ node: ctx.node.uuid }, 'RAID configuration completed');
      await ctx.record.raid({ raidConfig: await currentRaidConfig(call) });
      return 'done';
    });
  }
}

/** The system's Storage resources, their first controller and drives (Ironic's get_physical_disks reads). */
async function readStorage(call: RedfishCall): Promise<StorageInfo[]> {
  const system = await getSystem(call);
  const collection = linkPath(prop(system.body, 'Storage'));
  if (!collection) return [];
  const out: StorageInfo[] = [];
  for (const path of linkPaths(prop((await call.get(collection)).body, 'Members'))) {
    const { body } = await call.get(path);
    const id = str(body.Id) ?? path;
    const controllers = Array.isArray(body.StorageControllers) ? body.StorageControllers.filter(isObject) : [];
    const first = controllers[0];
    const types = first ? first.SupportedRAIDTypes : undefined;
    const drives: PhysicalDisk[] = [];
    // Intel lists one drive link many times.
    for (const d of [...new Set(linkPaths(prop(body, 'Drives')))]) {
      const drive = (await call.get(d)).body;
      drives.push({ id: str(drive.Id) ?? d, path: d, capacityBytes: num(drive.CapacityBytes) ?? 0, mediaType: str(drive.MediaType), protocol: str(drive.Protocol), storage: id });
    }
    out.push({ id, path, raidCapable: !(Array.isArray(types) && types.length === 0), hasController: first !== undefined, volumesPath: linkPath(prop(body, 'Volumes')), drives });
  }
  return out;
}

/** The task monitor an accepted request names (its Location). */
function locationOf(r: Reply): string | null {
  const l = r.headers.location;
  return (Array.isArray(l) ? l[0] : l) ?? null;
}

/** The answer's message for a failed request, as the BMC gave it. */
function bmcFailure(r: Reply, what: string): RaidConfigError {
  return new RaidConfigError(statusError(r, what).message);
}

/**
 * Ironic's _submit_create_configuration: each controller's volumes in turn; after one that
 * the BMC applies at the next boot, the rest of that controller's wait for it.
 */
async function submitCreate(call: RedfishCall, storages: StorageInfo[], grouped: Record<string, LogicalDisk[]>, node: string): Promise<{ configs: RaidConfigs; rebootRequired: boolean }> {
  const configs: RaidConfigs = { operation: 'create', pending: {} };
  const pending = configs.pending as Record<string, LogicalDisk[]>;
  let rebootRequired = false;
  for (const [controller, disks] of Object.entries(grouped)) {
    for (let i = 0; i < disks.length; i++) {
      const task = await createVolume(call, storages, disks[i], node);
      if (task) {
        (configs.task_monitor_uri ??= []).push(task);
        rebootRequired = true;
        if (i + 1 < disks.length) pending[controller] = disks.slice(i + 1);
        break;
      }
    }
  }
  return { configs, rebootRequired };
}

/** Ironic's create_virtual_disk: the volume POSTed on the controller of its drives; the task monitor when the BMC answers with one. */
async function createVolume(call: RedfishCall, storages: StorageInfo[], ld: LogicalDisk, node: string): Promise<string | null> {
  const drives = ld.physical_disks ?? [];
  const storage = storages.find((s) => s.raidCapable && s.drives.some((d) => drives.includes(d.id)));
  if (!storage?.volumesPath) throw new RaidConfigError(`No storage controller found for node ${node}`);
  const collection = (await call.get(storage.volumesPath)).body;
  const applyTime = applyTimeOf(collection);
  const payload: Json = { RAIDType: RAID_LEVELS[ld.raid_level].raidType };
  // As Ironic: no CapacityBytes for MAX, so that the controller sizes the volume with its own metadata overhead.
  if (ld.size_bytes !== 'MAX') payload.CapacityBytes = ld.size_bytes;
  if (drives.length) payload.Links = { Drives: drives.map((id) => ({ '@odata.id': storage.drives.find((d) => d.id === id)?.path })) };
  if (typeof ld.volume_name === 'string' && ld.volume_name) payload.Name = ld.volume_name;
  if (applyTime) payload['@Redfish.OperationApplyTime'] = applyTime;
  call.log.debug({ bmc: call.info.origin, payload }, 'Redfish RAID logical disk creation');
  const r = await call.send('POST', storage.volumesPath, { body: payload });
  if (r.status < 200 || r.status >= 300) throw bmcFailure(r, `Redfish driver failed to create virtual disk. Redfish POST ${storage.volumesPath}`);
  return r.status === 202 ? locationOf(r) : null;
}

/**
 * Ironic's _submit_delete_configuration: every RAID volume deleted, one per controller when
 * the BMC applies deletions at the next boot (`pending` says whether volumes are left then).
 */
async function submitDelete(call: RedfishCall, storages: StorageInfo[]): Promise<{ configs: RaidConfigs; rebootRequired: boolean }> {
  let anyLeft = false;
  const toDelete: Array<{ path: string; applyTime: ApplyTime }> = [];
  for (const s of storages) {
    if (!s.volumesPath) continue;
    const collection = (await call.get(s.volumesPath)).body;
    const applyTime = applyTimeOf(collection);
    const members = linkPaths(prop(collection, 'Members'));
    let i = 0;
    for (; i < members.length; i++) {
      const volume = (await call.get(members[i])).body;
      if (!str(volume.RAIDType)) continue;
      toDelete.push({ path: members[i], applyTime });
      if (applyTime === 'OnReset') {
        i++;
        break;
      }
    }
    anyLeft = anyLeft || i < members.length;
  }
  const configs: RaidConfigs = { operation: 'delete', pending: anyLeft };
  let rebootRequired = false;
  for (const v of toDelete) {
    const r = await call.send('DELETE', v.path, v.applyTime ? { body: { '@Redfish.OperationApplyTime': v.applyTime } } : {});
    if (r.status < 200 || r.status >= 300) throw bmcFailure(r, `Redfish DELETE ${v.path}`);
    const monitor = r.status === 202 ? locationOf(r) : null;
    if (monitor) {
      (configs.task_monitor_uri ??= []).push(monitor);
      rebootRequired = true;
    }
  }
  return { configs, rebootRequired };
}

/**
 * Ironic's _raid_config_in_progress: whether the BMC's task still runs. A task that cannot be
 * read is taken as done, and one that failed is logged, as Ironic does: raid_config then
 * shows what the BMC has.
 */
async function inProgress(ctx: StepContext, call: RedfishCall, uri: string, operation: string): Promise<boolean> {
  let r: Reply;
  try {
    r = await call.send('GET', uri);
  } catch (err) {
    ctx.log.info({ node: ctx.node.uuid, task: uri, err: (err as Error).message }, `Unable to get status of RAID ${operation} task; assuming task completed successfully`);
    return false;
  }
  if (r.status === 202) return true;
  const task = r.json();
  const state = task ? str(task.TaskState) : null;
  const status = task ? str(task.TaskStatus) : null;
  if (r.status >= 200 && r.status < 300 && state !== null && state !== 'Completed' && state !== 'Exception' && state !== 'Killed' && state !== 'Cancelled') return true;
  const messages = task && Array.isArray(task.Messages) ? task.Messages.map((m) => (isObject(m) ? str(m.Message) : null)).filter(Boolean) : [];
  if (state === 'Completed' && (status === 'OK' || status === 'Warning')) ctx.log.info({ node: ctx.node.uuid, task: uri }, `RAID ${operation} task completed`);
  else ctx.log.error({ node: ctx.node.uuid, task: uri, messages }, `RAID ${operation} task failed; messages: ${messages.join(', ')}`);
  return false;
}

/** Ironic's update_raid_config: raid_config lists the volumes with a RAID type, whatever made them. */
async function currentRaidConfig(call: RedfishCall): Promise<Record<string, unknown>> {
  const logicalDisks: Array<Record<string, unknown>> = [];
  for (const s of await readStorage(call)) {
    if (!s.volumesPath) continue;
    for (const path of linkPaths(prop((await call.get(s.volumesPath)).body, 'Members'))) {
      const v = (await call.get(path)).body;
      const raidType = str(v.RAIDType);
      const level = raidType ? raidLevelOf(raidType) : undefined;
      if (!level) continue;
      logicalDisks.push({ id: str(v.Id) ?? path, name: str(v.Name), controller: s.id, size_gb: Math.floor((num(v.CapacityBytes) ?? 0) / GI), raid_level: level });
    }
  }
  return { logical_disks: logicalDisks, last_updated: raidTimestamp() };
}
