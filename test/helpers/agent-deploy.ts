/**
 * Helpers for the tests that deploy and clean through simulated agents: an HTTP server for
 * the images the agents write, the node body of a direct deploy, the agent's witness, and a
 * suite's real `galvanic` with the Redfish simulator.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import { startRedfishSim, type RedfishSim, type RedfishSimOptions } from '../../sim/redfish/index.js';
import { startGalvanicOnFreshDatabase, type GalvanicOnFreshDatabase } from './app.js';
import { httpClient, type ApiCall, type NodeView } from './provisioning.js';

/** Fast agent protocol settings for tests: heartbeats every 0.6-1.2 s, quick timeouts. */
export const AGENT_TEST_ENV: Record<string, string> = {
  GALVANIC_API__RAMDISK_HEARTBEAT_TIMEOUT: '2',
  GALVANIC_CONDUCTOR__SYNC_POWER_STATE_INTERVAL: '0',
  GALVANIC_CONDUCTOR__CHECK_PROVISION_STATE_INTERVAL: '1',
  GALVANIC_REDFISH__CONNECTION_RETRY_INTERVAL: '0.1',
  GALVANIC_AGENT__POST_DEPLOY_GET_POWER_STATE_RETRY_INTERVAL: '1',
  GALVANIC_AGENT__COMMAND_TIMEOUT: '10',
};

/**
 * A suite's HTTP root under `work`, where its agent ISO is published (`[deploy]
 * ramdisk_image_download_source = local`), with Galvanic's options for it (never swept: nothing
 * but the code under test may withdraw a file while a test looks), the simulator's pattern of
 * that ISO (an agent ISO that calls Galvanic), and the node's files in it.
 */
export function publishedAgentIso(work: string): { env: Record<string, string>; isoPattern: RegExp; rootFiles(uuid: string): Promise<string[]> } {
  const httpRoot = path.join(work, 'httpboot');
  return {
    env: {
      GALVANIC_DEPLOY__HTTP_ROOT: httpRoot, GALVANIC_DEPLOY__ISO_MASTER_PATH: path.join(work, 'cache'),
      GALVANIC_DEPLOY__RAMDISK_IMAGE_DOWNLOAD_SOURCE: 'local', GALVANIC_DEPLOY__HTTP_ROOT_SWEEP_INTERVAL: '0',
    },
    isoPattern: /\/boot-[0-9a-f-]+\.iso$/,
    async rootFiles(uuid) {
      const entries = await fs.readdir(httpRoot, { recursive: true, withFileTypes: true }).catch(() => []);
      return entries.filter((e) => e.isFile() && e.name.includes(uuid)).map((e) => path.relative(httpRoot, path.join(e.parentPath, e.name))).sort();
    },
  };
}

export interface ImageServer {
  url: string;
  /** URL of an image of `bytes` bytes and its sha256. */
  image: { url: string; sha256: string; md5: string; bytes: number };
  isoUrl: string;
  /** The agent's kernel and ramdisk, for network boot. */
  kernelUrl: string;
  ramdiskUrl: string;
  close(): Promise<void>;
}

/** Serves one disk image (deterministic bytes, its URL's query ignored, as a pre-signed URL's) and an agent ISO name. */
export async function startImageServer(bytes = 4 * 1024 * 1024): Promise<ImageServer> {
  const data = Buffer.alloc(bytes);
  for (let i = 0; i < bytes; i++) data[i] = (i * 31 + 7) & 0xff;
  const server = http.createServer((req, res) => {
    if (req.url?.split('?')[0] === '/images/disk.raw') {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(bytes) });
      res.end(req.method === 'HEAD' ? undefined : data);
      return;
    }
    if (req.url === '/deploy/ipa.iso' || req.url === '/deploy/ipa.kernel' || req.url === '/deploy/ipa.initramfs') {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      res.end(req.method === 'HEAD' ? undefined : req.url === '/deploy/ipa.iso' ? 'ISO' : `${req.url.slice(8)} bytes`);
      return;
    }
    res.writeHead(404).end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    image: {
      url: `${url}/images/disk.raw`, bytes,
      sha256: createHash('sha256').update(data).digest('hex'), md5: createHash('md5').update(data).digest('hex'),
    },
    isoUrl: `${url}/deploy/ipa.iso`,
    kernelUrl: `${url}/deploy/ipa.kernel`,
    ramdiskUrl: `${url}/deploy/ipa.initramfs`,
    close: () => new Promise((r) => { server.closeAllConnections(); server.close(() => r()); }),
  };
}

/** Serves the firmware images the simulated BMC accepts (JSON naming the component and version). */
export async function startFirmwareServer(): Promise<{ url: string; close(): Promise<void> }> {
  const images: Record<string, object> = {
    '/fw/bios-2.0.0.bin': { Component: 'BIOS', Version: '2.0.0' },
    '/fw/bios-3.0.0.bin': { Component: 'BIOS', Version: '3.0.0' },
    '/fw/bmc-2.0.0.bin': { Component: 'BMC', Version: '2.0.0-sim' },
  };
  const server = http.createServer((req, res) => {
    const image = images[req.url ?? ''];
    if (!image) return void res.writeHead(404).end('not found');
    res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(JSON.stringify(image));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise((r) => { server.closeAllConnections(); server.close(() => r()); }),
  };
}

/** A redfish node with virtual media and the direct deploy interface. */
export function directNodeBody(name: string, bmcUrl: string, images: ImageServer, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    name,
    driver: 'redfish',
    boot_interface: 'redfish-virtual-media',
    deploy_interface: 'direct',
    inspect_interface: 'redfish',
    driver_info: { redfish_address: bmcUrl, redfish_username: 'admin', redfish_password: 'password', deploy_iso: images.isoUrl },
    instance_info: { image_source: images.image.url, image_os_hash_algo: 'sha256', image_os_hash_value: images.image.sha256 },
    ...extra,
  };
}

/** The provision states a node went through, read every 20 ms until it settles (none repeated in a row). */
export async function watchStates(api: ApiCall, ident: string, timeoutMs = 60_000): Promise<{ states: string[]; node: NodeView }> {
  const states: string[] = [];
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await api('GET', `/v1/nodes/${ident}`);
    expect(res.status, res.body).to.equal(200);
    const node = res.json<NodeView>();
    if (states[states.length - 1] !== node.provision_state) states.push(node.provision_state);
    if (node.target_provision_state === null && node.reservation === null) return { states, node };
    if (Date.now() > deadline) throw new Error(`node ${ident} still in transition after ${timeoutMs} ms (${states.join(' → ')}): ${JSON.stringify(node)}`);
    await sleep(20);
  }
}

export interface GalvanicAndSimOptions {
  /** `GALVANIC_*` overrides for the `galvanic` process. */
  env?: Record<string, string>;
  /** The simulator's options, given Galvanic's URL (for the agents the hosts run). */
  sim(galvanicUrl: string): RedfishSimOptions;
  /** Start an image server first (default false). */
  images?: boolean;
  /** Runs first in `before`, e.g. to skip the suite when a tool is missing. */
  precondition?(ctx: Mocha.Context): void | Promise<void>;
  /** In `after`, expect `galvanic` to exit 0 (default true). */
  cleanExit?: boolean;
}

/** What galvanicAndSim started; each getter throws before the suite's `before` has. */
export interface GalvanicAndSim {
  readonly galvanic: GalvanicOnFreshDatabase;
  readonly sim: RedfishSim;
  readonly images: ImageServer;
  /** HTTP to Galvanic's API; usable once `before` has run. */
  readonly api: ApiCall;
}

/**
 * The hooks of the suites that drive a real `galvanic all-in-one` on a fresh database, with
 * the Redfish simulator and, if asked, an image server: started in `before`, stopped in
 * `after` (Galvanic first). Call it inside `describe`.
 */
export function galvanicAndSim(opts: GalvanicAndSimOptions): GalvanicAndSim {
  let galvanic: GalvanicOnFreshDatabase | undefined;
  let sim: RedfishSim | undefined;
  let images: ImageServer | undefined;
  let client: ApiCall | undefined;
  before(async function () {
    await opts.precondition?.(this);
    if (opts.images) images = await startImageServer();
    galvanic = await startGalvanicOnFreshDatabase({ env: opts.env });
    sim = await startRedfishSim(opts.sim(galvanic.url));
    client = httpClient(galvanic.url);
  });
  after(async () => {
    if (opts.cleanExit ?? true) await galvanic?.shutdownCleanly();
    else await galvanic?.shutdown();
    await sim?.stop();
    await images?.close();
  });
  const started = <T>(what: string, v: T | undefined): T => {
    if (v === undefined) throw new Error(`${what} is not started (outside the suite's hooks and tests?)`);
    return v;
  };
  return {
    get galvanic() { return started('galvanic', galvanic); },
    get sim() { return started('the simulator', sim); },
    get images() { return started('the image server', images); },
    api: (...args) => started('galvanic', client)(...args),
  };
}
