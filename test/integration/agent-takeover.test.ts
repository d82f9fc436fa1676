/**
 * A conductor SIGKILLed while its nodes wait in `wait call-back` for their agents (3 conductor
 * processes, one API): nothing of the run lives in the dead process, so a survivor takes the
 * nodes over on the hash ring and carries each deploy on at its agent's next heartbeat. One of
 * its nodes is in the middle of an `agent_continue` at the kill (the agent holds its answer to
 * write_image): the survivor repeats it, and the agent gets write_image once all the same.
 */
import { expect } from 'chai';
import { startRedfishSim, type RedfishSim } from '../../sim/redfish/index.js';
import { startCluster, stopCluster, type Cluster } from '../helpers/cluster.js';
import { AGENT_TEST_ENV, directNodeBody, startImageServer, type ImageServer } from '../helpers/agent-deploy.js';
import { agentWitness, setAgentFaults } from '../helpers/agent-sim.js';
import { until } from '../helpers/until.js';
import { createNode, getNode, httpClient, provision, provisionAndSettle, settled, type ApiCall } from '../helpers/provisioning.js';

describe('agent: a conductor SIGKILLed during wait call-back and an agent_continue (3 conductor processes)', function () {
  this.timeout(180_000);
  const HEARTBEAT_TIMEOUT_S = 5;
  const NODES = 6;
  let c: Cluster | undefined;
  let sim: RedfishSim | undefined;
  let images: ImageServer | undefined;

  before(async () => {
    images = await startImageServer(8 * 1024 * 1024);
    c = await startCluster('agentkill', {
      conductors: 3,
      env: {
        ...AGENT_TEST_ENV,
        GALVANIC_CONDUCTOR__HEARTBEAT_INTERVAL: '1',
        GALVANIC_CONDUCTOR__HEARTBEAT_TIMEOUT: String(HEARTBEAT_TIMEOUT_S),
      },
    });
    // 8 MiB at 1 MB/s: every node is still writing its image when the conductor dies.
    sim = await startRedfishSim({ count: NODES, agent: { apiUrl: c.api.url, bootSeconds: [0.2, 0.5], heartbeatMinGapMs: 200, lookupRetryMs: 300, writeMBps: 1 } });
  });

  after(async () => {
    await stopCluster(c);
    await sim?.stop();
    await images?.close();
  });

  it('a survivor carries every deploy on at the next heartbeat, within heartbeat_timeout + 10 s of the image written', async () => {
    const api: ApiCall = httpClient(c!.api.url);
    const uuids: string[] = [];
    for (const [i, b] of sim!.bmcs.entries()) {
      const n = await createNode(api, directNodeBody(`kill-${i}`, b.url, images!, { automated_clean: false }));
      await provisionAndSettle(api, n.uuid, 'manage');
      await provisionAndSettle(api, n.uuid, 'inspect');
      expect((await provisionAndSettle(api, n.uuid, 'provide')).provision_state).to.equal('available');
      uuids.push(n.uuid);
    }
    // The victim owns two nodes or more (6 nodes on 3 conductors): one is cut short in its
    // agent_continue, the others wait idle. A held answer outlasts the kill; on a survivor it
    // is lost after [agent] command_timeout, and the command found in the agent's list.
    const owners = await Promise.all(uuids.map(async (u) => (await getNode(api, u)).conductor as string));
    const victimHost = [...new Set(owners)].sort((a, b) => owners.filter((o) => o === b).length - owners.filter((o) => o === a).length)[0];
    const held = owners.indexOf(victimHost);
    await setAgentFaults(sim!.bmcs[held].url, { holdAnswer: { command: 'deploy.execute_deploy_step', ms: 60_000 } });
    for (const u of uuids) await provision(api, u, 'active');
    await until('every node waiting for its image write, one of them in its agent_continue', async () => {
      const nodes = await Promise.all(uuids.map((u) => getNode(api, u)));
      const writing = nodes.every((n, i) => n.provision_state === (i === held ? 'deploying' : 'wait call-back') && (n.deploy_step as { step?: string }).step === 'write_image');
      return writing && ((await agentWitness(sim!.bmcs[held].url)).received['deploy.execute_deploy_step/write_image'] ?? 0) > 0;
    }, 60_000, 100);
    const victim = c!.conductors.find((x) => x.host === victimHost)!;
    const killedAt = Date.now();
    await victim.kill();
    const bound = (HEARTBEAT_TIMEOUT_S + 10) * 1000 + 8_400;
    for (const u of uuids) {
      const done = await settled(api, u, bound + 10_000);
      const took = Date.now() - killedAt;
      expect(done.provision_state, done.last_error ?? '').to.equal('active');
      expect(took, `${u} ended ${took} ms after the kill`).to.be.at.most(bound);
    }
    for (const b of sim!.bmcs) {
      const w = await agentWitness(b.url);
      expect(w.disk?.sha256).to.equal(images!.image.sha256);
      expect(w.received['deploy.execute_deploy_step/write_image'], b.url).to.equal(1);
    }
  });
});
