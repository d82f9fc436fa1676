import type { Knex } from 'knex';
import { ProvisionState, eventChanges, type ProvisionWork } from '../../common/states.js';
import { CleaningInMaintenance, HardwareInspectionFailure, InvalidDriverInfo, UnsupportedDriverExtension } from '../../common/errors.js';
import { syncFirmware } from '../../db/firmware-components.js';
import { storeInventory } from '../../db/inventory.js';
import { syncBiosSettings } from '../../db/bios-settings.js';
import type { BiosSetting } from '../../common/bios.js';
import type { Node, NodeChanges } from '../../db/nodes.js';
import { applyInspectedPorts, createMissingPorts, portsOfNode } from '../../db/ports.js';
import { describeNode, validateForDeploy, validateInspectionBoot, validateInterface } from '../../drivers/validate-node.js';
import type { ExistingPort } from '../../drivers/inspection-hooks.js';
import type { FirmwareComponentReading } from '../../drivers/interfaces.js';
import type { UserStep } from '../../common/steps.js';
import type { Action, ActionContext, ActionResult } from './types.js';
import { argsOf, type ProvisionArgs } from '../../common/intent-kinds.js';
import { abortServicing, runServicing } from '../servicing.js';
import {
  abortCleaning, bootAgentForInspection, deployOf, endOfRunChanges, startCleaning, startDeploy, stepId, taskInterfaces, tearDownInspectionBoot, usesAgent,
} from '../steps.js';
import { checkAutomatedCleaning, cleanStepToAbortAfter } from '../../drivers/provision-checks.js';
import { agentStepFailureChanges } from './agent-continue.js';
import { storeConfigdrive, withdrawConfigdrive } from '../configdrive.js';
import { cleanUpAfterTimeout, cleanUpFailureChanges } from '../wait-timeouts.js';

function provisionArgsOf(ctx: Pick<ActionContext, 'intent'>): ProvisionArgs {
  return argsOf(ctx.intent, 'provision');
}

/** The work of an intent; intents queued before `work` existed only verified or confirmed. */
function workOf(ctx: Pick<ActionContext, 'intent' | 'node'>): ProvisionWork {
  return provisionArgsOf(ctx).work ?? (ctx.node.provisionState === ProvisionState.VERIFYING ? 'verify' : 'none');
}

/**
 * `manage` from enroll: the power interface must accept driver_info and answer a power-state
 * read; the vendor is cached (Ironic's node_cache_vendor).
 */
async function verify(ctx: ActionContext): Promise<NodeChanges> {
  const power = ctx.registry.impl('power', ctx.node.powerInterface);
  if (!power) throw new InvalidDriverInfo(`Power interface ${ctx.node.powerInterface} is not enabled on this conductor.`);
  power.validate(ctx.node.driverInfo);
  const changes: NodeChanges = { powerState: await power.getPowerState(ctx.driver) };
  const vendor = await vendorToCache(ctx);
  if (vendor) changes.properties = { ...ctx.node.properties, vendor };
  return changes;
}

/**
 * Ironic's node_cache_vendor: the vendor the management interface detects, when the node has
 * none cached (vendors do not change on the fly). Never fails the work it goes with.
 */
async function vendorToCache(ctx: ActionContext): Promise<string | null> {
  if (ctx.node.properties.vendor) return null;
  const management = ctx.registry.impl('management', ctx.node.managementInterface);
  if (!management?.detectVendor) return null;
  try {
    const vendor = await management.detectVendor(ctx.driver);
    if (vendor) ctx.log.info({ node: ctx.node.uuid, vendor }, `Detected vendor ${vendor} for node ${ctx.node.uuid}`);
    return vendor;
  } catch (err) {
    ctx.log.warn({ node: ctx.node.uuid, err: (err as Error).message }, 'Unexpected exception when trying to detect vendor');
    return null;
  }
}

/**
 * A deploy (Ironic's do_node_deploy): the config drive built and kept, then the node's deploy
 * steps planned and run, from its deploy interface's core `deploy` step on. An agent deploy
 * then waits in `wait call-back` for the agent's heartbeats; the others end here.
 */
async function deploy(ctx: ActionContext): Promise<NodeChanges> {
  validateForDeploy(ctx.registry, describeNode(ctx.node));
  if (ctx.configdrive) await storeConfigdrive(ctx, ctx.configdrive);
  const outcome = await startDeploy(ctx, provisionArgsOf(ctx).deploySteps);
  if (outcome.wait) return { ...outcome.changes, powerState: 'power on' };
  return { ...endOfRunChanges(ctx.node, 'deploy'), ...(outcome.powerState ? { powerState: outcome.powerState } : {}) };
}

/**
 * Ironic's _do_node_tear_down: the deploy interface undoes the instance's boot and powers the
 * node off (unless disable_power_off), the config drive published for it is withdrawn, and
 * instance_info and instance_uuid are wiped.
 */
async function tearDown(ctx: ActionContext): Promise<NodeChanges> {
  const changes: NodeChanges = { instanceInfo: {}, instanceUuid: null, deployStep: {} };
  const { poweredOff } = await deployOf(ctx).tearDown(taskInterfaces(ctx));
  await withdrawConfigdrive(ctx, ctx.configdrive);
  if (poweredOff) changes.powerState = 'power off';
  return changes;
}

/**
 * Cleaning (Ironic's do_node_clean): through the agent when the deploy interface works with
 * one (the node then waits in `clean wait`), else the declared steps run now. Automated
 * cleaning runs the steps with a priority above 0; manual cleaning the steps asked for, each
 * of which must exist. `pending` changes are written first, with the cleaning's own first write.
 */
async function clean(ctx: ActionContext, manual: UserStep[] | undefined, pending?: NodeChanges): Promise<NodeChanges> {
  if (manual === undefined) {
    try {
      checkAutomatedCleaning(ctx.node, ctx.conductor);
    } catch (err) {
      // As Ironic, the node has entered cleaning (a tear-down's instance is gone) and fails there.
      if (pending) await ctx.task.progress(pending);
      throw err;
    }
  }
  const outcome = await startCleaning(ctx, manual, provisionArgsOf(ctx).disableRamdisk === true, pending);
  if (outcome.wait) return outcome.changes;
  return { ...endOfRunChanges(ctx.node, 'clean'), ...(outcome.powerState ? { powerState: outcome.powerState } : {}) };
}

/**
 * Adoption (Ironic's _do_adoption): a node that already runs its instance becomes active
 * without a deploy. The boot interface is validated when the instance boots from a ramdisk it
 * serves, with the image it boots (Ironic's boot.validate checks a ramdisk instance's image,
 * which is the ramdisk deploy's own check here); the deploy interface's take-over has nothing
 * to do for the interfaces Galvanic has; the power state is read from the BMC, so that the
 * node shows what it is doing.
 */
async function adopt(ctx: ActionContext): Promise<NodeChanges> {
  if (deployOf(ctx).bootOption !== 'local') {
    const desc = describeNode(ctx.node);
    validateInterface(ctx.registry, desc, 'boot');
    validateInterface(ctx.registry, desc, 'deploy');
  }
  const state = await taskInterfaces(ctx).power.getPowerState(ctx.driver);
  return { powerState: state === 'error' ? null : state };
}

/**
 * In-band inspection's start (Ironic's inspector Common.inspect_hardware with a managed boot):
 * ports for the MACs the BMC reports, so that the agent finds its node by them; power off;
 * the agent ISO inserted and booted once; `inspect wait` written before the power on, so that
 * an agent quicker than this intent finds its node waiting.
 */
async function startInBandInspection(ctx: ActionContext): Promise<NodeChanges> {
  const node = ctx.node;
  const opts = provisionArgsOf(ctx).inspector ?? { powerOff: true, preCreatePorts: true };
  validateInspectionBoot(ctx.registry, describeNode(node));
  const power = taskInterfaces(ctx).power;
  if (opts.preCreatePorts) {
    const management = ctx.registry.impl('management', node.managementInterface);
    const macs = management?.getMacAddresses ? await management.getMacAddresses(ctx.driver) : [];
    if (macs.length) await ctx.task.progressWith({}, async (trx, held) => void (await createMissingPorts(trx, held.id, macs)));
  }
  if (!node.disablePowerOff) await power.setPowerState(ctx.driver, 'power off');
  await ctx.task.progress(eventChanges(node, 'wait'));
  // A new token for the new agent; the ISO inserted and booted once.
  await bootAgentForInspection(ctx);
  return { powerState: 'power on' };
}

/**
 * An agent's inventory processed (Ironic's conductor continue_inspection with AgentInspect):
 * the inspection hooks run over it; their changes to properties and ports and the inventory
 * are written with the outcome; the boot is torn down. A hook's failure tears the boot down
 * too and fails the inspection with Ironic's message.
 */
async function processInspection(ctx: ActionContext): Promise<{ changes: NodeChanges; write: ActionResult['write'] }> {
  const node = ctx.node;
  const args = provisionArgsOf(ctx);
  const iface = ctx.registry.impl('inspect', node.inspectInterface);
  if (!iface?.processInventory) {
    throw new UnsupportedDriverExtension(`Inspect interface ${node.inspectInterface} does not support processing inspection data for node ${node.uuid}.`);
  }
  let ports: ExistingPort[] = [];
  await ctx.task.progressWith({}, async (trx, held) => {
    ports = await portsOfNode(trx, held.id);
  });
  const inventory = args.inventory ?? {};
  const powerOff = args.inspector?.powerOff ?? true;
  let outcome;
  try {
    outcome = iface.processInventory(node, inventory, args.pluginData ?? {}, ports);
  } catch (err) {
    if (!(err instanceof HardwareInspectionFailure)) throw err;
    try {
      // Recorded now: the failure's outcome carries no power state.
      await ctx.task.progress(await tearDownInspectionBoot(ctx, powerOff));
    } catch (cleanup) {
      ctx.log.warn({ node: node.uuid, err: (cleanup as Error).message }, 'Cleaning up the inspection boot failed');
    }
    throw new HardwareInspectionFailure(`Failed to finish inspection: ${err.message}`);
  }
  const firmware = await firmwareAtInspection(ctx);
  const changes: NodeChanges = { ...(await tearDownInspectionBoot(ctx, powerOff)), properties: outcome.properties, inspectionFinishedAt: new Date() };
  const bios = await biosSettingsToCache(ctx);
  const { logs: _logs, ...pluginData } = outcome.pluginData;
  return {
    changes,
    write: async (trx: Knex.Transaction, held: Node) => {
      await applyInspectedPorts(trx, held.id, outcome);
      await storeInventory(trx, held.id, { inventory, pluginData });
      if (bios) await syncBiosSettings(trx, held.id, bios);
      await syncFirmware(trx, held.id, firmware);
    },
  };
}

/**
 * The node's BIOS settings read for the cache (Ironic's node_cache_bios_settings): null when
 * its BIOS interface reads none. Never fails the work it goes with: a failure is logged.
 */
async function biosSettingsToCache(ctx: ActionContext): Promise<BiosSetting[] | null> {
  const bios = ctx.registry.impl('bios', ctx.node.biosInterface);
  if (!bios?.readSettings) return null;
  try {
    return await bios.readSettings(ctx.driver);
  } catch (err) {
    const level = err instanceof UnsupportedDriverExtension ? 'warn' : 'error';
    ctx.log[level]({ node: ctx.node.uuid, err: (err as Error).message }, `Caching of bios settings failed on node ${ctx.node.uuid}.`);
    return null;
  }
}

/**
 * Ironic's node_cache_firmware_components at the end of an inspection: the versions the
 * node's firmware interface reads, if it reads any. Never fails the inspection.
 */
async function firmwareAtInspection(ctx: ActionContext): Promise<FirmwareComponentReading[]> {
  const iface = ctx.registry.impl('firmware', ctx.node.firmwareInterface);
  if (!iface?.readComponents) return [];
  try {
    iface.validate(ctx.node.driverInfo);
    return await iface.readComponents(ctx.driver);
  } catch (err) {
    ctx.log.warn({ node: ctx.node.uuid, err: (err as Error).message }, 'Caching of firmware components failed');
    return [];
  }
}

/** Out-of-band inspection: properties merged, ports created for new MACs, the inventory stored. */
async function inspect(ctx: ActionContext): Promise<{ changes: NodeChanges; write?: ActionResult['write']; waiting?: boolean }> {
  const node = ctx.node;
  validateInterface(ctx.registry, describeNode(node), 'inspect');
  const iface = ctx.registry.impl('inspect', node.inspectInterface)!;
  if (iface.inBand) return { changes: await startInBandInspection(ctx), waiting: true };
  const started = new Date();
  const found = await iface.inspectHardware(ctx.driver, typeof node.properties.capabilities === 'string' ? node.properties.capabilities : undefined);
  const changes: NodeChanges = { inspectionStartedAt: started, inspectionFinishedAt: new Date() };
  const bios = await biosSettingsToCache(ctx);
  const writeBios = async (trx: Knex.Transaction, held: Node) => {
    if (bios) await syncBiosSettings(trx, held.id, bios);
  };
  if (!found) return { changes, write: writeBios };
  changes.properties = { ...node.properties, ...found.properties };
  const firmware = await firmwareAtInspection(ctx);
  return {
    changes,
    write: async (trx: Knex.Transaction, held: Node) => {
      await storeInventory(trx, held.id, { inventory: found.inventory, pluginData: found.pluginData });
      await createMissingPorts(trx, held.id, found.macs);
      await writeBios(trx, held);
      await syncFirmware(trx, held.id, firmware);
    },
  };
}

const FAILURE_WORDS: Record<ProvisionWork, string> = {
  verify: 'Failed to verify node', inspect: 'Failed to inspect hardware of node', process_inspection: 'Failed to finish inspection of node',
  clean: 'Failed to clean node',
  deploy: 'Failed to deploy node', tear_down: 'Failed to tear down node', none: 'Failed to move node', abort: 'Failed to abort on node',
  service: 'Cannot service node',
  adopt: 'Error while attempting to adopt node',
  clean_up_after_timeout: 'Failed to clean up after the timeout on node',
};

/**
 * Runs the work of a provision transition the API started, and ends it in its target state.
 * Each phase is one intent holding the node's reservation; a conductor that dies mid-way
 * leaves the intent to the survivors, who fail it into the transition's failure state.
 */
export const provisionAction: Action = {
  notification: {
    prefix: 'baremetal.node.provision_set',
    payloadName: 'NodeSetProvisionStatePayload',
    extra: (ctx) => ({ event: provisionArgsOf(ctx).verb, previous_provision_state: ctx.node.provisionState }),
  },

  async run(ctx: ActionContext): Promise<ActionResult> {
    const args = provisionArgsOf(ctx);
    const work = workOf(ctx);
    let changes: NodeChanges = {};
    let write: ActionResult['write'];
    let event = `Node moved to ${args.target} (${args.verb}).`;
    switch (work) {
      case 'verify':
        changes = await verify(ctx);
        break;
      case 'deploy':
        changes = await deploy(ctx);
        event = `Deployed (${ctx.node.deployInterface} deploy), node is ${args.target}.`;
        break;
      case 'tear_down': {
        changes = await tearDown(ctx);
        // Then automated cleaning, as Ironic's DELETING --clean--> CLEANING.
        const cleaning: NodeChanges = { ...changes, provisionState: ProvisionState.CLEANING, targetProvisionState: ProvisionState.AVAILABLE };
        if (args.automatedClean ?? true) Object.assign(changes, await clean(ctx, undefined, cleaning));
        else await ctx.task.progress(cleaning);
        event = `Torn down and cleaned, node is ${args.target}.`;
        break;
      }
      case 'clean': {
        const automated = args.cleanSteps === undefined;
        if (!automated || (args.automatedClean ?? true)) changes = await clean(ctx, args.cleanSteps);
        event = automated ? `Automated cleaning done, node is ${args.target}.` : `Manual cleaning (${args.cleanSteps!.length} step(s)) done.`;
        break;
      }
      case 'inspect': {
        const r = await inspect(ctx);
        changes = r.changes;
        write = r.write;
        event = `Inspection done, node is ${args.target}.`;
        if (r.waiting) {
          // The node stays in inspect wait (or the agent has already answered): only the power state changes.
          return { changes, history: { severity: 'INFO', eventType: 'provisioning', event: 'Agent booted for in-band inspection, node is inspect wait.' } };
        }
        break;
      }
      case 'process_inspection': {
        const r = await processInspection(ctx);
        changes = r.changes;
        write = r.write;
        event = `Inspection data processed, node is ${args.target}.`;
        break;
      }
      case 'adopt':
        changes = await adopt(ctx);
        event = `Successfully adopted node ${ctx.node.uuid}, node is ${args.target}.`;
        break;
      case 'service': {
        const outcome = await runServicing(ctx, args.serviceSteps ?? []);
        changes = outcome.changes ?? {};
        event = `Servicing (${(args.serviceSteps ?? []).length} step(s)) done, node is ${args.target}.`;
        break;
      }
      case 'abort': {
        // An in-band inspection aborted leaves the agent ISO to eject and the node to power off.
        const iface = ctx.registry.impl('inspect', ctx.node.inspectInterface);
        if (iface?.inBand && args.target === ProvisionState.INSPECTFAIL) {
          changes = await tearDownInspectionBoot(ctx, true);
          event = 'Inspection boot cleaned up (agent ISO ejected, node powered off).';
        }
        // An abort marked for after a step that was not abortable: that step's end has torn the cleaning down already.
        if (ctx.node.provisionState === ProvisionState.CLEANFAIL && usesAgent(ctx) && ctx.node.lastError === null) {
          changes = await abortCleaning(ctx);
          event = changes.lastError as string;
        }
        // A servicing aborted in service wait (the API moved it to service failed): the agent's boot undone, the instance booted.
        if (ctx.node.provisionState === ProvisionState.SERVICEFAIL && args.verb === 'abort' && ctx.node.lastError === null) {
          changes = await abortServicing(ctx);
          event = changes.lastError as string;
        }
        if (ctx.node.provisionState === ProvisionState.CLEANWAIT) {
          // The API marked a step that was not abortable; the cleaning may have moved on since.
          const marked = cleanStepToAbortAfter(ctx.node.cleanStep);
          if (marked) {
            changes = ctx.node.cleanStep.abort_after === true ? {} : { cleanStep: marked };
            event = `Clean step "${stepId(marked as { interface: string; step: string })}" is not abortable: the cleaning is aborted once it has ended.`;
          } else {
            changes = { ...(await abortCleaning(ctx)), ...eventChanges(ctx.node, 'abort') };
            event = changes.lastError as string;
          }
        }
        // The node may have moved on (manage) while this waited: its state is no longer this intent's.
        if (ctx.node.provisionState !== args.target) return { changes, history: { severity: 'INFO', eventType: 'provisioning', event } };
        break;
      }
      case 'clean_up_after_timeout':
        // Queued by the conductor's check, which failed the node: its state is not this intent's.
        return cleanUpAfterTimeout(ctx, args.target);
      case 'none':
        // The API ended the transition when it accepted it (manage from available). A request
        // accepted after it (inspect) may move the node on while this runs, even after it has
        // read the node: this writes nothing of the node's state, which is no longer its own.
        return { history: { severity: 'INFO', eventType: 'provisioning', event } };
    }
    // A run that waits for its agent keeps its target; the agent's heartbeats carry it on.
    const waiting = changes.provisionState === ProvisionState.DEPLOYWAIT || changes.provisionState === ProvisionState.CLEANWAIT || changes.provisionState === ProvisionState.SERVICEWAIT;
    return {
      changes: {
        ...changes, provisionState: changes.provisionState ?? args.target, targetProvisionState: waiting ? args.target : null, provisionUpdatedAt: new Date(),
      },
      write,
      // Ironic records no event when a node starts waiting for its agent; the run's end has one.
      ...(waiting ? {} : { history: { severity: 'INFO', eventType: 'provisioning', event } }),
    };
  },

  onFailure(ctx: Pick<ActionContext, 'node' | 'intent'>, error: Error, final: boolean) {
    if (!final) return {};
    const args = provisionArgsOf(ctx);
    const work = workOf(ctx);
    if (work === 'clean_up_after_timeout') return cleanUpFailureChanges(ctx.node, args.target, error);
    // A tear-down that got as far as cleaning fails as cleaning does.
    const onFail = work === 'tear_down' && ctx.node.provisionState === ProvisionState.CLEANING ? ProvisionState.CLEANFAIL : args.onFail;
    const reason = error.message || String(error);
    if (work === 'service' && ctx.node.provisionState === ProvisionState.SERVICEWAIT) {
      // The agent was booted (service wait written): the servicing fails as the agent's runs fail.
      return { ...agentStepFailureChanges(ctx.node, 'service', error), lastError: `${FAILURE_WORDS[work]} ${ctx.node.uuid}: ${reason}` };
    }
    if (work === 'deploy' || work === 'clean' || work === 'tear_down') {
      const failed = agentStepFailureChanges(ctx.node, onFail === ProvisionState.DEPLOYFAIL ? 'deploy' : 'clean', error);
      if (onFail !== ProvisionState.DEPLOYFAIL && onFail !== ProvisionState.CLEANFAIL) failed.provisionState = onFail;
      return { ...failed, lastError: error instanceof CleaningInMaintenance ? reason : `${FAILURE_WORDS[work]} ${ctx.node.uuid}: ${reason}` };
    }
    // Processing an agent's inventory fails with Ironic's own message, or in the boot's clean-up.
    const lastError = work === 'adopt' ? `${FAILURE_WORDS[work]} ${ctx.node.uuid}: ${reason}.`
      : work !== 'process_inspection' ? `${FAILURE_WORDS[work]} ${ctx.node.uuid}: ${reason}`
      : error instanceof HardwareInspectionFailure ? reason : `Inspection clean up failed: ${reason}`;
    return {
      provisionState: onFail,
      targetProvisionState: null,
      provisionUpdatedAt: new Date(),
      deployStep: {},
      cleanStep: {},
      lastError,
      // Ironic forgets the power state of a node it failed to adopt: it is likely wrong.
      ...(work === 'adopt' ? { powerState: null } : {}),
    };
  },
};
