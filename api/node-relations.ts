/**
 * Shards (API 1.82) and parent/child nodes (API 1.83): the list filters, the link check on
 * `parent_node`, `GET /v1/shards` and `GET /v1/nodes/{n}/children`.
 */
import type { FastifyInstance } from 'fastify';
import type { Knex } from 'knex';
import { InvalidParameterValue, NotFoundError, ResourceNotFound } from '../common/errors.js';
import { getNode, listChildUuids, listShards, type NodeFilters } from '../db/nodes.js';
import type { ApiDeps } from './deps.js';
import { baseUrl } from './links.js';
import { boolParam, param, type Query } from './query.js';

/** Ironic's `args.string_list`: comma-separated, trimmed, lower-cased, without repeats. */
function stringList(value: string): string[] {
  const items: string[] = [];
  for (const part of value.split(',')) {
    const v = part.trim().toLowerCase();
    if (v && !items.includes(v)) items.push(v);
  }
  return items;
}

/** The `shard`, `sharded`, `include_children` and `parent_node` filters of a node list (gated in list-gates.ts). */
export function childAndShardFilters(q: Query): Pick<NodeFilters, 'shardIn' | 'sharded' | 'includeChildren' | 'parentNode'> {
  const shard = param(q, 'shard');
  return {
    shardIn: shard === undefined ? undefined : stringList(shard),
    sharded: boolParam(q, 'sharded'),
    includeChildren: boolParam(q, 'include_children'),
    // Compared as given, as Ironic does: a parent's name matches nothing.
    parentNode: param(q, 'parent_node'),
  };
}

/**
 * The parent a node body names, by UUID or name, as its UUID. As Ironic's authorize_node_link,
 * a parent that does not exist and one of another owner get the same 400, so that the answer
 * does not tell whether the node exists.
 */
export async function resolveParentNode(db: Knex, ident: string, owner: string | null): Promise<string> {
  const refused = new InvalidParameterValue(`Unable to apply the requested parent_node '${ident}'. Requested value was invalid.`);
  let parent;
  try {
    parent = await getNode(db, ident);
  } catch (err) {
    if (err instanceof NotFoundError) throw refused;
    throw err;
  }
  if (parent.owner !== owner) throw refused;
  return parent.uuid;
}

export function registerNodeRelationRoutes(app: FastifyInstance, deps: ApiDeps): void {
  const { db, config } = deps;

  app.get('/v1/shards', async (req) => {
    if (!req.apiVersion.atLeast(82)) throw new ResourceNotFound('The API version does not allow shards');
    return { shards: await listShards(db) };
  });
  // Ironic serves no single shard: a 404 whatever the name.
  app.get('/v1/shards/:shard', async (req) => {
    if (!req.apiVersion.atLeast(82)) throw new ResourceNotFound('The API version does not allow shards');
    throw new ResourceNotFound('The resource could not be found.');
  });

  app.get('/v1/nodes/:node/children', async (req) => {
    if (!req.apiVersion.atLeast(83)) throw new ResourceNotFound('The resource could not be found.');
    const parent = await getNode(db, (req.params as { node: string }).node);
    const base = baseUrl(req, config.api.public_endpoint);
    return {
      children: await listChildUuids(db, parent.uuid),
      links: { href: `${base}/v1/nodes?parent_node=${parent.uuid}`, rel: 'children' },
    };
  });
}
