/**
 * Adoption (1.17, Ironic's _do_adoption): a node that already runs its instance is taken into
 * `active` without a deploy, against the Redfish simulator through a real `galvanic`.
 */
import { expect } from 'chai';
import { resetHost } from '../helpers/agent-sim.js';
import { galvanicAndSim } from '../helpers/agent-deploy.js';
import { resourceRequests, simStats } from '../helpers/redfish.js';
import { createNode, provision, provisionAndSettle, redfishNodeBody, settled } from '../helpers/provisioning.js';

describe('adopt: manageable → adopting → active, or adopt failed', function () {
  this.timeout(60_000);
  const g = galvanicAndSim({
    env: { GALVANIC_CONDUCTOR__SYNC_POWER_STATE_INTERVAL: '0', GALVANIC_CONDUCTOR__INTENT_MAX_ATTEMPTS: '1', GALVANIC_REDFISH__CONNECTION_ATTEMPTS: '1' },
    sim: () => ({ count: 3 }),
  });
  const { api } = g;

  async function manageable(i: number, extra: Record<string, unknown> = {}): Promise<string> {
    const node = await createNode(api, redfishNodeBody(`adopt-${i}`, g.sim.bmcs[i].url, extra));
    expect((await provisionAndSettle(api, node.uuid, 'manage')).provision_state).to.equal('manageable');
    return node.uuid;
  }

  it('adopts a running node: active with the power state its BMC reports, and nothing done at the BMC', async () => {
    const uuid = await manageable(0, { instance_info: { boot_iso: 'http://images.example/live.iso' } });
    await resetHost(g.sim.bmcs[0].url, 'On');
    const before = resourceRequests(await simStats(g.sim.bmcs[0].url)).length;

    const old = await api('PUT', `/v1/nodes/${uuid}/states/provision`, { target: 'adopt' }, { 'x-openstack-ironic-api-version': '1.16' });
    expect(old.status, old.body).to.equal(406);

    const node = await provisionAndSettle(api, uuid, 'adopt');
    expect(node.provision_state, node.last_error ?? '').to.equal('active');
    expect(node.power_state).to.equal('power on');
    expect(node.last_error).to.equal(null);
    const writes = resourceRequests(await simStats(g.sim.bmcs[0].url)).slice(before).filter((r) => !r.startsWith('GET '));
    expect(writes, 'adoption only reads the BMC').to.deep.equal([]);
    const history = (await api('GET', `/v1/nodes/${uuid}/history`)).json<{ history: Array<{ event: string }> }>().history;
    expect(history.map((h) => h.event)).to.include(`Successfully adopted node ${uuid}, node is active.`);
  });

  it('fails into adopt failed with Ironic\'s message and no power state; adopt again, or manage', async () => {
    const uuid = await manageable(1, { instance_info: { boot_iso: 'http://images.example/live.iso' } });
    const good = g.sim.bmcs[1].url;
    const patch = (address: string) => api('PATCH', `/v1/nodes/${uuid}`, [{ op: 'replace', path: '/driver_info/redfish_address', value: address }]);
    expect((await patch('http://127.0.0.1:9')).status).to.equal(200);

    await provision(api, uuid, 'adopt');
    const failed = await settled(api, uuid);
    expect(failed.provision_state).to.equal('adopt failed');
    expect(failed.power_state).to.equal(null);
    expect(failed.last_error).to.match(new RegExp(`^Error while attempting to adopt node ${uuid}: .+\\.$`));

    // adopt again from adopt failed (still failing), then manage back to manageable.
    expect((await provisionAndSettle(api, uuid, 'adopt')).provision_state).to.equal('adopt failed');
    expect((await provisionAndSettle(api, uuid, 'manage')).provision_state).to.equal('manageable');

    expect((await patch(good)).status).to.equal(200);
    const adopted = await provisionAndSettle(api, uuid, 'adopt');
    expect(adopted.provision_state, adopted.last_error ?? '').to.equal('active');
    expect(adopted.last_error).to.equal(null);
  });

  it('fails to adopt a node whose instance boots an ISO it does not name, asking nothing of the BMC', async () => {
    const uuid = await manageable(2);
    await resetHost(g.sim.bmcs[2].url, 'On');
    const before = resourceRequests(await simStats(g.sim.bmcs[2].url)).length;
    const node = await provisionAndSettle(api, uuid, 'adopt');
    expect(node.provision_state).to.equal('adopt failed');
    expect(node.last_error).to.equal(`Error while attempting to adopt node ${uuid}: Some parameters were missing in node's instance_info. Missing are: ['boot_iso'].`);
    expect(resourceRequests(await simStats(g.sim.bmcs[2].url)).slice(before), 'nothing asked of the BMC').to.deep.equal([]);
  });
});
