/**
 * `/v1/nodes/{n}/vmedia` (attach and detach from 1.89, read from 1.93). Attach and detach are
 * queued on the node and answered 204 at once, as Ironic answers before its worker runs; the
 * read waits for the BMC's answer, as Ironic's synchronous call does.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { InvalidParameterValue, ResourceNotFound, ServiceUnavailable } from '../common/errors.js';
import type { Node, NodeChanges } from '../db/nodes.js';
import { VIRTUAL_MEDIA_DEVICES } from '../drivers/interfaces.js';
import type { ApiDeps } from './deps.js';
import { intentView, replyFor, requestedWait, type IntentAcceptor } from './intents.js';
import { baseUrl } from './links.js';
import { param, type Query } from './query.js';

const notFound = () => new ResourceNotFound('The resource could not be found.');
/** Ironic's image_publisher.VMEDIA_SUPPORTED_URL_SCHEMES. */
const URL_SCHEMES = ['http', 'https', 'nfs', 'cifs', 'smb'];
const DOWNLOAD_SOURCES = ['http', 'local', 'swift'];
const pyList = (items: readonly string[]) => `[${items.map((i) => `'${i}'`).join(', ')}]`;
function schemaError(message: string): InvalidParameterValue {
  return new InvalidParameterValue(`Schema error for vmedia: ${message}`);
}

/** Ironic's VMEDIA_ATTACH_VALIDATOR, with jsonschema's messages. */
function checkAttachBody(body: unknown): { device_type: string; image_url: string; image_download_source: string } {
  const b = body === undefined || body === null ? {} : body;
  if (typeof b !== 'object' || Array.isArray(b)) throw schemaError(`${JSON.stringify(b)} is not of type 'object'`);
  const v = b as Record<string, unknown>;
  const extra = Object.keys(v).filter((k) => !['device_type', 'image_url', 'image_download_source'].includes(k));
  if (extra.length) throw schemaError(`Additional properties are not allowed (${extra.map((k) => `'${k}'`).join(', ')} ${extra.length > 1 ? 'were' : 'was'} unexpected)`);
  for (const key of ['device_type', 'image_url']) if (v[key] === undefined) throw schemaError(`'${key}' is a required property`);
  for (const [key, allowed] of [['device_type', VIRTUAL_MEDIA_DEVICES as readonly string[]], ['image_url', undefined], ['image_download_source', DOWNLOAD_SOURCES]] as const) {
    const value = v[key];
    if (value === undefined) continue;
    if (typeof value !== 'string') throw schemaError(`${JSON.stringify(value)} is not of type 'string'`);
    if (allowed && !allowed.includes(value)) throw schemaError(`'${value}' is not one of ${pyList(allowed)}`);
  }
  return { device_type: v.device_type as string, image_url: v.image_url as string, image_download_source: (v.image_download_source as string | undefined) ?? 'local' };
}

/** Ironic's refusal of a vmedia change on a node in maintenance for a power failure (TemporaryFailure). */
function prepareChange(what: string) {
  return (n: Node): NodeChanges => {
    if (n.maintenance && n.fault === 'power failure') throw new ServiceUnavailable(`Unable to ${what} virtual media for node ${n.uuid} due to power failure state`);
    // Starting a new operation clears the previous error, as Ironic does before its worker runs.
    return { lastError: null };
  };
}

export function registerVmediaRoutes(app: FastifyInstance, deps: ApiDeps, acceptor: IntentAcceptor): void {
  const { config } = deps;
  const base = (req: FastifyRequest) => baseUrl(req, config.api.public_endpoint);
  const nodeIdent = (req: FastifyRequest) => (req.params as { node: string }).node;

  /** 204 at once unless the client asked to wait; then the outcome, as other actions answer. */
  async function queued(req: FastifyRequest, reply: FastifyReply, kind: string, args: Record<string, unknown>, what: string) {
    const wait = requestedWait(req) ?? 0;
    const { node, intents } = await acceptor.accept(req, nodeIdent(req), { steps: [{ kind, args }], prepare: prepareChange(what) });
    if (wait === 0) return reply.code(204).send();
    const done = await acceptor.waitAll(intents, wait);
    return replyFor(reply, req, base(req), node, done, () => reply.code(204).send(), (all) => intentView(all[all.length - 1], node.uuid, base(req)));
  }

  app.post('/v1/nodes/:node/vmedia', async (req, reply) => {
    if (!req.apiVersion.atLeast(89)) throw notFound();
    const body = checkAttachBody(req.body);
    const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(body.image_url)?.[1]?.toLowerCase() ?? '';
    if (!URL_SCHEMES.includes(scheme)) throw new InvalidParameterValue(`Unsupported or missing URL scheme: ${scheme}`);
    return queued(req, reply, 'attach_virtual_media', body, 'attach');
  });

  app.delete('/v1/nodes/:node/vmedia', async (req, reply) => {
    if (!req.apiVersion.atLeast(89)) throw notFound();
    const raw = param(req.query as Query, 'device_types');
    // Ironic's args.string_list: trimmed, lower-cased, without repeats; empty means every device.
    const devices = raw === undefined ? [] : [...new Set(raw.split(',').map((s) => s.trim().toLowerCase()).filter(Boolean))];
    const invalid = devices.filter((d) => !(VIRTUAL_MEDIA_DEVICES as readonly string[]).includes(d));
    if (invalid.length) throw new InvalidParameterValue(`Invalid device type(s) ${invalid.join(', ')} (valid are ${VIRTUAL_MEDIA_DEVICES.join(', ')})`);
    return queued(req, reply, 'detach_virtual_media', { device_types: devices.length ? devices : null }, 'detach');
  });

  app.get('/v1/nodes/:node/vmedia', async (req, reply) => {
    if (!req.apiVersion.atLeast(93)) throw notFound();
    const wait = requestedWait(req) ?? 60;
    const { node, intents } = await acceptor.accept(req, nodeIdent(req), { steps: [{ kind: 'get_virtual_media', args: {} }] });
    const done = await acceptor.waitAll(intents, wait);
    return replyFor(reply, req, base(req), node, done, (last) => last.result, (all) => intentView(all[all.length - 1], node.uuid, base(req)));
  });
}
