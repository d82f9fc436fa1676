/**
 * The test runner behind `npm test`: every test file in a mocha process of its own, several at
 * once, all on one database server and one migrated template that this process sets up (the
 * files clone it, see helpers/database.ts). Most files spend their time waiting (on processes,
 * BMC simulators, the `baremetal` CLI, timeouts), so running them side by side costs far less
 * wall time than it adds CPU.
 *
 *   npm test                                  every file of every tier
 *   npm test -- test/unit/backoff.test.ts     those files only (source or dist/ paths)
 *   npm test -- --tier unit,integration       those tiers only
 *   npm test -- --jobs 1 --grep 'claims'      one file at a time; other options go to mocha
 *
 * GALVANIC_TEST_JOBS sets the default of --jobs (4). Files listed in SERIAL run alone, after
 * the others. Each file's output is printed whole when it ends; a summary of the time per
 * tier and the failed files comes last, and the exit code is 1 when any file failed.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { setUpTestDatabases, sharedDatabaseEnv, tearDownTestDatabases } from './helpers/database.js';

/** dist/test, where the compiled files run from. */
const DIST_TEST = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(DIST_TEST, '../..');
const TIERS = ['unit', 'integration', 'e2e'] as const;
type Tier = (typeof TIERS)[number];

/**
 * Files that must have the machine to themselves: they measure how fast something happens
 * (wake-ups, pacing, claims racing across processes), and other files' load would make them
 * measure the neighbours. (operations-races is not one: it bounds counts and orders, and times
 * only from below, backoff gaps that load can only widen.)
 */
const SERIAL: ReadonlySet<string> = new Set([
  // Bounds its wake-ups (200 ms) and its takeover (heartbeat_timeout + 10 s); its 20,000
  // intents over three conductors fill both cores for a minute, and under other files' load a
  // heartbeat lapsing past its 5 s timeout would be a false death amid its exact counts.
  'integration/conductor-races.test.js',
  // Times how long a stream of notifications is gathered before it is sent.
  'integration/pg-notify.test.js',
  // A conductor's console watchdog reaps, machine-wide, console processes whose conductor is
  // gone: beside other files' conductors, this file's own survivors are not the ones to do it.
  'integration/console-takeover.test.js',
  // Its takeover of consoles by a second conductor is bounded (20 s) and counted from /proc:
  // beside other files' conductors and their watchdogs it missed the bound (alone: 8 s).
  'integration/console-races.test.js',
  // Measures the API server's memory while a console prints 32 MiB to eleven viewers; beside
  // other files one reader once saw the console's output start over (line 1073, then 1).
  'integration/console-backpressure.test.js',
]);

/**
 * The longest files first, so that no lane is left with a long one at the end: seconds each
 * took in a full run on a 2-core machine against its Debian Postgres (files under 10 s left out),
 * less what single-file runs showed for the files whose waits were shortened since.
 */
const EXPECTED_SECONDS: Readonly<Record<string, number>> = {
  // Two boots of a VM under TCG where KVM boots no kernel (about 40 s each, network boot included).
  'e2e/vm-ipmi-netboot.test.js': 95,
  'e2e/baremetal-cli-ipmi-netboot.test.js': 85,
  // Four QEMU boots, under TCG where KVM boots no kernel (OVMF about 20 s each, after a 10 s KVM probe); the
  // first run also downloads a Debian kernel.
  'integration/iso-boot.test.js': 80,
  'e2e/tempest.test.js': 75,
  'integration/console-races.test.js': 74,
  'e2e/baremetal-cli.test.js': 68,
  'integration/database-outage.test.js': 64,
  // Nine runs of callback timeouts of 5 s against real processes, three of them group operations.
  'integration/wait-timeouts.test.js': 68,
  'integration/provisioning-faults.test.js': 53,
  'e2e/baremetal-cli-provisioning.test.js': 50,
  'integration/power-sync-fleet.test.js': 50,
  'integration/operations-races.test.js': 45,
  'e2e/baremetal-cli-agent.test.js': 45,
  'e2e/vm-agent-inspect.test.js': 45,
  'e2e/vm-redfish-sim.test.js': 30,
  'e2e/vm-ramdisk-deploy.test.js': 25,
  'integration/agent-deploy.test.js': 44,
  'integration/ipmi-driver.test.js': 40,
  'integration/sensor-data.test.js': 38,
  'e2e/openstacksdk-provisioning.test.js': 37,
  'e2e/baremetal-cli-drivers.test.js': 34,
  'e2e/baremetal-cli-actions.test.js': 25,
  'integration/cli.test.js': 25,
  'integration/redfish-raid.test.js': 25,
  'integration/operations-cli.test.js': 24,
  'integration/redfish-firmware.test.js': 24,
  'integration/operations-provisioning.test.js': 23,
  'integration/redfish-bios.test.js': 23,
  'integration/redfish-driver.test.js': 22,
  'integration/agent-sim.test.js': 21,
  'e2e/baremetal-cli-microversions.test.js': 20,
  'integration/provisioning-bmcs.test.js': 19,
  'integration/agent-reboot.test.js': 19,
  'integration/agent-takeover.test.js': 18,
  'integration/agent-inspect.test.js': 16,
  'integration/bmo-flow.test.js': 16,
  'e2e/baremetal-cli-agent-inspect.test.js': 16,
  'integration/intents-api.test.js': 15,
  'integration/bmo-bad-input.test.js': 12,
  'integration/database-outage-console.test.js': 15,
  'integration/console-api.test.js': 15,
  'integration/hot-plans.test.js': 13,
  'integration/custom-agent.test.js': 14,
  'integration/idrac.test.js': 14,
  'integration/adopt.test.js': 12,
  'e2e/baremetal-cli-console.test.js': 13,
  'integration/operations-api.test.js': 12,
  'integration/intent-claims.test.js': 12,
  'integration/console-ipmi.test.js': 12,
  'unit/intent-runner-pacing.test.js': 11,
};

interface Options {
  files: string[];
  tiers: Set<Tier>;
  jobs: number;
  mochaArgs: string[];
}

function usage(): string {
  return 'Usage: npm test -- [FILE ...] [--tier unit,integration,e2e] [--jobs N] [mocha options, e.g. --grep TEXT]';
}

function parseOptions(argv: string[]): Options {
  const files: string[] = [];
  const mochaArgs: string[] = [];
  let tiers = new Set<Tier>(TIERS);
  let jobs = Number(process.env.GALVANIC_TEST_JOBS ?? 4);
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const value = () => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${arg} needs a value\n${usage()}`);
      return v;
    };
    if (arg === '--tier') {
      tiers = new Set(value().split(',').map((t) => {
        if (!TIERS.includes(t as Tier)) throw new Error(`--tier: no tier "${t}" (${TIERS.join(', ')})`);
        return t as Tier;
      }));
    } else if (arg === '--jobs') {
      jobs = Number(value());
    } else if (arg === '--help' || arg === '-h') {
      process.stdout.write(`${usage()}\n`);
      process.exit(0);
    } else if (arg.startsWith('-')) {
      mochaArgs.push(arg);
      // A mocha option's value, when it takes one (--grep TEXT, --timeout MS, ...).
      if (argv[i + 1] !== undefined && !argv[i + 1].startsWith('-') && !/\.(ts|js)$/.test(argv[i + 1])) mochaArgs.push(argv[++i]);
    } else {
      files.push(compiledPath(arg));
    }
  }
  if (!Number.isInteger(jobs) || jobs < 1) throw new Error(`--jobs must be a positive integer, not ${jobs}`);
  return { files, tiers, jobs, mochaArgs };
}

/** The compiled file a source or compiled path names: test/unit/x.test.ts → dist/test/unit/x.test.js. */
function compiledPath(arg: string): string {
  let p = path.resolve(arg);
  const rel = path.relative(ROOT, p);
  if (!rel.startsWith(`dist${path.sep}`)) p = path.join(ROOT, 'dist', rel);
  p = p.replace(/\.ts$/, '.js');
  if (!fs.existsSync(p)) throw new Error(`no compiled test file ${path.relative(ROOT, p)} (for ${arg}); npm test builds first`);
  return p;
}

function testFiles(dir: string): string[] {
  if (!fs.existsSync(dir)) return [];
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return testFiles(p);
    return e.name.endsWith('.test.js') ? [p] : [];
  });
}

const key = (file: string) => path.relative(DIST_TEST, file).split(path.sep).join('/');
const tierOf = (file: string) => key(file).split('/')[0] as Tier;

interface FileResult {
  file: string;
  ok: boolean;
  seconds: number;
}

/** One file in a mocha process of its own; its output printed whole once it ends. */
function runFile(file: string, opts: Options, env: Record<string, string>): Promise<FileResult> {
  const started = performance.now();
  const mocha = path.join(ROOT, 'node_modules/mocha/bin/mocha.js');
  const child = spawn(process.execPath, [mocha, process.stdout.isTTY ? '--color' : '--no-color', ...opts.mochaArgs, file], {
    cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'],
  });
  const chunks: Buffer[] = [];
  child.stdout.on('data', (d: Buffer) => chunks.push(d));
  child.stderr.on('data', (d: Buffer) => chunks.push(d));
  return new Promise((resolve) => {
    child.once('close', (code, signal) => {
      const seconds = (performance.now() - started) / 1000;
      const ok = code === 0;
      process.stdout.write(`\n=== ${key(file)}: ${ok ? 'passed' : `FAILED (${signal ?? `exit ${code}`})`} in ${seconds.toFixed(1)} s\n`);
      process.stdout.write(Buffer.concat(chunks));
      resolve({ file, ok, seconds });
    });
  });
}

/**
 * At most this many end-to-end files at once: each runs Python clients (the `baremetal` CLI,
 * tempest, openstacksdk) whose start-up alone is seconds of CPU, and four of them at once on
 * two cores stretched each threefold.
 */
const E2E_AT_ONCE = 2;

/**
 * The files that boot QEMU machines, one at a time: under TCG on two cores, two machines beside
 * other files starved one guest until its kernel stalled for minutes in its disk probe.
 */
const VM_FILES: ReadonlySet<string> = new Set([
  'integration/iso-boot.test.js', 'e2e/vm-agent-inspect.test.js', 'e2e/vm-ramdisk-deploy.test.js', 'e2e/vm-redfish-sim.test.js', 'e2e/vm-ipmi-netboot.test.js',
]);

/** Runs `files` `jobs` at a time, longest expected first, no more than E2E_AT_ONCE end-to-end files and one VM file at once. */
async function runLanes(files: string[], jobs: number, run: (file: string) => Promise<FileResult>): Promise<FileResult[]> {
  const queue = [...files].sort((a, b) => (EXPECTED_SECONDS[key(b)] ?? 0) - (EXPECTED_SECONDS[key(a)] ?? 0));
  const results: FileResult[] = [];
  let e2eRunning = 0;
  let vmRunning = 0;
  const next = () => {
    const i = queue.findIndex((f) => (tierOf(f) !== 'e2e' || e2eRunning < E2E_AT_ONCE) && (!VM_FILES.has(key(f)) || vmRunning === 0));
    return i < 0 ? undefined : queue.splice(i, 1)[0];
  };
  await Promise.all(Array.from({ length: Math.min(jobs, queue.length) }, async () => {
    for (let file = next(); file !== undefined; file = next()) {
      const e2e = tierOf(file) === 'e2e';
      const vm = VM_FILES.has(key(file));
      if (e2e) e2eRunning++;
      if (vm) vmRunning++;
      try {
        results.push(await run(file));
      } finally {
        if (e2e) e2eRunning--;
        if (vm) vmRunning--;
      }
    }
  }));
  return results;
}

async function main(): Promise<number> {
  const opts = parseOptions(process.argv.slice(2));
  const files = opts.files.length > 0 ? opts.files : TIERS.filter((t) => opts.tiers.has(t)).flatMap((t) => testFiles(path.join(DIST_TEST, t)));
  if (files.length === 0) throw new Error('no test files');
  const started = performance.now();
  await setUpTestDatabases();
  let results: FileResult[] = [];
  try {
    const env = sharedDatabaseEnv();
    const run = (file: string) => runFile(file, opts, env);
    results = await runLanes(files.filter((f) => !SERIAL.has(key(f))), opts.jobs, run);
    results.push(...await runLanes(files.filter((f) => SERIAL.has(key(f))), 1, run));
  } finally {
    await tearDownTestDatabases();
  }
  const wall = (performance.now() - started) / 1000;
  const rows = TIERS.map((tier) => {
    const of = results.filter((r) => tierOf(r.file) === tier);
    return of.length === 0 ? '' : `  ${tier.padEnd(12)} ${String(of.length).padStart(4)} file(s)  ${of.reduce((a, r) => a + r.seconds, 0).toFixed(0).padStart(6)} s of file time`
      + `  (longest: ${[...of].sort((a, b) => b.seconds - a.seconds).slice(0, 3).map((r) => `${key(r.file)} ${r.seconds.toFixed(0)} s`).join(', ')})`;
  }).filter((r) => r !== '');
  const failed = results.filter((r) => !r.ok);
  process.stdout.write(`\n=== ${results.length} file(s) in ${wall.toFixed(0)} s of wall time, ${opts.jobs} at once (serial: ${[...SERIAL].join(', ')})\n${rows.join('\n')}\n`);
  if (failed.length > 0) process.stdout.write(`=== FAILED: ${failed.map((r) => key(r.file)).join(', ')}\n`);
  return failed.length > 0 ? 1 : 0;
}

main().then((code) => process.exit(code), (err: Error) => {
  process.stderr.write(`${err.stack ?? err.message}\n`);
  process.exit(2);
});
