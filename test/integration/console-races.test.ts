import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { HashRing } from '../../common/hash-ring.js';
import { hashToken } from '../../db/console.js';
import { freshDatabase, type TestDatabase } from '../helpers/database.js';
import { startConductor, startGalvanic, type RunningConductor, type RunningGalvanic } from '../helpers/app.js';
import { apiCall, connectViewer, fakeConsoleProcesses } from '../helpers/console.js';
import { until } from '../helpers/until.js';

async function createConsoleNodes(api: string, count: number, intervalMs: number, enable: boolean, chosen: string[] = []): Promise<string[]> {
  const uuids: string[] = [];
  for (let i = 0; i < count; i++) {
    const r = await apiCall(api, 'POST', '/v1/nodes', {
      driver: 'fake-hardware', console_interface: 'fake', driver_info: { fake_console_interval_ms: intervalMs }, ...(chosen[i] ? { uuid: chosen[i] } : {}),
    });
    expect(r.status, JSON.stringify(r.body)).to.equal(201);
    uuids.push(r.body.uuid);
    if (enable) expect((await apiCall(api, 'PUT', `/v1/nodes/${r.body.uuid}/states/console?wait=30`, { enabled: true })).status).to.equal(202);
  }
  return uuids;
}

/** A process's parent and group ids, from /proc. */
function statOf(pid: number): { ppid: number; pgrp: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return { ppid: Number(f[1]), pgrp: Number(f[2]) };
}

describe('serial console races across processes (fake console)', function () {
  this.timeout(300_000);
  let tdb: TestDatabase;
  let apis: RunningGalvanic[] = [];
  let conductor: RunningConductor | undefined;
  const consoleEnv = {
    GALVANIC_CONSOLE__RESTART_INITIAL_DELAY: '0.1',
    GALVANIC_CONSOLE__WATCHDOG_INTERVAL: '2',
    GALVANIC_CONDUCTOR__HEARTBEAT_INTERVAL: '1',
    GALVANIC_CONDUCTOR__HEARTBEAT_TIMEOUT: '4',
  };

  beforeEach(async () => {
    tdb = await freshDatabase();
    conductor = await startConductor({ databaseUrl: tdb.url, host: 'console-c1', env: consoleEnv });
    apis = await Promise.all([0, 1].map(() => startGalvanic({ databaseUrl: tdb.url, command: 'api' })));
  });
  afterEach(async () => {
    await Promise.all(apis.map((a) => a.stop()));
    await conductor?.stop();
    await tdb.drop();
  });

  it('500 interleavings of {issue token, connect} with {change owner} on two API servers: no stale session survives, no stale token is accepted', async () => {
    const NODES = 10;
    const ROUNDS = 50;
    const nodes = await createConsoleNodes(apis[0].url, NODES, 30, true);
    const pick = () => apis[Math.floor(Math.random() * 2)].url;
    const tally = { fresh: 0, staleClosed: 0, staleRefused: 0, issueAfterChange: 0 };
    const problems: string[] = [];

    const epochOf = async (uuid: string) => Number((await tdb.knex('nodes').where('uuid', uuid).first('access_epoch')).access_epoch);

    const interleave = async (uuid: string, i: number) => {
      const viewerSide = (async () => {
        await sleep(Math.random() * 20);
        const r = await apiCall(pick(), 'GET', `/v1/nodes/${uuid}/states/console`);
        if (r.status !== 200) throw new Error(`token request failed: ${r.status} ${JSON.stringify(r.body)}`);
        const url: string = r.body.console_info.url;
        const token = url.slice(url.lastIndexOf('/') + 1);
        await sleep(Math.random() * 20);
        // Connect through either API server, whichever issued the token.
        const viaUrl = `${pick().replace(/^http/, 'ws')}/v1/console/${token}`;
        const connectAt = Date.now();
        return { token, viewer: connectViewer(viaUrl), connectAt };
      })();
      const ownerSide = (async () => {
        await sleep(Math.random() * 40);
        const r = await apiCall(pick(), 'PATCH', `/v1/nodes/${uuid}`, [{ op: 'replace', path: '/owner', value: `project-${i}` }]);
        if (r.status !== 200) throw new Error(`owner change failed: ${r.status}`);
        return Date.now();
      })();
      const [{ token, viewer, connectAt }, patchedAt] = await Promise.all([viewerSide, ownerSide]);
      const epochAfter = await epochOf(uuid);
      const tokenEpoch = Number((await tdb.knex('console_tokens').where('token_hash', hashToken(token)).first('access_epoch')).access_epoch);
      const opened = await viewer.opened;
      if (tokenEpoch === epochAfter) {
        // Issued after the change: a valid session, which must work.
        tally.fresh++;
        // A line of this node's console, not its banner: the console prints a line every 30 ms
        // and the replay holds the latest output, so by the later rounds the banner is gone.
        await viewer.waitFor(new RegExp(`fake console ${uuid} line \\d+`), 10_000).catch((err: Error) => problems.push(`#${i} fresh token: ${err.message}`));
        viewer.close();
        await viewer.closed;
        return;
      }
      if (tokenEpoch !== epochAfter - 1) problems.push(`#${i}: token epoch ${tokenEpoch}, node epoch ${epochAfter}`);
      const closed = await Promise.race([viewer.closed, sleep(3000).then(() => null)]);
      if (!closed) {
        problems.push(`#${i}: a session with a stale token (epoch ${tokenEpoch} < ${epochAfter}) was still open 3 s after the owner change`);
        viewer.ws.terminate();
        return;
      }
      if (opened) {
        tally.staleClosed++;
        if (![4001, 4003].includes(closed.code)) problems.push(`#${i}: stale session closed with ${closed.code} ${closed.reason}`);
        if (closed.at - patchedAt > 1000) problems.push(`#${i}: stale session closed ${closed.at - patchedAt} ms after the owner change`);
      } else {
        tally.staleRefused++;
      }
      const late = viewer.chunks.filter((c) => c.at > patchedAt + 1000);
      if (late.length) problems.push(`#${i}: ${late.length} chunks received more than 1 s after the owner change`);
      if (connectAt > patchedAt && viewer.chunks.length) problems.push(`#${i}: a stale token connected after the owner change received console output`);
      if (connectAt > patchedAt) tally.issueAfterChange++;
    };

    for (let round = 0; round < ROUNDS; round++) {
      await Promise.all(nodes.map((uuid, n) => interleave(uuid, round * NODES + n)));
    }
    console.log(`      outcomes: ${JSON.stringify(tally)}`);
    expect(problems).to.deep.equal([]);
    expect(tally.fresh + tally.staleClosed + tally.staleRefused).to.equal(NODES * ROUNDS);
    // The interleavings must really interleave: some of each outcome.
    expect(tally.fresh).to.be.above(0);
    expect(tally.staleClosed).to.be.above(0);
    expect(tally.staleRefused).to.be.above(0);
  });

  it('200 enable/connect/disconnect/disable cycles, then SIGKILL and restart of the conductor: one console process per enabled node, none for others (from /proc)', async () => {
    const api = apis[0].url;
    const NODES = 5;
    const CYCLES = 40;
    const nodes = await createConsoleNodes(api, NODES, 200, false);
    const cycle = async (uuid: string) => {
      expect((await apiCall(api, 'PUT', `/v1/nodes/${uuid}/states/console?wait=30`, { enabled: true })).status).to.equal(202);
      const r = await apiCall(apis[1].url, 'GET', `/v1/nodes/${uuid}/states/console`);
      expect(r.body.console_enabled).to.equal(true);
      const v = connectViewer(r.body.console_info.url);
      await v.waitFor(`Fake serial console of node ${uuid}`);
      v.close();
      await v.closed;
      expect((await apiCall(api, 'PUT', `/v1/nodes/${uuid}/states/console?wait=30`, { enabled: false })).status).to.equal(202);
    };
    await Promise.all(nodes.map(async (uuid) => {
      for (let c = 0; c < CYCLES; c++) await cycle(uuid);
    }));
    await until('no console process after the cycles', () => [...fakeConsoleProcesses().keys()].every((u) => !nodes.includes(u)), 10_000);

    // Leave the first three enabled, with viewers attached, and kill the conductor outright.
    const enabled = nodes.slice(0, 3);
    for (const uuid of enabled) expect((await apiCall(api, 'PUT', `/v1/nodes/${uuid}/states/console?wait=30`, { enabled: true })).status).to.equal(202);
    await until('consoles of the enabled nodes', () => enabled.every((u) => fakeConsoleProcesses().get(u)?.length === 1), 10_000);
    const viewers = await Promise.all(enabled.map(async (uuid) => {
      const v = connectViewer((await apiCall(api, 'GET', `/v1/nodes/${uuid}/states/console`)).body.console_info.url);
      await v.waitFor('Fake serial console');
      return v;
    }));
    const before = fakeConsoleProcesses();
    for (const uuid of enabled) {
      const [pid] = before.get(uuid)!;
      // The group is led by the wrapper that ends it when the conductor dies.
      const { ppid, pgrp } = statOf(pid);
      expect(pgrp, 'a console process runs in a process group of its own, led by its wrapper').to.equal(ppid);
      expect(statOf(ppid).pgrp).to.equal(ppid);
    }
    await conductor!.kill();
    for (const v of viewers) expect((await v.closed).code).to.not.equal(1000);

    conductor = await startConductor({ databaseUrl: tdb.url, host: 'console-c1', env: consoleEnv });
    await until('fresh consoles after the restart', () => enabled.every((u) => (fakeConsoleProcesses().get(u) ?? []).every((p) => !before.get(u)!.includes(p)) && fakeConsoleProcesses().get(u)?.length === 1), 15_000);
    // Settle, then count again: nothing extra appeared, the old ones are gone.
    await sleep(1500);
    const after = fakeConsoleProcesses();
    for (const uuid of nodes) {
      expect(after.get(uuid)?.length ?? 0, `console processes of ${uuid}`).to.equal(enabled.includes(uuid) ? 1 : 0);
    }
    for (const uuid of enabled) for (const old of before.get(uuid)!) expect(after.get(uuid)).to.not.include(old);
    // The new consoles work.
    const v = connectViewer((await apiCall(apis[1].url, 'GET', `/v1/nodes/${enabled[0]}/states/console`)).body.console_info.url);
    await v.waitFor('Fake serial console');
    v.close();
  });

  it('a second conductor takes over part of the consoles, and gives them back when it dies: always one process per node', async () => {
    const api = apis[0].url;
    // UUIDs chosen so that each conductor owns half of the nodes on a ring of the two: with
    // random ones, all eight land on the first one time in 256 and nothing could move.
    const ring = new HashRing(['console-c1', 'console-c2']);
    const chosen: Record<string, string[]> = { 'console-c1': [], 'console-c2': [] };
    while (chosen['console-c1'].length < 4 || chosen['console-c2'].length < 4) {
      const uuid = randomUUID();
      const side = chosen[ring.owner(uuid)!];
      if (side.length < 4) side.push(uuid);
    }
    const nodes = await createConsoleNodes(api, 8, 200, true, [...chosen['console-c1'], ...chosen['console-c2']]);
    const holders = async () => new Map((await tdb.knex('console_processes as p').join('nodes as n', 'n.id', 'p.node_id').select('n.uuid', 'p.conductor'))
      .map((r: { uuid: string; conductor: string }) => [r.uuid, r.conductor]));
    const onePerNode = () => nodes.every((u) => fakeConsoleProcesses().get(u)?.length === 1);
    await until('consoles on the first conductor', onePerNode, 10_000);
    const viewers = new Map(await Promise.all(nodes.map(async (u) => {
      const v = connectViewer((await apiCall(api, 'GET', `/v1/nodes/${u}/states/console`)).body.console_info.url);
      await v.waitFor('Fake serial console');
      return [u, v] as const;
    })));

    const second = await startConductor({ databaseUrl: tdb.url, host: 'console-c2', env: consoleEnv });
    try {
      await until('the second conductor holding its four consoles', async () => {
        const held = [...(await holders()).values()];
        return held.length === nodes.length && held.filter((c) => c === 'console-c2').length === 4 && onePerNode();
      }, 20_000);
      const moved = [...(await holders())].filter(([, c]) => c === 'console-c2').map(([u]) => u);
      expect(moved).to.have.members(chosen['console-c2']);
      // Viewers of moved consoles were told; the others kept theirs.
      for (const u of moved) expect((await viewers.get(u)!.closed).code).to.equal(4002);
      for (const u of nodes.filter((x) => !moved.includes(x))) expect(viewers.get(u)!.ws.readyState).to.equal(viewers.get(u)!.ws.OPEN);
      // A moved console is reachable through the other API server.
      const v = connectViewer((await apiCall(apis[1].url, 'GET', `/v1/nodes/${moved[0]}/states/console`)).body.console_info.url);
      await v.waitFor(`Fake serial console of node ${moved[0]}`);
      v.close();

      await second.kill();
      await until('the first conductor taking the consoles back', async () => [...(await holders()).values()].every((c) => c === 'console-c1') && (await holders()).size === nodes.length && onePerNode(), 30_000);
    } finally {
      await second.stop();
      for (const v of viewers.values()) v.ws.terminate();
    }
    for (const u of nodes) expect(fakeConsoleProcesses().get(u)).to.have.length(1);
  });
});

