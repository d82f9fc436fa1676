/**
 * openstacksdk (Debian's python3-openstacksdk), unchanged, drives a node through Galvanic's
 * provisioning flow on a real `galvanic all-in-one` and the Redfish simulator over HTTP:
 * register_machine, inspect_machine from available, validate_machine(for_deploy=True),
 * set_node_provision_state 'active' with a config drive and 'deleted', each with wait=True;
 * and a deploy the BMC refuses, which the SDK's wait reports as a failure; in-band inspection,
 * and the direct deploy through the simulated agent (image URL and checksum, undeploy with
 * automated cleaning through the agent). The steps run in
 * openstacksdk-provisioning.py (beside this file's source), which prints one JSON line each.
 * Skipped when openstacksdk is missing, except under CI.
 */
import { expect } from 'chai';
import { execFile, spawnSync } from 'node:child_process';
import path from 'node:path';
import { startRedfishSim, type RedfishSim } from '../../sim/redfish/index.js';
import { ROOT, startGalvanicOnFreshDatabase, type GalvanicOnFreshDatabase } from '../helpers/app.js';
import { clearSimEvents, expectInOrder, insertedMedia, simEvents, simState, story } from '../helpers/provisioning.js';
import { setFaults } from '../helpers/redfish.js';
import { nicMacs } from '../../sim/redfish/model-synthetic.js';
import { AGENT_TEST_ENV, startImageServer } from '../helpers/agent-deploy.js';
import { agentWitness } from '../helpers/agent-sim.js';
import { httpClient, nodeHistory } from '../helpers/provisioning.js';

const SCRIPT = path.join(ROOT, 'test/e2e/openstacksdk-provisioning.py');
const ISO = 'http://images.example/deploy/live.iso';

/**
 * A Python that imports openstacksdk: GALVANIC_TEST_PYTHON, else `python3` on PATH, else the
 * system's (Debian installs python3-openstacksdk for /usr/bin/python3, which a pyenv or venv
 * `python3` earlier on PATH does not see).
 */
function findPython(): string | null {
  const candidates = [process.env.GALVANIC_TEST_PYTHON, 'python3', '/usr/bin/python3'].filter((c): c is string => !!c);
  for (const py of candidates) {
    const r = spawnSync(py, ['-c', 'import openstack'], { encoding: 'utf8' });
    if (r.error === undefined && r.status === 0) return py;
  }
  return null;
}

type Step = Record<string, unknown> & { step: string };

describe('openstacksdk: provisioning (e2e)', function () {
  this.timeout(120_000);
  let python: string | null = null;
  let galvanic: GalvanicOnFreshDatabase | undefined;
  let sim: RedfishSim | undefined;

  before(async function () {
    python = findPython();
    if (!python) {
      const msg = 'openstacksdk (python3-openstacksdk) is not importable by python3';
      if (process.env.CI === 'true') throw new Error(`${msg}; CI must install it (apt-get install python3-openstacksdk, as .ci/run does).`);
      process.stderr.write(`      skipping the openstacksdk provisioning tests: ${msg} (apt-get install python3-openstacksdk).\n`);
      this.skip();
    }
    sim = await startRedfishSim({ count: 2 });
    galvanic = await startGalvanicOnFreshDatabase({
      env: {
        // Heartbeats every second or so, for the tests that run an agent.
        ...AGENT_TEST_ENV,
        GALVANIC_CONDUCTOR__SYNC_POWER_STATE_INTERVAL: '0',
        GALVANIC_REDFISH__CONNECTION_RETRY_INTERVAL: '0.1',
        GALVANIC_CONDUCTOR__INTENT_MAX_ATTEMPTS: '1',
        GALVANIC_DEFAULT__ENABLED_INSPECT_INTERFACES: 'redfish,agent,no-inspect',
        GALVANIC_INSPECTOR__HOOKS: '$default_hooks,memory,cpus,boot-mode,root-device',
      },
    });
  });

  after(async () => {
    await galvanic?.shutdownCleanly();
    await sim?.stop();
  });

  /** Runs one scenario of the script; resolves with its steps by name, and the exit code. */
  function scenario(name: string, args: Record<string, unknown>): Promise<{ code: number; steps: Map<string, Step>; raw: string }> {
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('OS_')));
    return new Promise((resolve) => {
      execFile(python!, [SCRIPT, galvanic!.url, name, JSON.stringify(args)], { env, timeout: 100_000 }, (err, stdout, stderr) => {
        const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : 1) : 0;
        const steps = new Map<string, Step>();
        for (const line of stdout.split('\n').filter((l) => l.startsWith('{'))) {
          const s = JSON.parse(line) as Step;
          steps.set(s.step, s);
        }
        resolve({ code, steps, raw: `stdout:\n${stdout}\nstderr:\n${stderr}\n${galvanic!.output().slice(-2000)}` });
      });
    });
  }

  it('registers, inspects, validates, deploys and undeploys a redfish node with wait=True', async () => {
    const bmc = sim!.bmcs[0].url;
    await clearSimEvents(bmc);
    const r = await scenario('redfish', { name: 'sdk-rf', bmc, mac: '02:00:00:00:00:01', iso: ISO });
    expect(r.code, r.raw).to.equal(0);
    const step = (name: string): Step => {
      expect(r.steps.has(name), `no step ${name}: ${r.raw}`).to.equal(true);
      return r.steps.get(name)!;
    };
    // Created at 1.6, a node starts available (Ironic's rule below 1.11).
    expect(step('register_machine')).to.include({ provision_state: 'available', last_error: null });
    expect(step('update_node')).to.include({ boot_interface: 'redfish-virtual-media', deploy_interface: 'ramdisk', inspect_interface: 'redfish' });
    // inspect_machine from available: manage, inspect, provide; the registered port is kept, the other NIC added.
    const inspected = step('inspect_machine');
    expect(inspected).to.include({ provision_state: 'available', last_error: null });
    expect(inspected.properties).to.deep.include({ memory_mb: '393216', cpu_arch: 'x86_64', capabilities: 'boot_mode:uefi' });
    expect(inspected.ports).to.deep.equal(['02:00:00:00:00:01', '02:00:00:00:00:02']);
    expect(step('validate_machine_without_iso')).to.include({ ok: false });
    expect(step('validate_machine_without_iso').error).to.match(/deploy \(Some parameters were missing in node's instance_info. Missing are: \['boot_iso'\]\)/);
    expect(step('validate_machine')).to.include({ ok: true });
    expect(step('active')).to.include({ provision_state: 'active', target_provision_state: null, power_state: 'power on', last_error: null });
    expect(step('active').instance_info).to.deep.equal({ boot_iso: ISO, configdrive: '******' });
    expect(step('deleted')).to.include({ provision_state: 'available', target_provision_state: null, power_state: 'power off', last_error: null });
    expect(step('deleted').instance_info).to.deep.equal({});

    const lines = story(await simEvents(bmc));
    expectInOrder(lines, [/^insert live\.iso$/, /^boot-override Cd\/Continuous$/, /^reset On$/, /^boot-started Cd live\.iso$/, /^eject live\.iso$/, /^reset ForceOff$/]);
    expect(insertedMedia(await simState(bmc))).to.deep.equal([]);
  });

  it("reports a deploy the BMC refuses as the SDK's ResourceFailure, the node in deploy failed", async () => {
    const bmc = sim!.bmcs[1].url;
    await setFaults(bmc, { insertMediaStatus: 400 });
    const r = await scenario('failing-deploy', { name: 'sdk-refused', bmc, iso: ISO });
    expect(r.code, r.raw).to.equal(0);
    expect(r.steps.get('provide'), r.raw).to.include({ provision_state: 'available' });
    const active = r.steps.get('active')!;
    expect(active, r.raw).to.include({ ok: false, type: 'ResourceFailure' });
    expect(active.error).to.match(/deploy failed/);
    const after = r.steps.get('after')!;
    expect(after).to.include({ provision_state: 'deploy failed', target_provision_state: null });
    expect(after.last_error).to.match(/^Failed to deploy node \S+: .*InsertMedia.*400/i);
  });

  it('inspects a node in-band (inspect_interface=agent) with wait=True: properties and ports from the agent\'s inventory', async () => {
    // Agents of their own fleet (other MACs than the first one's), which post to this Galvanic.
    const agents = await startRedfishSim({ count: 1, fleetId: 7, agent: { apiUrl: galvanic!.url, bootSeconds: [0.2, 0.5], lookupRetryMs: 300 } });
    try {
      const r = await scenario('agent-inspect', { name: 'sdk-agent', bmc: agents.bmcs[0].url, iso: 'http://127.0.0.1:9/ipa.iso' });
      expect(r.code, r.raw).to.equal(0);
      const inspected = r.steps.get('inspect')!;
      expect(inspected, r.raw).to.include({ provision_state: 'manageable', target_provision_state: null, power_state: 'power off', last_error: null });
      expect(inspected.properties).to.deep.include({ cpu_arch: 'x86_64', memory_mb: 393216, capabilities: 'boot_mode:uefi' });
      expect(inspected.ports).to.deep.equal([...nicMacs(7, 0)].sort());
    } finally {
      await agents.stop();
    }
  });

  it('deploys with deploy_interface=direct (image URL and checksum) and undeploys with cleaning through the agent, wait=True', async () => {
    const images = await startImageServer();
    const agents = await startRedfishSim({ count: 1, fleetId: 8, agent: { apiUrl: galvanic!.url, bootSeconds: [0.2, 0.5], heartbeatMinGapMs: 200, lookupRetryMs: 300 } });
    try {
      const bmc = agents.bmcs[0].url;
      const r = await scenario('direct-deploy', { name: 'sdk-direct', bmc, macs: [...nicMacs(8, 0)], iso: images.isoUrl, image: images.image.url, checksum: images.image.md5 });
      expect(r.code, r.raw).to.equal(0);
      expect(r.steps.get('provide'), r.raw).to.include({ provision_state: 'available', last_error: null });
      expect(r.steps.get('validate_machine'), r.raw).to.include({ ok: true });
      const active = r.steps.get('active')!;
      expect(active, r.raw).to.include({ provision_state: 'active', target_provision_state: null, power_state: 'power on', last_error: null });
      expect(active.instance_info).to.deep.include({ image_source: images.image.url, image_checksum: images.image.md5 });
      expect((active.disk as { sha256?: string } | null)?.sha256, r.raw).to.equal(images.image.sha256);
      const deleted = r.steps.get('deleted')!;
      expect(deleted, r.raw).to.include({ provision_state: 'available', target_provision_state: null, power_state: 'power off', last_error: null });
      expect(deleted.instance_info).to.deep.equal({});

      // The disk held the image once deployed; the cleaning after the undeploy erased it again.
      const witness = await agentWitness(bmc);
      expect(witness.disk, JSON.stringify(witness)).to.equal(null);
      const events = (await nodeHistory(httpClient(galvanic!.url), 'sdk-direct')).map((h) => h.event);
      const deployed = events.findIndex((e) => e.startsWith('Deployed (direct deploy)'));
      expect(deployed, events.join('\n')).to.be.greaterThan(-1);
      expect(events.slice(deployed + 1).some((e) => e === 'Cleaning through the agent done, node is available.'), events.join('\n')).to.equal(true);
    } finally {
      await agents.stop();
      await images.close();
    }
  });
});
