/**
 * A deploy whose BMC misbehaves ends in `deploy failed` with a last_error and history that say
 * what happened, never stuck in `deploying`: InsertMedia refused, a BMC that stops answering
 * mid-deploy, a BMC that loses power mid-boot, and a conductor SIGKILLed while its nodes boot
 * (3 conductor processes; a survivor fails each such node within heartbeat_timeout + 10 s).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import { startRedfishSim, type RedfishSim, type SimFaults } from '../../sim/redfish/index.js';
import { suiteApp } from '../helpers/app.js';
import { startCluster, stopCluster, type Cluster } from '../helpers/cluster.js';
import {
  clearSimEvents, createNode, httpClient, injector, nodeHistory, provision, provisionAndSettle, redfishNodeBody, settled, untilNode,
  simEvents, story, type ApiCall, type NodeView,
} from '../helpers/provisioning.js';
import { setFaults, simControl } from '../helpers/redfish.js';

const ISO = 'http://images.example/live.iso';

/** A node of `bmcUrl`, taken to available with a boot ISO set. */
async function availableNode(api: ApiCall, name: string, bmcUrl: string): Promise<NodeView> {
  const node = await createNode(api, redfishNodeBody(name, bmcUrl, { instance_info: { boot_iso: ISO } }));
  expect((await provisionAndSettle(api, node.uuid, 'manage')).provision_state).to.equal('manageable');
  const available = await provisionAndSettle(api, node.uuid, 'provide');
  expect(available.provision_state, available.last_error ?? '').to.equal('available');
  return available;
}

/** Polls the simulator until a boot has started on the BMC. */
async function bootStarted(bmcUrl: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!story(await simEvents(bmcUrl)).some((l) => l.startsWith('boot-started'))) {
    if (Date.now() > deadline) throw new Error(`no boot started on ${bmcUrl}: ${story(await simEvents(bmcUrl)).join(', ')}`);
    await sleep(50);
  }
}

function expectDeployFailed(node: NodeView, reason: RegExp): void {
  expect(node.provision_state, JSON.stringify(node)).to.equal('deploy failed');
  expect(node.target_provision_state).to.equal(null);
  expect(node.reservation).to.equal(null);
  expect(node.deploy_step).to.deep.equal({});
  expect(node.last_error).to.match(new RegExp(`^Failed to deploy node ${node.uuid}: `));
  expect(node.last_error, node.last_error ?? "").to.match(reason);
}

describe('provisioning faults', function () {
  this.timeout(60_000);

  describe('a misbehaving BMC (in-process conductor)', () => {
    const t = suiteApp({
      env: {
        GALVANIC_REDFISH__CONNECTION_ATTEMPTS: '2',
        GALVANIC_REDFISH__CONNECTION_RETRY_INTERVAL: '0.1',
        GALVANIC_REDFISH__REQUEST_TIMEOUT: '3',
        GALVANIC_REDFISH__POWER_STATE_CHANGE_TIMEOUT: '4',
        // Transient failures are retried once, soon, so that each case ends in seconds.
        GALVANIC_CONDUCTOR__INTENT_MAX_ATTEMPTS: '2',
        GALVANIC_CONDUCTOR__INTENT_RETRY_INITIAL_DELAY: '0.2',
        GALVANIC_CONDUCTOR__INTENT_RETRY_MAX_DELAY: '0.2',
        GALVANIC_CONDUCTOR__SYNC_POWER_STATE_INTERVAL: '0',
      },
    });
    let api: ApiCall;
    let sim: RedfishSim;

    before(async () => {
      api = injector(t.app);
      sim = await startRedfishSim({ count: 3 });
    });

    after(async () => {
      await sim?.stop();
    });

    afterEach(async () => {
      for (const b of sim.bmcs) {
        await setFaults(b.url, { insertMediaStatus: 0, hang: false, powerLost: false, bootMs: [0, 0] });
        await simControl(b.url, 'state', { initial: true });
      }
    });

    it('fails the deploy when the BMC refuses InsertMedia (400), and a redeploy then succeeds', async () => {
      const url = sim.bmcs[0].url;
      const node = await availableNode(api, 'refused-insert', url);
      await setFaults(url, { insertMediaStatus: 400 });
      await clearSimEvents(url);
      const failed = await provisionAndSettle(api, node.uuid, 'active');
      expectDeployFailed(failed, /InsertMedia|insert/i);
      expect(failed.last_error).to.match(/400/);
      const lines = story(await simEvents(url));
      expect(lines).to.include('refused InsertMedia 400');
      // Nothing was booted from a CD that holds nothing.
      expect(lines.filter((l) => l.startsWith('boot-started'))).to.deep.equal([]);
      const history = await nodeHistory(api, node.uuid);
      expect(history.filter((h) => h.severity === 'ERROR').map((h) => h.event).join('\n')).to.match(/InsertMedia|insert/i);

      // deploy failed --active--> deploying: the fault gone, it deploys.
      await setFaults(url, { insertMediaStatus: 0 });
      const active = await provisionAndSettle(api, node.uuid, 'active');
      expect(active.provision_state, active.last_error ?? '').to.equal('active');
      expect(active.last_error).to.equal(null);
    });

    it('fails the deploy, after the retry, when InsertMedia keeps failing with 500', async () => {
      const url = sim.bmcs[1].url;
      const node = await availableNode(api, 'insert-500', url);
      await setFaults(url, { insertMediaStatus: 500 });
      const failed = await provisionAndSettle(api, node.uuid, 'active', {}, 50_000);
      expectDeployFailed(failed, /500/);
      const events = (await nodeHistory(api, node.uuid)).filter((h) => h.severity === 'ERROR').map((h) => h.event);
      expect(events.some((e) => /will retry/.test(e)), events.join('\n')).to.equal(true);
      expect(events.some((e) => /failed after 2 attempt/.test(e)), events.join('\n')).to.equal(true);
    });

    /**
     * Deploys a node of `url` with a 2 s boot (one a BMC which answers finishes within
     * power_state_change_timeout), sets `fault` once the boot has started: the settled node.
     */
    async function deployWithFaultMidBoot(name: string, url: string, fault: Partial<SimFaults>): Promise<NodeView> {
      const node = await availableNode(api, name, url);
      await setFaults(url, { bootMs: [2_000, 2_000] });
      await clearSimEvents(url);
      await provision(api, node.uuid, 'active');
      await bootStarted(url);
      await setFaults(url, fault);
      return settled(api, node.uuid, 40_000);
    }

    it('fails the deploy when the BMC stops answering mid-boot', async () => {
      const failed = await deployWithFaultMidBoot('hung-bmc', sim.bmcs[2].url, { hang: true });
      expectDeployFailed(failed, /no answer within \d+ s/);
      const events = (await nodeHistory(api, failed.uuid)).filter((h) => h.severity === 'ERROR').map((h) => h.event);
      expect(events.some((e) => /failed after 2 attempt/.test(e)), events.join('\n')).to.equal(true);
    });

    it('fails the deploy when the BMC loses power mid-boot', async () => {
      const url = sim.bmcs[0].url;
      const failed = await deployWithFaultMidBoot('power-lost', url, { powerLost: true });
      expectDeployFailed(failed, /unreachable|reset|connect|socket|ECONN/i);
      expect(story(await simEvents(url))).to.include('power-lost');
    });
  });

  describe('a conductor SIGKILLed while its nodes deploy (3 conductor processes)', () => {
    const HEARTBEAT_TIMEOUT_S = 5;
    const NODES = 6;
    let c: Cluster | undefined;
    let sim: RedfishSim | undefined;

    before(async () => {
      sim = await startRedfishSim({ count: NODES });
      c = await startCluster('deploykill', {
        conductors: 3,
        env: {
          GALVANIC_CONDUCTOR__HEARTBEAT_INTERVAL: '1',
          GALVANIC_CONDUCTOR__HEARTBEAT_TIMEOUT: String(HEARTBEAT_TIMEOUT_S),
          GALVANIC_CONDUCTOR__SYNC_POWER_STATE_INTERVAL: '0',
          GALVANIC_CONDUCTOR__CHECK_PROVISION_STATE_INTERVAL: '1',
          GALVANIC_REDFISH__POWER_STATE_CHANGE_TIMEOUT: '120',
          GALVANIC_REDFISH__REQUEST_TIMEOUT: '120',
        },
      });
    });

    after(async () => {
      await stopCluster(c);
      await sim?.stop();
    });

    it('a survivor ends each node the dead conductor was deploying in deploy failed, within heartbeat_timeout + 10 s', async () => {
      const api = httpClient(c!.api.url);
      const nodes: NodeView[] = [];
      for (const [i, b] of sim!.bmcs.entries()) nodes.push(await availableNode(api, `kill-${i}`, b.url));
      // Slow boots: every node is still booting when the conductor dies (a second or two after
      // the boots start), and the survivors' own deploys, which wait their boots out, end soon.
      for (const b of sim!.bmcs) await setFaults(b.url, { bootMs: [15_000, 15_000] });
      for (const n of nodes) await provision(api, n.uuid, 'active');
      for (const b of sim!.bmcs) await bootStarted(b.url);
      const held = new Map<string, string>();
      for (const n of nodes) {
        const now = await untilNode(api, n.uuid, (x) => x.reservation !== null, 'to be reserved');
        expect(now.provision_state).to.equal('deploying');
        held.set(n.uuid, now.reservation!);
      }
      const counts = new Map<string, number>();
      for (const host of held.values()) counts.set(host, (counts.get(host) ?? 0) + 1);
      const victimHost = [...counts.entries()].sort((a, b) => b[1] - a[1])[0][0];
      const victim = c!.conductors.find((x) => x.host === victimHost)!;
      const orphans = nodes.filter((n) => held.get(n.uuid) === victimHost);
      const others = nodes.filter((n) => held.get(n.uuid) !== victimHost);
      const killedAt = Date.now();
      await victim.kill();

      const bound = (HEARTBEAT_TIMEOUT_S + 10) * 1000;
      for (const n of orphans) {
        const failed = await untilNode(api, n.uuid, (x) => x.provision_state !== 'deploying', 'to leave deploying', bound + 5_000);
        const took = Date.now() - killedAt;
        expect(took, `${n.uuid} ended ${took} ms after the kill`).to.be.at.most(bound);
        expect(failed.provision_state, JSON.stringify(failed)).to.equal('deploy failed');
        expect(failed.reservation).to.equal(null);
        expect(failed.target_provision_state).to.equal(null);
        expect(failed.last_error).to.be.a('string').and.match(new RegExp(`^Failed to deploy node ${n.uuid}: .*${victimHost}`));
        const errors = (await nodeHistory(api, n.uuid)).filter((h) => h.severity === 'ERROR');
        expect(errors, JSON.stringify(errors)).to.have.length.at.least(1);
      }
      // The survivors' own deploys are untouched by the takeover and finish.
      for (const n of others) {
        const done = await settled(api, n.uuid, 40_000);
        expect(done.provision_state, done.last_error ?? '').to.equal('active');
      }
    });
  });
});
