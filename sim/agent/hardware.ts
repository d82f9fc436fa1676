/**
 * IPA's `hardware.py`, for the GenericHardwareManager alone: its version, its steps, and the
 * steps' dispatch (`dispatch_to_managers`), with the faults a host's agent may be given.
 */
import { COREOS_DEPLOY_STEPS, COREOS_MANAGER, COREOS_MANAGER_VERSION, installCoreos } from './coreos.js';
import type { ExtensionAgent } from './extensions/base.js';
import { diskAfter, validateImageInfo, writeImage } from './image.js';
import {
  CLEAN_STEPS,
  DEPLOY_STEPS,
  EXTRA_HARDWARE_MANAGER,
  EXTRA_HARDWARE_MANAGER_VERSION,
  HARDWARE_MANAGER,
  SERVICE_STEPS,
  servicingError,
  cleaningError,
  deploymentError,
  executionError,
  methodNotFound,
  pyRepr,
  versionMismatch,
  type Step,
} from './ipa.js';
import { sleep, type Life } from './life.js';
import type { InventoryDisk } from './inventory.js';
import { applyConfiguration, createConfiguration, deleteConfiguration, type RaidHost } from './raid.js';

const STEPS = { clean: CLEAN_STEPS, deploy: DEPLOY_STEPS, service: SERVICE_STEPS } as const;

/** How long steps without real work take. */
const STEP_MS: Record<string, number> = { erase_devices: 1000, erase_devices_metadata: 100, erase_devices_express: 200 };
export const DEFAULT_STEP_MS = 50;

/** The vendor manager's clean steps this host's agent is given (`extraCleanSteps`), as IPA lists them. */
function extraCleanSteps(agent: ExtensionAgent): Step[] {
  return (agent.faults.extraCleanSteps ?? []).map((s) => ({
    step: s.step, priority: s.priority ?? 0, interface: s.interface ?? 'deploy', reboot_requested: s.reboot_requested ?? false, abortable: s.abortable ?? true,
  }));
}

/** `get_current_versions`: the hardware managers and their versions. */
export function hardwareVersions(agent: ExtensionAgent): Record<string, string> {
  const out: Record<string, string> = { [HARDWARE_MANAGER]: agent.hwVersion };
  if (agent.env.coreosInstaller) out[COREOS_MANAGER] = COREOS_MANAGER_VERSION;
  if (extraCleanSteps(agent).length) out[EXTRA_HARDWARE_MANAGER] = EXTRA_HARDWARE_MANAGER_VERSION;
  return out;
}

/** `get_clean_steps` / `get_deploy_steps` of every manager, with the agent's versions. */
export function listSteps(agent: ExtensionAgent, kind: 'clean' | 'deploy' | 'service'): unknown {
  const coreos = kind === 'deploy' && agent.env.coreosInstaller ? { [COREOS_MANAGER]: COREOS_DEPLOY_STEPS.map((s) => ({ ...s })) } : {};
  const extra = kind === 'clean' ? extraCleanSteps(agent) : [];
  return {
    [`${kind}_steps`]: {
      [HARDWARE_MANAGER]: STEPS[kind].map((s) => (kind === 'clean' && s.step === agent.faults.unabortableStep ? { ...s, abortable: false } : { ...s })),
      ...coreos,
      ...(extra.length ? { [EXTRA_HARDWARE_MANAGER]: extra } : {}),
    },
    hardware_manager_version: hardwareVersions(agent),
  };
}

/** The host as the RAID steps see it: its disks, which hold partitions, its md devices (changed on a copy until the step ends). */
function raidHost(agent: ExtensionAgent): RaidHost {
  const disks = (agent.facts.inventory.disks as InventoryDisk[] | undefined) ?? [];
  const current = agent.softwareRaid;
  return {
    disks,
    partitioned: () => [...new Set([...(agent.disk && agent.facts.rootDisk ? [agent.facts.rootDisk.name] : []), ...(current ?? []).flatMap((d) => d.holders)])],
    softwareRaid: current,
  };
}

/** A JSON value with its object keys sorted: IPA compares the versions as dicts, in any order. */
function canonical(v: unknown): string {
  if (v === null || typeof v !== 'object') return JSON.stringify(v);
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canonical((v as Record<string, unknown>)[k])}`).join(',')}}`;
}

function isKnownStep(agent: ExtensionAgent, name: string): boolean {
  if ([...CLEAN_STEPS, ...DEPLOY_STEPS, ...SERVICE_STEPS, ...extraCleanSteps(agent)].some((s) => s.step === name)) return true;
  return agent.env.coreosInstaller && COREOS_DEPLOY_STEPS.some((s) => s.step === name);
}

/** `execute_clean_step` / `execute_deploy_step`, with the step faults. */
export async function executeStep(agent: ExtensionAgent, kind: 'clean' | 'deploy' | 'service', params: Record<string, unknown>, life: Life): Promise<unknown> {
  const given = params[`${kind}_version`];
  if (given !== undefined && given !== null) {
    if (agent.faults.versionMismatch) {
      // A newer agent: its hardware managers report another version from now on.
      agent.hwVersion = `${agent.hwVersion}.1`;
      agent.faults = { ...agent.faults, versionMismatch: false };
    }
    if (canonical(given) !== canonical(hardwareVersions(agent))) throw versionMismatch(hardwareVersions(agent), given);
  }
  const step = params.step as Record<string, unknown> | null;
  if (!step || typeof step !== 'object' || !('step' in step)) throw executionError(`Malformed ${kind}_step, no "step" key: ${pyRepr(step)}`);
  const name = String(step.step);
  // IPA dispatches a step to whichever manager has its method.
  if (!isKnownStep(agent, name)) throw methodNotFound(name);
  const args: Record<string, unknown> = { ...params, ...((step.args as Record<string, unknown> | undefined) ?? {}) };
  const fail = { clean: cleaningError, deploy: deploymentError, service: servicingError }[kind];
  const f = agent.faults;
  if (f.hangStep === name) return new Promise<never>(() => undefined);
  let result: unknown = null;
  let work: () => void = () => undefined;
  const seconds = f.stepSeconds?.[name];
  let busyMs = typeof seconds === 'number' ? seconds * 1000 : (STEP_MS[name] ?? DEFAULT_STEP_MS);
  const started = Date.now();
  if (name === 'write_image') {
    const info = validateImageInfo(args.image_info);
    const w = await writeImage(info, args.configdrive, agent.env.dispatcher, life.signal);
    if (life.dead) return null;
    // The write takes its time: at least the size over the write rate.
    busyMs = Math.max(0, w.written.bytes / agent.env.writeBytesPerMs - (Date.now() - started));
    work = () => {
      agent.disk = diskAfter(w);
      agent.configdriveImage = w.configdrive?.image ?? null;
      life.partitionUuids = w.parts.uuids;
    };
    result = { result: `prepare_image: image (${info.id}) written to device /dev/sda root_uuid=${w.parts.uuids['root uuid']}` };
  } else if (name === 'install_coreos') {
    const installed = installCoreos(args.node);
    work = () => {
      agent.disk = installed;
    };
  } else if (name === 'create_configuration' || name === 'delete_configuration' || name === 'apply_configuration') {
    // Built before the step's time passes, so that a refusal fails it at once, as IPA's checks do.
    const host = raidHost(agent);
    const node = (args.node ?? {}) as Record<string, unknown>;
    const built = name === 'create_configuration' ? createConfiguration(host, node)
      : name === 'delete_configuration' ? deleteConfiguration(host) : applyConfiguration(host, node, args.raid_config, args.delete_existing);
    const devices = host.softwareRaid;
    work = () => {
      agent.softwareRaid = devices;
      // The disks were repartitioned: what was written on them is gone.
      if (name !== 'delete_configuration' && devices) agent.disk = null;
    };
    result = built;
  } else if (name.startsWith('erase_devices')) {
    work = () => {
      agent.disk = null;
      agent.configdriveImage = null;
    };
    result = name === 'erase_devices' ? Object.fromEntries(((agent.facts.inventory.disks as Array<{ name: string }>) ?? []).map((d) => [d.name, null])) : null;
  }
  if (f.crashDuringStep === name || f.rebootDuringStep === name) {
    await sleep(life, busyMs / 2);
    if (f.crashDuringStep === name) agent.kill(`crashed during ${name}`);
    else agent.power('ForceRestart');
    return new Promise<never>(() => undefined);
  }
  await sleep(life, busyMs);
  if (f.failStep === name) throw fail(f.failMessage ?? `Simulated failure of step ${name}`);
  work();
  return { [`${kind}_result`]: result, [`${kind}_step`]: step };
}
