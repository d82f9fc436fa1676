/**
 * The agent ISO built from deploy_kernel + deploy_ramdisk and served from the conductor's HTTP
 * root, end to end: a real `galvanic all-in-one` with its embedded HTTP server, the Redfish
 * simulator (which checks an inserted image as a BMC does and reads the ISO's kernel command
 * line to start its agent: the agents are told no API URL of their own), and an HTTP server
 * for the images. Then bad input: a kernel that 404s, a checksum mismatch, an HTTP root that is
 * full or not writable; each a clear last_error and nothing left behind.
 */
import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { buildAgentIso } from '../../drivers/image/iso-builder.js';
import { agentWitness } from '../helpers/agent-sim.js';
import { AGENT_TEST_ENV, galvanicAndSim, watchStates } from '../helpers/agent-deploy.js';
import { createNode, insertedMedia, provision, provisionAndSettle, simState, type NodeView } from '../helpers/provisioning.js';

const KERNEL = Buffer.from('a kernel, as far as this test goes\n'.repeat(100));
const RAMDISK = Buffer.from('a ramdisk, as far as this test goes\n'.repeat(300));
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

/** Serves the kernel and ramdisk (and a disk image), counting GETs per path. */
async function startKernelServer(): Promise<{ url: string; gets: Map<string, number>; files: Record<string, Buffer>; close(): Promise<void> }> {
  const gets = new Map<string, number>();
  const files: Record<string, Buffer> = { '/ipa.kernel': KERNEL, '/ipa.initramfs': RAMDISK, '/disk.raw': Buffer.alloc(1024 * 1024, 1) };
  const server = http.createServer((req, res) => {
    const body = files[req.url ?? ''];
    if (req.method === 'GET') gets.set(req.url ?? '', (gets.get(req.url ?? '') ?? 0) + 1);
    if (!body) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-length': String(body.length) }).end(req.method === 'HEAD' ? undefined : body);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, gets, files,
    close: () => new Promise((r) => { server.closeAllConnections(); server.close(() => r()); }),
  };
}

/** Every file under `dir`, relative. */
async function filesUnder(dir: string): Promise<string[]> {
  const entries = await fs.readdir(dir, { recursive: true, withFileTypes: true }).catch(() => []);
  return entries.filter((e) => e.isFile()).map((e) => path.relative(dir, path.join(e.parentPath, e.name))).sort();
}

function mount(args: string[]): boolean {
  try {
    execFileSync('mount', args, { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

function needIsoTools(ctx: Mocha.Context): void {
  const tools = ['/usr/bin/xorriso', '/usr/lib/ISOLINUX/isolinux.bin', '/usr/lib/grub/x86_64-efi'];
  if (tools.every((f) => existsSync(f))) return;
  // .ci/run installs them: missing there is a failure, not a skip.
  if (process.env.CI === 'true') throw new Error(`the ISO tools are missing (${tools.join(', ')})`);
  ctx.skip();
}

describe('the agent ISO from deploy_kernel and deploy_ramdisk (real processes)', function () {
  this.timeout(180_000);
  const work = path.join(os.tmpdir(), `galvanic-agent-iso-${process.pid}`);
  const httpRoot = path.join(work, 'httpboot');
  const cache = path.join(work, 'cache');
  let images: Awaited<ReturnType<typeof startKernelServer>>;
  let mounted = false;
  const g = galvanicAndSim({
    precondition: needIsoTools,
    env: {
      ...AGENT_TEST_ENV,
      GALVANIC_DEPLOY__HTTP_ROOT: httpRoot, GALVANIC_DEPLOY__ISO_MASTER_PATH: cache,
      GALVANIC_CONDUCTOR__DEPLOY_CALLBACK_TIMEOUT: '20', GALVANIC_CONDUCTOR__CLEAN_CALLBACK_TIMEOUT: '20',
      GALVANIC_DEFAULT__ENABLED_INSPECT_INTERFACES: 'redfish,agent,no-inspect',
    },
    // The agents know no API but the one their ISO's kernel command line names.
    sim: () => ({ count: 9, vmediaCheckImage: 'insert', agent: { apiUrl: 'http://127.0.0.1:9', bootSeconds: [0.2, 0.5], heartbeatMinGapMs: 200, lookupRetryMs: 300, writeMBps: 20 } }),
    cleanExit: false,
  });
  const { api } = g;

  before(async () => {
    await fs.mkdir(httpRoot, { recursive: true });
    images = await startKernelServer();
  });
  after(async () => {
    await images?.close();
    if (mounted) execFileSync('umount', ['-l', httpRoot]);
    await fs.rm(work, { recursive: true, force: true });
  });

  function nodeBody(name: string, i: number, driverInfo: Record<string, unknown> = {}, extra: Record<string, unknown> = {}): Record<string, unknown> {
    return {
      name, driver: 'redfish', boot_interface: 'redfish-virtual-media', deploy_interface: 'direct', inspect_interface: 'redfish', automated_clean: false, ...extra,
      driver_info: {
        redfish_address: g.sim.bmcs[i].url, redfish_username: 'admin', redfish_password: 'password',
        deploy_kernel: `${images.url}/ipa.kernel`, deploy_ramdisk: `${images.url}/ipa.initramfs`, ...driverInfo,
      },
      instance_info: { image_source: `${images.url}/disk.raw`, image_os_hash_algo: 'sha256', image_os_hash_value: sha256(Buffer.alloc(1024 * 1024, 1)) },
    };
  }

  async function availableNode(name: string, i: number, driverInfo: Record<string, unknown> = {}, extra: Record<string, unknown> = {}): Promise<string> {
    const node = await createNode(api, nodeBody(name, i, driverInfo, extra));
    expect((await provisionAndSettle(api, node.uuid, 'manage')).provision_state).to.equal('manageable');
    // The BMC's NICs become ports, by which the agent is looked up.
    expect((await provisionAndSettle(api, node.uuid, 'inspect')).provision_state).to.equal('manageable');
    expect((await provisionAndSettle(api, node.uuid, 'provide', {}, 60_000)).provision_state).to.equal('available');
    return node.uuid;
  }

  /** Deploys and waits for the end; the node as it ended. */
  async function deploy(uuid: string): Promise<NodeView> {
    await provision(api, uuid, 'active');
    return (await watchStates(api, uuid, 90_000)).node;
  }

  it('builds one ISO for nodes that boot the same, serves it per node, and the agents find the API on its command line', async () => {
    const uuids = await Promise.all([0, 1, 2].map((i) => availableNode(`iso-${i}`, i)));
    // The ISO's URL at the BMC, seen while the node waits for its agent.
    const inserted = new Map<string, string[]>();
    const watching = Promise.all(uuids.map(async (uuid, i) => {
      for (let n = 0; n < 600 && !inserted.has(uuid); n++) {
        const media = insertedMedia(await simState(g.sim.bmcs[i].url));
        if (media.length) inserted.set(uuid, media);
        else await new Promise((r) => setTimeout(r, 50));
      }
    }));
    const ends = await Promise.all(uuids.map((u) => deploy(u)));
    await watching;
    for (const node of ends) expect(node.provision_state, node.last_error ?? '').to.equal('active');
    for (const [i, uuid] of uuids.entries()) {
      expect(inserted.get(uuid)?.[0]).to.match(new RegExp(`: http://127\\.0\\.0\\.1:\\d+/redfish/boot-${uuid}\\.iso$`));
      const w = await agentWitness(g.sim.bmcs[i].url);
      expect(w.heartbeats, `agent ${i}`).to.be.greaterThan(0);
    }
    // Each image downloaded once, one ISO built for all three, none left published once deployed.
    expect(images.gets.get('/ipa.kernel')).to.equal(1);
    expect(images.gets.get('/ipa.initramfs')).to.equal(1);
    expect((await filesUnder(cache)).filter((f) => f.startsWith('built/'))).to.have.length(1);
    expect(await filesUnder(httpRoot)).to.deep.equal([]);
    const iso = path.join(cache, (await filesUnder(cache)).find((f) => f.startsWith('built/'))!);
    const text = (await fs.readFile(iso)).toString('latin1');
    expect(text).to.match(new RegExp(` nofb nomodeset vga=normal ir_pub_id=[0-9a-f-]{36} ipa-api-url=${g.galvanic.url.replace(/\./g, '\\.')} boot_method=vmedia\\b`));
  });

  it('undeploys and cleans through the agent with the ISO published again, and withdrawn at the end', async () => {
    const uuid = await availableNode('iso-clean', 3, {}, { automated_clean: true });
    expect((await deploy(uuid)).provision_state).to.equal('active');
    await provision(api, uuid, 'deleted');
    const { node, states } = await watchStates(api, uuid, 90_000);
    expect(node.provision_state, node.last_error ?? '').to.equal('available');
    expect(states).to.include('clean wait');
    expect(await filesUnder(httpRoot)).to.deep.equal([]);
    expect(insertedMedia(await simState(g.sim.bmcs[3].url))).to.deep.equal([]);
  });

  it('inspects in-band with the inspection callback on the command line instead of the API URL, as Ironic\'s managed inspection', async () => {
    const before = new Set(await filesUnder(path.join(cache, 'built')));
    const node = await createNode(api, nodeBody('iso-inspect', 8, {}, { inspect_interface: 'agent' }));
    expect((await provisionAndSettle(api, node.uuid, 'manage')).provision_state).to.equal('manageable');
    const inspected = await provisionAndSettle(api, node.uuid, 'inspect', {}, 60_000);
    expect(inspected.provision_state, inspected.last_error ?? '').to.equal('manageable');
    expect((await agentWitness(g.sim.bmcs[8].url)).inspectionStatuses).to.have.property('202');
    const built = (await filesUnder(path.join(cache, 'built'))).filter((f) => !before.has(f));
    expect(built).to.have.length(1);
    const text = (await fs.readFile(path.join(cache, 'built', built[0]!))).toString('latin1');
    expect(text).to.include(` ipa-inspection-callback-url=${g.galvanic.url}/v1/continue_inspection boot_method=vmedia`);
    expect(text).not.to.include('ipa-api-url=');
    expect((await filesUnder(httpRoot)).filter((f) => f.includes(node.uuid))).to.deep.equal([]);
  });

  /** A deploy that fails before the BMC is touched: its last_error, and nothing published, inserted or half-written. */
  async function failedDeploy(name: string, i: number, driverInfo: Record<string, unknown>): Promise<string> {
    const uuid = await availableNode(name, i, driverInfo);
    const node = await deploy(uuid);
    expect(node.provision_state).to.equal('deploy failed');
    expect((await filesUnder(httpRoot)).filter((f) => f.includes(uuid) || f.includes('.tmp-'))).to.deep.equal([]);
    expect(await filesUnder(path.join(cache, 'tmp'))).to.deep.equal([]);
    expect(insertedMedia(await simState(g.sim.bmcs[i].url))).to.deep.equal([]);
    return node.last_error ?? '';
  }

  it('fails the deploy with a clear last_error when the kernel URL answers 404', async () => {
    const error = await failedDeploy('iso-404', 4, { deploy_kernel: `${images.url}/missing.kernel` });
    expect(error).to.include(`Failed to download image ${images.url}/missing.kernel, reason: Got HTTP code 404 instead of 200 in response to GET request.`);
  });

  it('fails the deploy when the ramdisk does not match its checksum, and keeps nothing of it', async () => {
    const wrong = sha256(Buffer.from('another ramdisk'));
    const before = (await filesUnder(path.join(cache, 'master'))).length;
    const error = await failedDeploy('iso-checksum', 5, { deploy_ramdisk_checksum: `sha256:${wrong}` });
    expect(error).to.include('The supplied image checksum is invalid or does not match');
    expect(error).to.include(`expected ${wrong}`);
    expect(error).to.include(sha256(RAMDISK));
    // The kernel (fetched beside it) may be cached; the ramdisk that failed is not.
    expect((await filesUnder(path.join(cache, 'master'))).length).to.be.at.most(before + 1);
  });

  describe('an HTTP root on a small file system of its own', () => {
    before(function () {
      mounted = mount(['-t', 'tmpfs', '-o', 'size=256k', 'tmpfs', httpRoot]);
      if (!mounted) this.skip();
    });

    it('fails the deploy with a clear last_error when the HTTP root is full, and leaves no part of the ISO', async () => {
      const filler = path.join(httpRoot, 'filler');
      await fs.writeFile(filler, Buffer.alloc(256 * 1024)).catch(() => undefined);
      try {
        const error = await failedDeploy('iso-full', 6, {});
        expect(error).to.match(/Publishing boot\.iso for node [0-9a-f-]{36} in the HTTP root failed: the HTTP root .* is full \(no space left on its device\)\./);
      } finally {
        await fs.rm(filler, { force: true });
      }
    });

    it('fails the deploy with a clear last_error when the HTTP root is not writable', async () => {
      expect(mount(['-o', 'remount,ro', httpRoot])).to.equal(true);
      try {
        const error = await failedDeploy('iso-ro', 7, {});
        expect(error).to.match(/Publishing boot\.iso for node [0-9a-f-]{36} in the HTTP root failed: the HTTP root .* is on a read-only file system\./);
      } finally {
        mount(['-o', 'remount,rw', httpRoot]);
      }
    });
  });
});

describe('a deploy_iso re-mastered with the agent\'s command line ([deploy] remaster_deploy_iso, real processes)', function () {
  this.timeout(120_000);
  const work = path.join(os.tmpdir(), `galvanic-remaster-${process.pid}`);
  let images: Awaited<ReturnType<typeof startKernelServer>>;
  const g = galvanicAndSim({
    precondition: needIsoTools,
    env: {
      ...AGENT_TEST_ENV, GALVANIC_DEPLOY__REMASTER_DEPLOY_ISO: 'true',
      GALVANIC_DEPLOY__HTTP_ROOT: path.join(work, 'httpboot'), GALVANIC_DEPLOY__ISO_MASTER_PATH: path.join(work, 'cache'),
    },
    sim: () => ({ count: 1, vmediaCheckImage: 'insert', agent: { apiUrl: 'http://127.0.0.1:9', bootSeconds: [0.2, 0.5], heartbeatMinGapMs: 200, lookupRetryMs: 300, writeMBps: 20 } }),
    cleanExit: false,
  });

  before(async () => {
    images = await startKernelServer();
    // A deploy ISO that names no API: only the re-mastered command line tells the agent where to call.
    await fs.mkdir(work, { recursive: true });
    await fs.writeFile(path.join(work, 'k'), KERNEL);
    await fs.writeFile(path.join(work, 'r'), RAMDISK);
    await buildAgentIso({ kernel: path.join(work, 'k'), ramdisk: path.join(work, 'r'), cmdline: 'console=ttyS0 boot_method=vmedia', output: path.join(work, 'ipa.iso') });
    images.files['/ipa.iso'] = await fs.readFile(path.join(work, 'ipa.iso'));
  });
  after(async () => {
    await images?.close();
    await fs.rm(work, { recursive: true, force: true });
  });

  it('deploys through an agent that finds the API on the re-mastered ISO, published per node', async () => {
    const node = await createNode(g.api, {
      name: 'remaster', driver: 'redfish', boot_interface: 'redfish-virtual-media', deploy_interface: 'direct', inspect_interface: 'redfish', automated_clean: false,
      driver_info: { redfish_address: g.sim.bmcs[0].url, redfish_username: 'admin', redfish_password: 'password', deploy_iso: `${images.url}/ipa.iso` },
      instance_info: { image_source: `${images.url}/disk.raw`, image_os_hash_algo: 'sha256', image_os_hash_value: sha256(images.files['/disk.raw']!) },
    });
    for (const verb of ['manage', 'inspect', 'provide']) await provisionAndSettle(g.api, node.uuid, verb, {}, 60_000);
    await provision(g.api, node.uuid, 'active');
    const { node: end } = await watchStates(g.api, node.uuid, 60_000);
    expect(end.provision_state, end.last_error ?? '').to.equal('active');
    const calls = (await agentWitness(g.sim.bmcs[0].url)).calls.map((c) => c[0]);
    expect(calls.some((c) => c.startsWith('api POST /v1/heartbeat'))).to.equal(true);
    const events = (await (await fetch(`${g.sim.bmcs[0].url}/_sim/events`)).json()) as { events: Array<{ type: string; image?: string }> };
    const inserted = events.events.filter((e) => e.type === 'insert').map((e) => e.image);
    expect(inserted).to.deep.equal([`${inserted[0]!.replace(/\/redfish\/.*$/, '')}/redfish/boot-${node.uuid}.iso`]);
    const built = await filesUnder(path.join(work, 'cache', 'built'));
    expect(built).to.have.length(1);
    const text = (await fs.readFile(path.join(work, 'cache', 'built', built[0]!))).toString('latin1');
    expect(text).to.include(`ipa-api-url=${g.galvanic.url} boot_method=vmedia`);
  });
});
