/**
 * The dnsmasq DHCP provider against real directories: the host and option files Ironic's
 * DnsmasqDHCPApi writes, byte for byte; the tag saved before a file names it and dropped at the
 * clean-up; a directory that cannot be written leaves nothing behind.
 */
import { expect } from 'chai';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { DhcpUpdateFailed } from '../../common/errors.js';
import { DnsmasqDhcp, NoDhcp, dhcpProvider, type DhcpOption, type DhcpTarget } from '../../drivers/dhcp.js';
import type { BootPort } from '../../drivers/interfaces.js';

const NODE = '1be26c0b-03f2-4d2e-ae87-c02d7f33c123';
const OPTIONS: DhcpOption[] = [
  { optName: 'tag:!ipxe,67', optValue: 'undionly.kpxe', ipVersion: 4 },
  { optName: 'tag:ipxe,67', optValue: 'http://192.0.2.1:8080/boot.ipxe', ipVersion: 4 },
  { optName: '66', optValue: '192.0.2.1', ipVersion: 4 },
];

/** The conductor's side of a node, in memory: driver_internal_info saves and the ports. */
function target(ports: BootPort[], info: Record<string, unknown> = {}): DhcpTarget & { info: Record<string, unknown>; saves: number } {
  const t = {
    info: { ...info },
    saves: 0,
    get node() {
      return { uuid: NODE, provisionState: 'cleaning', properties: {}, instanceInfo: {}, driverInfo: {}, driverInternalInfo: t.info };
    },
    ports: async () => ports,
    saveInternalInfo: async (patch: Readonly<Record<string, unknown>>) => {
      t.saves++;
      for (const [k, v] of Object.entries(patch)) {
        if (v === null) delete t.info[k];
        else t.info[k] = v;
      }
    },
  };
  return t;
}

async function listing(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const name of await fs.readdir(dir)) out[name] = await fs.readFile(path.join(dir, name), 'utf8');
  return out;
}

describe('dnsmasq DHCP provider', () => {
  let root: string;
  let hostsDir: string;
  let optsDir: string;
  let provider: DnsmasqDhcp;
  const ports: BootPort[] = [
    { address: '52:54:00:12:34:56', pxeEnabled: true },
    { address: '52:54:00:ab:cd:ef', pxeEnabled: true },
    { address: '52:54:00:00:00:01', pxeEnabled: false },
  ];

  beforeEach(async () => {
    root = await fs.mkdtemp(path.join(os.tmpdir(), 'galvanic-dnsmasq-'));
    hostsDir = path.join(root, 'hostsdir.d');
    optsDir = path.join(root, 'optsdir.d');
    await fs.mkdir(hostsDir);
    await fs.mkdir(optsDir);
    provider = new DnsmasqDhcp({ hostsDir, optsDir, leaseFile: path.join(root, 'dnsmasq.leases') });
  });

  afterEach(async () => {
    await fs.rm(root, { recursive: true, force: true });
  });

  it('tags each PXE-enabled MAC and writes the options under the tag, as Ironic does', async () => {
    const t = target(ports);
    await provider.update(t, OPTIONS);
    const tag = t.info.dnsmasq_tag as string;
    expect(tag).to.match(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(await listing(hostsDir)).to.deep.equal({
      'ironic-52:54:00:12:34:56.conf': `52:54:00:12:34:56,set:${tag},set:ironic\n`,
      'ironic-52:54:00:ab:cd:ef.conf': `52:54:00:ab:cd:ef,set:${tag},set:ironic\n`,
    });
    expect(await listing(optsDir)).to.deep.equal({
      [`ironic-${NODE}.conf`]: `tag:${tag},tag:!ipxe,67,undionly.kpxe\ntag:${tag},tag:ipxe,67,http://192.0.2.1:8080/boot.ipxe\ntag:${tag},66,192.0.2.1\n`,
    });
  });

  it('keeps the tag the node has, and saves none then', async () => {
    const t = target(ports, { dnsmasq_tag: 'kept-tag' });
    await provider.update(t, OPTIONS);
    expect(t.saves).to.equal(0);
    expect(await fs.readFile(path.join(hostsDir, 'ironic-52:54:00:12:34:56.conf'), 'utf8')).to.equal('52:54:00:12:34:56,set:kept-tag,set:ironic\n');
  });

  it('cleans up: every MAC ignored, the options file removed, the tag dropped', async () => {
    const t = target(ports);
    await provider.update(t, OPTIONS);
    await provider.clean(t);
    expect(t.info).to.not.have.property('dnsmasq_tag');
    expect(await listing(hostsDir)).to.deep.equal({
      'ironic-52:54:00:12:34:56.conf': '52:54:00:12:34:56,ignore\n',
      'ironic-52:54:00:ab:cd:ef.conf': '52:54:00:ab:cd:ef,ignore\n',
    });
    expect(await listing(optsDir)).to.deep.equal({});
  });

  it('a hosts directory that cannot be written: DhcpUpdateFailed naming the file, no file and no tag left', async () => {
    // A regular file where the directory should be (ENOTDIR) fails as a read-only one does, also for root.
    await fs.rm(hostsDir, { recursive: true });
    await fs.writeFile(hostsDir, 'not a directory');
    const t = target(ports);
    const err = await provider.update(t, OPTIONS).then(() => null, (e: unknown) => e);
    expect(err).to.be.instanceOf(DhcpUpdateFailed);
    expect((err as Error).message).to.include(`Failed to write the DHCP options of node ${NODE} for dnsmasq to ${path.join(hostsDir, 'ironic-52:54:00:12:34:56.conf')}: ENOTDIR`);
    expect(await listing(optsDir)).to.deep.equal({});
    expect(t.info).to.deep.equal({});
  });

  it('a failure after some entries were written sets those back to ignore', async () => {
    // The second MAC's file name is taken by a directory: its rename fails (EISDIR).
    await fs.mkdir(path.join(hostsDir, 'ironic-52:54:00:ab:cd:ef.conf'));
    const t = target(ports);
    const err = await provider.update(t, OPTIONS).then(() => null, (e: unknown) => e);
    expect(err).to.be.instanceOf(DhcpUpdateFailed);
    expect(await fs.readFile(path.join(hostsDir, 'ironic-52:54:00:12:34:56.conf'), 'utf8')).to.equal('52:54:00:12:34:56,ignore\n');
    expect((await fs.readdir(hostsDir)).filter((n) => n.startsWith('.'))).to.deep.equal([]);
    expect(await listing(optsDir)).to.deep.equal({});
  });

  it('reads the addresses of the node\'s PXE MACs from the lease file', async () => {
    await fs.writeFile(path.join(root, 'dnsmasq.leases'), [
      '1700000000 52:54:00:12:34:56 192.0.2.10 node0 01:52:54:00:12:34:56',
      '1700000000 52:54:00:99:99:99 192.0.2.11 other *',
      '1700000000 52:54:00:00:00:01 192.0.2.12 * *',
      '',
    ].join('\n'));
    expect(await provider.ipAddresses(ports)).to.deep.equal(['192.0.2.10']);
    await fs.rm(path.join(root, 'dnsmasq.leases'));
    expect(await provider.ipAddresses(ports)).to.deep.equal([]);
  });

  it('[dhcp] dhcp_provider picks the provider; none writes nothing', async () => {
    const dnsmasq = { dhcp_hostsdir: hostsDir, dhcp_optsdir: optsDir, dhcp_leasefile: '' };
    expect(dhcpProvider({ dhcp: { dhcp_provider: 'dnsmasq' }, dnsmasq })).to.be.instanceOf(DnsmasqDhcp);
    const none = dhcpProvider({ dhcp: { dhcp_provider: 'none' }, dnsmasq });
    expect(none).to.be.instanceOf(NoDhcp);
    expect(none.supportsIpxeTag).to.equal(false);
    const t = target(ports);
    await none.update(t, OPTIONS);
    expect(t.info).to.deep.equal({});
    expect(await listing(hostsDir)).to.deep.equal({});
  });
});
