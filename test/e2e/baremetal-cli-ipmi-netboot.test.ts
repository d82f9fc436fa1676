/**
 * The real `baremetal` CLI drives an `ipmi` node with `boot_interface=ipxe` through in-band
 * inspection, cleaning (provide), a `direct` deploy and undeploy, on a real `galvanic
 * all-in-one` with the dnsmasq DHCP provider. Behind a real IPMI BMC (ipmi_sim) sits a machine
 * that boots from the network as firmware and iPXE do (sim/netboot): it gets its boot offer
 * from the dnsmasq files Galvanic wrote, its loader from the TFTP root, boot.ipxe and its
 * node's script from the HTTP root, fetches the kernel and ramdisk they name, and runs the
 * simulated agent with the kernel parameters it was given. At each boot the files are compared,
 * one by one, with what Ironic writes for the same node; after each boot phase none is left.
 * Then bad input: a MAC on two nodes, no PXE-enabled port, a missing loader, an unwritable
 * dhcp_hostsdir.
 */
import { expect } from 'chai';
import fs from 'node:fs/promises';
import path from 'node:path';
import { baremetalCli, requireCli } from '../helpers/baremetal.js';
import { requireIpmiSim } from '../helpers/ipmi-sim.js';
import { AGENT_TEST_ENV, startImageServer, type ImageServer } from '../helpers/agent-deploy.js';
import { startGalvanicOnFreshDatabase, type GalvanicOnFreshDatabase } from '../helpers/app.js';
import { describeBoot, startIpmiNetbootLab, type IpmiNetbootLab, type LabMachine } from '../helpers/ipmi-netboot.js';
import {
  ironicBootIpxe, ironicDnsmasqFiles, ironicIgnoredHosts, ironicIpxeConfig, ironicMacLinks, readTree, type Tree,
} from '../helpers/ironic-netboot.js';
import { until } from '../helpers/until.js';

describe('baremetal CLI: an ipmi node booting from the network (ipxe, dnsmasq) (e2e)', function () {
  this.timeout(600_000);
  let lab: IpmiNetbootLab | undefined;
  let images: ImageServer | undefined;
  let galvanic: GalvanicOnFreshDatabase | undefined;
  const { ok, run, show, settle } = baremetalCli(() => galvanic!, 150_000);

  before(async function () {
    requireCli(this, 'baremetal CLI network boot tests');
    requireIpmiSim(this);
    images = await startImageServer();
    lab = await startIpmiNetbootLab({ count: 3 });
    galvanic = await startGalvanicOnFreshDatabase({
      env: { ...AGENT_TEST_ENV, ...lab.env, GALVANIC_DEFAULT__ENABLED_INSPECT_INTERFACES: 'agent,no-inspect' },
    });
  });

  after(async function () {
    this.timeout(60_000);
    await lab?.stop();
    await galvanic?.shutdownCleanly();
    await images?.close();
  });

  /** `node create` of an ipmi node with the ipxe boot interface for a lab machine, and a port for its first NIC. */
  async function enroll(name: string, m: LabMachine, portArgs: string[] = []): Promise<string> {
    const created = JSON.parse(await ok(
      'node', 'create', '--driver', 'ipmi', '--name', name, '--boot-interface', 'ipxe', '--deploy-interface', 'direct', '--inspect-interface', 'agent',
      '--driver-info', `ipmi_address=${m.bmc.host}`, '--driver-info', `ipmi_port=${m.bmc.port}`, '--driver-info', 'ipmi_username=admin',
      '--driver-info', 'ipmi_password=password', '--driver-info', 'ipmi_cipher_suite=3',
      '--driver-info', `deploy_kernel=${images!.kernelUrl}`, '--driver-info', `deploy_ramdisk=${images!.ramdiskUrl}`, '-f', 'json',
    )) as { uuid: string; boot_interface: string };
    expect(created.boot_interface).to.equal('ipxe');
    await ok('port', 'create', m.macs[0], '--node', created.uuid, ...portArgs);
    return created.uuid;
  }

  /** What Galvanic has written for network boot: the HTTP root, dnsmasq's hosts and options. */
  async function written(): Promise<{ http: Tree; hosts: Tree; opts: Tree }> {
    return { http: await readTree(lab!.dirs.httpRoot), hosts: await readTree(lab!.dirs.hostsDir), opts: await readTree(lab!.dirs.optsDir) };
  }

  /** Nothing of a node's boot left: boot.ipxe (shared) and the MAC directory only; its MACs ignored; no options. */
  async function expectNothingLeft(macs: string[]): Promise<void> {
    const w = await written();
    expect(w.http).to.deep.equal({ 'boot.ipxe': ironicBootIpxe(), 'pxelinux.cfg/': '/' });
    expect(w.hosts).to.deep.include(ironicIgnoredHosts(macs));
    expect(w.opts).to.deep.equal({});
  }

  it('inspects, provides, deploys (direct) and undeploys; Ironic\'s files at each boot, none after', async () => {
    const m = lab!.machines[0];
    const uuid = await enroll('netboot-0', m);
    await ok('node', 'manage', uuid, '--wait', '60');

    // An agent that never comes up keeps the node in inspect wait: the files can be read.
    m.host.agent.faults = { noBoot: true };
    await ok('node', 'inspect', uuid);
    await until(() => `inspect wait and a network boot: ${describeBoot(m.host.lastBoot)}`, async () => {
      await m.settled();
      return (await show<{ provision_state: string }>(uuid, 'provision_state')).provision_state === 'inspect wait' && m.host.lastBoot?.outcome === 'agent';
    }, 60_000, 100);
    const { driver_internal_info: dii } = await show<{ driver_internal_info: Record<string, unknown> }>(uuid, 'driver_internal_info');
    const tag = dii.dnsmasq_tag as string;
    expect(tag).to.be.a('string');
    const http = lab!.httpUrl;
    const dnsmasq = ironicDnsmasqFiles({ nodeUuid: uuid, macs: [m.macs[0]], tag, ipxe: true, bootFile: 'snponly.efi', tftpServer: '127.0.0.1', scriptUrl: `${http}/boot.ipxe` });
    expect(await written()).to.deep.equal({
      http: {
        'boot.ipxe': ironicBootIpxe(),
        [`${uuid}/`]: '/',
        [`${uuid}/config`]: ironicIpxeConfig({
          deployKernel: `${http}/${uuid}/deploy_kernel`, deployRamdisk: `${http}/${uuid}/deploy_ramdisk`, akiPath: 'no_kernel', ariPath: 'no_ramdisk',
          appendParams: `nofb vga=normal ipa-inspection-callback-url=${galvanic!.url}/v1/continue_inspection`,
        }),
        [`${uuid}/deploy_kernel`]: 'ipa.kernel bytes',
        [`${uuid}/deploy_ramdisk`]: 'ipa.initramfs bytes',
        'pxelinux.cfg/': '/',
        ...ironicMacLinks(uuid, m.macs[0], true),
      },
      hosts: dnsmasq.hosts,
      opts: dnsmasq.opts,
    });
    // The machine booted what those files say, all the way to the agent's kernel.
    const boot = m.host.lastBoot!;
    expect(boot.device, describeBoot(boot)).to.equal('pxe');
    expect(boot.steps, describeBoot(boot)).to.include.members([
      `DHCP ${m.macs[0]}: boot file snponly.efi from 127.0.0.1`,
      'TFTP snponly.efi: read',
      `iPXE DHCP ${m.macs[0]}: ${http}/boot.ipxe`,
      `iPXE: chain ${http}/pxelinux.cfg/52-54-00-00-00-01: fetched`,
    ]);
    expect(boot.cmdline).to.equal(`selinux=0 troubleshoot=0 text nofb vga=normal ipa-inspection-callback-url=${galvanic!.url}/v1/continue_inspection BOOTIF=${m.macs[0]} initrd=deploy_ramdisk`);

    await ok('node', 'abort', uuid);
    await until('the aborted inspection to be torn down', async () => {
      const n = await show<{ provision_state: string; target_provision_state: string | null; reservation: string | null }>(uuid, 'provision_state', 'target_provision_state', 'reservation');
      return n.provision_state === 'inspect failed' && n.target_provision_state === null && n.reservation === null;
    }, 30_000, 100);
    await expectNothingLeft([m.macs[0]]);
    expect((await show<{ driver_internal_info: Record<string, unknown> }>(uuid, 'driver_internal_info')).driver_internal_info).to.not.have.property('dnsmasq_tag');

    m.host.agent.faults = {};
    await ok('node', 'manage', uuid, '--wait', '60');
    await ok('node', 'inspect', uuid, '--wait', '90');
    const inspected = await show<{ provision_state: string; last_error: string | null; properties: Record<string, unknown> }>(uuid, 'provision_state', 'last_error', 'properties');
    expect(inspected, describeBoot(m.host.lastBoot)).to.deep.include({ provision_state: 'manageable', last_error: null });
    expect(inspected.properties).to.deep.include({ cpu_arch: 'x86_64' });
    expect(m.host.agent.witness().inspectionStatuses).to.deep.equal({ 202: 1 });
    await expectNothingLeft([m.macs[0]]);

    // Cleaning's files, held in clean wait the same way: the tag survives the cleaning's own
    // writes of driver_internal_info, and the agent is told the API's URL.
    m.host.agent.faults = { noBoot: true };
    await ok('node', 'provide', uuid);
    await until(() => `clean wait and a network boot: ${describeBoot(m.host.lastBoot)}`, async () => {
      await m.settled();
      return (await show<{ provision_state: string }>(uuid, 'provision_state')).provision_state === 'clean wait' && m.host.boots.length === 3;
    }, 60_000, 100);
    const cleaning = await show<{ driver_internal_info: Record<string, unknown> }>(uuid, 'driver_internal_info');
    const cleaningTag = cleaning.driver_internal_info.dnsmasq_tag as string;
    expect(cleaningTag).to.be.a('string').and.not.equal(tag);
    const cleaningFiles = await written();
    expect(cleaningFiles.http[`${uuid}/config`]).to.equal(ironicIpxeConfig({
      deployKernel: `${http}/${uuid}/deploy_kernel`, deployRamdisk: `${http}/${uuid}/deploy_ramdisk`, akiPath: 'no_kernel', ariPath: 'no_ramdisk',
      appendParams: `nofb vga=normal ipa-api-url=${galvanic!.url}`,
    }));
    expect(cleaningFiles.hosts).to.deep.equal(ironicDnsmasqFiles({ nodeUuid: uuid, macs: [m.macs[0]], tag: cleaningTag, ipxe: true, bootFile: 'snponly.efi', tftpServer: '127.0.0.1', scriptUrl: `${http}/boot.ipxe` }).hosts);
    await ok('node', 'abort', uuid);
    await until('the aborted cleaning to be torn down', async () => {
      const n = await show<{ provision_state: string; target_provision_state: string | null; reservation: string | null }>(uuid, 'provision_state', 'target_provision_state', 'reservation');
      return n.provision_state === 'clean failed' && n.target_provision_state === null && n.reservation === null;
    }, 30_000, 100);
    await expectNothingLeft([m.macs[0]]);
    m.host.agent.faults = {};
    await ok('node', 'manage', uuid, '--wait', '60');

    expect(await settle('provide', uuid)).to.deep.include({ provision_state: 'available', last_error: null });
    expect(m.host.lastBoot!.cmdline).to.include(`ipa-api-url=${galvanic!.url}`);
    expect(m.host.agent.witness().received).to.have.property('clean.execute_clean_step/erase_devices_metadata');
    await expectNothingLeft([m.macs[0]]);

    await ok('node', 'set', uuid, '--instance-info', `image_source=${images!.image.url}`, '--instance-info', `image_checksum=${images!.image.md5}`);
    await ok('node', 'deploy', uuid, '--wait', '150');
    expect(await show(uuid, 'provision_state', 'power_state', 'last_error')).to.deep.equal({ provision_state: 'active', power_state: 'power on', last_error: null });
    await m.settled();
    const w = m.host.agent.witness();
    expect(w.disk?.sha256).to.equal(images!.image.sha256);
    expect(w.instance).to.deep.equal({ running: true, imageUrl: images!.image.url });
    expect(describeBoot(m.host.lastBoot)).to.match(/^default → disk/);
    await expectNothingLeft([m.macs[0]]);

    expect(await settle('undeploy', uuid)).to.deep.include({ provision_state: 'available', last_error: null });
    await m.settled();
    await expectNothingLeft([m.macs[0]]);
    expect(await m.bmc.power()).to.equal(0);

    // What the machine found set at each power-on, in order: the boot device always came first.
    expect(m.host.boots.map((b) => `${b.device} → ${b.outcome}`)).to.deep.equal([
      'pxe → agent', // the inspection whose agent never came up
      'pxe → agent', // the inspection
      'pxe → agent', // the cleaning whose agent never came up
      'pxe → agent', // cleaning (provide)
      'pxe → agent', // the deploy
      'default → disk', // the instance
      'pxe → agent', // cleaning after undeploy
    ]);
  });

  it('a MAC on a second node is refused, and the first node\'s entries stay', async () => {
    const m = lab!.machines[0];
    const other = JSON.parse(await ok('node', 'create', '--driver', 'ipmi', '--name', 'netboot-dup', '--boot-interface', 'ipxe', '-f', 'json')) as { uuid: string };
    const before = await written();
    for (const mac of [m.macs[0], m.macs[0].toUpperCase()]) {
      const r = await run('port', 'create', mac, '--node', other.uuid);
      expect(r.code).to.not.equal(0);
      expect(r.stderr).to.include(`A port with MAC address ${m.macs[0]} already exists`);
    }
    expect(await written()).to.deep.equal(before);
  });

  it('a node with no PXE-enabled port: validation says so, inspection is refused, a cleaning fails with it, nothing written', async () => {
    const m = lab!.machines[1];
    const uuid = await enroll('netboot-nopxe', m, ['--pxe-enabled', 'false']);
    const validation = JSON.parse(await ok('node', 'validate', uuid, '-f', 'json')) as Array<{ Interface: string; Result: boolean; Reason: string }>;
    const reason = `Node ${uuid} has no port with pxe_enabled set: no MAC address of it would be offered a network boot.`;
    expect(validation.find((v) => v.Interface === 'boot')).to.deep.equal({ Interface: 'boot', Result: false, Reason: reason });
    await ok('node', 'manage', uuid, '--wait', '60');
    const refused = await run('node', 'inspect', uuid);
    expect(refused.code).to.not.equal(0);
    expect(refused.stderr).to.include(reason);
    const before = await written();
    expect(await settle('provide', uuid)).to.deep.include({ provision_state: 'clean failed' });
    expect((await show<{ last_error: string }>(uuid, 'last_error')).last_error).to.include(reason);
    expect(await written()).to.deep.equal(before);
    expect(m.host.boots).to.deep.equal([]);
  });

  it('a loader missing from the TFTP root, then an unwritable dhcp_hostsdir: a clear last_error, nothing left', async () => {
    const m = lab!.machines[2];
    const uuid = await enroll('netboot-bad-dirs', m);
    await ok('node', 'manage', uuid, '--wait', '60');
    const loader = path.join(lab!.dirs.tftpRoot, 'snponly.efi');
    const saved = await fs.readFile(loader);
    await fs.rm(loader);
    const before = await written();
    try {
      expect(await settle('provide', uuid)).to.deep.include({ provision_state: 'clean failed' });
      expect((await show<{ last_error: string }>(uuid, 'last_error')).last_error).to.include(
        `The boot loader snponly.efi that DHCP hands to node ${uuid} (uefi, ipxe boot) is not in [pxe] tftp_root ${lab!.dirs.tftpRoot}`,
      );
      expect(await written()).to.deep.equal(before);
    } finally {
      await fs.writeFile(loader, saved);
    }

    const hostsDir = lab!.dirs.hostsDir;
    await fs.rename(hostsDir, `${hostsDir}.away`);
    await fs.writeFile(hostsDir, 'not a directory');
    try {
      await ok('node', 'manage', uuid, '--wait', '60');
      expect(await settle('provide', uuid)).to.deep.include({ provision_state: 'clean failed' });
      const { last_error: lastError, driver_internal_info: dii } = await show<{ last_error: string; driver_internal_info: Record<string, unknown> }>(uuid, 'last_error', 'driver_internal_info');
      expect(lastError).to.include(`Failed to write the DHCP options of node ${uuid} for dnsmasq to ${path.join(hostsDir, `ironic-${m.macs[0]}.conf`)}: ENOTDIR`);
      expect(dii).to.not.have.property('dnsmasq_tag');
      const after = await written();
      expect(after.http).to.deep.equal(before.http);
      expect(after.opts).to.deep.equal(before.opts);
    } finally {
      await fs.rm(hostsDir);
      await fs.rename(`${hostsDir}.away`, hostsDir);
    }
    expect(m.host.boots).to.deep.equal([]);
  });
});
