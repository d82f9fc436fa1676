/**
 * The ipxe and pxe boot interfaces write, file by file, what Ironic's conductor writes for the
 * same node (test/helpers/ironic-netboot.ts, written from Ironic's code), for the agent and for
 * a ramdisk deploy, BIOS and UEFI; a boot phase's end leaves nothing; a failure half-way
 * leaves nothing either.
 */
import { expect } from 'chai';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { pathToFileURL } from 'node:url';
import { BootFilesFailed, DhcpUpdateFailed, ImageDownloadFailed, InvalidParameterValue, MissingParameterValue } from '../../common/errors.js';
import { DnsmasqDhcp } from '../../drivers/dhcp.js';
import type { BootPort, DriverContext, NodeAccess } from '../../drivers/interfaces.js';
import { CachedImageSource } from '../../drivers/netboot/images.js';
import { ImageCache } from '../../drivers/image/image-cache.js';
import { NO_AGENT_BOOT_DEFAULTS } from '../../drivers/agent-boot.js';
import { NetworkBoot, type NetbootOptions } from '../../drivers/netboot/pxe-boot.js';
import { Template } from '../../drivers/netboot/template.js';
import { BOOT_IPXE, GRUB_CONFIG, IPXE_CONFIG, PXELINUX_CONFIG } from '../../drivers/netboot/templates.js';
import {
  ironicBootIpxe, ironicDnsmasqFiles, ironicGrubConfig, ironicIgnoredHosts, ironicIpxeConfig, ironicMacLinks, ironicPxelinuxConfig, readTree, type Tree,
} from '../helpers/ironic-netboot.js';

const UUID = '1be26c0b-03f2-4d2e-ae87-c02d7f33c123';
const MAC = '52:54:00:12:34:56';
const MAC2 = '52:54:00:ab:cd:ef';
const HTTP = 'http://192.0.2.1:8080';
const TFTP = '192.0.2.1';
const API = 'http://192.0.2.1:6385';

interface Fixture {
  root: string;
  httpRoot: string;
  tftpRoot: string;
  hostsDir: string;
  optsDir: string;
  images: string;
  opts: NetbootOptions;
  dhcp: DnsmasqDhcp;
  cache: ImageCache;
}

async function fixture(): Promise<Fixture> {
  const root = await fs.mkdtemp(path.join(os.tmpdir(), 'galvanic-netboot-'));
  const dirs = { httpRoot: path.join(root, 'httpboot'), tftpRoot: path.join(root, 'tftpboot'), hostsDir: path.join(root, 'hostsdir.d'), optsDir: path.join(root, 'optsdir.d'), images: path.join(root, 'images') };
  for (const d of Object.values(dirs)) await fs.mkdir(d);
  for (const loader of ['undionly.kpxe', 'snponly.efi', 'pxelinux.0', 'bootx64.efi']) await fs.writeFile(path.join(dirs.tftpRoot, loader), `loader ${loader}`);
  await fs.writeFile(path.join(dirs.images, 'ipa.kernel'), 'agent kernel');
  await fs.writeFile(path.join(dirs.images, 'ipa.initramfs'), 'agent ramdisk');
  await fs.writeFile(path.join(dirs.images, 'os.kernel'), 'os kernel');
  await fs.writeFile(path.join(dirs.images, 'os.initramfs'), 'os ramdisk');
  await fs.writeFile(path.join(dirs.images, 'os.iso'), 'os iso');
  const dhcp = new DnsmasqDhcp({ hostsDir: dirs.hostsDir, optsDir: dirs.optsDir, leaseFile: path.join(root, 'dnsmasq.leases') });
  const cache = new ImageCache({ dir: path.join(root, 'cache'), sizeBytes: 1 << 30, ttlMs: 60_000, log: pino({ level: 'silent' }) });
  await cache.start();
  const opts: NetbootOptions = {
    httpRoot: dirs.httpRoot, httpUrl: () => HTTP, tftpRoot: dirs.tftpRoot, tftpServer: TFTP, subdir: 'pxelinux.cfg',
    bootFiles: { pxe: 'pxelinux.0', uefiPxe: 'bootx64.efi', ipxe: 'undionly.kpxe', uefiIpxe: 'snponly.efi' },
    templates: { pxe: new Template('p', PXELINUX_CONFIG), uefiPxe: new Template('g', GRUB_CONFIG), ipxe: new Template('i', IPXE_CONFIG), bootScript: new Template('b', BOOT_IPXE) },
    fallbackScript: '', ipxeTimeoutS: 0, kernelAppendParams: 'nofb vga=normal',
    agentBoot: {
      ...NO_AGENT_BOOT_DEFAULTS, apiUrl: API,
      deployKernel: pathToFileURL(path.join(dirs.images, 'ipa.kernel')).href, deployRamdisk: pathToFileURL(path.join(dirs.images, 'ipa.initramfs')).href,
    },
    dhcp, images: new CachedImageSource(cache),
  };
  return { root, ...dirs, opts, dhcp, cache };
}

/** The conductor's side, in memory: the node, its ports, driver_internal_info saves, boot device calls. */
function nodeAccess(node: { provisionState?: string; properties?: Record<string, unknown>; instanceInfo?: Record<string, unknown>; driverInfo?: Record<string, unknown> }, ports: BootPort[]) {
  const info: Record<string, unknown> = {};
  const bootDevices: Array<[string, boolean, string | undefined]> = [];
  const access: NodeAccess = {
    node: {
      uuid: UUID, provisionState: node.provisionState ?? 'cleaning', properties: node.properties ?? {}, instanceInfo: node.instanceInfo ?? {},
      driverInfo: node.driverInfo ?? {}, driverInternalInfo: info,
    },
    ports: async () => ports,
    saveInternalInfo: async (patch) => {
      for (const [k, v] of Object.entries(patch)) {
        if (v === null) delete info[k];
        else info[k] = v;
      }
    },
    setBootDevice: async (device, persistent, mode) => void bootDevices.push([device, persistent, mode]),
  };
  const ctx: DriverContext = { nodeUuid: UUID, driverInfo: access.node.driverInfo, log: pino({ level: 'silent' }), access };
  return { ctx, info, bootDevices };
}

const PORTS: BootPort[] = [{ address: MAC, pxeEnabled: true }, { address: MAC2, pxeEnabled: false }];
const LOADERS: Tree = { 'bootx64.efi': 'loader bootx64.efi', 'pxelinux.0': 'loader pxelinux.0', 'snponly.efi': 'loader snponly.efi', 'undionly.kpxe': 'loader undionly.kpxe' };

describe('network boot file layout (ipxe, pxe) against Ironic\'s', () => {
  let f: Fixture;
  beforeEach(async () => { f = await fixture(); });
  afterEach(async () => {
    await f.cache.close();
    await fs.rm(f.root, { recursive: true, force: true });
  });

  it('ipxe, BIOS, the agent: boot.ipxe, <uuid>/config, the images, the MAC links, dnsmasq\'s files; cleaned up to nothing', async () => {
    const boot = new NetworkBoot(true, f.opts);
    const { ctx, info, bootDevices } = nodeAccess({ properties: { capabilities: 'boot_mode:bios' } }, PORTS);
    await boot.prepareRamdisk(ctx, { purpose: 'deploy' });
    const append = `nofb vga=normal ipa-api-url=${API}`;
    expect(await readTree(f.httpRoot)).to.deep.equal({
      'boot.ipxe': ironicBootIpxe(),
      [`${UUID}/`]: '/',
      [`${UUID}/config`]: ironicIpxeConfig({ deployKernel: `${HTTP}/${UUID}/deploy_kernel`, deployRamdisk: `${HTTP}/${UUID}/deploy_ramdisk`, akiPath: 'no_kernel', ariPath: 'no_ramdisk', appendParams: append }),
      [`${UUID}/deploy_kernel`]: 'agent kernel',
      [`${UUID}/deploy_ramdisk`]: 'agent ramdisk',
      'pxelinux.cfg/': '/',
      ...ironicMacLinks(UUID, MAC, true),
    });
    const tag = info.dnsmasq_tag as string;
    const expected = ironicDnsmasqFiles({ nodeUuid: UUID, macs: [MAC], tag, ipxe: true, bootFile: 'undionly.kpxe', tftpServer: TFTP, scriptUrl: `${HTTP}/boot.ipxe` });
    expect(await readTree(f.hostsDir)).to.deep.equal(expected.hosts);
    expect(await readTree(f.optsDir)).to.deep.equal(expected.opts);
    expect(bootDevices).to.deep.equal([['pxe', false, 'bios']]);
    expect(await readTree(f.tftpRoot)).to.deep.equal(LOADERS);

    await boot.cleanUpRamdisk(ctx);
    expect(await readTree(f.httpRoot)).to.deep.equal({ 'boot.ipxe': ironicBootIpxe(), 'pxelinux.cfg/': '/' });
    expect(await readTree(f.hostsDir)).to.deep.equal(ironicIgnoredHosts([MAC]));
    expect(await readTree(f.optsDir)).to.deep.equal({});
    expect(info).to.deep.equal({});
  });

  it('ipxe, UEFI (the default mode), inspection: snponly.efi and the inspection callback instead of ipa-api-url', async () => {
    const boot = new NetworkBoot(true, { ...f.opts, ipxeTimeoutS: 30 });
    const { ctx, info, bootDevices } = nodeAccess({}, PORTS);
    await boot.prepareRamdisk(ctx, { purpose: 'inspect' });
    const tree = await readTree(f.httpRoot);
    expect(tree[`${UUID}/config`]).to.equal(ironicIpxeConfig({
      deployKernel: `${HTTP}/${UUID}/deploy_kernel`, deployRamdisk: `${HTTP}/${UUID}/deploy_ramdisk`, akiPath: 'no_kernel', ariPath: 'no_ramdisk',
      appendParams: `nofb vga=normal ipa-inspection-callback-url=${API}/v1/continue_inspection`, ipxeTimeoutMs: 30_000,
    }));
    const expected = ironicDnsmasqFiles({ nodeUuid: UUID, macs: [MAC], tag: info.dnsmasq_tag as string, ipxe: true, bootFile: 'snponly.efi', tftpServer: TFTP, scriptUrl: `${HTTP}/boot.ipxe` });
    expect(await readTree(f.optsDir)).to.deep.equal(expected.opts);
    expect(bootDevices).to.deep.equal([['pxe', false, 'uefi']]);
  });

  it('pxe, BIOS: PXELINUX configuration and images in the TFTP root, 01-<mac> links', async () => {
    const boot = new NetworkBoot(false, f.opts);
    const { ctx, info } = nodeAccess({ properties: { capabilities: 'boot_mode:bios' }, driverInfo: { kernel_append_params: '%default% console=ttyS0' } }, PORTS);
    await boot.prepareRamdisk(ctx, { purpose: 'deploy' });
    expect(await readTree(f.tftpRoot)).to.deep.equal({
      ...LOADERS,
      [`${UUID}/`]: '/',
      [`${UUID}/config`]: ironicPxelinuxConfig({
        deployKernel: `${UUID}/deploy_kernel`, deployRamdisk: `${UUID}/deploy_ramdisk`, akiPath: 'no_kernel', ariPath: 'no_ramdisk',
        appendParams: `nofb vga=normal console=ttyS0 ipa-api-url=${API}`,
      }),
      [`${UUID}/deploy_kernel`]: 'agent kernel',
      [`${UUID}/deploy_ramdisk`]: 'agent ramdisk',
      'pxelinux.cfg/': '/',
      ...ironicMacLinks(UUID, MAC, false),
    });
    expect(await readTree(f.httpRoot)).to.deep.equal({});
    const expected = ironicDnsmasqFiles({ nodeUuid: UUID, macs: [MAC], tag: info.dnsmasq_tag as string, ipxe: false, bootFile: 'pxelinux.0', tftpServer: TFTP, scriptUrl: '' });
    expect(await readTree(f.optsDir)).to.deep.equal(expected.opts);
    await boot.cleanUpRamdisk(ctx);
    expect(await readTree(f.tftpRoot)).to.deep.equal({ ...LOADERS, 'pxelinux.cfg/': '/' });
  });

  it('pxe, UEFI: GRUB configuration, and a per-address link for a leased address', async () => {
    await fs.writeFile(path.join(f.root, 'dnsmasq.leases'), `1700000000 ${MAC} 192.0.2.50 node0 *\n`);
    const boot = new NetworkBoot(false, f.opts);
    const { ctx } = nodeAccess({}, PORTS);
    await boot.prepareRamdisk(ctx, { purpose: 'deploy' });
    const tree = await readTree(f.tftpRoot);
    expect(tree[`${UUID}/config`]).to.equal(ironicGrubConfig({
      deployKernel: `${UUID}/deploy_kernel`, deployRamdisk: `${UUID}/deploy_ramdisk`, akiPath: 'no_kernel', ariPath: 'no_ramdisk',
      appendParams: `nofb vga=normal ipa-api-url=${API}`, tftpServer: TFTP,
    }));
    expect(tree['192.0.2.50.conf']).to.equal(`-> ${UUID}/config`);
    await boot.cleanUpRamdisk(ctx);
    expect(await readTree(f.tftpRoot)).to.deep.equal({ ...LOADERS, 'pxelinux.cfg/': '/' });
  });

  it('ipxe, the ramdisk deploy with a boot_iso: the ISO in the node\'s directory, sanboot, every boot from the network', async () => {
    const boot = new NetworkBoot(true, f.opts);
    const iso = pathToFileURL(path.join(f.images, 'os.iso')).href;
    const { ctx, bootDevices } = nodeAccess({ provisionState: 'deploying', instanceInfo: { boot_iso: iso }, properties: { capabilities: 'boot_mode:bios' } }, PORTS);
    await boot.prepareInstance(ctx, { bootIso: iso });
    const tree = await readTree(f.httpRoot);
    expect(tree[`${UUID}/config`]).to.equal(ironicIpxeConfig({
      deployKernel: '', deployRamdisk: '', akiPath: 'no_kernel', ariPath: 'no_ramdisk', appendParams: 'nofb vga=normal',
      bootIsoUrl: `${HTTP}/${UUID}/boot_iso`, target: 'boot_ramdisk',
    }));
    expect(tree[`${UUID}/boot_iso`]).to.equal('os iso');
    expect(bootDevices).to.deep.equal([['pxe', true, 'bios']]);
    await boot.cleanUpInstance(ctx);
    expect(await readTree(f.httpRoot)).to.deep.equal({ 'boot.ipxe': ironicBootIpxe(), 'pxelinux.cfg/': '/' });
  });

  it('ipxe, the ramdisk deploy with a kernel and ramdisk and ramdisk_kernel_arguments', async () => {
    const boot = new NetworkBoot(true, f.opts);
    const kernel = pathToFileURL(path.join(f.images, 'os.kernel')).href;
    const ramdisk = pathToFileURL(path.join(f.images, 'os.initramfs')).href;
    const { ctx } = nodeAccess({ provisionState: 'deploying', instanceInfo: { kernel, ramdisk, ramdisk_kernel_arguments: 'console=ttyS0' } }, PORTS);
    await boot.prepareInstance(ctx, { kernel, ramdisk });
    const tree = await readTree(f.httpRoot);
    expect(tree[`${UUID}/config`]).to.equal(ironicIpxeConfig({
      deployKernel: '', deployRamdisk: '', akiPath: `${HTTP}/${UUID}/kernel`, ariPath: `${HTTP}/${UUID}/ramdisk`, appendParams: 'nofb vga=normal',
      ramdiskOpts: 'console=ttyS0', target: 'boot_ramdisk',
    }));
    expect([tree[`${UUID}/kernel`], tree[`${UUID}/ramdisk`]]).to.deep.equal(['os kernel', 'os ramdisk']);
  });

  it('refuses a node without ports, or without a PXE-enabled one, before writing anything', async () => {
    const boot = new NetworkBoot(true, f.opts);
    for (const [ports, cls, msg] of [
      [[], MissingParameterValue, `Node ${UUID} does not have any port associated with it`],
      [[{ address: MAC, pxeEnabled: false }], InvalidParameterValue, `Node ${UUID} has no port with pxe_enabled set`],
    ] as const) {
      const { ctx } = nodeAccess({}, [...ports]);
      const err = await boot.prepareRamdisk(ctx, { purpose: 'deploy' }).then(() => null, (e: unknown) => e);
      expect(err).to.be.instanceOf(cls);
      expect((err as Error).message).to.include(msg);
      expect(() => boot.validateNode({ uuid: UUID, driverInfo: {}, instanceInfo: {}, properties: {}, ports })).to.throw(cls, msg);
    }
    expect(await readTree(f.httpRoot)).to.deep.equal({});
    expect(await readTree(f.hostsDir)).to.deep.equal({});
  });

  it('a loader missing from the TFTP root: a clear error naming it and the option, nothing written', async () => {
    await fs.rm(path.join(f.tftpRoot, 'snponly.efi'));
    const boot = new NetworkBoot(true, f.opts);
    const { ctx, bootDevices } = nodeAccess({}, PORTS);
    const err = await boot.prepareRamdisk(ctx, { purpose: 'deploy' }).then(() => null, (e: unknown) => e);
    expect(err).to.be.instanceOf(BootFilesFailed);
    expect((err as Error).message).to.equal(
      `The boot loader snponly.efi that DHCP hands to node ${UUID} (uefi, ipxe boot) is not in [pxe] tftp_root ${f.tftpRoot}: put it there (${path.join(f.tftpRoot, 'snponly.efi')}) or name another one in [pxe] uefi_ipxe_bootfile_name.`,
    );
    expect(await readTree(f.httpRoot)).to.deep.equal({});
    expect(bootDevices).to.deep.equal([]);
  });

  it('a hosts directory that cannot be written: DhcpUpdateFailed, and the boot files written before it are gone', async () => {
    await fs.rm(f.hostsDir, { recursive: true });
    await fs.writeFile(f.hostsDir, 'not a directory');
    const boot = new NetworkBoot(true, f.opts);
    const { ctx, info, bootDevices } = nodeAccess({}, PORTS);
    const err = await boot.prepareRamdisk(ctx, { purpose: 'deploy' }).then(() => null, (e: unknown) => e);
    expect(err).to.be.instanceOf(DhcpUpdateFailed);
    expect(await readTree(f.httpRoot)).to.deep.equal({ 'boot.ipxe': ironicBootIpxe(), 'pxelinux.cfg/': '/' });
    expect(await readTree(f.optsDir)).to.deep.equal({});
    expect(info).to.deep.equal({});
    expect(bootDevices).to.deep.equal([]);
  });

  it('a deploy kernel that cannot be had: ImageDownloadFailed, nothing written', async () => {
    const boot = new NetworkBoot(true, { ...f.opts, agentBoot: { ...f.opts.agentBoot, deployKernel: pathToFileURL(path.join(f.images, 'missing')).href } });
    const { ctx } = nodeAccess({}, PORTS);
    const err = await boot.prepareRamdisk(ctx, { purpose: 'deploy' }).then(() => null, (e: unknown) => e);
    expect(err).to.be.instanceOf(ImageDownloadFailed);
    expect(await readTree(f.httpRoot)).to.deep.equal({});
    expect(await readTree(f.hostsDir)).to.deep.equal({});
  });

  it('Ironic\'s message when no deploy kernel and ramdisk are known', () => {
    const boot = new NetworkBoot(true, { ...f.opts, agentBoot: { ...f.opts.agentBoot, deployKernel: '', deployRamdisk: '' } });
    expect(() => boot.validateRamdisk(UUID, {})).to.throw(MissingParameterValue,
      "Cannot validate PXE bootloader. Some parameters were missing in node's driver_info and configuration. Missing are: ['deploy_kernel', 'deploy_ramdisk']");
    expect(() => boot.validateRamdisk(UUID, { deploy_kernel: 'http://x/k', deploy_ramdisk: 'http://x/r' })).to.not.throw();
  });
});
