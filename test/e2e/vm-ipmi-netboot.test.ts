/**
 * A real VM boots from the network through Galvanic, behind a real IPMI BMC: ipmi_sim's chassis
 * control starts QEMU (SeaBIOS, its virtio NIC's iPXE ROM) on a network inside a namespace the
 * test creates, where dnsmasq from Debian (configured from etc/dnsmasq.conf.sample) reads the
 * host and option files Galvanic writes; Galvanic's HTTP root and API are relayed into it.
 *
 * An unknown MAC gets no boot offer. `inspect` of an ipmi node with boot_interface=ipxe: the
 * boot device is set before the power on, iPXE gets boot.ipxe from DHCP, chains to the node's
 * script and boots the test ramdisk with Ironic's kernel parameters, which posts its inventory
 * to the inspection callback: the node is manageable. Cleaning boots it again with ipa-api-url:
 * it looks itself up and heartbeats (it runs no clean steps: the cleaning ends in clean failed,
 * torn down). After each, the host entry says `ignore` and no boot file is left. Under TCG when KVM boots no kernel here.
 */
import { expect } from 'chai';
import { pathToFileURL } from 'node:url';
import fs from 'node:fs/promises';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { requireIpmiSim } from '../helpers/ipmi-sim.js';
import { startGalvanicOnFreshDatabase, type GalvanicOnFreshDatabase } from '../helpers/app.js';
import { createNode, getNode, httpClient, provision, provisionAndSettle, settled, type ApiCall } from '../helpers/provisioning.js';
import { ironicBootIpxe, ironicIgnoredHosts, readTree } from '../helpers/ironic-netboot.js';
import { ramdiskReport, vmAccel } from '../helpers/vm-lab.js';
import { testRamdisk, type TestRamdisk } from '../helpers/vm-ramdisk.js';
import { MARK, requireNetbootVmLab, startVmNetbootLab, type VmNetbootLab } from '../helpers/vm-netboot-lab.js';
import { until } from '../helpers/until.js';

const run = promisify(execFile);

describe('a VM behind ipmi_sim boots iPXE from the network: dnsmasq, Galvanic\'s script, the test ramdisk (e2e)', function () {
  this.timeout(900_000);
  let lab: VmNetbootLab | undefined;
  let galvanic: GalvanicOnFreshDatabase | undefined;
  let ramdisk: TestRamdisk | undefined;
  let api: ApiCall;

  before(async function () {
    requireNetbootVmLab(this, 'VM network boot test');
    requireIpmiSim(this);
    ramdisk = await testRamdisk();
    const { accel } = await vmAccel(ramdisk.kernel);
    lab = await startVmNetbootLab({ accel });
    galvanic = await startGalvanicOnFreshDatabase({
      port: lab.apiPort,
      env: {
        ...lab.env,
        GALVANIC_DEFAULT__ENABLED_INSPECT_INTERFACES: 'agent,no-inspect',
        GALVANIC_INSPECTOR__HOOKS: '$default_hooks,memory,cpus',
        GALVANIC_CONDUCTOR__SYNC_POWER_STATE_INTERVAL: '0',
        GALVANIC_CONDUCTOR__CHECK_PROVISION_STATE_INTERVAL: '2',
        GALVANIC_API__RAMDISK_HEARTBEAT_TIMEOUT: '10',
      },
    });
    api = httpClient(galvanic.url);
  });

  after(async function () {
    this.timeout(60_000);
    await galvanic?.shutdownCleanly();
    await lab?.stop();
  });

  /** The serial console since the last power on. */
  async function lastBoot(): Promise<string> {
    const text = await lab!.console();
    return text.slice(text.lastIndexOf(MARK));
  }

  async function ipmitool(...args: string[]): Promise<void> {
    const b = lab!.bmc;
    await run('ipmitool', ['-I', 'lanplus', '-C', '3', '-H', b.host, '-p', String(b.port), '-U', b.username, '-E', ...args], { env: { PATH: process.env.PATH, IPMI_PASSWORD: b.password } });
  }

  /** Nothing of a boot left: boot.ipxe (shared) and the MAC directory only; the MAC ignored; no options. */
  async function expectNothingLeft(): Promise<void> {
    expect(await readTree(lab!.dirs.httpRoot)).to.deep.equal({ 'boot.ipxe': ironicBootIpxe(), 'pxelinux.cfg/': '/' });
    expect(await readTree(lab!.dirs.hostsDir)).to.deep.equal(ironicIgnoredHosts([lab!.macs[0]]));
    expect(await readTree(lab!.dirs.optsDir)).to.deep.equal({});
  }

  it('a MAC that Galvanic has written no entry for gets no boot offer', async () => {
    await ipmitool('chassis', 'bootdev', 'pxe');
    await ipmitool('power', 'on');
    const log = await until('dnsmasq to ignore the unknown MAC', async () => {
      const text = await fs.readFile(lab!.dirs.dnsmasqLog, 'utf8');
      return new RegExp(`DHCPDISCOVER\\(nbbr0\\) ${lab!.macs[0]} ignored`).test(text) && text;
    }, 180_000, 500);
    expect(log).to.not.match(new RegExp(`DHCPOFFER\\(nbbr0\\) \\S+ ${lab!.macs[0]}`));
    await ipmitool('power', 'off');
    await until('the VM to stop', () => !lab!.vmRunning(), 30_000, 200);
  });

  it('inspects in-band, then boots it for cleaning: iPXE boots Galvanic\'s script and the ramdisk, which looks itself up and heartbeats; nothing left after each', async () => {
    const node = await createNode(api, {
      name: 'vm-netboot', driver: 'ipmi', boot_interface: 'ipxe', inspect_interface: 'agent', deploy_interface: 'direct',
      driver_info: {
        ...lab!.bmc.driverInfo(),
        deploy_kernel: pathToFileURL(ramdisk!.kernel).href, deploy_ramdisk: pathToFileURL(ramdisk!.initrd).href,
        kernel_append_params: '%default% console=ttyS0',
      },
      properties: { capabilities: 'boot_mode:bios' },
    });
    const port = await api('POST', '/v1/ports', { address: lab!.macs[0], node_uuid: node.uuid });
    expect(port.status, port.body).to.equal(201);
    expect((await provisionAndSettle(api, node.uuid, 'manage')).provision_state).to.equal('manageable');
    const logFrom = (await lab!.bmc.chassisLog()).length;

    const started = Date.now();
    await provision(api, node.uuid, 'inspect');
    const done = await settled(api, node.uuid, 600_000);
    process.stderr.write(`      inspect over the network to manageable: ${Date.now() - started} ms\n`);
    const out = await lastBoot();
    expect(done, `${JSON.stringify(done)}\n${out.slice(-3000)}`).to.deep.include({ provision_state: 'manageable', last_error: null });
    const report = ramdiskReport(out);
    const apiUrl = `http://${lab!.gateway}:${lab!.apiPort}`;
    expect(report.params).to.deep.include({
      console: 'ttyS0', 'ipa-inspection-callback-url': `${apiUrl}/v1/continue_inspection`, BOOTIF: lab!.macs[0], initrd: 'deploy_ramdisk',
    });
    expect(report.params).to.not.have.property('ipa-api-url');
    expect(report.inspectionError).to.equal(null);
    expect(done.properties).to.deep.include({ cpus: 1, cpu_arch: 'x86_64' });

    // iPXE's DHCP request was tagged and answered with Galvanic's script.
    const dhcp = await fs.readFile(lab!.dirs.dnsmasqLog, 'utf8');
    expect(dhcp).to.match(/tags: [^\n]*\bipxe\b/);
    expect(dhcp).to.include(`bootfile-name  http://${lab!.gateway}:${lab!.httpPort}/boot.ipxe`);

    // The boot device was set before the power on.
    const actions = (await lab!.bmc.chassisLog()).slice(logFrom).map((e) => e.action);
    const on = actions.findIndex((a) => a === 'set power 1' || a === 'set reset 1');
    expect(actions.slice(0, on), actions.join(', ')).to.include('set boot pxe');
    await until('the VM to be powered off', () => !lab!.vmRunning(), 60_000, 200);
    await expectNothingLeft();
    expect((await getNode(api, node.uuid)).power_state).to.equal('power off');

    // Cleaning: ipa-api-url; the ramdisk looks itself up and heartbeats. It serves no command
    // API, so the cleaning cannot go on: it is aborted in clean wait, or fails when the conductor
    // finds no agent to ask for its steps; the boot is torn down either way.
    await provision(api, node.uuid, 'provide');
    let seen = '';
    const cleaning = await until(() => `the ramdisk's heartbeat:\n${seen.slice(-2000)}`, async () => {
      seen = await lastBoot();
      const r = ramdiskReport(seen);
      return r.heartbeats.some((h) => h.ok) && r;
    }, 600_000, 1000);
    expect(cleaning.params).to.deep.include({ 'ipa-api-url': apiUrl, BOOTIF: lab!.macs[0] });
    expect(cleaning.lookups.filter((l) => l.startsWith('ok'))).to.deep.equal([`ok node=${node.uuid} token=yes`]);
    if ((await getNode(api, node.uuid)).provision_state === 'clean wait') await api('PUT', `/v1/nodes/${node.uuid}/states/provision`, { target: 'abort' });
    const ended = await settled(api, node.uuid, 120_000);
    expect(ended.provision_state).to.equal('clean failed');
    await until('the VM to be powered off', () => !lab!.vmRunning(), 60_000, 200);
    await expectNothingLeft();
  });
});
