import type { FastifyInstance } from 'fastify';
import { InvalidStateRequested, NotAcceptable, InvalidParameterValue } from '../common/errors.js';
import { KNOWN_VERBS, refusedMessage, transitionFor } from '../common/states.js';
import { INTENT_CHANNEL, enqueueIntents } from '../db/intents.js';
import type { IntentAcceptor } from './intents.js';
import { getNode, updateNode } from '../db/nodes.js';
import { withTransaction } from '../db/transaction.js';
import type { ApiDeps } from './deps.js';
import { baseUrl } from './links.js';
import { requireObject } from './body.js';

/** The microversion each verb needs (openstacksdk's PROVISIONING_VERSIONS). */
const VERB_FLOORS: Record<string, number> = { manage: 4, provide: 4, inspect: 6, abort: 13, clean: 15, adopt: 17, rescue: 38, unrescue: 38, unhold: 85, service: 87 };
const BODY_KEYS = new Set(['target', 'configdrive', 'clean_steps', 'deploy_steps', 'rescue_password', 'disable_ramdisk', 'service_steps', 'runbook']);

export function registerProvisionRoutes(app: FastifyInstance, deps: ApiDeps, acceptor: IntentAcceptor): void {
  const { db, config } = deps;

  app.put('/v1/nodes/:node/states/provision', async (req, reply) => {
    const body = requireObject(req.body, 'provision state change');
    const unknown = Object.keys(body).filter((k) => !BODY_KEYS.has(k));
    if (unknown.length) throw new InvalidParameterValue(`Unknown attribute(s) for provision state change: ${unknown.join(', ')}`);
    const verb = body.target;
    if (typeof verb !== 'string') throw new InvalidParameterValue('Invalid input for field/attribute target. Expected a string.');
    const floor = Object.hasOwn(VERB_FLOORS, verb) ? VERB_FLOORS[verb] : undefined;
    if (floor !== undefined && !req.apiVersion.atLeast(floor)) {
      throw new NotAcceptable(`The "${verb}" verb requires API version 1.${floor} or later.`);
    }
    const ident = (req.params as { node: string }).node;
    const node = await withTransaction(db, async (trx) => {
      const current = await getNode(trx, ident, { forUpdate: true });
      const t = (KNOWN_VERBS as readonly string[]).includes(verb) ? transitionFor(current.provisionState, verb) : undefined;
      if (!t) throw new InvalidStateRequested(refusedMessage(current.uuid, verb, current.provisionState));
      // Ironic moves the node into the transitional state before answering 202; clients
      // waiting on the node (`--wait`) rely on target_provision_state being set.
      const updated = await updateNode(trx, current.id, {
        provisionState: t.via,
        targetProvisionState: t.target,
        lastError: null,
        provisionUpdatedAt: new Date(),
      });
      await enqueueIntents(trx, current.id, [{
        kind: 'provision',
        args: { verb, target: t.target, onFail: t.onFail },
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
