/**
 * Config drives end to end, with a real `galvanic all-in-one`, the Redfish simulator and its
 * agents (as strict as IPA about the config drive they are handed): the JSON form (1.56) is
 * built by the conductor when the deploy runs, as Ironic builds it, and kept in instance_info
 * as gzip + base64; the direct deploy hands that to the agent, which writes it beside the image;
 * what the agent got is read back as a machine would mount it.
 */
import { expect } from 'chai';
import { agentWitness } from '../helpers/agent-sim.js';
import { AGENT_TEST_ENV, directNodeBody, galvanicAndSim, watchStates } from '../helpers/agent-deploy.js';
import { readIso, requireXorriso } from '../helpers/iso.js';
import { createNode, provision, provisionAndSettle, untilNode } from '../helpers/provisioning.js';

describe('config drives built by the conductor (real processes)', function () {
  this.timeout(120_000);
  const g = galvanicAndSim({
    images: true,
    precondition: (ctx) => requireXorriso(ctx),
    env: { ...AGENT_TEST_ENV },
    sim: (apiUrl) => ({ count: 4, agent: { apiUrl, bootSeconds: [0.2, 0.5], heartbeatMinGapMs: 200, lookupRetryMs: 300, writeMBps: 50 } }),
  });
  const { api } = g;

  /** The node's instance_info as stored (the API masks the config drive). */
  async function storedInstanceInfo(uuid: string): Promise<Record<string, unknown>> {
    const row = await g.galvanic.tdb.knex('nodes').where({ uuid }).first('instance_info') as { instance_info: Record<string, unknown> };
    return row.instance_info;
  }

  /** A direct-deploy node on BMC `i`, inspected (its ports, by which its agent looks itself up) and available. */
  async function availableDirectNode(i: number): Promise<{ uuid: string; name: string }> {
    const name = `cd-direct-${i}`;
    const node = await createNode(api, directNodeBody(name, g.sim.bmcs[i].url, g.images, { automated_clean: false }));
    for (const verb of ['manage', 'inspect', 'provide']) {
      const n = await provisionAndSettle(api, node.uuid, verb);
      expect(n.last_error, verb).to.equal(null);
    }
    return { uuid: node.uuid, name };
  }

  it('direct: builds a config drive given as JSON into a config-2 ISO the agent writes, and keeps it as gzip + base64', async () => {
    const { uuid, name } = await availableDirectNode(0);
    const configdrive = {
      meta_data: { hostname: 'cd-direct-0.example', public_keys: { default: 'ssh-ed25519 AAAAC3Nz test' } },
      user_data: '#cloud-config\nhostname: cd-direct-0\n',
      network_data: { links: [{ id: 'eth0', type: 'phy', mtu: 1500 }], networks: [], services: [] },
      vendor_data: { site: 'lab' },
    };
    await provision(api, uuid, 'active', { configdrive });
    const deployed = await watchStates(api, uuid);
    expect(deployed.node.provision_state, deployed.node.last_error ?? '').to.equal('active');

    const bmc = g.sim.bmcs[0].url;
    const witness = await agentWitness(bmc);
    expect(witness.disk?.configdrive, JSON.stringify(witness.disk)).to.include({ source: 'inline' });
    const res = await fetch(`${bmc}/_sim/agent/configdrive`);
    expect(res.status).to.equal(200);
    const iso = await readIso(Buffer.from(await res.arrayBuffer()));
    expect(iso.volumeId).to.equal('config-2');
    const file = (n: string) => iso.files.get(`openstack/latest/${n}`)?.toString('utf8');
    expect(JSON.parse(file('meta_data.json')!)).to.deep.equal({ ...configdrive.meta_data, uuid, name });
    expect(file('user_data')).to.equal(configdrive.user_data);
    expect(JSON.parse(file('network_data.json')!)).to.deep.equal(configdrive.network_data);
    expect(JSON.parse(file('vendor_data2.json')!)).to.deep.equal(configdrive.vendor_data);
    expect(iso.files.has('openstack/2012-08-10/meta_data.json')).to.equal(true);

    // The row holds what the agent got, gzip + base64 (Ironic's form), no longer the JSON.
    const stored = (await storedInstanceInfo(uuid)).configdrive;
    expect(stored).to.be.a('string').and.match(/^H4sI/);
    expect(witness.disk!.configdrive!.sha256).to.be.a('string');
  });

  it('direct, in a group operation: each node\'s config drive is built when its deploy runs', async () => {
    const { uuid, name } = await availableDirectNode(1);
    const configdrive = { meta_data: { hostname: 'op' }, user_data: { ignition: { version: '3.2.0' } } };
    const res = await api('POST', '/v1/operations', { nodes: [uuid], steps: [{ action: 'deploy', args: { configdrive } }] });
    expect(res.status, res.body).to.equal(201);
    const deployed = await untilNode(api, uuid, (n) => ['active', 'deploy failed'].includes(n.provision_state) && n.target_provision_state === null, 'to be deployed', 60_000);
    expect(deployed.provision_state, deployed.last_error ?? '').to.equal('active');
    const image = await fetch(`${g.sim.bmcs[1].url}/_sim/agent/configdrive`);
    expect(image.status).to.equal(200);
    const iso = await readIso(Buffer.from(await image.arrayBuffer()));
    expect(JSON.parse(iso.files.get('openstack/latest/meta_data.json')!.toString())).to.deep.equal({ hostname: 'op', uuid, name });
    expect(iso.files.get('openstack/latest/user_data')!.toString()).to.equal('{"ignition": {"version": "3.2.0"}}');
  });
});
