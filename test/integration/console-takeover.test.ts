import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { HashRing } from '../../common/hash-ring.js';
import { restartConductor, startCluster, stopCluster, type Cluster } from '../helpers/cluster.js';
import { apiCall, fakeConsoleProcesses } from '../helpers/console.js';
import { until } from '../helpers/until.js';

function statOf(pid: number): { ppid: number; pgrp: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return { ppid: Number(f[1]), pgrp: Number(f[2]) };
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // gone
  }
}

describe('serial console processes across a takeover (real conductors, /proc)', function () {
  this.timeout(180_000);
  const consoleEnv = {
    GALVANIC_CONSOLE__RESTART_INITIAL_DELAY: '0.1',
    GALVANIC_CONSOLE__WATCHDOG_INTERVAL: '2',
    GALVANIC_CONDUCTOR__HEARTBEAT_INTERVAL: '1',
    GALVANIC_CONDUCTOR__HEARTBEAT_TIMEOUT: '4',
  };
  let cluster: Cluster | undefined;
  /** Every console process seen, to be ended whatever the outcome (a failing run must not leak). */
  const seen = new Set<number>();
  const note = () => {
    for (const pids of fakeConsoleProcesses().values()) for (const p of pids) seen.add(p);
  };

  afterEach(async () => {
    await stopCluster(cluster);
    cluster = undefined;
    for (const pid of seen) {
      signal(pid, 'SIGKILL');
      signal(pid, 'SIGCONT');
    }
    seen.clear();
  });

  it('a console that ignores EOF, one stopped and one stopped with its whole group, through SIGKILL, takeover, restart and shutdown: one process per node, then none', async () => {
    // A watchdog too slow to matter here: what ends the group-stopped console is the takeover itself.
    const env = { ...consoleEnv, GALVANIC_CONSOLE__WATCHDOG_INTERVAL: '600' };
    cluster = await startCluster('takeover', { conductors: 2, env });
    const [first, second] = cluster.conductors.map((c) => c.host);
    const api = cluster.api.url;
    // Nodes the ring of both conductors gives to the first one: they move and come back.
    const ring = new HashRing([first, second]);
    const uuids: string[] = [];
    while (uuids.length < 3) {
      const u = randomUUID();
      if (ring.owner(u) === first) uuids.push(u);
    }
    const [trapped, stopped, groupStopped] = uuids;
    for (const uuid of uuids) {
      const info = { fake_console_interval_ms: 200, ...(uuid === trapped ? { fake_console_ignore_eof: true } : {}) };
      const r = await apiCall(api, 'POST', '/v1/nodes', { uuid, driver: 'fake-hardware', console_interface: 'fake', driver_info: info });
      expect(r.status, JSON.stringify(r.body)).to.equal(201);
      expect((await apiCall(api, 'PUT', `/v1/nodes/${uuid}/states/console?wait=30`, { enabled: true })).status).to.equal(202);
    }
    const holders = async () => new Map((await cluster!.tdb.knex('console_processes as p').join('nodes as n', 'n.id', 'p.node_id')
      .whereNotNull('p.pid').select('n.uuid', 'p.conductor'))
      .map((r: { uuid: string; conductor: string }) => [r.uuid, r.conductor]));
    const heldBy = async (host: string) => {
      const h = await holders();
      return uuids.every((u) => h.get(u) === host);
    };
    const onePerNode = () => uuids.every((u) => fakeConsoleProcesses().get(u)?.length === 1);
    await until('the consoles running on the first conductor', async () => onePerNode() && (await heldBy(first)), 20_000);
    const original = fakeConsoleProcesses();
    note();

    // A child stopped on its own, and one stopped together with everything in its group.
    signal(original.get(stopped)![0], 'SIGSTOP');
    signal(-statOf(original.get(groupStopped)![0]).pgrp, 'SIGSTOP');

    await cluster.conductors[0].kill();
    // Down past heartbeat_timeout: the survivor takes every console over.
    await until('the second conductor running every console',
      async () => (await heldBy(second)) && uuids.every((u) => (fakeConsoleProcesses().get(u) ?? []).some((p) => !original.get(u)!.includes(p))), 30_000);
    note();

    await restartConductor(cluster, 0, env);
    const beforeRestart = new Set(seen);
    await until('the first conductor running its consoles again',
      async () => (await heldBy(first)) && uuids.every((u) => (fakeConsoleProcesses().get(u) ?? []).some((p) => !beforeRestart.has(p))), 30_000);
    note();
    // Settle: nothing extra appears.
    await sleep(3000);
    note();
    const after = fakeConsoleProcesses();
    for (const u of uuids) {
      expect(after.get(u) ?? [], `console processes of ${u === trapped ? 'the EOF-ignoring' : u === stopped ? 'the stopped' : 'the group-stopped'} console`).to.have.length(1);
      for (const old of original.get(u)!) expect(after.get(u)).to.not.include(old);
    }

    await Promise.all(cluster.conductors.map((c) => c.stop()));
    const left = [...fakeConsoleProcesses()].filter(([u]) => uuids.includes(u));
    expect(left, 'console processes after a clean shutdown').to.deep.equal([]);
    // The group-stopped one could not end itself: the survivor, on the same machine, killed it.
    expect(cluster.conductors[1].output()).to.contain('killed a console process whose holder lost it');
  });

  it('the watchdog kills and counts a console process group whose conductor is gone, and leaves those of live ones', async () => {
    cluster = await startCluster('strays', { conductors: 1, env: consoleEnv });
    // Process groups marked as consoles: one of an owner long gone, one of a live process (this one).
    const self = readFileSync('/proc/self/stat', 'utf8');
    const selfTicks = self.slice(self.lastIndexOf(')') + 2).split(' ')[19];
    const start = (owner: string) => {
      const child = spawn('sleep', ['300'], { detached: true, stdio: 'ignore', env: { ...process.env, GALVANIC_CONSOLE_OWNER: owner } });
      child.unref();
      seen.add(child.pid!);
      return child.pid!;
    };
    const orphan = start('4194303:1');
    const kept = start(`${process.pid}:${selfTicks}`);
    const alive = (pid: number) => {
      try {
        return !/^\S+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
      } catch {
        return false;
      }
    };
    await until('the watchdog killing the ownerless console group', () => !alive(orphan), 15_000);
    await sleep(2500);
    expect(alive(kept), 'a console group whose owner lives').to.equal(true);
    expect(cluster.conductors[0].output()).to.contain('killed a stray console process group');
    expect(cluster.conductors[0].output()).to.match(/"unrecorded":1[^\n]*console watchdog found stray console processes/);
  });
});
