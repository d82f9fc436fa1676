/**
 * What the agent is told of its node, end to end: a real `galvanic all-in-one` cleans and
 * deploys a node through a simulated agent that records the `node` each command carried. As
 * Ironic's Node.as_dict(secure=True) hands it over, every field arrives, but no secret of
 * driver_info (the BMC's password), instance_info (an image pull secret, the token of a
 * pre-signed image URL) or driver_internal_info; the config drive reaches execute_deploy_step
 * only, a JSON dict as it was given.
 */
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { agentWitness } from '../helpers/agent-sim.js';
import { AGENT_TEST_ENV, directNodeBody, galvanicAndSim, watchStates } from '../helpers/agent-deploy.js';
import { requireXorriso } from '../helpers/iso.js';
import { createNode, provision, provisionAndSettle } from '../helpers/provisioning.js';

const MASK = '******';

describe('the node the agent is told of (real processes)', function () {
  this.timeout(120_000);
  const secret = (what: string) => `${what}-${randomBytes(8).toString('hex')}`;
  const bmcPassword = secret('bmc');
  const urlToken = secret('url');
  const pullSecret = secret('pull');
  const g = galvanicAndSim({
    images: true,
    precondition: (ctx) => requireXorriso(ctx),
    env: AGENT_TEST_ENV,
    sim: (apiUrl) => ({ count: 1, password: bmcPassword, agent: { apiUrl, bootSeconds: [0.2, 0.5], heartbeatMinGapMs: 200, lookupRetryMs: 300, writeMBps: 50 } }),
  });
  const { api } = g;

  it('cleans and deploys with the node\'s secrets masked in every command, the config drive shown to execute_deploy_step only', async () => {
    const bmc = g.sim.bmcs[0].url;
    const imageSource = `${g.images.image.url}?X-Amz-Security-Token=${urlToken}`;
    const body = directNodeBody('secrets', bmc, g.images);
    const node = await createNode(api, {
      ...body,
      driver_info: { ...(body.driver_info as object), redfish_password: bmcPassword },
      instance_info: { ...(body.instance_info as object), image_source: imageSource, image_pull_secret: pullSecret },
    });
    for (const verb of ['manage', 'inspect', 'provide']) {
      const n = await provisionAndSettle(api, node.uuid, verb);
      expect(n.last_error, verb).to.equal(null);
    }
    const configdrive = { meta_data: { hostname: 'secrets.example' }, user_data: '#cloud-config\nhostname: secrets\n' };
    await provision(api, node.uuid, 'active', { configdrive });
    const deployed = await watchStates(api, node.uuid);
    expect(deployed.node.provision_state, deployed.node.last_error ?? '').to.equal('active');

    const witness = await agentWitness(bmc);
    // The image URL itself reached write_image, whose image_info is the agent's to download from.
    expect(witness.disk?.imageUrl).to.equal(imageSource);
    const sent = witness.nodeReceived as Record<string, Record<string, Record<string, unknown>>>;
    expect(Object.keys(sent)).to.include.members([
      'clean.get_clean_steps', 'clean.execute_clean_step/erase_devices_metadata', 'deploy.get_deploy_steps', 'deploy.execute_deploy_step/write_image',
    ]);
    const secrets = [bmcPassword, urlToken, pullSecret, witness.token ?? secret('no-token')];
    for (const [command, n] of Object.entries(sent)) {
      expect(n.uuid, command).to.equal(node.uuid);
      expect(n.driver, command).to.equal('redfish');
      expect(n.driver_info, command).to.deep.include({ redfish_address: bmc, redfish_username: 'admin', redfish_password: MASK });
      expect(n.instance_info, command).to.deep.include({ image_source: `${g.images.image.url}?X-Amz-Security-Token=${MASK}`, image_pull_secret: MASK });
      const { configdrive: shown, ...rest } = n.instance_info;
      const seen = JSON.stringify({ ...n, instance_info: rest });
      for (const s of secrets) expect(seen, `${command} carries a secret`).to.not.include(s);
      if (command === 'deploy.execute_deploy_step/write_image') expect(shown, command).to.deep.equal(configdrive);
      else if (command.startsWith('deploy.')) expect(shown, command).to.equal(MASK);
    }
  });
});
