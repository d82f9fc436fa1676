import type { FastifyInstance, FastifyRequest } from 'fastify';
import {
  InvalidStateRequested, NotAcceptable, InvalidParameterValue, MissingParameterValue, NodeInMaintenance, NodeProtected,
  GalvanicError,
} from '../common/errors.js';
import { KNOWN_VERBS, refusedMessage, transitionFor, type Transition } from '../common/states.js';
import { INTENT_CHANNEL, enqueueIntents } from '../db/intents.js';
import type { IntentAcceptor } from './intents.js';
import { getNode, updateNode, type Node, type NodeChanges } from '../db/nodes.js';
import { withTransaction } from '../db/transaction.js';
import { describeNode, validateForDeploy, validateInterface } from '../drivers/validate-node.js';
import type { DriverRegistry } from '../drivers/registry.js';
import type { ApiDeps } from './deps.js';
import { baseUrl } from './links.js';
import { requireObject } from './body.js';

/** The microversion each verb needs (openstacksdk's PROVISIONING_VERSIONS). */
const VERB_FLOORS: Record<string, number> = {
  manage: 4, provide: 4, inspect: 6, abort: 13, clean: 15, adopt: 17, rescue: 38, unrescue: 38, deploy: 73, undeploy: 73,
  unhold: 85, service: 87,
};
/** Body fields and the microversion that introduced each. */
const BODY_FIELDS: Record<string, number> = {
  target: 1, configdrive: 1, clean_steps: 15, rescue_password: 38, deploy_steps: 69, disable_ramdisk: 70, service_steps: 87, runbook: 92,
};
const CONFIGDRIVE_KEYS = new Set(['meta_data', 'network_data', 'user_data', 'vendor_data']);
const STEP_KEYS = new Set(['interface', 'step', 'args', 'priority']);
const STEP_INTERFACES = ['bios', 'deploy', 'firmware', 'management', 'power', 'raid'];

function own<T>(table: Record<string, T>, key: string): T | undefined {
  return Object.hasOwn(table, key) ? table[key] : undefined;
}

/** Ironic's configdrive rules: a string (gzip+base64 ISO or URL) always, a dict from 1.56. */
function checkConfigdrive(value: unknown, req: FastifyRequest): void {
  if (value === null || value === undefined) return;
  if (typeof value === 'string') return;
  if (typeof value !== 'object' || Array.isArray(value)) {
    throw new InvalidParameterValue('Invalid input for field/attribute configdrive. Value: ' + JSON.stringify(value) + '. Expected a string or an object.');
  }
  if (!req.apiVersion.atLeast(56)) {
    throw new InvalidParameterValue('Invalid input for field/attribute configdrive: a dictionary is accepted from API version 1.56; send a string.');
  }
  const bad = Object.keys(value).filter((k) => !CONFIGDRIVE_KEYS.has(k));
  if (bad.length) throw new InvalidParameterValue(`Invalid configdrive format: unexpected key(s) ${bad.join(', ')}; allowed are meta_data, network_data, user_data, vendor_data.`);
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

/** clean_steps / deploy_steps: a list of {interface, step, args?, priority?}, as Ironic's schema. */
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
    if (withPriority && step.priority !== undefined && !(Number.isInteger(step.priority) && (step.priority as number) >= 0)) {
      throw new InvalidParameterValue(`Invalid ${name}: step ${i} 'priority' must be a non-negative integer.`);
    }
    return { interface: step.interface, step: step.step, args: step.args as Record<string, unknown> | undefined, priority: step.priority as number | undefined };
  });
}

/**
 * What Ironic's conductor checks synchronously before it accepts a verb (so that the request
 * fails, not the node): maintenance, protection, and the interfaces the work will use.
 */
function checkNodeFor(registry: DriverRegistry, node: Node, verb: string, t: Transition): void {
  const desc = describeNode(node);
  if (t.work === 'deploy') {
    if (node.maintenance) throw new NodeInMaintenance('provisioning', node.uuid);
    if (verb === 'rebuild' && node.protected) throw new NodeProtected(node.uuid);
    validateForDeploy(registry, desc);
  }
  if (t.work === 'tear_down' && node.protected) throw new NodeProtected(node.uuid);
  if (t.work === 'inspect') {
    try {
      validateInterface(registry, desc, 'power');
      validateInterface(registry, desc, 'inspect');
    } catch (err) {
      if (!(err instanceof GalvanicError) || err.httpStatus !== 400) throw err;
      throw new InvalidParameterValue(`RPC inspect_hardware failed to validate inspection or power info. Error: ${err.message}`);
    }
  }
}

export function registerProvisionRoutes(app: FastifyInstance, deps: ApiDeps, acceptor: IntentAcceptor): void {
  const { db, config, registry } = deps;

  app.put('/v1/nodes/:node/states/provision', async (req, reply) => {
    const body = requireObject(req.body, 'provision state change');
    const unknown = Object.keys(body).filter((k) => own(BODY_FIELDS, k) === undefined);
    if (unknown.length) throw new InvalidParameterValue(`Unknown attribute(s) for provision state change: ${unknown.join(', ')}`);
    for (const k of Object.keys(body)) {
      const since = BODY_FIELDS[k];
      if (!req.apiVersion.atLeast(since)) throw new NotAcceptable(`The "${k}" parameter requires API version 1.${since} or later.`);
    }
    const verb = body.target;
    if (typeof verb !== 'string') throw new InvalidParameterValue('Invalid input for field/attribute target. Expected a string.');
    if (!(KNOWN_VERBS as readonly string[]).includes(verb)) {
      throw new InvalidParameterValue(`Invalid input for field/attribute target. Value: '${verb}'. Value should be one of: ${KNOWN_VERBS.join(', ')}`);
    }
    const floor = own(VERB_FLOORS, verb);
    if (floor !== undefined && !req.apiVersion.atLeast(floor)) {
      throw new NotAcceptable(`The "${verb}" verb requires API version 1.${floor} or later.`);
    }
    const deploying = verb === 'active' || verb === 'deploy' || verb === 'rebuild';
    if (body.configdrive !== undefined && body.configdrive !== null && !deploying) {
      throw new InvalidParameterValue('Adding a config drive is only supported when setting provision state to active, deploy or rebuild');
    }
    checkConfigdrive(body.configdrive, req);
    if (body.deploy_steps !== undefined && body.deploy_steps !== null && !deploying) {
      throw new InvalidParameterValue('"deploy_steps" is only valid when setting target provision state to active, deploy or rebuild');
    }
    if (body.deploy_steps !== undefined && body.deploy_steps !== null) {
      // The deploy interfaces Galvanic ships have one step (deploy.deploy, priority 100); it runs anyway.
      for (const s of checkSteps(body.deploy_steps, 'deploy_steps', true)) {
        if (!(s.interface === 'deploy' && s.step === 'deploy')) {
          throw new InvalidParameterValue(`Invalid deploy_steps: the node's interfaces have no deploy step ${s.interface}.${s.step}.`);
        }
      }
    }
    let cleanSteps: ReturnType<typeof checkSteps> | undefined;
    if (verb === 'clean') {
      if (body.clean_steps === undefined || body.clean_steps === null) {
        throw new MissingParameterValue('"clean_steps" is required when setting target provision state to clean');
      }
      cleanSteps = checkSteps(body.clean_steps, 'clean_steps', false);
    } else if (body.clean_steps !== undefined && body.clean_steps !== null) {
      throw new InvalidParameterValue('"clean_steps" is only valid when setting target provision state to clean');
    }
    if (body.disable_ramdisk !== undefined && verb !== 'clean') {
      throw new InvalidParameterValue('"disable_ramdisk" is only valid when setting target provision state to clean');
    }
    const ident = (req.params as { node: string }).node;
    const node = await withTransaction(db, async (trx) => {
      const current = await getNode(trx, ident, { forUpdate: true });
      const t = transitionFor(current.provisionState, verb);
      if (!t) throw new InvalidStateRequested(refusedMessage(current.uuid, verb, current.provisionState));
      checkNodeFor(registry, current, verb, t);
      // Ironic moves the node into the transitional state before answering 202; clients
      // waiting on the node (`--wait`) rely on target_provision_state being set.
      const changes: NodeChanges = {
        provisionState: t.via,
        targetProvisionState: t.target,
        lastError: null,
        provisionUpdatedAt: new Date(),
      };
      if (deploying && body.configdrive !== undefined && body.configdrive !== null) {
        changes.instanceInfo = { ...current.instanceInfo, configdrive: body.configdrive };
      }
      if (t.work === 'inspect') Object.assign(changes, { inspectionStartedAt: new Date(), inspectionFinishedAt: null });
      const updated = await updateNode(trx, current.id, changes);
      await enqueueIntents(trx, current.id, [{
        kind: 'provision',
        args: {
          verb, target: t.target, onFail: t.onFail, work: t.work,
          ...(cleanSteps ? { cleanSteps } : {}),
          // Decided now, as Ironic decides it when the cleaning starts from this request.
          automatedClean: current.automatedClean ?? config.conductor.automated_clean,
        },
        maxAttempts: config.conductor.intent_max_attempts,
        requester: req.user,
        requestId: req.id,
      }]);
      return updated;
    });
    acceptor.wake.notify(INTENT_CHANNEL, node.uuid);
    reply.code(202).header('Location', `${baseUrl(req, config.api.public_endpoint)}/v1/nodes/${node.uuid}/states`).send();
  });
}

