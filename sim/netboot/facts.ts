/**
 * What the agent of a network-booting machine reports (IPA's list_hardware_info), for machines
 * that have no Redfish resources to read it from (an IPMI BMC's): a small x86_64 server with
 * the given NICs and one 64 GiB disk, its boot mode, and `boot.pxe_interface` set at each boot
 * from the BOOTIF its boot loader passed.
 */
import type { HostFacts, InventoryDisk } from '../agent/index.js';

const GIB = 1024 ** 3;

export function netbootFacts(opts: { uuid: string; macs: readonly string[]; bootMode: 'uefi' | 'bios'; bmcAddress: string; index?: number }): HostFacts {
  const i = opts.index ?? 0;
  const disk: InventoryDisk = {
    name: '/dev/sda', model: 'SIM SSD', size: 64 * GIB, rotational: false, wwn: `0x5000c500${i.toString(16).padStart(8, '0')}`,
    serial: `SIMNETDISK${String(i).padStart(6, '0')}`, vendor: 'ATA', wwn_with_extension: null, wwn_vendor_extension: null,
    hctl: '0:0:0:0', by_path: '/dev/disk/by-path/pci-0000:00:17.0-ata-1', logical_sectors: 512, physical_sectors: 4096, tran: 'sata',
  };
  const interfaces = opts.macs.map((mac, n) => ({
    name: `eth${n}`, mac_address: mac.toLowerCase(), ipv4_address: `192.0.2.${((i + n) % 250) + 2}`, ipv6_address: null, has_carrier: true,
    lldp: null, vendor: '0x8086', product: '0x10d3', client_id: null, biosdevname: null, speed_mbps: 1000, pci_address: `0000:00:0${3 + n}.0`, driver: 'e1000e',
  }));
  return {
    systemUuid: opts.uuid.toLowerCase(),
    macs: interfaces.map((n) => n.mac_address),
    inventory: {
      interfaces,
      cpu: { model_name: 'Simulated x86_64 CPU', frequency: '2400', count: 4, architecture: 'x86_64', flags: ['fpu', 'sse2', 'lm', 'vmx'], socket_count: 1 },
      disks: [disk],
      memory: { total: 8 * GIB - 512 * 1024 * 1024, physical_mb: 8192 },
      bmc_address: opts.bmcAddress,
      bmc_v6address: '::/0',
      system_vendor: {
        product_name: 'Netboot SIM', serial_number: `NETSIM${String(i).padStart(4, '0')}`, manufacturer: 'Galvanic',
        firmware: { vendor: 'Galvanic', version: '1.0.0', build_date: '01/01/2026' },
      },
      boot: { current_boot_mode: opts.bootMode, pxe_interface: null },
      hostname: `netsim-${i}`,
    },
    rootDisk: disk,
  };
}
