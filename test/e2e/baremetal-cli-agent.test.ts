/**
 * The real `baremetal` CLI, unchanged, deploys and cleans a node through the agent: a real
 * `galvanic all-in-one`, the Redfish simulator whose hosts run a simulated ironic-python-agent
 * when they boot the agent ISO, and an image server. `node deploy --wait` (the suite's one
 * `--wait` on a long verb: each poll of it sleeps 10 s, so the other long verbs are waited for
 * over HTTP), `provide`, `undeploy`, `clean --clean-steps`, and `node abort` in clean wait.
 * Skipped when the CLI is not installed, except under CI.
 */
import { expect } from 'chai';
import { baremetalCli, requireCli } from '../helpers/baremetal.js';
import { agentWitness, setAgentFaults } from '../helpers/agent-sim.js';
import { until } from '../helpers/until.js';
import { AGENT_TEST_ENV, galvanicAndSim } from '../helpers/agent-deploy.js';
import { nodeHistory } from '../helpers/provisioning.js';

describe('baremetal CLI: direct deploy and cleaning through the agent (e2e)', function () {
  // Each CLI run costs seconds of Python start-up on a loaded machine.
  this.timeout(400_000);
  const g = galvanicAndSim({
    precondition: (ctx) => requireCli(ctx, 'baremetal CLI agent tests'),
    images: true,
    env: AGENT_TEST_ENV,
    sim: (apiUrl) => ({ count: 1, agent: { apiUrl, bootSeconds: [0.2, 0.5], heartbeatMinGapMs: 200, lookupRetryMs: 300 } }),
  });
  const { api } = g;
  const { ok, show, settle } = baremetalCli(() => g.galvanic, 150_000);

  it('provides, deploys with --wait, undeploys, cleans by hand and aborts a cleaning', async () => {
    const bmc = g.sim.bmcs[0].url;
    await ok(
      'node', 'create', '--driver', 'redfish', '--name', 'cli-agent',
      '--boot-interface', 'redfish-virtual-media', '--deploy-interface', 'direct', '--inspect-interface', 'redfish',
      '--driver-info', `redfish_address=${bmc}`, '--driver-info', 'redfish_username=admin', '--driver-info', 'redfish_password=password',
      '--driver-info', `deploy_iso=${g.images.isoUrl}`,
    );
    await ok('node', 'manage', 'cli-agent', '--wait', '60');
    await ok('node', 'inspect', 'cli-agent', '--wait', '60');
    expect(await settle('provide', 'cli-agent')).to.deep.include({ provision_state: 'available', last_error: null });

    await ok('node', 'set', 'cli-agent', '--instance-info', `image_source=${g.images.image.url}`, '--instance-info', `image_checksum=${g.images.image.md5}`);
    const validation = JSON.parse(await ok('node', 'validate', 'cli-agent', '-f', 'json')) as Array<{ Interface: string; Result: boolean; Reason: string }>;
    expect(validation.find((r) => r.Interface === 'deploy')).to.include({ Result: true });
    await ok('node', 'deploy', 'cli-agent', '--wait', '120');
    expect(await show('cli-agent', 'provision_state', 'power_state', 'last_error')).to.deep.equal({ provision_state: 'active', power_state: 'power on', last_error: null });
    const witness = await agentWitness(bmc);
    expect(witness.disk?.sha256).to.equal(g.images.image.sha256);
    const events = (await nodeHistory(api, 'cli-agent')).map((h) => h.event).join('\n');
    expect(events).to.include('Deployed (direct deploy)');

    expect(await settle('undeploy', 'cli-agent')).to.deep.include({ provision_state: 'available', last_error: null });

    await ok('node', 'manage', 'cli-agent', '--wait', '60');
    expect(await settle('clean', 'cli-agent', '--clean-steps', JSON.stringify([{ interface: 'deploy', step: 'erase_devices_metadata' }])))
      .to.deep.include({ provision_state: 'manageable', last_error: null });

    await setAgentFaults(bmc, { hangStep: 'erase_devices_metadata' });
    await ok('node', 'clean', 'cli-agent', '--clean-steps', JSON.stringify([{ interface: 'deploy', step: 'erase_devices_metadata' }]));
    await until('the clean step to run in clean wait', async () => {
      const n = await show<{ provision_state: string; clean_step: { step?: string } }>('cli-agent', 'provision_state', 'clean_step');
      return n.provision_state === 'clean wait' && n.clean_step.step === 'erase_devices_metadata';
    }, 60_000, 300);
    await ok('node', 'abort', 'cli-agent');
    // The API moves the node to clean failed when it takes the abort; the conductor's tear-down ends it (no target left).
    await until('clean failed', async () => {
      const n = await show<{ provision_state: string; target_provision_state: string | null }>('cli-agent', 'provision_state', 'target_provision_state');
      return n.provision_state === 'clean failed' && n.target_provision_state === null;
    }, 30_000, 300);
    const failed = await show<{ last_error: string }>('cli-agent', 'last_error');
    expect(failed.last_error).to.include('By request, the clean operation was aborted');
    await setAgentFaults(bmc, {});
  });
});
