/**
 * The agent client's connections: agents served under path prefixes of one origin (as the
 * simulator and Metal3's fake IPA serve them, or behind a proxy) each have their own, so one
 * agent's slow command never holds up another's calls; and the agent's TLS certificate,
 * checked as Ironic checks it.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { SCHEMA } from '../../common/config-schema.js';
import { AgentConnectionFailed, InvalidParameterValue } from '../../common/errors.js';
import { AgentClient, commandError, type AgentCommand } from '../../drivers/agent/client.js';
import { agentVerify } from '../../drivers/agent/session.js';
import { generateAgentCertificate, type AgentCertificate } from '../../sim/agent/tls.js';

describe('AgentClient connections', () => {
  let server: http.Server;
  let origin: string;
  const held: http.ServerResponse[] = [];
  const seen: string[] = [];

  before(async () => {
    server = http.createServer((req, res) => {
      seen.push(req.url ?? '');
      // Agent "slow" never answers while the test runs; every other agent answers at once.
      if ((req.url ?? '').startsWith('/slow/')) {
        held.push(res);
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ commands: [] }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  after(async () => {
    for (const res of held) res.destroy();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it('answers an agent while another agent on the same origin holds all of its connections', async () => {
    const client = new AgentClient({ timeoutMs: 1500, maxAttempts: 1, connectionsPerAgent: 1 });
    try {
      const slow = client.getCommands({ url: `${origin}/slow`, token: 't'.repeat(32) }).catch((err: unknown) => err);
      // The slow agent's request is at its server before the other agent's call starts.
      while (!seen.some((u) => u.startsWith('/slow/'))) await new Promise((r) => setTimeout(r, 5));
      const started = Date.now();
      const commands = await client.getCommands({ url: `${origin}/fast`, token: 'f'.repeat(32) });
      expect(commands).to.deep.equal([]);
      // One pool per origin would have queued this call behind the slow one until its timeout.
      expect(Date.now() - started).to.be.below(1000);
      expect(await slow).to.be.instanceOf(Error);
    } finally {
      await client.close();
    }
  });

  it('sends a task\'s calls to its agent, one after another, over one connection by default', async () => {
    const connections = new Set<unknown>();
    const count = (socket: unknown) => connections.add(socket);
    server.on('connection', count);
    const client = new AgentClient({ timeoutMs: 1500, maxAttempts: 1, connectionsPerAgent: SCHEMA.agent.connections_per_agent.default });
    try {
      const target = { url: `${origin}/sequential`, token: 's'.repeat(32) };
      // As a deploy step's task calls: a command list read right after each answer.
      for (let i = 0; i < 4; i++) expect(await client.getCommands(target)).to.deep.equal([]);
      expect(connections.size).to.equal(1);
    } finally {
      server.off('connection', count);
      await client.close();
    }
  });

  it('closes an agent\'s pool when it is forgotten, and opens a new one at its next call', async () => {
    const client = new AgentClient({ timeoutMs: 1500, maxAttempts: 1, connectionsPerAgent: 1 });
    try {
      const target = { url: `${origin}/gone`, token: 'g'.repeat(32) };
      expect(await client.getCommands(target)).to.deep.equal([]);
      client.forget(target.url);
      client.forget('not a url');
      expect(await client.getCommands(target)).to.deep.equal([]);
    } finally {
      await client.close();
    }
  });
});

describe('AgentClient TLS: the agent\'s own certificate pinned (API 1.68 agent_verify_ca)', () => {
  let agentA: AgentCertificate;
  let agentB: AgentCertificate;
  let otherHost: AgentCertificate;
  const servers: https.Server[] = [];
  let urlA: string;
  let urlOtherHost: string;

  async function serve(cert: AgentCertificate): Promise<string> {
    const server = https.createServer({ key: cert.key, cert: cert.cert }, (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ commands: [] }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    servers.push(server);
    return `https://127.0.0.1:${(server.address() as AddressInfo).port}/agent`;
  }

  before(async () => {
    [agentA, agentB, otherHost] = await Promise.all([generateAgentCertificate('127.0.0.1'), generateAgentCertificate('127.0.0.1'), generateAgentCertificate('127.0.0.2')]);
    urlA = await serve(agentA);
    urlOtherHost = await serve(otherHost);
  });

  after(async () => {
    for (const s of servers) {
      s.closeAllConnections();
      await new Promise<void>((resolve) => s.close(() => resolve()));
    }
  });

  const token = 'p'.repeat(32);
  const failure = (p: Promise<unknown>) => p.then(() => undefined, (err: unknown) => err as Error);

  it('reaches the agent with the certificate it sent, pinned', async () => {
    const client = new AgentClient({ timeoutMs: 1500, maxAttempts: 1, connectionsPerAgent: 1 });
    try {
      expect(await client.getCommands({ url: urlA, token, verify: { ca: agentA.cert } })).to.deep.equal([]);
    } finally {
      await client.close();
    }
  });

  it('refuses, as a connection that failed, the system\'s CAs, another agent\'s certificate and a certificate for another address', async () => {
    const client = new AgentClient({ timeoutMs: 1500, maxAttempts: 2, connectionsPerAgent: 1, retryDelayMs: 10 });
    try {
      const system = await failure(client.getCommands({ url: urlA, token }));
      expect(system).to.be.instanceOf(AgentConnectionFailed);
      expect(system!.message).to.include('after 2 attempt(s): self-signed certificate');
      // The pool pinned to A's certificate (the first test's) is not the one used for B's.
      expect(await client.getCommands({ url: urlA, token, verify: { ca: agentA.cert } })).to.deep.equal([]);
      expect(await failure(client.getCommands({ url: urlA, token, verify: { ca: agentB.cert } }))).to.be.instanceOf(AgentConnectionFailed);
      // The certificate is the agent's, but names 127.0.0.2: the host is checked, as requests checks it.
      const host = await failure(client.getCommands({ url: urlOtherHost, token, verify: { ca: otherHost.cert } }));
      expect(host).to.be.instanceOf(AgentConnectionFailed);
      expect(host!.message).to.include("IP: 127.0.0.1 is not in the cert's list: 127.0.0.2");
    } finally {
      await client.close();
    }
  });

  it('verifies nothing with [agent] verify_ca False', async () => {
    const client = new AgentClient({ timeoutMs: 1500, maxAttempts: 1, connectionsPerAgent: 1 });
    try {
      expect(await client.getCommands({ url: urlOtherHost, token, verify: false })).to.deep.equal([]);
    } finally {
      await client.close();
    }
  });

  describe('agentVerify (Ironic\'s _get_verify)', () => {
    const node = (dii: Record<string, unknown> | null, info: Record<string, unknown> = {}) => ({
      uuid: 'n', properties: {}, instanceInfo: {}, driverInfo: info, driverInternalInfo: dii, targetRaidConfig: {},
      provisionState: 'clean wait', targetProvisionState: 'available', disablePowerOff: false,
    });

    it('takes the heartbeat\'s certificate, else driver_info agent_verify_ca, else [agent] verify_ca', async () => {
      expect(await agentVerify(node({ agent_verify_ca: agentA.cert }, { agent_verify_ca: false }), 'False')).to.deep.equal({ ca: agentA.cert });
      expect(await agentVerify(node({}, { agent_verify_ca: 'no' }), 'True')).to.equal(false);
      expect(await agentVerify(node(null, { agent_verify_ca: true }), 'False')).to.equal(true);
      expect(await agentVerify(node({}), 'True')).to.equal(true);
      expect(await agentVerify(node({}), 'f')).to.equal(false);
      const dir = await mkdtemp(path.join(os.tmpdir(), 'agent-ca-'));
      try {
        await writeFile(path.join(dir, 'ca.pem'), agentB.cert);
        expect(await agentVerify(node({}), path.join(dir, 'ca.pem'))).to.deep.equal({ ca: agentB.cert });
        expect(await agentVerify(node({}, { agent_verify_ca: path.join(dir, 'ca.pem') }), 'True')).to.deep.equal({ ca: agentB.cert });
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    });

    it('refuses a value that is neither a boolean nor a path', async () => {
      const err = await failure(agentVerify(node({}), '/no/such/ca.pem'));
      expect(err).to.be.instanceOf(InvalidParameterValue);
      expect(err!.message).to.equal('Agent CA /no/such/ca.pem is neither a path nor a boolean');
      expect(await failure(agentVerify(node({}, { agent_verify_ca: 3 }), 'True'))).to.be.instanceOf(InvalidParameterValue);
    });
  });
});

describe('commandError (Ironic\'s get_command_error)', () => {
  const failed = (command_error: unknown): AgentCommand => ({ id: 'c', command_name: 'execute_deploy_step', command_status: 'FAILED', command_error, command_result: null } as AgentCommand);
  it('gives the error\'s details, else its message, else the error as Python prints it', () => {
    expect(commandError(failed({ type: 'DeploymentError', code: 500, message: 'Deploy step failed', details: 'disk on fire' }))).to.equal('disk on fire');
    expect(commandError(failed({ type: 'DeploymentError', message: 'Deploy step failed', details: '' }))).to.equal('Deploy step failed');
    expect(commandError(failed({ type: 'X', code: 500 }))).to.equal("{'type': 'X', 'code': 500}");
    expect(commandError(failed('plain words'))).to.equal('plain words');
    expect(commandError(failed(null))).to.equal('Invalid agent response');
  });
});
