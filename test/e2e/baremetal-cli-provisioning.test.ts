/**
 * The real `baremetal` CLI (python-ironicclient), unchanged, takes a node through Galvanic's
 * provisioning flow on a real `galvanic all-in-one` and the Redfish simulator over HTTP:
 * create, manage, inspect, provide, set the boot ISO, validate, deploy with a config drive,
 * rebuild and undeploy; then the same flow on fake-hardware's fake interfaces. Manage and
 * inspect `--wait` as an operator does; the long verbs are waited for over HTTP, as their
 * `--wait` sleeps 10 s a poll (baremetal-cli-agent's deploy is the long `--wait`). Skipped
 * when the CLI is not installed, except under CI.
 */
import { expect } from 'chai';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { galvanicAndSim } from '../helpers/agent-deploy.js';
import { baremetalCli, requireCli } from '../helpers/baremetal.js';
import {
  clearSimEvents, expectInOrder, insertedMedia, nodeHistory, nodePorts, settled, simEvents, simState, story,
} from '../helpers/provisioning.js';

const ISO = 'http://images.example/deploy/live.iso';
const SYSTEM = '/redfish/v1/Systems/System.Embedded.1';

describe('baremetal CLI: provisioning (e2e)', function () {
  // About 30 CLI runs a test, each seconds of Python start-up on a loaded 2-core machine.
  this.timeout(400_000);
  const g = galvanicAndSim({
    precondition: (ctx) => requireCli(ctx, 'baremetal CLI provisioning tests'),
    env: { GALVANIC_CONDUCTOR__SYNC_POWER_STATE_INTERVAL: '0', GALVANIC_REDFISH__CONNECTION_RETRY_INTERVAL: '0.1' },
    sim: () => ({ count: 1 }),
  });
  const { api } = g;
  const { run: baremetal, ok, show, settle } = baremetalCli(() => g.galvanic);
  let dir: string | undefined;

  before(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'galvanic-cli-prov-'));
  });

  after(async () => {
    if (dir) await fs.rm(dir, { recursive: true, force: true });
  });

  /** `node validate` as {interface: {result, reason}}. */
  async function validate(node: string): Promise<Record<string, { result: boolean; reason: string | null }>> {
    const rows = JSON.parse(await ok('node', 'validate', node, '-f', 'json')) as Array<{ Interface: string; Result: boolean; Reason: string }>;
    return Object.fromEntries(rows.map((r) => [r.Interface, { result: r.Result, reason: r.Reason || null }]));
  }

  /** The stored instance_info (the API masks the config drive). */
  async function storedInstanceInfo(name: string): Promise<Record<string, unknown>> {
    const row = await g.galvanic.tdb.knex('nodes').where({ name }).first('instance_info') as { instance_info: Record<string, unknown> };
    return row.instance_info;
  }

  it('takes a redfish node through inspect, deploy with a config drive, rebuild and undeploy', async () => {
    const bmc = g.sim.bmcs[0].url;
    const created = JSON.parse(await ok(
      'node', 'create', '--driver', 'redfish', '--name', 'cli-rf',
      '--boot-interface', 'redfish-virtual-media', '--deploy-interface', 'ramdisk', '--inspect-interface', 'redfish',
      '--driver-info', `redfish_address=${bmc}`, '--driver-info', 'redfish_username=admin', '--driver-info', 'redfish_password=password',
      '--driver-info', `redfish_system_id=${SYSTEM}`, '-f', 'json',
    )) as Record<string, unknown>;
    expect(created).to.include({ provision_state: 'enroll', boot_interface: 'redfish-virtual-media', deploy_interface: 'ramdisk', inspect_interface: 'redfish' });

    await ok('node', 'manage', 'cli-rf', '--wait', '60');
    expect(await show('cli-rf', 'provision_state', 'power_state')).to.deep.equal({ provision_state: 'manageable', power_state: 'power on' });

    await ok('node', 'inspect', 'cli-rf', '--wait', '60');
    const inspected = await show<{ provision_state: string; properties: Record<string, unknown>; last_error: string | null }>('cli-rf', 'provision_state', 'properties', 'last_error');
    expect(inspected.provision_state, inspected.last_error ?? '').to.equal('manageable');
    // The synthetic BMC: 384 GiB, 2 × 48 threads of x86-64, a RAID1 of two 960 GB SSDs, UEFI.
    expect(inspected.properties).to.deep.include({ memory_mb: '393216', cpus: 96, cpu_arch: 'x86_64', capabilities: 'boot_mode:uefi' });
    expect(Number(inspected.properties.local_gb)).to.be.greaterThan(800);
    // Checks between the CLI's steps go over the API: each CLI run is seconds of Python start-up
    // (baremetal-cli.test.ts has `port list` and the other listings).
    expect(await nodePorts(api, created.uuid as string)).to.deep.equal(['02:00:00:00:00:01', '02:00:00:00:00:02']);

    expect((await settle<{ provision_state: string }>('provide', 'cli-rf')).provision_state).to.equal('available');

    const unset = await api('GET', '/v1/nodes/cli-rf/validate');
    expect(unset.status, unset.body).to.equal(200);
    const before = unset.json<Record<string, { result: boolean; reason: string | null }>>();
    expect(before.boot.result).to.equal(true);
    expect(before.deploy).to.deep.equal({ result: false, reason: "Some parameters were missing in node's instance_info. Missing are: ['boot_iso']" });
    await ok('node', 'set', 'cli-rf', '--instance-info', `boot_iso=${ISO}`);
    const after = await validate('cli-rf');
    for (const iface of ['boot', 'deploy', 'power', 'management', 'inspect']) expect(after[iface], iface).to.deep.equal({ result: true, reason: null });

    await clearSimEvents(bmc);
    const configdrive = { meta_data: { hostname: 'cli-rf', uuid: created.uuid }, user_data: '#cloud-config\nhostname: cli-rf\n' };
    await settle('deploy', 'cli-rf', '--config-drive', JSON.stringify(configdrive));
    const active = await show<Record<string, unknown>>('cli-rf', 'provision_state', 'power_state', 'last_error', 'instance_info');
    expect(active).to.deep.equal({ provision_state: 'active', power_state: 'power on', last_error: null, instance_info: { boot_iso: ISO, configdrive: '******' } });
    // Below the bound the JSON is kept, as Ironic keeps it, and built for the BMC's USB stick.
    expect((await storedInstanceInfo('cli-rf')).configdrive).to.deep.equal(configdrive);
    const deployed = story(await simEvents(bmc));
    // The config drive's image, published in the conductor's HTTP root, goes in the USB slot.
    expectInOrder(deployed, [/^reset ForceOff$/, /^insert live\.iso$/, new RegExp(`^insert configdrive-${created.uuid as string}$`), /^boot-override Cd\/Continuous$/, /^reset On$/, /^boot-started Cd live\.iso$/]);
    const running = Object.values((await simState(bmc)).systems)[0].running as { device: string; image: string; phase: string };
    expect(running).to.deep.include({ device: 'Cd', image: ISO, phase: 'up' });

    // A rebuild with a config drive file: its contents are sent as the (string) config drive.
    const file = path.join(dir!, 'configdrive.b64');
    const encoded = gzipSync(Buffer.from('a config drive image')).toString('base64');
    await fs.writeFile(file, encoded);
    await clearSimEvents(bmc);
    await settle('rebuild', 'cli-rf', '--config-drive', file);
    expect(await show('cli-rf', 'provision_state', 'last_error')).to.deep.equal({ provision_state: 'active', last_error: null });
    expect((await storedInstanceInfo('cli-rf')).configdrive).to.equal(encoded);
    expectInOrder(story(await simEvents(bmc)), [/^reset ForceOff$/, /^eject live\.iso$/, /^insert live\.iso$/, /^boot-override Cd\//, /^reset On$/]);

    await clearSimEvents(bmc);
    await settle('undeploy', 'cli-rf');
    const gone = await show<Record<string, unknown>>('cli-rf', 'provision_state', 'power_state', 'instance_info', 'instance_uuid', 'last_error');
    expect(gone).to.deep.equal({ provision_state: 'available', power_state: 'power off', instance_info: {}, instance_uuid: null, last_error: null });
    expect(story(await simEvents(bmc))).to.include.members(['eject live.iso', 'reset ForceOff']);
    const state = await simState(bmc);
    expect(insertedMedia(state)).to.deep.equal([]);
    expect(Object.values(state.systems)[0]).to.deep.include({ power: 'Off', running: null });

    // Ironic refuses inspection of an available node (openstacksdk manages it first).
    const refused = await baremetal('node', 'inspect', 'cli-rf');
    expect(refused.code).to.not.equal(0);
    expect(refused.stderr).to.include(`The requested action "inspect" can not be performed on node "${created.uuid as string}" while it is in state "available". (HTTP 400)`);
    expect((await show('cli-rf', 'provision_state')).provision_state).to.equal('available');
  });

  it('takes a fake-hardware node through the same flow, each transition in milliseconds', async () => {
    const created = JSON.parse(await ok(
      'node', 'create', '--driver', 'fake-hardware', '--name', 'cli-fake',
      '--boot-interface', 'fake', '--deploy-interface', 'fake', '--inspect-interface', 'fake', '-f', 'json',
    )) as { uuid: string };
    // `--wait` on deploy, rebuild, provide and undeploy polls every 10 s (ironicclient's long
    // interval): these verbs are asked with the CLI and waited for over HTTP, which measures
    // Galvanic rather than the client's sleep.
    const timed = async (...args: string[]): Promise<number> => {
      await ok(...args);
      const started = Date.now();
      const node = await settled(api, created.uuid, 10_000);
      expect(node.last_error, `${args.join(' ')}: ${JSON.stringify(node)}`).to.equal(null);
      return Date.now() - started;
    };
    const took: Record<string, number> = {};
    await ok('node', 'manage', 'cli-fake', '--wait', '30');
    await ok('node', 'inspect', 'cli-fake', '--wait', '30');
    expect((await show('cli-fake', 'provision_state')).provision_state).to.equal('manageable');
    took.provide = await timed('node', 'provide', 'cli-fake');
    expect((await show('cli-fake', 'provision_state')).provision_state).to.equal('available');
    const v = await validate('cli-fake');
    expect(v.boot).to.deep.equal({ result: true, reason: null });
    expect(v.deploy).to.deep.equal({ result: true, reason: null });
    took.deploy = await timed('node', 'deploy', 'cli-fake', '--config-drive', '{"meta_data": {"hostname": "cli-fake"}}');
    expect((await show('cli-fake', 'provision_state')).provision_state).to.equal('active');
    took.rebuild = await timed('node', 'rebuild', 'cli-fake');
    expect((await show('cli-fake', 'provision_state')).provision_state).to.equal('active');
    took.undeploy = await timed('node', 'undeploy', 'cli-fake');
    expect(await show('cli-fake', 'provision_state', 'instance_info')).to.deep.equal({ provision_state: 'available', instance_info: {} });
    for (const [verb, ms] of Object.entries(took)) expect(ms, `${verb} took ${ms} ms`).to.be.below(2_000);
    const events = (await nodeHistory(api, created.uuid)).map((h) => h.event);
    expect(events).to.deep.equal([
      'Node moved to manageable (manage).',
      'Inspection done, node is manageable.',
      'Automated cleaning done, node is available.',
      'Deployed (fake deploy), node is active.',
      'Deployed (fake deploy), node is active.',
      'Torn down and cleaned, node is available.',
    ]);
    const refused = await baremetal('node', 'inspect', 'cli-fake');
    expect(refused.stderr).to.include('while it is in state "available". (HTTP 400)');
  });
});
