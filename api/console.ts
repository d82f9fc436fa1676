import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ConsoleTokenRefused, Forbidden, InvalidParameterValue, UnsupportedDriverExtension } from '../common/errors.js';
import { TOKEN_RE, checkToken, consoleSecret, insertToken, newToken, type ConsoleMode, type TokenGrant } from '../db/console.js';
import { getNode } from '../db/nodes.js';
import { withTransaction } from '../db/transaction.js';
import { ConsoleRelay } from './console-relay.js';
import { consolePage, loadConsoleAssets } from './console-page.js';
import type { ApiDeps } from './deps.js';
import { requestedWait, type IntentAcceptor } from './intents.js';
import { baseUrl } from './links.js';
import { requireObject } from './body.js';
import { param, type Query } from './query.js';

declare module 'fastify' {
  interface FastifyRequest {
    consoleGrant?: TokenGrant;
  }
}

/**
 * The serial console API: Ironic's PUT/GET /v1/nodes/{n}/states/console, the websocket a
 * console token opens on any API server (relayed to the conductor holding the console), and
 * a browser terminal for it.
 */
export function registerConsoleRoutes(app: FastifyInstance, deps: ApiDeps, acceptor: IntentAcceptor): void {
  const { db, config } = deps;
  const base = (req: FastifyRequest) => baseUrl(req, config.api.public_endpoint);
  const assets = loadConsoleAssets();
  let secret: Promise<string> | undefined;

  app.put('/v1/nodes/:node/states/console', async (req, reply) => {
    const body = requireObject(req.body, 'console state change');
    const extra = Object.keys(body).filter((k) => k !== 'enabled');
    if (extra.length) throw new InvalidParameterValue(`Unknown attribute(s) for console state change: ${extra.join(', ')}`);
    if (typeof body.enabled !== 'boolean') throw new InvalidParameterValue('Invalid input for field/attribute enabled. Value should be a boolean.');
    const enabled = body.enabled;
    const wait = requestedWait(req) ?? 0;
    const { node, intents } = await acceptor.accept(req, (req.params as { node: string }).node, {
      steps: [{ kind: 'console', args: { enabled } }],
      prepare: (n) => {
        if (enabled && (!n.consoleInterface || n.consoleInterface === 'no-console')) {
          throw new UnsupportedDriverExtension(`Node ${n.uuid} has no console interface (console_interface is ${n.consoleInterface ?? 'not set'}); set one, e.g. ipmitool-sol or fake.`);
        }
        return undefined;
      },
    });
    await acceptor.waitAll(intents, wait);
    reply.code(202).header('Location', `${base(req)}/v1/nodes/${node.uuid}/states/console`).send();
  });

  app.get('/v1/nodes/:node/states/console', async (req) => {
    const modeParam = param(req.query as Query, 'mode') ?? 'ro';
    if (modeParam !== 'ro' && modeParam !== 'rw') throw new InvalidParameterValue(`Invalid mode "${modeParam}": expected ro or rw.`);
    const mode: ConsoleMode = modeParam;
    const isAdmin = req.user === null || config.console.admin_users.includes(req.user);
    // Authorisation and the token's epoch come from one locked read of the node, in the
    // transaction that stores the token: an owner change either precedes it (and is seen)
    // or follows it (and bumps the epoch past the token's).
    const issued = await withTransaction(db, async (trx) => {
      const node = await getNode(trx, (req.params as { node: string }).node, { forShare: true });
      if (!node.consoleEnabled) return { node, token: null, expiresAt: null };
      if (mode === 'rw' && !isAdmin && node.owner !== req.user) {
        throw new Forbidden(`A read-write console of node ${node.uuid} is for admins and the node's owner only; ask for mode=ro.`);
      }
      const token = newToken();
      const expiresAt = await insertToken(trx, { token, nodeId: node.id, accessEpoch: node.accessEpoch, mode, requester: req.user, ttlSeconds: config.console.token_ttl });
      return { node, token, expiresAt };
    });
    if (!issued.token) return { console_enabled: false, console_info: null };
    const url = `${base(req).replace(/^http/, 'ws')}/v1/console/${issued.token}`;
    return {
      console_enabled: true,
      console_info: {
        type: 'websocket',
        url,
        view_url: `${base(req)}/v1/console/${issued.token}/view`,
        mode,
        expires_at: issued.expiresAt!.toISOString(),
      },
    };
  });

  for (const [name, asset] of assets) {
    app.get(`/v1/console/assets/${name}`, async (_req, reply) => reply.type(asset.type).header('Cache-Control', 'public, max-age=3600').send(asset.body));
  }

  /** Resolves the token before the upgrade, so a bad one gets an HTTP error, not a websocket. */
  const grantOf = async (req: FastifyRequest): Promise<TokenGrant> => {
    const token = (req.params as { token: string }).token;
    if (!TOKEN_RE.test(token)) throw new ConsoleTokenRefused('Unknown console token.');
    const grant = await checkToken(db, token);
    if (!grant) throw new ConsoleTokenRefused('Unknown console token.');
    if (!grant.valid) throw new ConsoleTokenRefused(`Console token refused: ${grant.reason}.`);
    return grant;
  };

  app.get('/v1/console/:token/view', async (req, reply) => {
    const grant = await grantOf(req);
    return reply.type('text/html; charset=utf-8')
      .header('Content-Security-Policy', "default-src 'self'; connect-src 'self' ws: wss:; style-src 'self' 'unsafe-inline'")
      .header('Cache-Control', 'no-store')
      .send(consolePage(grant.nodeUuid, grant.mode));
  });

  app.route({
    method: 'GET',
    url: '/v1/console/:token',
    preValidation: async (req) => {
      req.consoleGrant = await grantOf(req);
    },
    handler: async () => {
      throw new InvalidParameterValue('This is a websocket endpoint: connect with a websocket client, or open <url>/view in a browser.');
    },
    wsHandler: (socket, req) => {
      const grant = req.consoleGrant!;
      const token = (req.params as { token: string }).token;
      secret ??= consoleSecret(db);
      new ConsoleRelay(socket, grant, token, { db, secret: () => secret!, log: req.log.child({ node: grant.nodeUuid }) }).start();
    },
  });
}
