import type { FastifyInstance, FastifyRequest } from 'fastify';
import { WebSocket } from 'ws';
import { ConsoleTokenRefused, Forbidden, InvalidParameterValue, UnsupportedDriverExtension } from '../common/errors.js';
import { TOKEN_RE, checkToken, consoleEndpoint, consoleSecret, insertToken, newToken, type ConsoleMode, type TokenGrant } from '../db/console.js';
import { getNode } from '../db/nodes.js';
import { withTransaction } from '../db/transaction.js';
import { AUTH_HEADER, CloseCode, TOKEN_HEADER, relayAuth } from '../common/console-relay.js';
import { consolePage, loadConsoleAssets } from './console-page.js';
import type { ApiDeps } from './deps.js';
import { requestedWait, type IntentAcceptor } from './intents.js';
import { baseUrl } from './links.js';
import { requireObject } from './body.js';
import { param, type Query } from './query.js';

/** How long a viewer waits for a just-enabled console to come up before being told to retry. */
const ENDPOINT_WAIT_MS = 10_000;
/** Input held while the relay to the conductor opens. */
const MAX_PENDING_INPUT = 64 * 1024;

declare module 'fastify' {
  interface FastifyRequest {
    consoleGrant?: TokenGrant;
  }
}

/** Close codes a websocket may carry on the wire (1005, 1006 and 1015 are reserved for "none"). */
function sendableCode(code: number): boolean {
  return (code >= 1000 && code <= 1014 && ![1004, 1005, 1006].includes(code)) || (code >= 3000 && code <= 4999);
}

/**
 * The serial console API: Ironic's PUT/GET /v1/nodes/{n}/states/console, the websocket a
 * console token opens on any API server (relayed to the conductor holding the console), and
 * a browser terminal for it.
 */
/** Relays of one viewer to a console restarted under it, and the pause before each. */
const MAX_RELAY_RECONNECTS = 5;
const RELAY_RECONNECT_DELAY_MS = 250;
const ENDPOINT_POLLS_PER_RECONNECT = 8;

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
      const log = req.log.child({ node: grant.nodeUuid });
      let upstream: WebSocket | undefined;
      let closed = false;
      const pending: Array<{ data: Buffer; binary: boolean }> = [];
      let pendingBytes = 0;
      socket.on('message', (data: Buffer, binary: boolean) => {
        if (upstream?.readyState === WebSocket.OPEN) upstream.send(data, { binary });
        else if (pendingBytes + data.length <= MAX_PENDING_INPUT) {
          pending.push({ data, binary });
          pendingBytes += data.length;
        }
      });
      socket.on('close', () => {
        closed = true;
        if (upstream && upstream.readyState !== WebSocket.CLOSED) upstream.close(1000);
      });
      socket.on('error', () => undefined);
      const close = (code: number, reason: string) => {
        if (socket.readyState === WebSocket.OPEN || socket.readyState === WebSocket.CONNECTING) socket.close(sendableCode(code) ? code : 1011, reason);
      };
      // A console stopped and started again on its conductor (a disable and an enable in quick
      // succession, or new settings) closes the sessions of the old process; a viewer whose
      // node's console is still enabled is relayed to the new one instead of being dropped.
      // Its token is checked again there: one issued before a disable no longer works.
      let reconnects = 0;
      let firstClose: { code: number; reason: string } | undefined;
      const relay = async (endpointHint: string | undefined): Promise<void> => {
        secret ??= consoleSecret(db);
        const auth = relayAuth(await secret, token);
        const endpoint = endpointHint ?? await waitForEndpoint(grant.nodeId, () => closed);
        if (closed) return;
        if (!endpoint) return close(CloseCode.CONSOLE_NOT_HERE, 'the console is not running yet; try again shortly');
        const up = new WebSocket(`ws://${endpoint}/console/${grant.nodeId}`, { headers: { [TOKEN_HEADER]: token, [AUTH_HEADER]: auth } });
        upstream = up;
        up.on('open', () => {
          for (const p of pending.splice(0)) up.send(p.data, { binary: p.binary });
          pendingBytes = 0;
        });
        up.on('message', (data: Buffer, binary: boolean) => {
          // Output means the session is attached: a later close has a reason of its own.
          firstClose = undefined;
          if (socket.readyState === WebSocket.OPEN) socket.send(data, { binary });
        });
        up.on('close', (code: number, reason: Buffer) => {
          if (closed) return;
          const restarted = code === CloseCode.CONSOLE_DISABLED || code === CloseCode.CONSOLE_NOT_HERE;
          // What the viewer is told if it is not relayed again: the first reason, not a later one.
          firstClose ??= { code, reason: reason.toString() || 'the console endpoint closed the session' };
          if (restarted && reconnects < MAX_RELAY_RECONNECTS) {
            reconnects++;
            void (async () => {
              // The conductor records the restarted console a moment after it stopped the old one.
              let next: string | undefined;
              for (let i = 0; i < ENDPOINT_POLLS_PER_RECONNECT && !closed && next === undefined; i++) {
                await new Promise((r) => setTimeout(r, RELAY_RECONNECT_DELAY_MS));
                const node = await db('nodes').where({ id: grant.nodeId }).first('console_enabled');
                if (!node?.console_enabled) break;
                next = await consoleEndpoint(db, grant.nodeId);
              }
              if (closed) return;
              // Only a console started again on the same conductor is followed; one that moved to
              // another conductor (or was disabled) ends the session, and the viewer reconnects.
              if (!next || next !== endpoint) return close(firstClose!.code, firstClose!.reason);
              await relay(next);
            })().catch((err) => {
              log.error({ err }, 'console relay failed');
              close(1011, 'console relay failed');
            });
            return;
          }
          close(firstClose.code, firstClose.reason);
        });
        up.on('unexpected-response', (_r, res) => {
          log.warn({ status: res.statusCode, endpoint }, 'console endpoint refused the relay');
          close(1011, 'the console endpoint refused the relay');
        });
        up.on('error', (err) => {
          log.warn({ err: err.message, endpoint }, 'console relay failed');
          close(1011, 'the console endpoint is unreachable');
        });
      };
      relay(grant.endpoint ?? undefined).catch((err) => {
        log.error({ err }, 'console relay failed');
        close(1011, 'console relay failed');
      });
    },
  });

  /** The endpoint of a console that is starting; undefined when none appears in time. */
  async function waitForEndpoint(nodeId: number, gone: () => boolean): Promise<string | undefined> {
    const deadline = Date.now() + ENDPOINT_WAIT_MS;
    while (!gone() && Date.now() < deadline) {
      const endpoint = await consoleEndpoint(db, nodeId);
      if (endpoint) return endpoint;
      await new Promise((r) => setTimeout(r, 200));
    }
    return undefined;
  }
}
