import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { randomUUID } from 'node:crypto';
import type { ApiDeps } from './deps.js';
import { DATABASE_RETRY_AFTER_SECONDS, errorBody, installErrorHandler } from './error-handler.js';
import { ApiVersion, MAX_HEADER, MAX_VERSION_STRING, MIN_HEADER, MIN_VERSION, MIN_VERSION_STRING, negotiateVersion } from './versioning.js';
import { BasicAuth } from './auth.js';
import { DatabaseUnavailable, InvalidParameterValue } from '../common/errors.js';
import { pingDatabase } from '../db/connection.js';
import { RouteMethods, routingUrl } from './routing.js';
import { parseJsonBody } from './body.js';
import { buildApiMetrics, READINESS_TIMEOUT_MS } from './metrics.js';
import { registerRootRoutes } from './root.js';
import { registerNodeRoutes } from './nodes.js';
import { registerNodeRelationRoutes } from './node-relations.js';
import { registerInspectionRoutes } from './inspection.js';
import { registerVmediaRoutes } from './vmedia.js';
import { registerVendorPassthruRoutes } from './vendor-passthru.js';
import { stripJsonSuffix } from './json-suffix.js';
import { registerRunbookRoutes } from './runbooks.js';
import { registerPortRoutes } from './ports.js';
import { registerChassisRoutes } from './chassis.js';
import { registerPortgroupRoutes } from './portgroups.js';
import { registerDriverRoutes } from './drivers.js';
import { registerConductorRoutes } from './conductors.js';
import { registerHistoryRoutes } from './history.js';
import { registerBiosRoutes } from './bios.js';
import { registerProvisionRoutes } from './provision.js';
import { registerRamdiskRoutes } from './ramdisk.js';
import { IntentAcceptor, registerIntentRoutes } from './intents.js';
import { registerOperationRoutes } from './operations.js';
import fastifyWebsocket from '@fastify/websocket';
import { registerConsoleRoutes } from './console.js';
import { registerVolumeRoutes } from './volume.js';
import { registerRaidRoutes } from './raid.js';
import { registerFirmwareRoutes } from './firmware.js';
import { registerTraitRoutes } from './traits.js';
import { registerAllocationRoutes } from './allocations.js';
import { registerDeployTemplateRoutes } from './deploy-templates.js';

declare module 'fastify' {
  interface FastifyRequest {
    apiVersion: ApiVersion;
    user: string | null;
  }
}

const CONSOLE_TOKEN_IN_URL = /^(\/v1\/console\/)(?!assets\/)[^/?]+/;

/**
 * Longest path segment routed: a node name may have 255 characters, and a percent-encoded
 * segment takes up to three per character.
 */
const MAX_PARAM_LENGTH = 1024;

/** The version headers every response carries, for errors met before the onRequest hook. */
function setVersionHeaders(req: FastifyRequest, reply: FastifyReply): void {
  let version = new ApiVersion(MIN_VERSION.minor);
  try {
    version = negotiateVersion(req.headers);
  } catch {
    // The URL's error is the one reported; a bad version header is answered on a good URL.
  }
  reply.header(MIN_HEADER, MIN_VERSION_STRING).header(MAX_HEADER, MAX_VERSION_STRING)
    .header('X-OpenStack-Request-Id', req.id).header('X-OpenStack-Ironic-API-Version', version.toString());
}

/**
 * Builds the HTTP application from its dependencies. Nothing here listens: the caller
 * decides (the CLI listens, tests use `inject`).
 */
export function buildApp(deps: ApiDeps): FastifyInstance {
  const { config } = deps;
  const app = Fastify({
    loggerInstance: deps.log.child({ component: 'api' }) as FastifyBaseLogger,
    bodyLimit: config.api.max_body_bytes,
    genReqId: () => `req-${randomUUID()}`,
    // One line per request is written by our onResponse hook; fastify's own pair is off.
    logController: new LogController({ disableRequestLogging: true }),
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: MAX_PARAM_LENGTH },
    rewriteUrl: (req) => routingUrl(stripJsonSuffix(req, req.url ?? '/')),
    // Errors fastify meets before routing (a malformed %-escape) get Ironic's body and headers too.
    frameworkErrors: (err, req, rawReply) => {
      const reply = rawReply as unknown as FastifyReply;
      setVersionHeaders(req, reply);
      const message = err.code === 'FST_ERR_MAX_PARAM_LENGTH'
        ? `A path segment of the request is longer than ${MAX_PARAM_LENGTH} characters.`
        : `The request URL is malformed: ${err.code === 'FST_ERR_BAD_URL' ? 'it has an invalid percent-encoding' : err.message}.`;
      void reply.code(400).send(errorBody(400, message));
    },
  });
  const routeMethods = new RouteMethods();
  app.addHook('onRoute', (route) => routeMethods.add(route));
  const metrics = buildApiMetrics(deps.db);
  const auth = config.api.auth_strategy === 'http_basic' ? new BasicAuth(config.api.http_basic_auth_user_file) : undefined;

  app.decorateRequest('apiVersion', null as unknown as ApiVersion);
  app.decorateRequest('user', null);

  // Version headers go on every response, errors included, so set them before anything can fail.
  app.addHook('onRequest', async (req, reply) => {
    reply.header(MIN_HEADER, MIN_VERSION_STRING);
    reply.header(MAX_HEADER, MAX_VERSION_STRING);
    reply.header('X-OpenStack-Request-Id', req.id);
    req.apiVersion = new ApiVersion(1);
    try {
      req.apiVersion = negotiateVersion(req.headers);
    } finally {
      reply.header('X-OpenStack-Ironic-API-Version', req.apiVersion.toString());
    }
    // A console URL carries its own credential (the token): browsers cannot add basic auth to a websocket.
    // The agent has no credentials but its token: Ironic keeps its routes public too (acl_public_routes).
    const path = req.url.split('?')[0];
    const open = (req.method === 'GET' && (path === '/' || path === '/v1' || path === '/v1/' || path === '/healthz')) || req.url.startsWith('/v1/console/')
      || path === '/v1/continue_inspection' || path === '/v1/lookup' || path.startsWith('/v1/heartbeat/');
    if (auth && !open) req.user = await auth.check(req.headers.authorization);
    // Postgres text cannot hold U+0000: refuse it here rather than fail in SQL with a 500.
    if (req.url.includes('%00')) throw new InvalidParameterValue('The request URL contains a NUL character (%00), which is not allowed.');
  });

  app.addHook('onResponse', async (req, reply) => {
    // A console URL holds its token, a credential: never logged.
    const url = req.url.replace(CONSOLE_TOKEN_IN_URL, '$1***');
    req.log.info({ method: req.method, url, status: reply.statusCode, ms: Math.round(reply.elapsedTime) }, 'request');
    metrics.observe(req, reply);
  });

  // An empty body on PUT/DELETE (maintenance) is fine; JSON is the only other media type.
  app.removeContentTypeParser('text/plain');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, parseJsonBody);
  // python-ironicclient sends every DELETE (node, port, maintenance) as a raw request with
  // `Content-Type: application/octet-stream` and no body; Ironic ignores it. A body is still 415.
  app.addContentTypeParser('application/octet-stream', { parseAs: 'buffer' }, (_req, body, done) => {
    if ((body as Buffer).length === 0) return done(null, undefined);
    done(Object.assign(new Error('Unsupported Content-Type; use application/json.'), { statusCode: 415 }), undefined);
  });

  installErrorHandler(app, routeMethods);
  registerRootRoutes(app, deps);
  // Prometheus scrapes this with the same credentials as any client under http_basic.
  app.get('/metrics', async (_req, reply) => {
    reply.type(metrics.registry.contentType);
    return metrics.registry.metrics();
  });
  // Readiness for load balancers: 200 while the database answers, else Ironic's 503 with Retry-After.
  app.get('/healthz', async () => {
    if (!(await pingDatabase(deps.db, READINESS_TIMEOUT_MS))) {
      throw new DatabaseUnavailable('The service is not ready: its database cannot be reached.', DATABASE_RETRY_AFTER_SECONDS);
    }
    return { status: 'ok', database: 'ok' };
  });
  registerNodeRoutes(app, deps);
  registerNodeRelationRoutes(app, deps);
  registerRunbookRoutes(app, deps);
  registerPortRoutes(app, deps);
  registerChassisRoutes(app, deps);
  registerPortgroupRoutes(app, deps);
  registerDriverRoutes(app, deps);
  registerConductorRoutes(app, deps);
  registerHistoryRoutes(app, deps);
  registerBiosRoutes(app, deps);
  registerTraitRoutes(app, deps);
  registerAllocationRoutes(app, deps);
  registerDeployTemplateRoutes(app, deps);
  const acceptor = new IntentAcceptor(deps);
  registerIntentRoutes(app, deps, acceptor);
  registerProvisionRoutes(app, deps, acceptor);
  // The agent's endpoints read their bodies as JSON whatever the Content-Type says, as Ironic's
  // (webob's request.json): IPA 9.4 posts its inspection data with none.
  void app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', { parseAs: 'buffer' }, parseJsonBody);
    registerRamdiskRoutes(scope, deps, acceptor);
    registerInspectionRoutes(scope, deps, acceptor);
  });
  registerOperationRoutes(app, deps, acceptor);
  registerVolumeRoutes(app, deps, acceptor);
  registerVmediaRoutes(app, deps, acceptor);
  registerVendorPassthruRoutes(app, deps, acceptor);
  registerRaidRoutes(app, deps);
  registerFirmwareRoutes(app, deps);
  void app.register(fastifyWebsocket, { options: { maxPayload: 64 * 1024 } });
  void app.register(async (scope) => registerConsoleRoutes(scope, deps, acceptor));
  app.addHook('onClose', async () => acceptor.close());
  return app;
}
