/**
 * Galvanic deploys a real virtual machine with the `ramdisk` deploy interface and a config
 * drive given in its JSON form (API 1.56): a real `galvanic all-in-one` builds the config drive,
 * publishes it in its HTTP root and has the QEMU-backed BMC attach it as the virtual USB stick
 * beside the boot ISO (instance_info boot_iso, made here with Galvanic's ISO builder), in BIOS
 * mode (SeaBIOS). The machine's kernel mounts the config drive and the test ramdisk prints its
 * meta_data.json and user_data on the serial console. Undeploying leaves the machine off, no
 * medium inserted and no file in the HTTP root. Skipped when QEMU or apt are missing, except under CI.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { buildAgentIso } from '../../drivers/image/iso-builder.js';
import { createNode, provision, provisionAndSettle, settled } from '../helpers/provisioning.js';
import { expectNothingLeft, filesUnder, ramdiskReport, vmLabGalvanic, vmState, waitForConsole } from '../helpers/vm-lab.js';

describe('Galvanic deploys a real VM with the ramdisk interface and a config drive it built, under SeaBIOS (e2e)', function () {
  this.timeout(600_000);
  const lab = vmLabGalvanic('VM ramdisk deploy test');
  const metaData = { hostname: 'vm-deploy.example.org', public_keys: { lab: 'ssh-ed25519 AAAAC3Nz lab@example.org' }, meta: { role: 'vm-lab' } };
  const userData = '#cloud-config\nruncmd:\n  - echo hello from the VM lab\n';

  before(async () => {
    const dir = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'vm-deploy-iso-'));
    try {
      const iso = path.join(dir, 'boot.iso');
      await buildAgentIso({ kernel: lab.ramdisk.kernel, ramdisk: lab.ramdisk.initrd, cmdline: 'console=ttyS0 vmlab.test=ramdisk-deploy', output: iso });
      lab.serve('boot.iso', await fs.promises.readFile(iso));
    } finally {
      await fs.promises.rm(dir, { recursive: true, force: true });
    }
  });

  it('boots the ISO with the config drive on the USB stick; the machine reads it; undeploy leaves nothing', async () => {
    const { api, bmc } = lab;
    const node = await createNode(api, {
      name: 'vm-deploy', driver: 'redfish', boot_interface: 'redfish-virtual-media', deploy_interface: 'ramdisk', automated_clean: false,
      driver_info: { redfish_address: bmc, redfish_username: 'admin', redfish_password: 'password' },
      instance_info: { boot_iso: `${lab.files}/boot.iso` },
      properties: { capabilities: 'boot_mode:bios' },
    });
    expect((await provisionAndSettle(api, node.uuid, 'manage')).provision_state).to.equal('manageable');
    expect((await provisionAndSettle(api, node.uuid, 'provide')).provision_state).to.equal('available');

    const started = Date.now();
    await provision(api, node.uuid, 'active', { configdrive: { meta_data: metaData, user_data: userData } });
    const active = await settled(api, node.uuid, 120_000);
    expect(active, JSON.stringify(active)).to.deep.include({ provision_state: 'active', last_error: null });
    const out = await waitForConsole(bmc, /vmlab: (no ipa-api-url|lookup)/, { what: 'the ramdisk past its config drive' });
    process.stderr.write(`      deploy to the config drive read (SeaBIOS): ${Date.now() - started} ms\n`);

    expect(out).to.include('power on: boot cd (bios)');
    expect(out).to.include('SeaBIOS');
    const report = ramdiskReport(out);
    expect(report.params).to.deep.include({ console: 'ttyS0', 'vmlab.test': 'ramdisk-deploy' });
    expect(report.configDrive, 'the config drive was not found by the machine').to.match(/^\/dev\/sd[a-z]$/);
    // Galvanic's build_configdrive adds the node's uuid and name to the meta data.
    expect(JSON.parse(report.files['openstack/latest/meta_data.json'] ?? 'null')).to.deep.equal({ ...metaData, uuid: node.uuid, name: 'vm-deploy' });
    expect(report.files['openstack/latest/user_data']).to.equal(userData);

    const vm = await vmState(bmc);
    expect(vm).to.deep.include({ running: true, firmware: 'bios', boot: 'cd' });
    expect(vm.media.cd).to.equal(`${lab.files}/boot.iso`);
    expect(vm.media.usb, 'the config drive comes from the HTTP root').to.be.a('string');
    expect(await filesUnder(lab.httpRoot)).to.have.length(1);

    await provision(api, node.uuid, 'deleted');
    const undeployed = await settled(api, node.uuid, 120_000);
    expect(undeployed, JSON.stringify(undeployed)).to.deep.include({ provision_state: 'available', last_error: null });
    await expectNothingLeft(lab, node.uuid);
  });
});
