/**
 * IPA's `api/app.py`: the REST API of one agent, `/`, `/v1/`, `/v1/status` and
 * `/v1/commands[/<id>]`, with the agent token, `wait`, and the faults that lose or hold an answer.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Command, ExtensionAgent } from './extensions/base.js';
import { lockDown } from './extensions/system.js';
import { AGENT_VERSION, IpaError, faultBody, notFound } from './ipa.js';
import { bump, type Life } from './life.js';

/** What the API reaches of its agent. */
export interface ApiAgent extends ExtensionAgent {
  /** `http://<host>:<port>/<id>`: where the agent serves. */
  readonly callbackUrl: string;
  /** Command POSTs received (AgentWitness.received), and the node the last of each carried. */
  readonly received: Record<string, number>;
  readonly nodeReceived: Record<string, unknown>;
  /** `execute_command`. @throws IpaError */
  execute(life: Life, name: string, params: Record<string, unknown>): Command;
}

function send(res: ServerResponse, status: number, body: string): void {
  if (res.headersSent || res.destroyed) return;
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body);
}

function sendError(res: ServerResponse, err: IpaError): void {
  send(res, err.code, faultBody(err.code, `${err.ipaMessage}: ${err.details}`, err));
}

/** Serves `/<id>/...` while the agent runs; `sub` is the path after the prefix. */
export async function serveApi(agent: ApiAgent, req: IncomingMessage, res: ServerResponse, sub: string, query: URLSearchParams, body: string): Promise<void> {
  const from = Date.now();
  res.once('finish', () => agent.record(`serve ${req.method ?? 'GET'} ${sub.replace(/^\/v1/, '').replace(/\/commands\/.+$/, '/commands/{id}')} ${res.statusCode}`, from));
  const life = agent.life;
  const method = req.method ?? 'GET';
  const path = sub.replace(/^\/v1(?=\/|$)/, '') || '/';
  const versioned = /^\/v1(\/|$)/.test(sub);
  if (!life || life.lockedDown) return send(res, 404, faultBody(404, '404 Not Found: The requested URL was not found on the server.'));
  if (sub === '' || sub === '/') {
    if (method !== 'GET') return send(res, 405, faultBody(405, '405 Method Not Allowed: The method is not allowed for the requested URL.'));
    return send(res, 200, JSON.stringify(rootDoc(agent.callbackUrl)));
  }
  if (versioned && path === '/') {
    if (method !== 'GET') return send(res, 405, faultBody(405, '405 Method Not Allowed: The method is not allowed for the requested URL.'));
    return send(res, 200, JSON.stringify(v1Doc(agent.callbackUrl)));
  }
  if (path === '/status' && method === 'GET') return send(res, 200, JSON.stringify({ started_at: life.startedAt / 1000, version: agent.faults.agentVersion ?? AGENT_VERSION }));
  const m = /^\/commands(?:\/([^/]*))?$/.exec(path);
  if (!m) return send(res, 404, faultBody(404, '404 Not Found: The requested URL was not found on the server.'));
  const cmdId = m[1] ?? '';
  if (cmdId === '' ? method !== 'GET' && method !== 'POST' : method !== 'GET') {
    return send(res, 405, faultBody(405, '405 Method Not Allowed: The method is not allowed for the requested URL.'));
  }
  const token = query.get('agent_token');
  if (!token || !life.token || token !== life.token) return send(res, 401, faultBody(401, '401 Unauthorized: Token invalid.'));
  const wait = (query.get('wait') ?? '').toLowerCase() === 'true';
  if (cmdId !== '') {
    const cmd = life.commands.get(cmdId);
    if (!cmd) return sendError(res, notFound('Command Result', cmdId));
    // A request waiting on a host that dies gets its connection reset, as from a dead host.
    if (wait && !(await life.outlives(cmd.done))) return void req.socket.destroy();
    return send(res, 200, JSON.stringify(cmd.result));
  }
  if (method === 'GET') return send(res, 200, JSON.stringify({ commands: [...life.commands.values()].map((c) => c.result) }));
  let input: unknown;
  try {
    input = JSON.parse(body);
  } catch {
    return send(res, 400, faultBody(400, '400 Bad Request: The browser (or proxy) sent a request that this server could not understand.'));
  }
  const o = input as { name?: unknown; params?: unknown } | null;
  if (!o || typeof o !== 'object' || typeof o.name !== 'string' || typeof o.params !== 'object' || o.params === null || Array.isArray(o.params)) {
    return send(res, 400, faultBody(400, '400 Bad Request: Missing or invalid name or params'));
  }
  const params = o.params as Record<string, unknown>;
  const step = (params.step as { step?: unknown } | undefined)?.step;
  const key = /\.execute_(deploy|clean|service)_step$/.test(o.name) && typeof step === 'string' ? `${o.name}/${step}` : o.name;
  bump(agent.received, key);
  if (params.node !== undefined) agent.nodeReceived[key] = params.node;
  let cmd: Command;
  try {
    cmd = agent.execute(life, o.name, params);
  } catch (err) {
    if (err instanceof IpaError) return sendError(res, err);
    throw err;
  }
  if ((agent.faults.loseResponse ?? 0) > 0) {
    // Accepted and running, but the answer never arrives.
    agent.faults = { ...agent.faults, loseResponse: (agent.faults.loseResponse ?? 1) - 1 };
    req.socket.destroy();
    return;
  }
  const hold = agent.faults.holdAnswer;
  if (hold && hold.command === o.name) {
    const { holdAnswer: _spent, ...rest } = agent.faults;
    agent.faults = rest;
    await new Promise((r) => setTimeout(r, hold.ms));
  }
  if ((wait || cmd.sync) && !(await life.outlives(cmd.done))) return void req.socket.destroy();
  send(res, 200, JSON.stringify(cmd.result));
  if (o.name === 'system.lockdown' && cmd.result.command_status === 'SUCCEEDED') lockDown(agent, life);
}

function rootDoc(url: string): object {
  return {
    name: 'OpenStack Ironic Python Agent API',
    description: 'Ironic Python Agent is a provisioning agent for OpenStack Ironic',
    versions: [versionDoc(url)],
    default_version: versionDoc(url),
  };
}

function versionDoc(url: string): object {
  return {
    id: 'v1',
    links: [
      { href: `${url}/v1/`, rel: 'self' },
      { href: 'https://docs.openstack.org/ironic-python-agent', rel: 'describedby', type: 'text/html' },
    ],
  };
}

function v1Doc(url: string): object {
  return {
    commands: [
      { href: `${url}/v1/commands`, rel: 'self' },
      { href: `${url}/commands`, rel: 'bookmark' },
    ],
    status: [
      { href: `${url}/v1/status`, rel: 'self' },
      { href: `${url}/status`, rel: 'bookmark' },
    ],
    media_types: [{ base: 'application/json', type: 'application/vnd.openstack.ironic-python-agent.v1+json' }],
    ...versionDoc(url),
  };
}
