/**
 * Node vendor passthru (Ironic's NodeVendorPassthruController): `GET .../vendor_passthru/methods`
 * and `{GET,POST,PUT,PATCH,DELETE} .../vendor_passthru?method=<name>` (or `/vendor_passthru/<name>`).
 * The method and the arguments it can check alone are checked here, against the locked node,
 * so that a refused call queues nothing. A synchronous method is waited for, as Ironic's RPC
 * call is, and answered 200 with its value; an asynchronous one is answered 202 at once.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { InvalidParameterValue } from '../common/errors.js';
import { getNode } from '../db/nodes.js';
import type { VendorMethod } from '../drivers/interfaces.js';
import { vendorMetadata, vendorMethod, vendorMethods } from '../drivers/vendor-passthru.js';
import { requireObject } from './body.js';
import type { ApiDeps } from './deps.js';
import { intentView, replyFor, requestedWait, type IntentAcceptor } from './intents.js';
import { baseUrl } from './links.js';
import { param, type Query } from './query.js';

const VERBS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;

/**
 * A GET's body, which Fastify leaves unread: gophercloud's get_subscription sends its `id`
 * in one, and Ironic reads the body whatever the verb.
 */
async function bodyOfGet(req: FastifyRequest, limit: number): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req.raw) {
    size += (chunk as Buffer).length;
    if (size > limit) throw new InvalidParameterValue('Request body is too large.');
    chunks.push(chunk as Buffer);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  if (text.trim() === '') return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new InvalidParameterValue(`The request body is not valid JSON: ${(err as Error).message}`);
  }
}

export function registerVendorPassthruRoutes(app: FastifyInstance, deps: ApiDeps, acceptor: IntentAcceptor): void {
  const { db, config, registry } = deps;
  const base = (req: FastifyRequest) => baseUrl(req, config.api.public_endpoint);
  const nodeIdent = (req: FastifyRequest) => (req.params as { node: string }).node;

  app.get('/v1/nodes/:node/vendor_passthru/methods', async (req) => vendorMetadata(vendorMethods(registry, await getNode(db, nodeIdent(req)))));

  async function call(req: FastifyRequest, reply: FastifyReply) {
    const name = (req.params as { method?: string }).method ?? param(req.query as Query, 'method');
    // Ironic's ClientSideError.
    if (!name) throw new InvalidParameterValue('Method not specified');
    const raw = req.method === 'GET' ? await bodyOfGet(req, config.api.max_body_bytes) : req.body;
    const args = raw === undefined || raw === null ? {} : requireObject(raw, `vendor passthru method ${name}`);
    const wait = requestedWait(req) ?? 60;
    let method: VendorMethod | undefined;
    const { node, intents } = await acceptor.accept(req, nodeIdent(req), {
      steps: [{ kind: 'vendor_passthru', args: { method: name, http_method: req.method, args } }],
      prepare: (n) => {
        method = vendorMethod(registry, n, name, req.method);
        method.validate?.(args);
        return undefined;
      },
    });
    reply.header('Location', `${base(req)}/v1/intents/${intents[0].uuid}`);
    if (method?.async) return reply.code(202).send();
    const done = await acceptor.waitAll(intents, wait);
    return replyFor(reply, req, base(req), node, done, (last) => {
      const value = (last.result as { return?: unknown } | null)?.return ?? null;
      // Ironic answers a method that returns nothing with an empty body.
      return value === null ? reply.code(200).send() : reply.code(200).type('application/json').send(JSON.stringify(value));
    }, (all) => intentView(all[all.length - 1], node.uuid, base(req)));
  }

  for (const url of ['/v1/nodes/:node/vendor_passthru', '/v1/nodes/:node/vendor_passthru/:method']) {
    app.route({ method: [...VERBS], url, handler: call });
  }
}
