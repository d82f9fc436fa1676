/**
 * The agent client's connections: agents served under path prefixes of one origin (as the
 * simulator and Metal3's fake IPA serve them, or behind a proxy) each have their own, so one
 * agent's slow command never holds up another's calls.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { AgentClient } from '../../drivers/agent/client.js';

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
