/**
 * The QEMU-backed Redfish BMC (sim/qemu) with a real virtual machine, driven over Redfish as a
 * conductor drives a server, with a boot ISO and a config drive made here with Galvanic's image
 * builders (a conductor building and publishing them is the other vm-*.test.ts files' business):
 * the machine boots the ISO from the virtual CD in BIOS mode; the test ramdisk shows its kernel
 * parameters, reads the config drive on the virtual USB stick, looks itself up, heartbeats and
 * posts its inventory at a recorder that stands where ipa-api-url points; an eject empties the
 * drive and removes the BMC's download; a restart without an override boots the disk through a
 * QMP reset of the same QEMU; a restart in UEFI mode starts OVMF in a new QEMU; a graceful
 * shutdown the guest ignores ends after the grace period; a QEMU that dies is a system off.
 * Skipped when QEMU or apt are missing, except under CI.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { startRedfishSim, type RedfishSim } from '../../sim/redfish/index.js';
import { requireVmLab, testRamdisk } from '../helpers/vm-ramdisk.js';
import { buildAgentIso } from '../../drivers/image/iso-builder.js';
import { buildConfigdriveImage } from '../../drivers/image/configdrive.js';
import { lastBoot, ramdiskReport, vmAccel, vmConsole, vmState, waitForConsole } from '../helpers/vm-lab.js';
import { until } from '../helpers/until.js';

const AUTH = { authorization: `Basic ${Buffer.from('admin:password').toString('base64')}`, 'content-type': 'application/json' };
const SYSTEM = '/redfish/v1/Systems/System.Embedded.1';
const CD = '/redfish/v1/Managers/BMC/VirtualMedia/Cd';
const USB = '/redfish/v1/Managers/BMC/VirtualMedia/USB';
const NODE = '1be26c0b-03f2-4d2d-ae87-c02d7f33c123';
const GRACE_SECONDS = 2;
/** Waits for QEMU to start or stop: seconds alone, more beside other files' machines under TCG. */
const WAIT_MS = 60_000;

interface Seen {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

describe('QEMU-backed Redfish BMC: a real VM boots a virtual CD (e2e)', function () {
  this.timeout(600_000);
  let dir: string;
  let sim: RedfishSim;
  let server: http.Server;
  let base: string;
  let bmc: string;
  const seen: Seen[] = [];
  const metaData = { uuid: NODE, hostname: 'vm-lab', name: 'vm-lab', public_keys: { k: 'ssh-ed25519 AAAA test' } };
  const userData = '#cloud-config\nhostname: vm-lab\n';

  async function redfish(method: string, p: string, body?: object): Promise<{ status: number; text: string }> {
    const res = await fetch(`${bmc}${p}`, { method, headers: AUTH, body: body ? JSON.stringify(body) : undefined });
    return { status: res.status, text: await res.text() };
  }
  async function ok(method: string, p: string, body?: object): Promise<string> {
    const r = await redfish(method, p, body);
    if (r.status >= 300) throw new Error(`${method} ${p}: ${r.status} ${r.text}`);
    return r.text;
  }

  before(async function () {
    requireVmLab(this, 'QEMU-backed BMC tests');
    const ramdisk = await testRamdisk();
    const { accel } = await vmAccel(ramdisk.kernel);
    dir = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'vm-sim-test-'));
    // One server is the image server (GET /files/…) and stands for the API the ramdisk calls.
    server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const url = req.url ?? '/';
        if (url.startsWith('/files/')) {
          const file = path.join(dir, path.basename(url));
          if (!fs.existsSync(file)) return void res.writeHead(404).end();
          res.writeHead(200, { 'content-length': fs.statSync(file).size });
          return void fs.createReadStream(file).pipe(res);
        }
        seen.push({ method: req.method ?? '', url, headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
        if (url.startsWith('/v1/lookup')) {
          // The first lookup is refused, as Ironic refuses one before the node waits for its agent.
          if (seen.filter((s) => s.url.startsWith('/v1/lookup')).length === 1) return void res.writeHead(404, { 'content-type': 'application/json' }).end('{}');
          return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ node: { uuid: NODE, properties: {} }, config: { agent_token: 'tok-123', heartbeat_timeout: 300 } }));
        }
        if (url.startsWith(`/v1/heartbeat/${NODE}`)) return void res.writeHead(202).end();
        if (url === '/v1/continue_inspection') return void res.writeHead(202, { 'content-type': 'application/json' }).end(JSON.stringify({ uuid: NODE }));
        res.writeHead(404).end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as AddressInfo).port;
    base = `http://127.0.0.1:${port}`;
    // The guest reaches the host's loopback as 10.0.2.2 (QEMU's user network).
    await buildAgentIso({ kernel: ramdisk.kernel, ramdisk: ramdisk.initrd, output: path.join(dir, 'boot.iso'), cmdline: `console=ttyS0 ipa-api-url=http://10.0.2.2:${port} ipa-inspection-callback-url=http://10.0.2.2:${port}/v1/continue_inspection ipa-global-request-id=req-vm-lab boot_method=vmedia` });
    await fs.promises.writeFile(path.join(dir, 'config.iso'), await buildConfigdriveImage({ uuid: NODE, name: 'vm-lab' }, { meta_data: metaData, user_data: userData }));
    sim = await startRedfishSim({ count: 1, qemu: { accel, shutdownGraceSeconds: GRACE_SECONDS } });
    bmc = sim.bmcs[0].url;
  });

  after(async () => {
    await sim?.stop();
    await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)));
    if (dir) await fs.promises.rm(dir, { recursive: true, force: true });
  });

  it('starts powered off, and refuses an image it cannot download', async () => {
    const system = JSON.parse(await ok('GET', SYSTEM)) as { PowerState: string };
    expect(system.PowerState).to.equal('Off');
    const r = await redfish('POST', `${CD}/Actions/VirtualMedia.InsertMedia`, { Image: `${base}/files/missing.iso` });
    expect(r.status).to.equal(400);
    expect(r.text).to.include('HTTP 404');
    expect((JSON.parse(await ok('GET', CD)) as { Inserted: boolean }).Inserted).to.equal(false);
    expect((await vmState(bmc)).mediaFiles).to.deep.equal([]);
  });

  it('boots the ISO from the CD in BIOS mode: kernel parameters, USB config drive, lookup, heartbeats and inventory', async () => {
    const started = Date.now();
    await ok('POST', `${CD}/Actions/VirtualMedia.InsertMedia`, { Image: `${base}/files/boot.iso` });
    await ok('POST', `${USB}/Actions/VirtualMedia.InsertMedia`, { Image: `${base}/files/config.iso` });
    await ok('PATCH', SYSTEM, { Boot: { BootSourceOverrideTarget: 'Cd', BootSourceOverrideEnabled: 'Once', BootSourceOverrideMode: 'Legacy' } });
    await ok('POST', `${SYSTEM}/Actions/ComputerSystem.Reset`, { ResetType: 'On' });
    const out = await waitForConsole(bmc, /vmlab: inspection /, { what: 'the inspection after the second heartbeat' });
    process.stderr.write(`      BIOS: power on to the inspection (after two heartbeats): ${Date.now() - started} ms\n`);

    const vm = await vmState(bmc);
    expect(vm).to.deep.include({ running: true, firmware: 'bios', boot: 'cd' });
    expect(out).to.include('SeaBIOS');
    const report = ramdiskReport(out);
    expect(report.params).to.deep.include({ 'ipa-api-url': `http://10.0.2.2:${new URL(base).port}`, 'ipa-global-request-id': 'req-vm-lab', boot_method: 'vmedia' });
    // The machine's NIC is the one the BMC's inventory shows.
    const nic = JSON.parse(await ok('GET', `${SYSTEM}/EthernetInterfaces/NIC.Integrated.1-1`)) as { MACAddress: string };
    expect(report.nic?.mac).to.equal(nic.MACAddress.toLowerCase());
    expect(report.configDrive).to.match(/^\/dev\/sd/);
    expect(JSON.parse(report.files['openstack/latest/meta_data.json'] ?? 'null')).to.deep.equal(metaData);
    expect(report.files['openstack/latest/user_data']).to.equal(userData);
    expect(report.lookups[0]).to.match(/^failed: .*404/);
    expect(report.lookups[1]).to.equal(`ok node=${NODE} token=yes`);
    expect(report.heartbeats.slice(0, 2).map((h) => h.ok)).to.deep.equal([true, true]);

    const lookup = seen.find((s) => s.url.startsWith('/v1/lookup'));
    expect(lookup?.url).to.equal(`/v1/lookup?addresses=${vm.macs[0]}`);
    expect(lookup?.headers['x-openstack-ironic-api-version']).to.equal('1.68');
    const beat = seen.find((s) => s.url === `/v1/heartbeat/${NODE}`);
    expect(beat?.method).to.equal('POST');
    expect(beat?.headers['content-type']).to.equal('application/json');
    expect(JSON.parse(beat?.body ?? '{}')).to.deep.equal({ callback_url: 'http://10.0.2.15:9999', agent_version: 'vmlab-1', agent_token: 'tok-123' });
    const inspection = seen.find((s) => s.url === '/v1/continue_inspection');
    expect(inspection?.headers['content-type']).to.equal('application/json');
    const { inventory } = JSON.parse(inspection?.body ?? '{}') as { inventory: Record<string, unknown> };
    expect(inventory.interfaces).to.deep.equal([
      { name: 'eth0', mac_address: vm.macs[0], ipv4_address: '10.0.2.15', has_carrier: true },
      { name: 'eth1', mac_address: vm.macs[1], ipv4_address: null, has_carrier: true },
    ]);
    expect(inventory.cpu).to.deep.include({ count: 1, architecture: 'x86_64' });
    expect(inventory.memory).to.deep.include({ physical_mb: 256 });
    expect(inventory.disks).to.deep.equal([{ name: '/dev/vda', size: 1024 * 1024 * 1024, rotational: false, model: null, vendor: null, serial: null }]);
    expect(inventory.boot).to.deep.equal({ current_boot_mode: 'bios', pxe_interface: vm.macs[0] });
    expect(inventory.system_vendor).to.deep.equal({ manufacturer: 'Galvanic', product_name: 'QEMU virtual machine', serial_number: 'SIM000000' });
    // The Once override was used up.
    const system = JSON.parse(await ok('GET', SYSTEM)) as { PowerState: string; Boot: { BootSourceOverrideEnabled: string } };
    expect(system.PowerState).to.equal('On');
    expect(system.Boot.BootSourceOverrideEnabled).to.equal('Disabled');
  });

  it('ejects: the drive is emptied in the running machine and the download removed', async () => {
    const before = await vmState(bmc);
    await ok('POST', `${CD}/Actions/VirtualMedia.EjectMedia`, {});
    const after = await until('the CD to be ejected', async () => {
      const vm = await vmState(bmc);
      return vm.media.cd === null ? vm : null;
    }, WAIT_MS);
    expect(after.media.usb).to.equal(`${base}/files/config.iso`);
    const cdFiles = before.mediaFiles.filter((f) => !after.mediaFiles.includes(f));
    expect(cdFiles).to.have.length(1);
    expect(fs.existsSync(cdFiles[0])).to.equal(false);
    expect(after.pid).to.equal(before.pid);
  });

  it('restarts without an override through a QMP reset of the same QEMU, booting the disk', async () => {
    const before = await vmState(bmc);
    await ok('POST', `${SYSTEM}/Actions/ComputerSystem.Reset`, { ResetType: 'ForceRestart' });
    const out = await waitForConsole(bmc, /Booting from Hard Disk/, { from: before.serialBytes, what: 'SeaBIOS booting the disk' });
    expect(lastBoot(out)).to.include('reset: boot disk');
    const after = await vmState(bmc);
    expect(after).to.deep.include({ running: true, pid: before.pid, boot: 'disk' });
    const events = (await (await fetch(`${bmc}/_sim/events`)).json()) as { events: Array<{ type: string; what?: string }> };
    expect(events.events.filter((e) => e.type === 'vm').map((e) => e.what)).to.include('reset');
  });

  it('restarts in UEFI mode in a new QEMU with OVMF, and powers off', async () => {
    const before = await vmState(bmc);
    await ok('POST', `${CD}/Actions/VirtualMedia.InsertMedia`, { Image: `${base}/files/boot.iso` });
    await ok('PATCH', SYSTEM, { Boot: { BootSourceOverrideTarget: 'Cd', BootSourceOverrideEnabled: 'Once', BootSourceOverrideMode: 'UEFI' } });
    await ok('POST', `${SYSTEM}/Actions/ComputerSystem.Reset`, { ResetType: 'ForceRestart' });
    // OVMF booting the CD is enough here: the kernel under OVMF is vm-agent-inspect's.
    const out = await waitForConsole(bmc, /BdsDxe: starting .*DVD-ROM/, { from: before.serialBytes, what: 'OVMF booting the CD' });
    expect(lastBoot(out)).to.include('power on: boot cd (uefi)');
    const vm = await vmState(bmc);
    expect(vm).to.deep.include({ running: true, firmware: 'uefi', boot: 'cd' });
    expect(vm.pid).to.not.equal(before.pid);

    await ok('POST', `${SYSTEM}/Actions/ComputerSystem.Reset`, { ResetType: 'ForceOff' });
    const off = await until('the machine to stop', async () => {
      const s = await vmState(bmc);
      return s.running ? null : s;
    }, WAIT_MS);
    expect(off.pid).to.equal(null);
    expect(() => process.kill(vm.pid ?? 0, 0)).to.throw();
    expect((JSON.parse(await ok('GET', SYSTEM)) as { PowerState: string }).PowerState).to.equal('Off');
    expect(await vmConsole(bmc, off.serialBytes - 200)).to.include('power off (ForceOff)');
  });

  it('a graceful shutdown the guest ignores ends in a power off after the grace period', async () => {
    // SeaBIOS waiting for a boot device takes no ACPI power button.
    await ok('PATCH', SYSTEM, { Boot: { BootSourceOverrideMode: 'Legacy' } });
    await ok('POST', `${SYSTEM}/Actions/ComputerSystem.Reset`, { ResetType: 'On' });
    const on = await until('the machine to start', async () => {
      const s = await vmState(bmc);
      return s.running ? s : null;
    }, WAIT_MS);
    const started = Date.now();
    await ok('POST', `${SYSTEM}/Actions/ComputerSystem.Reset`, { ResetType: 'GracefulShutdown' });
    const off = await until('the machine to stop', async () => {
      const s = await vmState(bmc);
      return s.running ? null : s;
    }, WAIT_MS, 200);
    expect(Date.now() - started).to.be.at.least(GRACE_SECONDS * 1000);
    expect(() => process.kill(on.pid ?? 0, 0)).to.throw();
    expect(await vmConsole(bmc, off.serialBytes - 200)).to.include('power off (GracefulShutdown)');
  });

  it('a QEMU that dies turns the system off', async () => {
    await ok('POST', `${SYSTEM}/Actions/ComputerSystem.Reset`, { ResetType: 'On' });
    const on = await until('the machine to start', async () => {
      const s = await vmState(bmc);
      return s.running ? s : null;
    }, WAIT_MS);
    process.kill(on.pid ?? 0, 'SIGKILL');
    await until('the BMC to see the system off', async () => (JSON.parse(await ok('GET', SYSTEM)) as { PowerState: string }).PowerState === 'Off', WAIT_MS);
    const events = (await (await fetch(`${bmc}/_sim/events`)).json()) as { events: Array<{ type: string; what?: string; signal?: string }> };
    expect(events.events.filter((e) => e.type === 'vm' && e.what === 'off').map((e) => e.signal)).to.deep.equal(['SIGKILL']);
    expect((await vmState(bmc)).running).to.equal(false);
  });
});
