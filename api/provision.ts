import type { FastifyInstance, FastifyRequest } from 'fastify';
import { NotAcceptable, InvalidParameterValue, MissingParameterValue } from '../common/errors.js';
import { intentArgs } from '../common/intent-kinds.js';
import type { IntentAcceptor } from './intents.js';
import type { Node, NodeChanges } from '../db/nodes.js';
import { checkNodeForProvision, cleanStepToAbortAfter, provisionTransition, transitionStartChanges } from '../drivers/provision-checks.js';
import { bootNeedsPorts } from '../drivers/validate-node.js';
import { bootPort } from '../drivers/dhcp.js';
import { portsOfNode } from '../db/ports.js';
import type { ApiDeps } from './deps.js';
import { baseUrl } from './links.js';
import { requireObject } from './body.js';
import { getRunbook } from '../db/runbooks.js';
import { traitsOfNode } from '../db/traits.js';
import type { Knex } from 'knex';
import { ProvisionState } from '../common/states.js';
import type { Config } from '../common/config.js';
import { STEP_INTERFACES } from '../common/steps.js';
import { deploySteps as planDeploySteps } from '../drivers/step-plan.js';

/** The `[inspector]` options an in-band inspection runs with, fixed when it is asked for. */
export function inspectorArgs(config: Readonly<Config>): { powerOff: boolean; preCreatePorts: boolean } {
  return { powerOff: config.inspector.power_off, preCreatePorts: config.inspector.pre_create_ports };
}

/** The microversion each verb needs (openstacksdk's PROVISIONING_VERSIONS). */
const VERB_FLOORS: Record<string, number> = {
  manage: 4, provide: 4, inspect: 6, abort: 13, clean: 15, adopt: 17, rescue: 38, unrescue: 38, deploy: 73, undeploy: 73,
  unhold: 85, service: 87,
};
/** Body fields and the microversion that introduced each. */
const BODY_FIELDS: Record<string, number> = {
  target: 1, configdrive: 1, clean_steps: 15, rescue_password: 38, deploy_steps: 69, disable_ramdisk: 70, service_steps: 87, runbook: 92,
};
/** Ironic's last_error for an inspection aborted in inspect wait. */
const INSPECTION_ABORTED = 'Inspection was aborted by request.';
const CONFIGDRIVE_KEYS = new Set(['meta_data', 'network_data', 'user_data', 'vendor_data']);
const STEP_KEYS = new Set(['interface', 'step', 'args', 'priority']);

function own<T>(table: Record<string, T>, key: string): T | undefined {
  return Object.hasOwn(table, key) ? table[key] : undefined;
}

/**
 * The config drive a request gives: Ironic tests it for truth (`if configdrive:`), so an empty
 * string or dict is none at all: not checked, not stored (Metal3 sends `{}` with a live ISO).
 */
function givenConfigdrive(value: unknown): unknown {
  if (value === undefined || value === null || value === '') return undefined;
  if (typeof value === 'object' && !Array.isArray(value) && Object.keys(value).length === 0) return undefined;
  return value;
}

/** Ironic's configdrive rules: a string (gzip+base64 ISO or URL) always, a dict from 1.56 (with vendor_data from 1.59). */
function checkConfigdrive(value: unknown, req: FastifyRequest): void {
  if (value === null || value === undefined) return;
  if (typeof value === 'string') return;
  if (typeof value !== 'object' || Array.isArray(value)) {
    throw new InvalidParameterValue('Invalid input for field/attribute configdrive. Value: ' + JSON.stringify(value) + '. Expected a string or an object.');
  }
  if (!req.apiVersion.atLeast(56)) {
    throw new InvalidParameterValue('Providing a JSON object for configdrive is only supported starting with API version 1.56');
  }
  const bad = Object.keys(value).filter((k) => !CONFIGDRIVE_KEYS.has(k));
  if (bad.length) throw new InvalidParameterValue(`Invalid configdrive format: unexpected key(s) ${bad.join(', ')}; allowed are meta_data, network_data, user_data, vendor_data.`);
  // Ironic's check_allow_configdrive: vendor_data came with 1.59.
  if ('vendor_data' in value && !req.apiVersion.atLeast(59)) {
    throw new InvalidParameterValue('Providing vendor_data in configdrive is only supported starting with API version 1.59');
  }
  const d = value as Record<string, unknown>;
  for (const k of ['meta_data', 'network_data', 'vendor_data']) {
    if (d[k] !== undefined && (typeof d[k] !== 'object' || d[k] === null || Array.isArray(d[k]))) {
      throw new InvalidParameterValue(`Invalid configdrive format: ${k} must be an object.`);
    }
  }
  if (d.user_data !== undefined && typeof d.user_data !== 'string' && (typeof d.user_data !== 'object' || d.user_data === null)) {
    throw new InvalidParameterValue('Invalid configdrive format: user_data must be a string, an object or a list.');
  }
}

/**
 * clean_steps / deploy_steps: a list of {interface, step, args?}, as Ironic's _STEPS_SCHEMA, or
 * for deploy steps {interface, step, args, priority} (DEPLOY_STEP_SCHEMA: both required, the
 * priority an integer or a string of digits).
 */
function checkSteps(value: unknown, name: string, withPriority: boolean): Array<{ interface: string; step: string; args?: Record<string, unknown>; priority?: number }> {
  if (!Array.isArray(value)) throw new InvalidParameterValue(`Invalid ${name}: expected a list of steps.`);
  return value.map((s, i) => {
    if (!s || typeof s !== 'object' || Array.isArray(s)) throw new InvalidParameterValue(`Invalid ${name}: step ${i} is not an object.`);
    const step = s as Record<string, unknown>;
    const extra = Object.keys(step).filter((k) => !STEP_KEYS.has(k) || (k === 'priority' && !withPriority));
    if (extra.length) throw new InvalidParameterValue(`Invalid ${name}: step ${i} has unexpected key(s) ${extra.join(', ')}.`);
    if (typeof step.interface !== 'string' || !STEP_INTERFACES.includes(step.interface)) {
      throw new InvalidParameterValue(`Invalid ${name}: step ${i} 'interface' must be one of ${STEP_INTERFACES.join(', ')}.`);
    }
    if (typeof step.step !== 'string' || step.step === '') throw new InvalidParameterValue(`Invalid ${name}: step ${i} 'step' must be a non-empty string.`);
    if (step.args !== undefined && (typeof step.args !== 'object' || step.args === null || Array.isArray(step.args))) {
      throw new InvalidParameterValue(`Invalid ${name}: step ${i} 'args' must be an object.`);
    }
    let priority: number | undefined;
    if (withPriority) {
      if (step.priority === undefined) throw new InvalidParameterValue(`Invalid ${name}: step ${i}: 'priority' is a required property.`);
      if (typeof step.priority === 'string' && /^[0-9]+$/.test(step.priority)) priority = Number(step.priority);
      else if (Number.isInteger(step.priority) && (step.priority as number) >= 0) priority = step.priority as number;
      else throw new InvalidParameterValue(`Invalid ${name}: step ${i} 'priority' must be a non-negative integer.`);
      if (step.args === undefined) throw new InvalidParameterValue(`Invalid ${name}: step ${i}: 'args' is a required property.`);
    }
    return { interface: step.interface, step: step.step, args: step.args as Record<string, unknown> | undefined, priority };
  });
}

/**
 * A runbook's steps for a node (Ironic's _handle_runbook): the runbook must exist and the node
 * carry a trait of its name; the steps run in the order they are listed.
 */
/**
 * `clean_steps` with clean, `service_steps` with service: required there unless a runbook is
 * named, refused with any other verb.
 */
function stepsOfVerb(body: Record<string, unknown>, verb: string, stepsVerb: 'clean' | 'service', runbook: string | undefined): ReturnType<typeof checkSteps> | undefined {
  const key = `${stepsVerb}_steps`;
  const given = body[key] !== undefined && body[key] !== null;
  if (verb !== stepsVerb) {
    if (given) throw new InvalidParameterValue(`"${key}" is only valid when setting target provision state to ${stepsVerb}`);
    return undefined;
  }
  if (!given && runbook === undefined) throw new MissingParameterValue(`"${key}" is required when setting target provision state to ${stepsVerb}`);
  return given ? checkSteps(body[key], key, false) : undefined;
}

async function stepsOfRunbook(trx: Knex, node: Node, ident: string): Promise<ReturnType<typeof checkSteps>> {
  const runbook = await getRunbook(trx, ident);
  if (!(await traitsOfNode(trx, node.id)).includes(runbook.name)) {
    throw new InvalidParameterValue(`This runbook has not been approved for use on this node ${node.uuid}. Please ask an administrator to add it to your node traits.`);
  }
  return runbook.steps.map((s) => ({ interface: s.interface, step: s.step, args: s.args }));
}

/** A checked provision state change body. */
export interface ProvisionRequest {
  verb: string;
  /** Whether the verb deploys (active, deploy, rebuild). */
  deploying: boolean;
  configdrive?: unknown;
  runbook?: string;
  cleanSteps?: ReturnType<typeof checkSteps>;
  serviceSteps?: ReturnType<typeof checkSteps>;
  deploySteps?: ReturnType<typeof checkSteps>;
  disableRamdisk?: boolean;
}

/**
 * Checks a `PUT …/states/provision` body against the request's microversion: what can be
 * refused before any node is looked at. Group operations check their provision steps here too.
 */
export function checkProvisionBody(body: Record<string, unknown>, req: FastifyRequest): ProvisionRequest {
  const unknown = Object.keys(body).filter((k) => own(BODY_FIELDS, k) === undefined);
  if (unknown.length) throw new InvalidParameterValue(`Unknown attribute(s) for provision state change: ${unknown.join(', ')}`);
  for (const k of Object.keys(body)) {
    const since = BODY_FIELDS[k];
    if (!req.apiVersion.atLeast(since)) throw new NotAcceptable(`The "${k}" parameter requires API version 1.${since} or later.`);
  }
  const verb = body.target;
  if (typeof verb !== 'string') throw new InvalidParameterValue('Invalid input for field/attribute target. Expected a string.');
  const floor = own(VERB_FLOORS, verb);
  if (floor !== undefined && !req.apiVersion.atLeast(floor)) {
    throw new NotAcceptable(`The "${verb}" verb requires API version 1.${floor} or later.`);
  }
  const deploying = verb === 'active' || verb === 'deploy' || verb === 'rebuild';
  const configdrive = givenConfigdrive(body.configdrive);
  if (configdrive !== undefined) {
    // Ironic's check_allow_configdrive: `active`, and `rebuild` from 1.35 (not the 1.73 `deploy` alias).
    const allowed = req.apiVersion.atLeast(35) ? ['active', 'rebuild'] : ['active'];
    if (!allowed.includes(verb)) {
      throw new InvalidParameterValue(`Adding a config drive is only supported when setting provision state to ${allowed.join(', ')}`);
    }
  }
  checkConfigdrive(configdrive, req);
  let deploySteps: ReturnType<typeof checkSteps> | undefined;
  if (body.deploy_steps !== undefined && body.deploy_steps !== null && !deploying) {
    throw new InvalidParameterValue('"deploy_steps" is only valid when setting target provision state to active, deploy or rebuild');
  }
  // Any interface may offer deploy steps (raid.apply_configuration, bios.apply_configuration):
  // the node's are checked against what its interfaces declare when the deploy is accepted.
  if (body.deploy_steps !== undefined && body.deploy_steps !== null) deploySteps = checkSteps(body.deploy_steps, 'deploy_steps', true);
  const runbook = body.runbook === undefined || body.runbook === null ? undefined : body.runbook;
  if (runbook !== undefined && typeof runbook !== 'string') throw new InvalidParameterValue('Invalid input for field/attribute runbook. Expected a string.');
  const cleanSteps = stepsOfVerb(body, verb, 'clean', runbook);
  const serviceSteps = stepsOfVerb(body, verb, 'service', runbook);
  if (body.disable_ramdisk !== undefined && verb !== 'clean') {
    throw new InvalidParameterValue('"disable_ramdisk" is only valid when setting target provision state to clean');
  }
  if (body.disable_ramdisk !== undefined && typeof body.disable_ramdisk !== 'boolean') {
    throw new InvalidParameterValue(`Invalid input for field/attribute disable_ramdisk. Value: ${JSON.stringify(body.disable_ramdisk)}. Expected a boolean.`);
  }
  return {
    verb, deploying, configdrive, runbook, cleanSteps, serviceSteps, deploySteps,
    disableRamdisk: body.disable_ramdisk === true,
  };
}

export function registerProvisionRoutes(app: FastifyInstance, deps: ApiDeps, acceptor: IntentAcceptor): void {
  const { config, registry } = deps;

  app.put('/v1/nodes/:node/states/provision', async (req, reply) => {
    const checked = checkProvisionBody(requireObject(req.body, 'provision state change'), req);
    const { verb, deploying, configdrive, runbook, deploySteps, disableRamdisk } = checked;
    const ident = (req.params as { node: string }).node;
    // Through the acceptor as every action: one transaction with the node's row lock, group
    // commit, and Idempotency-Key (a repeated request finds the intent the first one queued).
    const { node } = await acceptor.accept(req, ident, {
      steps: [],
      resolve: async (current, trx) => {
        const t = provisionTransition(current, verb);
        // Aborting an inspection that waits for its agent came with 1.41.
        if (verb === 'abort' && current.provisionState === ProvisionState.INSPECTWAIT && !req.apiVersion.atLeast(41)) {
          throw new NotAcceptable('Request not acceptable.');
        }
        let { cleanSteps, serviceSteps } = checked;
        if (runbook !== undefined) {
          const steps = await stepsOfRunbook(trx, current, runbook);
          if (verb === 'clean') {
            if (cleanSteps) throw new InvalidParameterValue('Please provide either "clean_steps" or a runbook, but not both.');
            cleanSteps = steps;
          } else if (verb === 'service') {
            if (serviceSteps) throw new InvalidParameterValue('Please provide either "service_steps" or a runbook, but not both.');
            serviceSteps = steps;
          }
        }
        const ports = bootNeedsPorts(registry, current) ? (await portsOfNode(trx, current.id)).map(bootPort) : undefined;
        checkNodeForProvision(registry, current, verb, t, config.conductor, ports);
        // The user's deploy steps as the conductor will plan them (the agent's own are checked once it runs).
        if (deploySteps && t.work === 'deploy') planDeploySteps(current, registry, deploySteps);
        // A clean step that is not abortable is only marked: the node stays in clean wait, and
        // the abort's intent checks the mark again once it holds the node.
        const abortAfter = verb === 'abort' && current.provisionState === ProvisionState.CLEANWAIT ? cleanStepToAbortAfter(current.cleanStep) : undefined;
        // Ironic moves the node into the transitional state before answering 202.
        const changes: NodeChanges = abortAfter ? { cleanStep: abortAfter } : transitionStartChanges(t);
        // Ironic records why an inspection ended (_do_inspect_abort), and Metal3 reads "aborted" in it.
        if (verb === 'abort' && current.provisionState === ProvisionState.INSPECTWAIT) changes.lastError = INSPECTION_ABORTED;
        if (deploying && configdrive !== undefined && configdrive !== null) {
          changes.instanceInfo = { ...current.instanceInfo, configdrive };
        }
        const args = intentArgs('provision', {
          verb, target: t.target, onFail: t.onFail, work: t.work,
          ...(cleanSteps ? { cleanSteps } : {}),
          ...(serviceSteps ? { serviceSteps } : {}),
          ...(deploySteps ? { deploySteps } : {}),
          ...(disableRamdisk ? { disableRamdisk } : {}),
          // Decided now, as Ironic decides it when the cleaning starts from this request.
          automatedClean: current.automatedClean ?? config.conductor.automated_clean,
          ...(t.work === 'inspect' ? { inspector: inspectorArgs(config) } : {}),
        });
        return { changes, steps: [{ kind: 'provision', args }] };
      },
    });
    reply.code(202).header('Location', `${baseUrl(req, config.api.public_endpoint)}/v1/nodes/${node.uuid}/states`).send();
  });
}

