/**
 * Config drives end to end, with a real `galvanic all-in-one`, the Redfish simulator and its
 * agents (as strict as IPA about the config drive they are handed): the JSON form (1.56) is
 * built by the conductor when the deploy runs, as Ironic builds it; below
 * `[deploy] configdrive_max_inline_size` it stays in instance_info as JSON and is built where it
 * is consumed, above it published in the conductor's HTTP root with only its URL in the row. The direct deploy hands
 * it to the agent, which writes it beside the image; the ramdisk deploy attaches its image to
 * the BMC's virtual USB slot. What a machine would mount is read back with xorriso. Galvanic's
 * xorriso is a wrapper that counts its runs: a JSON config drive is built once per deploy.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { expect } from 'chai';
import { sweepHttpRoot } from '../../conductor/periodics/http-root-sweep.js';
import { HttpRoot } from '../../drivers/http-root.js';
import { decodeConfigdrive } from '../../drivers/image/configdrive.js';
import { agentWitness } from '../helpers/agent-sim.js';
import { AGENT_TEST_ENV, directNodeBody, galvanicAndSim, watchStates } from '../helpers/agent-deploy.js';
import { suiteApp } from '../helpers/app.js';
import { readIso, requireXorriso } from '../helpers/iso.js';
import {
  clearSimEvents, createNode, getNode, injector, provision, provisionAndSettle, redfishNodeBody, simEvents, simState, story, untilNode, type ApiCall,
} from '../helpers/provisioning.js';

/** The bound of these suites: a small JSON config drive stays under it, one with 8 KiB of random user_data does not. */
const BOUND = 4096;
const bigUserData = () => `#cloud-config\n# ${randomBytes(6000).toString('base64')}\n`;

/** The files a config drive image holds under openstack/latest. */
async function latestFiles(image: Buffer): Promise<Record<string, string>> {
  const iso = await readIso(image);
  expect(iso.volumeId).to.equal('config-2');
  const out: Record<string, string> = {};
  for (const [name, data] of iso.files) if (name.startsWith('openstack/latest/')) out[name.slice('openstack/latest/'.length)] = data.toString('utf8');
  return out;
}

/**
 * A directory whose `xorriso` records each run's arguments in `log`, then runs the first xorriso
 * on PATH, for the process given the directory first on its PATH.
 */
async function countingXorriso(dir: string, log: string): Promise<void> {
  const found = await Promise.all((process.env.PATH ?? '').split(path.delimiter).filter(Boolean).map(async (d) => {
    const p = path.join(d, 'xorriso');
    return fs.access(p, fs.constants.X_OK).then(() => p, () => null);
  }));
  const real = found.find((p) => p !== null);
  if (!real) throw new Error('xorriso is not on PATH');
  await fs.mkdir(dir, { recursive: true });
  await fs.writeFile(path.join(dir, 'xorriso'), `#!/bin/sh\nprintf '%s\\n' "$*" >> '${log}'\nexec '${real}' "$@"\n`, { mode: 0o755 });
}

async function fetchBytes(url: string): Promise<{ status: number; body: Buffer }> {
  const res = await fetch(url);
  return { status: res.status, body: Buffer.from(await res.arrayBuffer()) };
}

describe('config drives built by the conductor (real processes)', function () {
  this.timeout(180_000);
  const root = path.join(os.tmpdir(), `galvanic-configdrive-${process.pid}`);
  const bin = `${root}-bin`;
  const xorrisoLog = `${root}-xorriso.log`;
  const g = galvanicAndSim({
    images: true,
    precondition: async (ctx) => {
      await requireXorriso(ctx);
      await countingXorriso(bin, xorrisoLog);
    },
    env: {
      ...AGENT_TEST_ENV, GALVANIC_DEPLOY__CONFIGDRIVE_MAX_INLINE_SIZE: String(BOUND), GALVANIC_DEPLOY__HTTP_ROOT: root,
      PATH: `${bin}${path.delimiter}${process.env.PATH ?? ''}`,
    },
    sim: (apiUrl) => ({ count: 7, agent: { apiUrl, bootSeconds: [0.2, 0.5], heartbeatMinGapMs: 200, lookupRetryMs: 300, writeMBps: 50 } }),
  });
  const { api } = g;
  after(async () => {
    for (const p of [root, bin, xorrisoLog]) await fs.rm(p, { recursive: true, force: true });
  });

  /** The config drives Galvanic's xorriso has built so far. */
  async function configdriveBuilds(): Promise<number> {
    const log = await fs.readFile(xorrisoLog, 'utf8').catch(() => '');
    return log.split('\n').filter((line) => line.includes('-V config-2')).length;
  }

  /** The node's instance_info as stored (the API masks the config drive). */
  async function storedInstanceInfo(uuid: string): Promise<Record<string, unknown>> {
    const row = await g.galvanic.tdb.knex('nodes').where({ uuid }).first('instance_info') as { instance_info: Record<string, unknown> };
    return row.instance_info;
  }

  /** The node's files in the HTTP root. */
  async function publishedFiles(uuid: string): Promise<string[]> {
    const names = await fs.readdir(path.join(root, 'redfish')).catch(() => [] as string[]);
    return names.filter((n) => n.includes(uuid)).sort();
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

  /** A ramdisk-deploy node on BMC `i`, available, booting a live ISO (no agent's). */
  async function availableRamdiskNode(i: number): Promise<{ uuid: string; name: string }> {
    const name = `cd-ramdisk-${i}`;
    const node = await createNode(api, redfishNodeBody(name, g.sim.bmcs[i].url, {
      deploy_interface: 'ramdisk', boot_interface: 'redfish-virtual-media', automated_clean: false, instance_info: { boot_iso: `${g.images.url}/live/live.iso` },
    }));
    for (const verb of ['manage', 'provide']) expect((await provisionAndSettle(api, node.uuid, verb)).last_error, verb).to.equal(null);
    return { uuid: node.uuid, name };
  }

  /** The image in the BMC's virtual USB slot. */
  async function usbImage(i: number): Promise<string | null> {
    const media = Object.values((await simState(g.sim.bmcs[i].url)).media) as Array<{ image: string | null; inserted: boolean }>;
    const usb = media.filter((m) => m.inserted && m.image && /configdrive/.test(m.image));
    return usb.length ? usb[0].image : null;
  }

  it('direct: builds a config drive given as JSON into a config-2 ISO the agent writes, and keeps the JSON', async () => {
    const { uuid, name } = await availableDirectNode(0);
    const configdrive = {
      meta_data: { hostname: 'cd-direct-0.example', public_keys: { default: 'ssh-ed25519 AAAAC3Nz test' } },
      user_data: '#cloud-config\nhostname: cd-direct-0\n',
      network_data: { links: [{ id: 'eth0', type: 'phy', mtu: 1500 }], networks: [], services: [] },
      vendor_data: { site: 'lab' },
    };
    const builds = await configdriveBuilds();
    await provision(api, uuid, 'active', { configdrive });
    const deployed = await watchStates(api, uuid);
    expect(deployed.node.provision_state, deployed.node.last_error ?? '').to.equal('active');
    // Built when the deploy started, to check and measure it; write_image got that image.
    expect(await configdriveBuilds() - builds).to.equal(1);

    const bmc = g.sim.bmcs[0].url;
    const witness = await agentWitness(bmc);
    expect(witness.disk?.configdrive, JSON.stringify(witness.disk)).to.include({ source: 'inline' });
    const got = await fetchBytes(`${bmc}/_sim/agent/configdrive`);
    expect(got.status).to.equal(200);
    const files = await latestFiles(got.body);
    expect(JSON.parse(files['meta_data.json'])).to.deep.equal({ ...configdrive.meta_data, uuid, name });
    expect(files.user_data).to.equal(configdrive.user_data);
    expect(JSON.parse(files['network_data.json'])).to.deep.equal(configdrive.network_data);
    expect(JSON.parse(files['vendor_data2.json'])).to.deep.equal(configdrive.vendor_data);

    // The row keeps the JSON, as Ironic does (a custom deploy step reads it); nothing is published.
    expect((await storedInstanceInfo(uuid)).configdrive).to.deep.equal(configdrive);
    expect(await publishedFiles(uuid)).to.deep.equal([]);
  });

  it('direct, in a group operation: each node\'s config drive is built when its deploy runs', async () => {
    const { uuid, name } = await availableDirectNode(1);
    const configdrive = { meta_data: { hostname: 'op' }, user_data: { ignition: { version: '3.2.0' } } };
    const res = await api('POST', '/v1/operations', { nodes: [uuid], steps: [{ action: 'deploy', args: { configdrive } }] });
    expect(res.status, res.body).to.equal(201);
    const deployed = await untilNode(api, uuid, (n) => ['active', 'deploy failed'].includes(n.provision_state) && n.target_provision_state === null, 'to be deployed', 60_000);
    expect(deployed.provision_state, deployed.last_error ?? '').to.equal('active');
    const files = await latestFiles((await fetchBytes(`${g.sim.bmcs[1].url}/_sim/agent/configdrive`)).body);
    expect(JSON.parse(files['meta_data.json'])).to.deep.equal({ hostname: 'op', uuid, name });
    expect(files.user_data).to.equal('{"ignition": {"version": "3.2.0"}}');
  });

  it('direct, above the bound: published in the HTTP root, the row keeps its URL, the agent downloads it; undeploy withdraws it', async () => {
    const { uuid } = await availableDirectNode(2);
    const userData = bigUserData();
    await provision(api, uuid, 'active', { configdrive: { user_data: userData } });
    const deployed = await watchStates(api, uuid);
    expect(deployed.node.provision_state, deployed.node.last_error ?? '').to.equal('active');

    const url = (await storedInstanceInfo(uuid)).configdrive as string;
    expect(url).to.match(new RegExp(`^http://127\\.0\\.0\\.1:\\d+/redfish/configdrive-${uuid}$`));
    const witness = await agentWitness(g.sim.bmcs[2].url);
    expect(witness.disk?.configdrive).to.include({ source: 'url', url });
    // What is published is what IPA takes from a URL: gzip + base64, of more than the bound.
    const published = await fetchBytes(url);
    expect(published.status).to.equal(200);
    expect(published.body.length).to.be.above(BOUND);
    expect((await latestFiles(decodeConfigdrive(published.body.toString()))).user_data).to.equal(userData);
    expect(await publishedFiles(uuid)).to.deep.equal([`configdrive-${uuid}`]);

    await provision(api, uuid, 'deleted');
    const gone = await watchStates(api, uuid);
    expect(gone.node.provision_state, gone.node.last_error ?? '').to.equal('available');
    expect(await publishedFiles(uuid)).to.deep.equal([]);
    expect((await fetchBytes(url)).status).to.equal(404);
  });

  it('ramdisk: the config drive\'s image is published and attached to the BMC\'s virtual USB slot; undeploy ejects and withdraws it', async () => {
    const { uuid, name } = await availableRamdiskNode(3);
    const configdrive = { meta_data: { hostname: 'live' }, user_data: '#cloud-config\nhostname: live\n' };
    const builds = await configdriveBuilds();
    const node = await provisionAndSettle(api, uuid, 'active', { configdrive });
    expect(node.provision_state, node.last_error ?? '').to.equal('active');
    expect(await configdriveBuilds() - builds).to.equal(1);
    // Below the bound: the JSON is kept; the BMC gets the raw image built from it from the HTTP root.
    expect((await storedInstanceInfo(uuid)).configdrive).to.deep.equal(configdrive);
    const usb = await usbImage(3);
    expect(usb).to.match(new RegExp(`^http://127\\.0\\.0\\.1:\\d+/redfish/configdrive-${uuid}$`));
    const files = await latestFiles((await fetchBytes(usb!)).body);
    expect(JSON.parse(files['meta_data.json'])).to.deep.equal({ hostname: 'live', uuid, name });
    expect(files.user_data).to.equal(configdrive.user_data);

    expect((await provisionAndSettle(api, uuid, 'deleted')).provision_state).to.equal('available');
    expect(await usbImage(3)).to.equal(null);
    expect(await publishedFiles(uuid)).to.deep.equal([]);
  });

  it('ramdisk, above the bound: the raw image is published once and the row keeps the URL the BMC attaches', async () => {
    const { uuid } = await availableRamdiskNode(4);
    const userData = bigUserData();
    const node = await provisionAndSettle(api, uuid, 'active', { configdrive: { user_data: userData } });
    expect(node.provision_state, node.last_error ?? '').to.equal('active');
    const url = (await storedInstanceInfo(uuid)).configdrive as string;
    expect(url).to.match(new RegExp(`/redfish/configdrive-${uuid}$`));
    expect(await usbImage(4)).to.equal(url);
    expect((await latestFiles((await fetchBytes(url)).body)).user_data).to.equal(userData);
    // A rebuild boots it again.
    expect((await provisionAndSettle(api, uuid, 'rebuild')).last_error).to.equal(null);
    expect(await usbImage(4)).to.equal(url);
    expect((await fetchBytes(url)).status).to.equal(200);
    await provisionAndSettle(api, uuid, 'deleted');
    expect(await publishedFiles(uuid)).to.deep.equal([]);
  });

  it('ramdisk: a config drive that is not gzip + base64 fails the deploy before the node is touched', async () => {
    const { uuid } = await availableRamdiskNode(6);
    await clearSimEvents(g.sim.bmcs[6].url);
    const failed = await provisionAndSettle(api, uuid, 'active', { configdrive: 'bm90IGd6aXA=' });
    expect(failed.provision_state).to.equal('deploy failed');
    expect(failed.last_error).to.match(new RegExp(`^Failed to deploy node ${uuid}: Creating config drive image failed: the config drive is not a gzipped and base64-encoded image: `));
    expect(story(await simEvents(g.sim.bmcs[6].url))).to.deep.equal([]);
    expect(await storedInstanceInfo(uuid)).to.not.have.property('configdrive');
    expect(await publishedFiles(uuid)).to.deep.equal([]);
  });

  it('an HTTP root that cannot be written: a clear last_error, no config drive in the row, no file left', async () => {
    const { uuid } = await availableDirectNode(5);
    const dir = path.join(root, 'redfish');
    const aside = `${dir}.aside`;
    await fs.mkdir(dir, { recursive: true });
    await fs.rename(dir, aside);
    // A file where the root's directory should be: every publish fails.
    await fs.writeFile(dir, 'not a directory');
    try {
      await provision(api, uuid, 'active', { configdrive: { user_data: bigUserData() } });
      const failed = await watchStates(api, uuid);
      expect(failed.node.provision_state).to.equal('deploy failed');
      expect(failed.node.last_error).to.match(new RegExp(`^Failed to deploy node ${uuid}: Publishing configdrive for node ${uuid} in the HTTP root failed: `));
      expect(await storedInstanceInfo(uuid)).to.not.have.property('configdrive');
      // The agent was never booted.
      expect((await agentWitness(g.sim.bmcs[5].url)).boots).to.equal(0);
    } finally {
      await fs.rm(dir, { force: true });
      await fs.rename(aside, dir);
    }
    expect(await publishedFiles(uuid)).to.deep.equal([]);
    expect((await fs.readdir(dir)).filter((n) => n.startsWith('.tmp-'))).to.deep.equal([]);
  });

  it('the HTTP root sweep keeps a config drive while its node has an instance, and removes it once the node has none', async () => {
    const db = g.galvanic.tdb.knex;
    const sweepRoot = await fs.mkdtemp(path.join(os.tmpdir(), 'galvanic-sweep-'));
    try {
      const httpRoot = new HttpRoot({ root: sweepRoot, baseUrl: 'http://127.0.0.1:1' });
      const failed = await createNode(api, redfishNodeBody('cd-sweep-failed', g.sim.bmcs[0].url));
      const idle = await createNode(api, redfishNodeBody('cd-sweep-idle', g.sim.bmcs[0].url));
      await db('nodes').where({ uuid: failed.uuid }).update({ provision_state: 'deploy failed' });
      await db('nodes').where({ uuid: idle.uuid }).update({ provision_state: 'available' });
      for (const n of [failed, idle]) {
        await httpRoot.publish(n.uuid, 'configdrive', { data: 'H4sI' });
        await httpRoot.publish(n.uuid, 'boot.iso', { data: 'ISO' });
      }
      // Past the sweep's grace period.
      await sweepHttpRoot({ db, httpRoot, log: pino({ level: 'silent' }) }, Date.now() + 3_600_000);
      const left = (await httpRoot.list()).map((f) => `${f.nodeUuid === failed.uuid ? 'failed' : 'idle'} ${f.name}`).sort();
      // The failed deploy's ISO goes (its boot is over); its config drive stays for a deploy again.
      expect(left).to.deep.equal(['failed configdrive']);
    } finally {
      await fs.rm(sweepRoot, { recursive: true, force: true });
    }
  });
});

describe('config drives on a conductor without an HTTP root', function () {
  this.timeout(60_000);
  const t = suiteApp({ env: { GALVANIC_DEPLOY__CONFIGDRIVE_MAX_INLINE_SIZE: String(BOUND), GALVANIC_CONDUCTOR__SYNC_POWER_STATE_INTERVAL: '0' } });
  let api: ApiCall;
  before(async function () {
    await requireXorriso(this);
    api = injector(t.app);
  });

  async function availableFakeNode(name: string): Promise<string> {
    const node = await createNode(api, { name, driver: 'fake-hardware', boot_interface: 'fake', deploy_interface: 'fake', automated_clean: false });
    for (const verb of ['manage', 'provide']) expect((await provisionAndSettle(api, node.uuid, verb)).provision_state).to.not.match(/failed/);
    return node.uuid;
  }

  it('keeps a config drive below the bound in instance_info; one above it fails the deploy with a clear last_error and leaves no config drive behind', async () => {
    const small = await availableFakeNode('cd-fake-small');
    expect((await provisionAndSettle(api, small, 'active', { configdrive: { meta_data: { hostname: 'small' } } })).provision_state).to.equal('active');
    const row = await t.tdb.knex('nodes').where({ uuid: small }).first('instance_info');
    expect(row.instance_info.configdrive).to.deep.equal({ meta_data: { hostname: 'small' } });

    const big = await availableFakeNode('cd-fake-big');
    const failed = await provisionAndSettle(api, big, 'active', { configdrive: { user_data: bigUserData() } });
    expect(failed.provision_state).to.equal('deploy failed');
    expect(failed.last_error).to.match(new RegExp(
      `^Failed to deploy node ${big}: The config drive of node ${big} must be published in the conductor's HTTP root \\(it is \\d+ bytes gzipped and base64-encoded, above \\[deploy\\] configdrive_max_inline_size \\(${BOUND}\\)\\), and this conductor has none \\(\\[deploy\\] http_root\\)\\.$`,
    ));
    const after = await t.tdb.knex('nodes').where({ uuid: big }).first('instance_info');
    expect(after.instance_info).to.not.have.property('configdrive');
    expect((await getNode(api, big)).power_state).to.not.equal('power on');
  });
});
