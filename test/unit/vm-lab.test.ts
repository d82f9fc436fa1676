/**
 * The parts of the VM lab that need no virtual machine: QEMU's command line for a power on, the
 * `--qemu` flags of `galvanic sim redfish`, the initramfs archive, and the reading of what the
 * test ramdisk printed.
 */
import { execFileSync } from 'node:child_process';
import { expect } from 'chai';
import { bootOrder, qemuArgs, type MachineSpec } from '../../sim/qemu/machine.js';
import { parseSimArgs, SIM_REDFISH_USAGE } from '../../sim/redfish/cli.js';
import { cpioNewc } from '../helpers/vm-ramdisk.js';
import { lastBoot, ramdiskReport } from '../helpers/vm-lab.js';

const SPEC: MachineSpec = {
  name: 'm0', dir: '/var/lab/bmc,0', qemu: 'qemu-system-x86_64', accel: 'tcg', memoryMiB: 256, cpus: 1,
  uuid: '5a1f0000-0000-4000-8000-000000000000', serial: 'SIM000000', macs: ['02:00:00:00:00:01', '02:00:00:00:00:02'],
  diskBytes: 1 << 30, ovmfCode: '/ovmf/CODE.fd', ovmfVars: '/ovmf/VARS.fd',
};

/** The value following each occurrence of `flag`. */
function values(args: string[], flag: string): string[] {
  return args.flatMap((a, i) => (a === flag ? [args[i + 1]] : []));
}

describe('VM lab: QEMU command line', () => {
  it('puts the booted device first, then disk, CD, USB stick and network', () => {
    expect(bootOrder('cd')).to.deep.equal({ cd: 0, disk: 1, usb: 2, nic0: 3 });
    expect(bootOrder('disk')).to.deep.equal({ disk: 0, cd: 1, usb: 2, nic0: 3 });
    const devices = values(qemuArgs(SPEC, { firmware: 'bios', first: 'usb', media: { cd: null, usb: '/m/usb-1.img' } }), '-device');
    expect(devices.find((d) => d.startsWith('scsi-hd'))).to.include('removable=on').and.include('bootindex=0');
    expect(devices.find((d) => d.startsWith('virtio-blk'))).to.include('bootindex=1');
  });

  it('attaches the media read-only, escapes commas, and adds OVMF only for UEFI', () => {
    const bios = qemuArgs(SPEC, { firmware: 'bios', first: 'cd', media: { cd: '/m/cd,1.img', usb: null } });
    const drives = values(bios, '-drive');
    expect(drives).to.include('if=none,id=cd-drive,readonly=on,media=cdrom,file=/m/cd,,1.img,format=raw');
    expect(drives).to.include('if=none,id=usb-drive,readonly=on');
    expect(drives.some((d) => d.startsWith('if=pflash'))).to.equal(false);
    expect(values(bios, '-chardev')[0]).to.include('path=/var/lab/bmc,,0/serial.log');
    expect(values(bios, '-smbios')[0]).to.include(`uuid=${SPEC.uuid}`);
    expect(values(bios, '-machine')).to.deep.equal(['pc,accel=tcg']);
    expect(bios).to.not.include('-cpu');

    const uefi = qemuArgs({ ...SPEC, accel: 'kvm', agentPort: 40123 }, { firmware: 'uefi', first: 'cd', media: { cd: null, usb: null } });
    expect(values(uefi, '-drive').filter((d) => d.startsWith('if=pflash'))).to.deep.equal([
      'if=pflash,format=raw,unit=0,readonly=on,file=/ovmf/CODE.fd',
      'if=pflash,format=raw,unit=1,file=/var/lab/bmc,,0/OVMF_VARS.fd',
    ]);
    expect(values(uefi, '-cpu')).to.deep.equal(['host']);
    expect(values(uefi, '-netdev')[0]).to.equal('user,id=net0,hostfwd=tcp:127.0.0.1:40123-:9999');
  });
});

describe('VM lab: galvanic sim redfish --qemu', () => {
  it('parses the flags, and refuses them without --qemu or with a bad value', () => {
    expect(parseSimArgs(['--count', '1']).qemu).to.equal(undefined);
    expect(parseSimArgs(['--qemu']).qemu).to.deep.equal({});
    expect(parseSimArgs(['--qemu', '--qemu-accel', 'kvm', '--qemu-memory', '512', '--qemu-dir', '/tmp/lab', '--qemu-agent-port']).qemu).to.deep.equal({ accel: 'kvm', memoryMiB: 512, workDir: '/tmp/lab', agentPort: true });
    expect(() => parseSimArgs(['--qemu-accel', 'kvm'])).to.throw('--qemu-accel needs --qemu');
    expect(() => parseSimArgs(['--qemu', '--qemu-accel', 'hvf'])).to.throw('--qemu-accel must be tcg or kvm');
    expect(() => parseSimArgs(['--qemu', '--qemu-memory', '16'])).to.throw('--qemu-memory');
    for (const flag of ['--qemu', '--qemu-accel', '--qemu-memory', '--qemu-dir', '--qemu-agent-port', '/_sim/vm']) expect(SIM_REDFISH_USAGE).to.include(flag);
  });
});

describe('VM lab: the test ramdisk', () => {
  it('writes a newc archive that cpio reads back', function () {
    const archive = cpioNewc([
      { name: 'bin', mode: 0o040755 },
      { name: 'bin/hello', mode: 0o100755, data: Buffer.from('#!/bin/sh\necho hi\n') },
      { name: 'dev/console', mode: 0o020600, rdev: [5, 1] },
    ]);
    let listing: string;
    try {
      listing = execFileSync('cpio', ['-itv', '--quiet'], { input: archive, encoding: 'utf8' });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return this.skip();
      throw err;
    }
    const lines = listing.trim().split('\n');
    expect(lines).to.have.length(3);
    expect(lines[1]).to.match(/^-rwxr-xr-x .* 18 .* bin\/hello$/);
    expect(lines[2]).to.match(/^crw------- .* 5,\s+1 .* dev\/console$/);
  });

  it('reads what the ramdisk printed: parameters, config drive files, lookups and heartbeats', () => {
    const out = [
      'SeaBIOS', '[galvanic-sim] 2026-01-01T00:00:00.000Z power on: boot cd (bios), cd inserted, usb empty',
      'vmlab: cmdline BOOT_IMAGE=/vmlinuz console=ttyS0 ipa-api-url=http://10.0.2.2:6385 quiet',
      '\u001b[0mvmlab: nic eth0 02:00:00:00:00:01',
      'vmlab: config-drive /dev/sr0',
      `vmlab: file openstack/latest/meta_data.json 11 ${Buffer.from('{"a": "b"}\n').toString('base64')}`,
      'vmlab: file openstack/latest/user_data missing',
      'vmlab: lookup failed: wget: server returned error: HTTP/1.1 404 Not Found',
      'vmlab: lookup ok node=n1 token=yes',
      'vmlab: heartbeat 1 ok',
      'vmlab: heartbeat 2 failed: wget: server returned error: HTTP/1.1 409 Conflict',
    ].join('\n');
    const r = ramdiskReport(lastBoot(`vmlab: cmdline old\n${out}`));
    expect(r.params).to.deep.equal({ BOOT_IMAGE: '/vmlinuz', console: 'ttyS0', 'ipa-api-url': 'http://10.0.2.2:6385' });
    expect(r.nic).to.deep.equal({ name: 'eth0', mac: '02:00:00:00:00:01' });
    expect(r.configDrive).to.equal('/dev/sr0');
    expect(r.files).to.deep.equal({ 'openstack/latest/meta_data.json': '{"a": "b"}\n', 'openstack/latest/user_data': null });
    expect(r.lookups).to.deep.equal(['failed: wget: server returned error: HTTP/1.1 404 Not Found', 'ok node=n1 token=yes']);
    expect(r.heartbeats.map((h) => [h.n, h.ok])).to.deep.equal([[1, true], [2, false]]);
  });
});
