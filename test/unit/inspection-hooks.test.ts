/**
 * Ironic's inspection hooks as the agent inspect interface runs them: which ports an inventory
 * adds, keeps and updates under [inspector] add_ports / keep_ports, the properties the hooks
 * set, and Ironic's messages for what it refuses.
 */
import { expect } from 'chai';
import { HardwareInspectionFailure } from '../../common/errors.js';
import { parseHooks, pyRepr, runInspectionHooks, type HookOptions } from '../../drivers/inspection-hooks.js';

const NODE = { uuid: '1be26c0b-03f2-4d2e-ae87-c02d7f33c123', properties: { capabilities: 'boot_mode:bios,foo:bar' } };
const DEFAULT = 'ramdisk-error,validate-interfaces,ports,architecture';
const opts = (o: Partial<HookOptions> = {}): HookOptions => ({
  hooks: parseHooks(DEFAULT, DEFAULT), addPorts: 'pxe', keepPorts: 'all', updatePxeEnabled: true, diskPartitioningSpacing: true, ...o,
});
const inventory = (extra: Record<string, unknown> = {}) => ({
  interfaces: [
    { name: 'eth0', mac_address: 'AA:BB:CC:DD:EE:01', ipv4_address: '192.0.2.1' },
    { name: 'eth1', mac_address: 'aa:bb:cc:dd:ee:02', ipv4_address: null },
    { name: 'lo', mac_address: '00:00:00:00:00:00', ipv4_address: '127.0.0.1' },
    { name: 'bad', mac_address: 'not-a-mac' },
  ],
  cpu: { count: 4, architecture: 'aarch64' },
  memory: { physical_mb: 2048 },
  boot: { current_boot_mode: 'uefi' },
  disks: [{ name: '/dev/sda', size: 10 * 2 ** 30, serial: 'ABC' }, { name: '/dev/sdb', size: 100 * 2 ** 30, serial: 'DEF' }],
  ...extra,
});

function failure(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    expect(err).to.be.instanceOf(HardwareInspectionFailure);
    return (err as Error).message;
  }
  throw new Error('no failure');
}

describe('inspection hooks', () => {
  it('expands $default_hooks and refuses unknown hooks and hooks before their dependencies', () => {
    expect(parseHooks('$default_hooks,memory', DEFAULT)).to.deep.equal([...DEFAULT.split(','), 'memory']);
    expect(() => parseHooks('$default_hooks,bogus', DEFAULT)).to.throw('The following hook(s) are missing or failed to load: bogus');
    expect(() => parseHooks('ports,validate-interfaces', DEFAULT)).to.throw('Hook ports requires these missing hooks to be enabled before it: validate-interfaces');
  });

  it('with the default hooks sets only cpu_arch and adds a port for every valid, non-loopback NIC when no PXE NIC is named', () => {
    const out = runInspectionHooks(NODE, inventory(), {}, [], opts());
    expect(out.properties).to.deep.equal({ ...NODE.properties, cpu_arch: 'aarch64' });
    expect(out.createPorts).to.deep.equal([
      { address: 'aa:bb:cc:dd:ee:01', pxeEnabled: false, extra: {} },
      { address: 'aa:bb:cc:dd:ee:02', pxeEnabled: false, extra: {} },
    ]);
    expect(out.pluginData.macs).to.deep.equal(['aa:bb:cc:dd:ee:01', 'aa:bb:cc:dd:ee:02']);
    expect(Object.keys(out.pluginData.all_interfaces as object)).to.deep.equal(['eth0', 'eth1', 'lo']);
  });

  it('add_ports: pxe keeps the PXE NIC only (pxelinux form too), active those with an address, disabled none', () => {
    const pxe = runInspectionHooks(NODE, inventory({ boot: { pxe_interface: '01-aa-bb-cc-dd-ee-02' } }), {}, [], opts());
    expect(pxe.createPorts).to.deep.equal([{ address: 'aa:bb:cc:dd:ee:02', pxeEnabled: true, extra: {} }]);
    expect(runInspectionHooks(NODE, inventory(), {}, [], opts({ addPorts: 'active' })).createPorts.map((p) => p.address)).to.deep.equal(['aa:bb:cc:dd:ee:01']);
    expect(runInspectionHooks(NODE, inventory(), {}, [], opts({ addPorts: 'disabled' })).createPorts).to.deep.equal([]);
  });

  it('keep_ports: present deletes ports whose MAC the inventory lacks, added those add_ports did not select; pxe_enabled follows the inventory', () => {
    const ports = [
      { id: 1, address: 'aa:bb:cc:dd:ee:01', pxeEnabled: true, extra: {} },
      { id: 2, address: 'aa:bb:cc:dd:ee:02', pxeEnabled: true, extra: {} },
      { id: 3, address: 'aa:bb:cc:dd:ee:99', pxeEnabled: true, extra: {} },
    ];
    const inv = inventory({ boot: { pxe_interface: 'aa:bb:cc:dd:ee:01' } });
    const all = runInspectionHooks(NODE, inv, {}, ports, opts());
    expect(all.deletePortIds).to.deep.equal([]);
    expect(all.updatePorts).to.deep.equal([{ id: 2, pxeEnabled: false }, { id: 3, pxeEnabled: false }]);
    expect(runInspectionHooks(NODE, inv, {}, ports, opts({ keepPorts: 'present' })).deletePortIds).to.deep.equal([3]);
    expect(runInspectionHooks(NODE, inv, {}, ports, opts({ keepPorts: 'added' })).deletePortIds).to.deep.equal([2, 3]);
    expect(runInspectionHooks(NODE, inv, {}, ports, opts({ updatePxeEnabled: false })).updatePorts).to.deep.equal([]);
  });

  it('the optional hooks set memory_mb, cpus, the boot_mode capability and local_gb (the root disk less 1 GiB, or the hinted one)', () => {
    const o = opts({ hooks: parseHooks('$default_hooks,memory,cpus,boot-mode,root-device', DEFAULT) });
    const out = runInspectionHooks(NODE, inventory(), { root_disk: { name: '/dev/sda', size: 10 * 2 ** 30 } }, [], o);
    expect(out.properties).to.deep.equal({ capabilities: 'boot_mode:uefi,foo:bar', cpu_arch: 'aarch64', memory_mb: 2048, cpus: 4, local_gb: 9 });
    const hinted = runInspectionHooks({ ...NODE, properties: { root_device: { serial: 'def' } } }, inventory(), {}, [], o);
    expect(hinted.properties.local_gb).to.equal(99);
    expect(runInspectionHooks(NODE, inventory(), {}, [], o).properties.local_gb).to.equal(0);
    expect(failure(() => runInspectionHooks({ ...NODE, properties: { root_device: { serial: 'nope' } } }, inventory(), {}, [], o)))
      .to.equal(`Failed to inspect hardware. Reason: No disks satisfied root device hints for node ${NODE.uuid}`);
  });

  it("fails with Ironic's messages: a ramdisk error, no valid interface, no architecture", () => {
    expect(failure(() => runInspectionHooks(NODE, inventory(), { error: 'boom' }, [], opts()))).to.equal(
      `Failed to inspect hardware. Reason: The following failures happened while running preprocess hooks for node ${NODE.uuid}:\n`
      + 'Error in preprocess hook ramdisk-error: Failed to inspect hardware. Reason: Ramdisk reported error: boom',
    );
    expect(failure(() => runInspectionHooks(NODE, { interfaces: [{ name: 'x', mac_address: 'zz' }] }, {}, [], opts()))).to.equal(
      `Failed to inspect hardware. Reason: The following failures happened while running preprocess hooks for node ${NODE.uuid}:\n`
      + `Unexpected exception InvalidNodeInventory during preprocess hook validate-interfaces: Inventory for node ${NODE.uuid} is invalid: no valid network interfaces`,
    );
    expect(failure(() => runInspectionHooks(NODE, inventory({ cpu: { count: 2 } }), {}, [], opts()))).to.equal(
      `Failed to inspect hardware. Reason: Unexpected exception InvalidNodeInventory during processing for node: ${NODE.uuid}. Error: Inventory for node ${NODE.uuid} is invalid: `
      + `Inventory has malformed or missing CPU architecture information: {'count': 2} for node ${NODE.uuid}.`,
    );
  });

  it('renders values as Python does in those messages', () => {
    expect(pyRepr({ a: [1, 'x', null, true] })).to.equal("{'a': [1, 'x', None, True]}");
  });
});
