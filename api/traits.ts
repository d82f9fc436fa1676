import type { FastifyInstance, FastifyRequest } from 'fastify';
import { InvalidParameterValue, MethodNotAllowed, NotAcceptable, ResourceNotFound } from '../common/errors.js';
import { getNode } from '../db/nodes.js';
import { removeNodeTraits, setNodeTraits, traitsOfNode } from '../db/traits.js';
import type { ApiDeps } from './deps.js';
import { baseUrl } from './links.js';
import { STANDARD_TRAITS } from './standard-traits.js';

/** Node traits arrived in 1.37. */
export const TRAITS_VERSION = 37;
const CUSTOM_TRAIT_RE = /^CUSTOM_[A-Z0-9_]+$/;

/** Ironic's trait rule: a standard os-traits name or CUSTOM_[A-Z0-9_]+, 1-255 characters. */
export function isValidTrait(value: unknown): value is string {
  return typeof value === 'string' && value.length >= 1 && value.length <= 255
    && (CUSTOM_TRAIT_RE.test(value) || STANDARD_TRAITS.has(value));
}

/** Throws Ironic's schema error unless `value` is a valid trait. */
export function checkTrait(value: unknown, attribute = 'trait'): string {
  if (!isValidTrait(value)) {
    const shown = typeof value === 'string' ? `'${value.length > 100 ? `${value.slice(0, 100)}...` : value}'` : JSON.stringify(value);
    throw new InvalidParameterValue(`Invalid input for field/attribute ${attribute}. Value: ${shown}. ${shown} is not valid under any of the given schemas`);
  }
  return value;
}

/** A list of traits (allocations, `PUT .../traits`): an array of valid trait names. */
export function checkTraitList(value: unknown, attribute = 'traits'): string[] {
  if (!Array.isArray(value)) throw new InvalidParameterValue(`Invalid input for field/attribute ${attribute}. Value: ${JSON.stringify(value)}. ${JSON.stringify(value)} is not of type 'array'`);
  return value.map((t) => checkTrait(t, attribute));
}

function hasBody(body: unknown): boolean {
  return body !== undefined && body !== null && !(typeof body === 'object' && Object.keys(body).length === 0);
}

export function registerTraitRoutes(app: FastifyInstance, deps: ApiDeps): void {
  const { db, config } = deps;
  const nodeIdent = (req: FastifyRequest) => (req.params as { node: string }).node;

  // Before 1.37 Ironic's node controller has no `traits` child: GET is refused as not
  // acceptable, PUT as not allowed, DELETE as not found (what its routing gives).
  function gate(req: FastifyRequest): void {
    if (req.apiVersion.atLeast(TRAITS_VERSION)) return;
    if (req.method === 'GET') throw new NotAcceptable('Request not acceptable.');
    if (req.method === 'PUT') throw new MethodNotAllowed('The method specified is not allowed for this resource.');
    throw new ResourceNotFound('The resource could not be found.');
  }

  app.get('/v1/nodes/:node/traits', async (req) => {
    gate(req);
    const node = await getNode(db, nodeIdent(req));
    return { traits: await traitsOfNode(db, node.id) };
  });

  app.put('/v1/nodes/:node/traits', async (req, reply) => {
    gate(req);
    const body = req.body as Record<string, unknown> | undefined;
    if (body === undefined || body === null || typeof body !== 'object' || Array.isArray(body) || !('traits' in body)) {
      throw new InvalidParameterValue('A single node trait may be added via PUT /v1/nodes/<node identifier>/traits/<trait> with no body, or all node traits may be replaced via PUT /v1/nodes/<node identifier>/traits with the list of traits specified in the request body.');
    }
    const extra = Object.keys(body).filter((k) => k !== 'traits');
    if (extra.length) throw new InvalidParameterValue(`Additional properties are not allowed ('${extra[0]}' was unexpected)`);
    const traits = checkTraitList(body.traits);
    const node = await getNode(db, nodeIdent(req));
    await setNodeTraits(db, node, traits, true);
    reply.code(204).send();
  });

  app.put('/v1/nodes/:node/traits/:trait', async (req, reply) => {
    gate(req);
    const trait = checkTrait((req.params as { trait: string }).trait);
    if (hasBody(req.body)) throw new InvalidParameterValue('No body should be provided when adding a trait');
    const node = await getNode(db, nodeIdent(req));
    await setNodeTraits(db, node, [trait], false);
    reply.code(204).header('Location', `${baseUrl(req, config.api.public_endpoint)}/v1/nodes/${nodeIdent(req)}/traits/${encodeURIComponent(trait)}`).send();
  });

  app.delete('/v1/nodes/:node/traits', async (req, reply) => {
    gate(req);
    const node = await getNode(db, nodeIdent(req));
    await removeNodeTraits(db, node);
    reply.code(204).send();
  });

  app.delete('/v1/nodes/:node/traits/:trait', async (req, reply) => {
    gate(req);
    const node = await getNode(db, nodeIdent(req));
    await removeNodeTraits(db, node, (req.params as { trait: string }).trait);
    reply.code(204).send();
  });
}
