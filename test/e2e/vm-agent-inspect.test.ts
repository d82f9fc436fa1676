/**
 * Galvanic inspects a real virtual machine in-band: a real `galvanic all-in-one` builds the
 * agent ISO from driver_info deploy_kernel and deploy_ramdisk (the test ramdisk, served over
 * HTTP), publishes it in its HTTP root and boots it over Redfish virtual media on the
 * QEMU-backed BMC, in UEFI mode (OVMF). What the machine's serial console shows is checked: the
 * kernel parameters Galvanic put on the ISO, the ramdisk's lookup and heartbeats, and the
 * inventory it posts to the inspection callback, which makes the node manageable with the
 * machine's own memory, CPUs and boot mode. After the inspection the machine is off, no medium
 * is inserted and the HTTP root holds no file. Skipped when QEMU or apt are missing, except under CI.
 */
import { expect } from 'chai';
import { createNode, nodePorts, provision, provisionAndSettle, settled } from '../helpers/provisioning.js';
import { expectNothingLeft, ramdiskReport, vmLabGalvanic, vmState, waitForConsole } from '../helpers/vm-lab.js';

describe('Galvanic inspects a real VM in-band from the agent ISO it built, under OVMF (e2e)', function () {
  this.timeout(600_000);
  const lab = vmLabGalvanic('VM in-band inspection test', {
    GALVANIC_DEFAULT__ENABLED_INSPECT_INTERFACES: 'redfish,agent,no-inspect',
    GALVANIC_INSPECTOR__HOOKS: '$default_hooks,memory,cpus,boot-mode',
  });

  it('boots the ISO; the ramdisk looks itself up, heartbeats and posts its inventory; the node is manageable and nothing is left', async () => {
    const { api, bmc } = lab;
    const node = await createNode(api, {
      name: 'vm-inspect', driver: 'redfish', boot_interface: 'redfish-virtual-media', inspect_interface: 'agent', deploy_interface: 'ramdisk',
      driver_info: {
        redfish_address: bmc, redfish_username: 'admin', redfish_password: 'password',
        deploy_kernel: `${lab.files}/vmlinuz`, deploy_ramdisk: `${lab.files}/initrd.gz`,
        kernel_append_params: 'console=ttyS0 vmlab.test=inspect',
      },
      properties: { capabilities: 'boot_mode:uefi' },
    });
    expect((await provisionAndSettle(api, node.uuid, 'manage')).provision_state).to.equal('manageable');

    const started = Date.now();
    await provision(api, node.uuid, 'inspect');
    const out = await waitForConsole(bmc, /vmlab: inspection /, { what: "the ramdisk's inventory" });
    process.stderr.write(`      inspect to the inventory posted (ISO built, OVMF boot, lookup, two heartbeats): ${Date.now() - started} ms\n`);
    const done = await settled(api, node.uuid, 120_000);
    expect(done, JSON.stringify(done)).to.deep.include({ provision_state: 'manageable', last_error: null });

    const vm = await vmState(bmc);
    expect(out).to.include('power on: boot cd (uefi)');
    expect(out).to.include('BdsDxe');
    const report = ramdiskReport(out);
    expect(report.params).to.deep.include({
      console: 'ttyS0', 'vmlab.test': 'inspect', boot_method: 'vmedia',
      'ipa-api-url': lab.guestApi, 'ipa-inspection-callback-url': `${lab.guestApi}/v1/continue_inspection`,
    });
    expect(report.params.ir_pub_id).to.match(/^[0-9a-f-]{36}$/);
    expect(report.lookups.filter((l) => l.startsWith('ok'))).to.deep.equal([`ok node=${node.uuid} token=yes`]);
    expect(report.heartbeats.slice(0, 2).map((h) => h.ok)).to.deep.equal([true, true]);
    expect(report.inspectionError).to.equal(null);

    // The machine's own facts, through the inspection hooks.
    expect(done.properties).to.deep.include({ memory_mb: 256, cpus: 1, cpu_arch: 'x86_64' });
    expect(String(done.properties.capabilities)).to.include('boot_mode:uefi');
    expect(await nodePorts(api, node.uuid)).to.include(vm.macs[0]);

    // Torn down: the machine off, no medium in the BMC nor in the machine, nothing published.
    await expectNothingLeft(lab, node.uuid);
  });
});
