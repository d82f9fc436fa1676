/**
 * The real ironic-python-agent against Galvanic, in a QEMU virtual machine: a lab run by hand,
 * not part of `npm test` (it needs IPA's source to build its ramdisk, and takes minutes under TCG).
 *
 *   test/lab/real-ipa/build-ramdisk.sh IPA_SOURCE RAMDISK_DIR [IPA_VERSION]    (as root, once)
 *   npm run lab:real-ipa -- --ramdisk RAMDISK_DIR [--keep]
 *
 * A real `galvanic all-in-one` on a fresh database drives one QEMU-backed Redfish BMC whose
 * machine (2 GiB, a 6 GiB disk, the agent's port forwarded to 127.0.0.1) boots the agent ISO
 * Galvanic builds from the ramdisk. Through the `baremetal` CLI the node is enrolled, inspected
 * (the agent's inventory), provided (cleaning: erase_devices_metadata, by the agent over its
 * automatic TLS), deployed with a whole-disk image and a config drive given as JSON (the agent
 * writes both; the machine then boots the disk: GRUB and the test ramdisk, whose init prints the
 * config drive on the serial console) and undeployed (cleaned again). Each phase is timed and
 * checked; the checks and times are printed as tables and written to
 * bench/results/real-ipa-latest.json. The exit code is 0 only when every check passed.
 * Processes and temporary files go at the end (also on failure and on SIGINT); --keep keeps
 * the lab's directory: the machine's serial log, Galvanic's log, the instance image.
 */
import { execFile } from 'node:child_process';
import { createHash, X509Certificate } from 'node:crypto';
import fs from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import { promisify } from 'node:util';
import { onCleanup, runBenchmark } from '../../bench/lib/cleanup.js';
import { gitState, machineInfo, parseBenchArgs, table, writeResults } from '../../bench/lib/util.js';
import { baremetalCli, onPath } from '../helpers/baremetal.js';
import { setUpTestDatabases, tearDownTestDatabases } from '../helpers/database.js';
import { getNode, simEvents, type ApiCall, type NodeView } from '../helpers/provisioning.js';
import { expectNothingLeft, lastBoot, ramdiskReport, startVmLab, vmConsole, vmState, waitForConsole, type VmLab } from '../helpers/vm-lab.js';
import { vmLabMissing, type TestRamdisk } from '../helpers/vm-ramdisk.js';

const run = promisify(execFile);

const USAGE = `usage: node dist/test/lab/real-ipa.js --ramdisk DIR [--keep]

  --ramdisk DIR  ipa.kernel and ipa.initramfs, as test/lab/real-ipa/build-ramdisk.sh writes them
  --keep         keep the lab's directory (serial log, Galvanic's log, instance image)

DATABASE_URL: the Postgres server to make a database on (default: an embedded one).`;

/** The machine: IPA refuses a root disk under 4 GiB; its ramdisk (160 MB) unpacks into memory. */
const MEMORY_MIB = 2048;
const DISK_MIB = 6144;
/** Longest any phase may take; under TCG on 2 cores each took under 2 minutes. */
const PHASE_TIMEOUT_MS = 15 * 60_000;

const META_DATA = { hostname: 'real-ipa.example.org', public_keys: { lab: 'ssh-ed25519 AAAAC3Nz lab@example.org' }, meta: { role: 'real-ipa-lab' } };
const USER_DATA = '#cloud-config\nruncmd:\n  - echo hello from the real-IPA lab\n';

/** The agent's log lines on the console (its --debug log, colour codes and all). */
const CLEAN_STEP_DONE = (step: string) => new RegExp(`Clean step completed: \\{[^\\n]*'step': '${step}'`);
const CLEAN_STEP_RUN = (step: string) => new RegExp(`Executing clean step \\{[^\\n]*'step': '${step}'`);

interface Check {
  name: string;
  ok: boolean;
  detail: string;
}

interface Phase {
  name: string;
  seconds: number;
}

const t0 = performance.now();
const say = (m: string) => process.stdout.write(`[real-ipa ${((performance.now() - t0) / 1000).toFixed(1)}s] ${m}\n`);

/** Why this host cannot run the lab: each tool missing, with its Debian package. */
function missingTools(ramdiskDir: string): string[] {
  const problems: string[] = [];
  const vm = vmLabMissing();
  if (vm) problems.push(`${vm} (apt-get install qemu-system-x86 ovmf xorriso isolinux syslinux-common grub-efi-amd64-bin dosfstools mtools)`);
  const tools: Array<[string, string]> = [['sgdisk', 'gdisk'], ['grub-mkstandalone', 'grub-common'], ['baremetal', 'python3-ironicclient']];
  for (const [tool, pkg] of tools) if (!onPath(tool)) problems.push(`${tool} is not on PATH (apt-get install ${pkg})`);
  for (const f of ['ipa.kernel', 'ipa.initramfs']) {
    if (!fs.existsSync(path.join(ramdiskDir, f))) problems.push(`${path.join(ramdiskDir, f)} is missing: build it with test/lab/real-ipa/build-ramdisk.sh`);
  }
  return problems;
}

/**
 * The whole-disk image the agent writes: GPT with one EFI System Partition holding a standalone
 * GRUB as the removable-media path \EFI\BOOT\BOOTX64.EFI (what OVMF boots without a boot entry)
 * and the test ramdisk, which prints the config drive it finds. 64 MiB, the ESP from 1 MiB.
 */
async function buildInstanceImage(ramdisk: TestRamdisk, dir: string): Promise<{ file: string; sha256: string; bytes: number }> {
  await fs.promises.mkdir(dir, { recursive: true });
  const p = (name: string) => path.join(dir, name);
  await fs.promises.writeFile(p('grub.cfg'), [
    'set timeout=0',
    'search --no-floppy --file /vmlinuz --set=root',
    'linux /vmlinuz console=ttyS0 galvanic-instance=1',
    'initrd /initrd.gz',
    'boot',
    '',
  ].join('\n'));
  // A standalone GRUB loads file systems and commands from its memdisk when needed, but not
  // partition maps: without part_gpt built in, it sees no partition and finds no /vmlinuz.
  await run('grub-mkstandalone', ['-O', 'x86_64-efi', '--modules=part_gpt fat', '-o', p('BOOTX64.EFI'), `boot/grub/grub.cfg=${p('grub.cfg')}`]);
  const mtools = { env: { ...process.env, MTOOLS_SKIP_CHECK: '1' } };
  await run('mkfs.vfat', ['-C', '-n', 'ESP', p('esp.img'), String(60 * 1024)]);
  await run('mmd', ['-i', p('esp.img'), '::/EFI', '::/EFI/BOOT'], mtools);
  await run('mcopy', ['-i', p('esp.img'), p('BOOTX64.EFI'), '::/EFI/BOOT/BOOTX64.EFI'], mtools);
  await run('mcopy', ['-i', p('esp.img'), ramdisk.kernel, '::/vmlinuz'], mtools);
  await run('mcopy', ['-i', p('esp.img'), ramdisk.initrd, '::/initrd.gz'], mtools);
  const file = p('instance.img');
  await fs.promises.writeFile(file, '');
  await fs.promises.truncate(file, 64 * 1024 * 1024);
  await run('sgdisk', ['-n', '1:2048:+60M', '-t', '1:EF00', '-c', '1:ESP', file]);
  const esp = await fs.promises.readFile(p('esp.img'));
  const fd = await fs.promises.open(file, 'r+');
  try {
    await fd.write(esp, 0, esp.length, 1024 * 1024);
  } finally {
    await fd.close();
  }
  for (const f of ['grub.cfg', 'BOOTX64.EFI', 'esp.img']) await fs.promises.rm(p(f));
  const data = await fs.promises.readFile(file);
  return { file, sha256: createHash('sha256').update(data).digest('hex'), bytes: data.length };
}

/** What a phase saw of the node while it ran (polled), and the node at its end. */
interface Watched {
  node: NodeView;
  states: string[];
  steps: string[];
  agentUrls: string[];
  verifyCa: string | null;
  /** A request to the agent itself, verified with the pinned certificate: its status, or why it failed. */
  agentTls: string | null;
}

/**
 * Polls the node every 500 ms until its transition has ended (no target state, no
 * reservation), noting the states, steps and agent facts it passes through. While the agent
 * is up with a pinned certificate, one request is made to it with that certificate as the only CA.
 */
async function watchUntilSettled(api: ApiCall, uuid: string, agentPort: number): Promise<Watched> {
  const w: Watched = { node: await getNode(api, uuid), states: [], steps: [], agentUrls: [], verifyCa: null, agentTls: null };
  const note = (list: string[], v: unknown) => {
    if (typeof v === 'string' && v !== '' && list[list.length - 1] !== v) list.push(v);
  };
  const deadline = Date.now() + PHASE_TIMEOUT_MS;
  for (;;) {
    const n = await getNode(api, uuid);
    w.node = n;
    note(w.states, n.provision_state);
    note(w.steps, (n.clean_step as { step?: string } | null)?.step);
    note(w.steps, (n.deploy_step as { step?: string } | null)?.step);
    const dii = (n.driver_internal_info ?? {}) as Record<string, unknown>;
    if (typeof dii.agent_url === 'string' && !w.agentUrls.includes(dii.agent_url)) w.agentUrls.push(dii.agent_url);
    if (typeof dii.agent_verify_ca === 'string') {
      w.verifyCa = dii.agent_verify_ca;
      if (w.agentTls === null || w.agentTls.startsWith('error')) w.agentTls = await agentRequest(agentPort, dii.agent_verify_ca);
    }
    if (n.target_provision_state === null && n.reservation === null) return w;
    if (Date.now() > deadline) throw new Error(`node ${uuid} did not end its transition in ${PHASE_TIMEOUT_MS / 1000} s: ${n.provision_state} -> ${n.target_provision_state}`);
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

/** GET / of the agent's API at the forwarded port, trusting only `ca`: "HTTP <status>" or "error: ...". */
function agentRequest(port: number, ca: string): Promise<string> {
  return new Promise((resolve) => {
    const req = https.get({ host: '127.0.0.1', port, path: '/', ca, timeout: 10_000 }, (res) => {
      res.resume();
      resolve(`HTTP ${res.statusCode}`);
    });
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', (err) => resolve(`error: ${err.message}`));
  });
}

async function main(): Promise<number> {
  const args = parseBenchArgs(process.argv.slice(2), USAGE, ['ramdisk'] as const, ['keep'] as const);
  if (!args) return 0;
  if (!args.ramdisk) {
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  const ramdiskDir = path.resolve(args.ramdisk);
  const keep = args.keep === true;
  const problems = missingTools(ramdiskDir);
  if (problems.length) {
    process.stderr.write(`real-ipa: cannot run here:\n${problems.map((p) => `  - ${p}`).join('\n')}\n`);
    return 2;
  }
  const startedAt = new Date();
  const buildInfo = await fs.promises.readFile(path.join(ramdiskDir, 'build-info.txt'), 'utf8').catch(() => '');
  const info = (key: string) => new RegExp(`^${key}=(.*)$`, 'm').exec(buildInfo)?.[1] ?? null;

  const checks: Check[] = [];
  const phases: Phase[] = [];
  const check = (name: string, ok: boolean, detail = '') => {
    checks.push({ name, ok, detail });
    say(`${ok ? 'PASS' : 'FAIL'} ${name}${detail ? `: ${detail}` : ''}`);
    return ok;
  };
  /** Runs a phase, timed; an exception is a failed check and ends the run. */
  const phase = async <T>(name: string, body: () => Promise<T>): Promise<T> => {
    say(`${name}...`);
    const started = performance.now();
    try {
      return await body();
    } catch (err) {
      check(`${name}: completed`, false, (err as Error).message.split('\n').slice(0, 6).join(' | '));
      throw new PhaseFailed(name);
    } finally {
      const seconds = Math.round((performance.now() - started) / 100) / 10;
      phases.push({ name, seconds });
      say(`${name}: ${seconds} s`);
    }
  };

  await setUpTestDatabases();
  onCleanup('test databases', tearDownTestDatabases);

  let lab: VmLab | undefined;
  let galvanicExit: number | null | undefined;
  let galvanicLog = '';
  const starting = startVmLab({
    env: {
      GALVANIC_DEFAULT__ENABLED_INSPECT_INTERFACES: 'redfish,agent,no-inspect',
      // A full erase of the disk (shred) takes far too long under TCG; the metadata erase stays.
      GALVANIC_DEPLOY__ERASE_DEVICES_PRIORITY: '0',
    },
    machine: { memoryMiB: MEMORY_MIB, diskMiB: DISK_MIB, agentPort: true },
  });
  // Registered before the lab is up, so that an interrupt during its start stops it too.
  const stopLab = onCleanup('the VM lab', async () => {
    const l = await starting.catch(() => undefined);
    if (!l) return;
    galvanicLog = l.galvanic.output();
    if (keep) await fs.promises.writeFile(path.join(l.dir, 'galvanic.log'), galvanicLog);
    galvanicExit = await l.stop({ keep });
    if (keep) say(`kept ${l.dir}`);
  });
  try {
    lab = await phase('setup', () => starting);
    const l = lab;
    say(`lab: Galvanic ${l.galvanic.url}, BMC ${l.bmc}, files ${l.files}, ${l.accel.toUpperCase()}, directory ${l.dir}`);
    await runLab(l, ramdiskDir, phase, check);
  } catch (err) {
    if (!(err instanceof PhaseFailed)) check('the run', false, (err as Error).stack ?? String(err));
  } finally {
    if (lab && checks.some((c) => !c.ok)) {
      const console = await vmConsole(lab.bmc).catch(() => '');
      process.stderr.write(`\n--- the machine's serial console, its end ---\n${console.split('\n').slice(-80).join('\n')}\n`);
      process.stderr.write(`--- Galvanic's log, its end ---\n${lab.galvanic.output().split('\n').slice(-40).join('\n')}\n`);
      if (!keep) process.stderr.write('(--keep keeps the serial log and Galvanic\'s log)\n');
    }
    await stopLab();
  }
  if (lab) check('Galvanic shut down cleanly', galvanicExit === 0, `exit code ${galvanicExit}${galvanicExit === 0 ? '' : `: ${galvanicLog.split('\n').slice(-5).join(' | ')}`}`);

  const passed = checks.every((c) => c.ok);
  // The details are in the lines above and in the results file.
  process.stdout.write(`\n${table([['check', 'result'], ...checks.map((c) => [c.name, c.ok ? 'pass' : 'FAIL'])])}\n\n`);
  process.stdout.write(`${table([['phase', 'seconds'], ...phases.map((p) => [p.name, p.seconds.toFixed(1)])])}\n\n`);
  const file = await writeResults('real-ipa', startedAt, {
    lab: 'real-ipa',
    startedAt: startedAt.toISOString(),
    source: gitState(),
    machine: machineInfo(),
    accel: lab?.accel ?? null,
    vm: { memoryMiB: MEMORY_MIB, diskMiB: DISK_MIB },
    ramdisk: {
      ipaVersion: info('ipa_version'), kernel: info('kernel'), debianSuite: info('debian_suite'), built: info('built'),
      initramfsBytes: fs.statSync(path.join(ramdiskDir, 'ipa.initramfs')).size,
    },
    passed,
    totalSeconds: Math.round((performance.now() - t0) / 100) / 10,
    phases,
    checks,
  });
  say(`${passed ? 'all checks passed' : `${checks.filter((c) => !c.ok).length} check(s) failed`}; results: ${file}`);
  return passed ? 0 : 1;
}

class PhaseFailed extends Error {
  constructor(readonly phase: string) {
    super(`phase ${phase} failed`);
  }
}

type PhaseRunner = <T>(name: string, body: () => Promise<T>) => Promise<T>;
type Checker = (name: string, ok: boolean, detail?: string) => boolean;

/** The phases and their checks, in order; a phase that throws ends the run. */
async function runLab(lab: VmLab, ramdiskDir: string, phase: PhaseRunner, check: Checker): Promise<void> {
  const { api, bmc } = lab;
  const cli = baremetalCli(() => lab.galvanic, 120_000);
  const vm = await vmState(bmc);
  if (!vm.agentPort) throw new Error('the simulator forwarded no agent port');
  const agentPort = vm.agentPort;

  const image = await phase('instance image', () => buildInstanceImage(lab.ramdisk, path.join(lab.dir, 'instance')));
  lab.serveFile('ipa.kernel', path.join(ramdiskDir, 'ipa.kernel'));
  lab.serveFile('ipa.initramfs', path.join(ramdiskDir, 'ipa.initramfs'));
  lab.serveFile('instance.img', image.file);

  const uuid = await phase('enroll', async () => {
    const created = JSON.parse(await cli.ok(
      'node', 'create', '--driver', 'redfish', '--name', 'real-ipa',
      '--boot-interface', 'redfish-virtual-media', '--deploy-interface', 'direct', '--inspect-interface', 'agent',
      '--driver-info', `redfish_address=${bmc}`, '--driver-info', 'redfish_username=admin', '--driver-info', 'redfish_password=password',
      '--driver-info', `deploy_kernel=${lab.files}/ipa.kernel`, '--driver-info', `deploy_ramdisk=${lab.files}/ipa.initramfs`,
      // The agent listens on the guest's 9999, which QEMU's user network forwards from this port.
      '--driver-info', `kernel_append_params=console=ttyS0 ipa-advertise-host=127.0.0.1 ipa-advertise-port=${agentPort}`,
      '--property', 'capabilities=boot_mode:uefi',
      '-f', 'json',
    )) as { uuid: string };
    await cli.ok('port', 'create', vm.macs[0], '--node', created.uuid);
    await cli.ok('node', 'manage', created.uuid);
    const n = await watchUntilSettled(api, created.uuid, agentPort);
    if (n.node.provision_state !== 'manageable') throw new Error(`manage ended in ${n.node.provision_state}: ${n.node.last_error}`);
    return created.uuid;
  });

  // Inspection: the agent boots, posts its inventory, and the node is manageable again.
  const inspected = await phase('inspect', async () => {
    await cli.ok('node', 'inspect', uuid);
    return watchUntilSettled(api, uuid, agentPort);
  });
  const ok = (w: Watched, state: string) => w.node.provision_state === state && w.node.last_error === null;
  const stateDetail = (w: Watched) => `${w.states.join(' > ')}${w.node.last_error ? `; last_error: ${w.node.last_error}` : ''}`;
  if (!check('inspect: manageable, no error', ok(inspected, 'manageable'), stateDetail(inspected))) throw new PhaseFailed('inspect');
  const res = await api('GET', `/v1/nodes/${uuid}/inventory`);
  const inventory = res.status === 200 ? res.json<{ inventory: Inventory }>().inventory : null;
  const physicalMb = inventory?.memory?.physical_mb;
  const disk = inventory?.disks?.find((d) => d.size === DISK_MIB * 1024 * 1024);
  const macs = (inventory?.interfaces ?? []).map((i) => i.mac_address);
  check(
    "inspect: the inventory has the machine's memory, disk and MACs",
    physicalMb === MEMORY_MIB && disk !== undefined && vm.macs.every((m) => macs.includes(m)),
    inventory ? `physical_mb ${physicalMb}; disk ${disk ? `${disk.name} ${disk.size} B` : `none of ${DISK_MIB} MiB in ${JSON.stringify(inventory.disks?.map((d) => [d.name, d.size]))}`}; MACs ${macs.join(' ')} (machine: ${vm.macs.join(' ')})` : `GET inventory: ${res.status} ${res.body.slice(0, 200)}`,
  );

  // Cleaning (provide): erase_devices_metadata by the agent, over its automatic TLS.
  let from = (await vmState(bmc)).serialBytes;
  const cleaned = await phase('clean (provide)', async () => {
    await cli.ok('node', 'provide', uuid);
    return watchUntilSettled(api, uuid, agentPort);
  });
  let out = await vmConsole(bmc, from);
  if (!check('clean: available, no error', ok(cleaned, 'available'), stateDetail(cleaned))) throw new PhaseFailed('clean (provide)');
  check(
    'clean: erase_devices_metadata ran in the agent, erase_devices did not',
    CLEAN_STEP_DONE('erase_devices_metadata').test(out) && !CLEAN_STEP_RUN('erase_devices').test(out) && cleaned.steps.includes('erase_devices_metadata'),
    `clean steps seen: ${cleaned.steps.join(', ') || 'none'}; the agent's log: ${CLEAN_STEP_DONE('erase_devices_metadata').test(out) ? 'step completed' : 'no completion'}`,
  );
  check(...agentTlsCheck('clean', cleaned, agentPort));

  // Deploy: the agent writes the image and the config drive, powers the machine off; the machine boots its disk.
  from = (await vmState(bmc)).serialBytes;
  const seq = Math.max(0, ...(await simEvents(bmc)).map((e) => Number(e.seq)));
  await cli.ok(
    'node', 'set', uuid,
    // The agent downloads the image itself, from the guest's side of QEMU's user network.
    '--instance-info', `image_source=http://10.0.2.2:${new URL(lab.files).port}/instance.img`,
    '--instance-info', 'image_os_hash_algo=sha256', '--instance-info', `image_os_hash_value=${image.sha256}`,
    '--instance-info', 'image_disk_format=raw',
  );
  const deployed = await phase('deploy', async () => {
    await cli.ok('node', 'deploy', uuid, '--config-drive', JSON.stringify({ meta_data: META_DATA, user_data: USER_DATA }));
    return watchUntilSettled(api, uuid, agentPort);
  });
  if (!check('deploy: active, no error', ok(deployed, 'active'), stateDetail(deployed))) throw new PhaseFailed('deploy');
  check(...agentTlsCheck('deploy', deployed, agentPort));
  const events = (await simEvents(bmc)).filter((e) => Number(e.seq) > seq);
  const agentBoot = events.findIndex((e) => e.type === 'vm' && e.what === 'started');
  const after = events.slice(agentBoot + 1);
  const forced = after.filter((e) => e.type === 'reset' && e.resetType === 'ForceOff').length;
  const guestOff = after.filter((e) => e.type === 'vm' && e.what === 'off').length;
  check(
    'deploy: the agent powered the machine off itself (no ForceOff)',
    agentBoot >= 0 && guestOff >= 1 && forced === 0,
    `after the agent's boot: ${guestOff} power-off(s) by the guest, ${forced} ForceOff`,
  );

  const booted = await phase('instance boot', async () => {
    // GRUB's prompt is its failure to boot the disk: no need to wait for the timeout then.
    out = await waitForConsole(bmc, /vmlab: no ipa-api-url|\ngrub> /, { from, timeoutMs: 300_000, what: "the instance's test ramdisk past its config drive" });
    if (!out.includes('vmlab: no ipa-api-url')) throw new Error(`GRUB did not boot the disk: ${lastBoot(out).split('\n').filter((l) => l.includes('error')).join(' | ')}`);
    return lastBoot(out);
  });
  const report = ramdiskReport(booted);
  const state = await vmState(bmc);
  check(
    'deploy: the machine booted its disk (UEFI) and found the config drive on a partition of it',
    /\[galvanic-sim\] \S+ (power on: boot disk|reset: boot disk)/.test(booted) && state.firmware === 'uefi'
      && report.params['galvanic-instance'] === '1' && /^\/dev\/vda\d+$/.test(report.configDrive ?? ''),
    `${booted.split('\n').find((line) => line.includes('[galvanic-sim]'))?.replace(/^\[galvanic-sim\] \S+ /, '') ?? 'no boot mark'}, firmware ${state.firmware}; config drive ${report.configDrive}`,
  );
  // Galvanic's config drive builder adds the node's uuid and name to the meta data, as Ironic's does.
  const metaData = JSON.parse(report.files['openstack/latest/meta_data.json'] ?? 'null') as Record<string, unknown> | null;
  const expected = { ...META_DATA, uuid, name: 'real-ipa' };
  check(
    'deploy: the config drive has meta_data.json and user_data as given',
    JSON.stringify(sortKeys(metaData)) === JSON.stringify(sortKeys(expected)) && report.files['openstack/latest/user_data'] === USER_DATA,
    `meta_data.json ${JSON.stringify(metaData)}; user_data ${JSON.stringify(report.files['openstack/latest/user_data'] ?? null)}`,
  );

  // Undeploy: the instance goes, the agent cleans again, nothing is left.
  from = (await vmState(bmc)).serialBytes;
  const undeployed = await phase('undeploy', async () => {
    await cli.ok('node', 'undeploy', uuid);
    return watchUntilSettled(api, uuid, agentPort);
  });
  out = await vmConsole(bmc, from);
  check(
    'undeploy: available, no error, cleaned by the agent',
    ok(undeployed, 'available') && CLEAN_STEP_DONE('erase_devices_metadata').test(out),
    `${stateDetail(undeployed)}; clean steps seen: ${undeployed.steps.join(', ') || 'none'}`,
  );
  try {
    await expectNothingLeft(lab, uuid);
    check('undeploy: nothing left (machine off, no media, HTTP root empty, node off)', true);
  } catch (err) {
    check('undeploy: nothing left (machine off, no media, HTTP root empty, node off)', false, (err as Error).message);
  }
}

interface Inventory {
  memory?: { physical_mb?: number };
  disks?: Array<{ name: string; size: number }>;
  interfaces?: Array<{ name: string; mac_address: string }>;
}

/** The agent's URL is https on the forwarded port, its certificate (for 127.0.0.1) pinned, and it answered a request verified with it. */
function agentTlsCheck(phaseName: string, w: Watched, agentPort: number): [string, boolean, string] {
  let san = '';
  try {
    san = w.verifyCa ? new X509Certificate(w.verifyCa).subjectAltName ?? '' : '';
  } catch (err) {
    san = `unreadable: ${(err as Error).message}`;
  }
  const url = `https://127.0.0.1:${agentPort}`;
  return [
    `${phaseName}: the agent was reached over HTTPS, its certificate pinned`,
    w.agentUrls.length > 0 && w.agentUrls.every((u) => u === url || u.startsWith(`${url}/`)) && san.includes('IP Address:127.0.0.1') && w.agentTls === 'HTTP 200',
    `agent_url ${w.agentUrls.join(', ') || 'never seen'}; agent_verify_ca ${w.verifyCa ? `SAN ${san}` : 'never seen'}; a request verified with it: ${w.agentTls ?? 'not made'}`,
  ];
}

function sortKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).sort(([a], [b]) => a.localeCompare(b)).map(([k, x]) => [k, sortKeys(x)]));
  return v;
}

runBenchmark(main);
