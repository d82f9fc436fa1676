import type { FastifyInstance, FastifyRequest } from 'fastify';
import { InvalidParameterValue, NotAcceptable, ResourceNotFound } from '../common/errors.js';
import { getHistoryEvent, listHistory, type NodeHistoryEvent } from '../db/node-history.js';
import { getNode } from '../db/nodes.js';
import type { ApiDeps } from './deps.js';
import { baseUrl, resourceLinks } from './links.js';
import { boolParam, limitParam, nextLink, param, type Query } from './query.js';
import { isUuid } from './body.js';

export function registerHistoryRoutes(app: FastifyInstance, deps: ApiDeps): void {
  const { db, config } = deps;

  function view(req: FastifyRequest, nodeUuid: string, e: NodeHistoryEvent, detail: boolean) {
    const base = baseUrl(req, config.api.public_endpoint);
    const out: Record<string, unknown> = {
      uuid: e.uuid,
      created_at: e.createdAt.toISOString().replace('Z', '+00:00'),
      severity: e.severity,
      event: e.event,
      links: resourceLinks(base, 'nodes', nodeUuid, `history/${e.uuid}`),
    };
    if (detail) Object.assign(out, { event_type: e.eventType, conductor: e.conductor, user: e.user, operation: e.operation });
    return out;
  }

  function requireVersion(req: FastifyRequest): void {
    if (!req.apiVersion.atLeast(78)) throw new ResourceNotFound('The resource could not be found.');
  }

  app.get('/v1/nodes/:node/history', async (req) => {
    requireVersion(req);
    const q = req.query as Query;
    const detail = boolParam(q, 'detail') ?? false;
    if (param(q, 'fields') !== undefined) throw new NotAcceptable('The "fields" parameter is not supported for node history.');
    const node = await getNode(db, (req.params as { node: string }).node);
    const limit = limitParam(q, config.api.max_limit);
    const markerId = param(q, 'marker');
    if (markerId !== undefined && !isUuid(markerId)) throw new InvalidParameterValue(`Expected UUID for marker: ${markerId}`);
    const marker = markerId !== undefined ? await getHistoryEvent(db, node.id, markerId) : undefined;
    const events = await listHistory(db, node.id, limit, marker);
    const out: Record<string, unknown> = { history: events.map((e) => view(req, node.uuid, e, detail)) };
    const next = nextLink(baseUrl(req, config.api.public_endpoint), `nodes/${node.uuid}/history`, q, events.length, limit, events.at(-1)?.uuid);
    if (next) out.next = next;
    return out;
  });

  app.get('/v1/nodes/:node/history/:event', async (req) => {
    requireVersion(req);
    const { node: ident, event } = req.params as { node: string; event: string };
    const node = await getNode(db, ident);
    return view(req, node.uuid, await getHistoryEvent(db, node.id, event), true);
  });
}
