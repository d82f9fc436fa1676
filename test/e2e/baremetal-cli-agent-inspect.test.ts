/**
 * The real `baremetal` CLI (python-ironicclient), unchanged, inspects a node in-band
 * (`inspect_interface=agent`) on a real `galvanic all-in-one`: `node inspect --wait` boots the
 * simulated agent ISO, the simulated agent posts its inventory to /v1/continue_inspection,
 * and the node ends `manageable` with properties and ports from that inventory. Skipped when
 * the CLI is not installed, except under CI.
 */
import { expect } from 'chai';
import { startRedfishSim, type RedfishSim } from '../../sim/redfish/index.js';
import { nicMacs } from '../../sim/redfish/model-synthetic.js';
import { startGalvanicOnFreshDatabase, type GalvanicOnFreshDatabase } from '../helpers/app.js';
import { requireCli, runBaremetal } from '../helpers/baremetal.js';
import { agentWitness } from '../helpers/agent-sim.js';

describe('baremetal CLI: in-band inspection through the agent (e2e)', function () {
  this.timeout(120_000);
  let galvanic: GalvanicOnFreshDatabase | undefined;
  let sim: RedfishSim | undefined;

  before(async function () {
    requireCli(this, 'baremetal CLI agent inspection tests');
    galvanic = await startGalvanicOnFreshDatabase({
      env: {
        GALVANIC_DEFAULT__ENABLED_INSPECT_INTERFACES: 'redfish,agent,no-inspect',
        GALVANIC_INSPECTOR__HOOKS: '$default_hooks,memory,cpus,boot-mode,root-device',
        GALVANIC_CONDUCTOR__SYNC_POWER_STATE_INTERVAL: '0',
      },
    });
    sim = await startRedfishSim({ count: 1, agent: { apiUrl: galvanic.url, bootSeconds: [0.2, 0.5], lookupRetryMs: 300 } });
  });

  after(async () => {
    // The agents first, so that none calls a Galvanic that is going away.
    await sim?.stop();
    await galvanic?.shutdownCleanly();
  });

  async function ok(...args: string[]): Promise<string> {
    const r = await runBaremetal(galvanic!.url, args);
    expect(r.code, `baremetal ${args.join(' ')}\nstdout: ${r.stdout}\nstderr: ${r.stderr}\n${galvanic!.output().slice(-3000)}`).to.equal(0);
    return r.stdout;
  }

  it('node inspect --wait with inspect_interface=agent: properties and ports from the agent\'s inventory', async () => {
    const created = JSON.parse(await ok(
      'node', 'create', '--driver', 'redfish', '--name', 'agent-inspected',
      '--boot-interface', 'redfish-virtual-media', '--deploy-interface', 'ramdisk', '--inspect-interface', 'agent',
      '--driver-info', `redfish_address=${sim!.bmcs[0].url}`, '--driver-info', 'redfish_username=admin',
      '--driver-info', 'redfish_password=password', '--driver-info', 'deploy_iso=http://127.0.0.1:9/ipa.iso',
      '-f', 'json',
    )) as { uuid: string; inspect_interface: string };
    expect(created.inspect_interface).to.equal('agent');
    await ok('node', 'manage', created.uuid, '--wait', '60');
    await ok('node', 'inspect', created.uuid, '--wait', '60');

    const node = JSON.parse(await ok('node', 'show', created.uuid, '-f', 'json', '-c', 'provision_state', '-c', 'properties', '-c', 'power_state', '-c', 'last_error')) as {
      provision_state: string; properties: Record<string, unknown>; power_state: string; last_error: string | null;
    };
    expect(node.provision_state, node.last_error ?? '').to.equal('manageable');
    expect(node.power_state).to.equal('power off');
    const inv = (await (await fetch(`${galvanic!.url}/v1/nodes/${created.uuid}/inventory`, { headers: { 'x-openstack-ironic-api-version': '1.81' } })).json()) as {
      inventory: { cpu: { architecture: string; count: number }; memory: { physical_mb: number }; boot: { current_boot_mode: string } };
    };
    expect(node.properties).to.deep.include({
      cpu_arch: inv.inventory.cpu.architecture, cpus: inv.inventory.cpu.count, memory_mb: inv.inventory.memory.physical_mb,
      capabilities: `boot_mode:${inv.inventory.boot.current_boot_mode}`,
    });
    expect(node.properties.local_gb).to.be.a('number').above(0);

    const ports = JSON.parse(await ok('port', 'list', '--node', created.uuid, '-f', 'json', '-c', 'Address')) as Array<{ Address: string }>;
    expect(ports.map((p) => p.Address).sort()).to.deep.equal([...nicMacs(0, 0)].sort());
    const witness = await agentWitness(sim!.bmcs[0].url);
    expect(witness.inspectionStatuses).to.deep.equal({ 202: 1 });
    expect(witness.running).to.equal(false);
  });
});
