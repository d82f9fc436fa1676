/**
 * `galvanic sim redfish`: runs the simulator in the foreground until SIGINT/SIGTERM.
 * Prints one JSON line once every listener is bound, so scripts can wait for it.
 */
import { parseArgs } from 'node:util';
import { parseQuirks, QUIRK_NAMES } from './quirks.js';
import { DEFAULT_ISO_PATTERN, type AgentSimOptions } from '../agent/types.js';
import { startRedfishSim, type RedfishSimOptions } from './server.js';
import type { QemuOptions } from '../qemu/hosts.js';

export const SIM_REDFISH_USAGE = `Usage: galvanic sim redfish --count N --base-port P [options]

  --count N               number of BMCs (default 1)
  --base-port P           BMC i listens on 127.0.0.1:P+i (0: free ports)
  --latency MIN-MAX       delay of every request in ms, e.g. 1000-2000 (default 0)
  --slow-fraction F       fraction of requests delayed by --slow instead (default 0)
  --slow-bmc-fraction F   fraction of BMCs (spread evenly) whose every request takes --slow (default 0)
  --slow MS               delay of the slow requests in ms (default 20000)
  --fail-rate F           fraction answered 500 (default 0)
  --timeout-rate F        fraction never answered (default 0)
  --garbage-rate F        fraction answered with a body that is not JSON (default 0)
  --reset-rate F          fraction whose connection is reset (default 0)
  --session-limit N       sessions open at once per BMC (default 4)
  --chassis MODEL         both | legacy | sensors: which sensor resources the chassis has
  --mockup DIR            serve a recorded mockup tree instead of the synthetic BMC
  --fleet-id N            0-255, part of every NIC MAC and system UUID (default 0); give
                          fleets registered in one conductor different ids
  --boot-seconds MIN-MAX  a power on or restart boots for this long, PoweringOn meanwhile (default 0)
  --power-delay MS        PoweringOn/PoweringOff this long before any reset lands (default 0)
  --vmedia-quirks LIST    vendor behaviours, comma-separated: ${QUIRK_NAMES.join(', ')}
                          (sticky-inserted=S and eject-in-progress=S take seconds, default 3);
                          shape quirks are ignored with --mockup
  --vmedia-check-image WHEN  none | insert | boot: HEAD the image then, and fail on 404 (default none)
  --insert-media-status S 400 or 500: refuse every InsertMedia (default: accept)
  --volume-apply-time T   Immediate | OnReset: when RAID volume changes apply (default Immediate)
  --username U --password P   credentials (default admin / password)

ironic-python-agent simulation (docs/agent-simulator.md), off unless --agent-api-url is given:
  --agent-api-url URL     Galvanic's API (ipa-api-url): a host that boots an agent ISO from Cd runs an agent
  --agent-iso REGEX       which virtual-media URLs are agent ISOs (default ${DEFAULT_ISO_PATTERN.source}, case-insensitive)
  --agent-boot-seconds MIN-MAX  the agent comes up this long after its host booted the ISO (default 1-2)
  --agent-write-mbps N    write_image writes at most N MB/s (10^6 bytes; default 200)
  --agent-heartbeat-min-gap-ms N  a forced heartbeat comes at least N ms after the previous (default 5000)
  --agent-lookup-retry-ms N  longest wait between lookup retries (default 2000)
  --agent-port P          port of the agents' shared server (default: a free port)
  --agent-no-auto-tls     the agents serve plain HTTP (IPA's enable_auto_tls = False); by default they
                          serve HTTPS with a self-signed certificate against an API of 1.68 or later
  --agent-coreos-installer  the ramdisk also offers OpenShift's install_coreos deploy step

QEMU-backed hosts (docs/vm-lab.md), off unless --qemu is given: each BMC's system is a QEMU VM
  --qemu                  power, boot override and virtual media act on a QEMU virtual machine
  --qemu-accel A          tcg (default) or kvm
  --qemu-memory MIB       guest memory (default 256)
  --qemu-disk MIB         size of the sparse disk (default 1024; the real ironic-python-agent wants 4096 or more)
  --qemu-dir DIR          where the machines live (default: a new temporary directory, removed at exit)
  --qemu-agent-port       forward a free 127.0.0.1 port to each guest's 9999 (shown in /_sim/vm)

Control API per BMC: /_sim/stats, /_sim/reset, /_sim/expire-sessions, /_sim/faults, /_sim/state,
/_sim/events, /_sim/totals, /_sim/chains (docs/operations.md), /_sim/agent, /_sim/agent/faults,
/_sim/agent/configdrive, /_sim/vm, /_sim/vm/console.`;

function fraction(name: string, v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isFinite(n) || n < 0 || n > 1) throw new Error(`--${name} must be a number between 0 and 1, got "${v}"`);
  return n;
}

function count(name: string, v: string | undefined, min: number): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n < min) throw new Error(`--${name} must be an integer >= ${min}, got "${v}"`);
  return n;
}

/** Parses the command line into simulator options. @throws Error naming the bad option */
export function parseSimArgs(argv: string[]): RedfishSimOptions {
  const { values } = parseArgs({
    args: argv,
    options: {
      count: { type: 'string' },
      'base-port': { type: 'string' },
      latency: { type: 'string' },
      'slow-fraction': { type: 'string' },
      'slow-bmc-fraction': { type: 'string' },
      slow: { type: 'string' },
      'fail-rate': { type: 'string' },
      'timeout-rate': { type: 'string' },
      'garbage-rate': { type: 'string' },
      'reset-rate': { type: 'string' },
      'session-limit': { type: 'string' },
      chassis: { type: 'string' },
      mockup: { type: 'string' },
      'fleet-id': { type: 'string' },
      'boot-seconds': { type: 'string' },
      'power-delay': { type: 'string' },
      'vmedia-quirks': { type: 'string' },
      'vmedia-check-image': { type: 'string' },
      'volume-apply-time': { type: 'string' },
      'insert-media-status': { type: 'string' },
      username: { type: 'string' },
      password: { type: 'string' },
      'agent-api-url': { type: 'string' },
      'agent-iso': { type: 'string' },
      'agent-boot-seconds': { type: 'string' },
      'agent-write-mbps': { type: 'string' },
      'agent-heartbeat-min-gap-ms': { type: 'string' },
      'agent-lookup-retry-ms': { type: 'string' },
      'agent-port': { type: 'string' },
      'agent-no-auto-tls': { type: 'boolean' },
      'agent-coreos-installer': { type: 'boolean' },
      qemu: { type: 'boolean' },
      'qemu-accel': { type: 'string' },
      'qemu-memory': { type: 'string' },
      'qemu-disk': { type: 'string' },
      'qemu-dir': { type: 'string' },
      'qemu-agent-port': { type: 'boolean' },
    },
    allowPositionals: false,
  });
  let latencyMs: [number, number] | undefined;
  if (values.latency !== undefined) {
    const m = /^(\d+)(?:-(\d+))?$/.exec(values.latency);
    if (!m) throw new Error(`--latency must be MS or MIN-MAX in ms, got "${values.latency}"`);
    const lo = Number(m[1]);
    const hi = m[2] === undefined ? lo : Number(m[2]);
    if (hi < lo) throw new Error(`--latency: ${hi} is below ${lo}`);
    latencyMs = [lo, hi];
  }
  const chassis = values.chassis;
  if (chassis !== undefined && chassis !== 'both' && chassis !== 'legacy' && chassis !== 'sensors') {
    throw new Error(`--chassis must be both, legacy or sensors, got "${chassis}"`);
  }
  const bootSeconds = seconds('boot-seconds', values['boot-seconds']);
  const bootMs: [number, number] | undefined = bootSeconds ? [Math.round(bootSeconds[0] * 1000), Math.round(bootSeconds[1] * 1000)] : undefined;
  const check = values['vmedia-check-image'];
  if (check !== undefined && check !== 'none' && check !== 'insert' && check !== 'boot') {
    throw new Error(`--vmedia-check-image must be none, insert or boot, got "${check}"`);
  }
  const insertStatus = values['insert-media-status'];
  if (insertStatus !== undefined && insertStatus !== '400' && insertStatus !== '500') {
    throw new Error(`--insert-media-status must be 400 or 500, got "${insertStatus}"`);
  }
  const applyTime = values['volume-apply-time'];
  if (applyTime !== undefined && applyTime !== 'Immediate' && applyTime !== 'OnReset') {
    throw new Error(`--volume-apply-time must be Immediate or OnReset, got "${applyTime}"`);
  }
  let vmediaQuirks: string[] | undefined;
  if (values['vmedia-quirks'] !== undefined) {
    vmediaQuirks = values['vmedia-quirks'].split(',').filter((q) => q.trim());
    try {
      parseQuirks(vmediaQuirks);
    } catch (err) {
      throw new Error(`--vmedia-quirks: ${(err as Error).message}`);
    }
  }
  const fleetId = count('fleet-id', values['fleet-id'], 0);
  if (fleetId !== undefined && fleetId > 255) throw new Error(`--fleet-id must be at most 255, got ${fleetId}`);
  const basePort = count('base-port', values['base-port'], 0) ?? 0;
  const n = count('count', values.count, 1) ?? 1;
  if (basePort > 0 && basePort + n - 1 > 65535) throw new Error(`--base-port ${basePort} with --count ${n} runs past port 65535`);
  return {
    count: n,
    basePort,
    latencyMs,
    slowFraction: fraction('slow-fraction', values['slow-fraction']),
    slowBmcFraction: fraction('slow-bmc-fraction', values['slow-bmc-fraction']),
    slowMs: count('slow', values.slow, 0) ?? 20_000,
    failRate: fraction('fail-rate', values['fail-rate']),
    timeoutRate: fraction('timeout-rate', values['timeout-rate']),
    garbageRate: fraction('garbage-rate', values['garbage-rate']),
    resetRate: fraction('reset-rate', values['reset-rate']),
    sessionLimit: count('session-limit', values['session-limit'], 1),
    chassis,
    mockup: values.mockup,
    fleetId,
    bootMs,
    powerDelayMs: count('power-delay', values['power-delay'], 0),
    vmediaQuirks,
    vmediaCheckImage: check,
    ...(applyTime ? { storage: { applyTime } } : {}),
    insertMediaStatus: insertStatus === undefined ? undefined : Number(insertStatus),
    username: values.username,
    password: values.password,
    agent: agentOptions(values),
    qemu: qemuOptions(values),
  };
}

function qemuOptions(values: Record<string, string | boolean | undefined>): QemuOptions | undefined {
  const others = ['qemu-accel', 'qemu-memory', 'qemu-disk', 'qemu-dir', 'qemu-agent-port'].filter((k) => values[k] !== undefined);
  if (!values.qemu) {
    if (others.length) throw new Error(`--${others[0]} needs --qemu`);
    return undefined;
  }
  const accel = values['qemu-accel'];
  if (accel !== undefined && accel !== 'tcg' && accel !== 'kvm') throw new Error(`--qemu-accel must be tcg or kvm, got "${String(accel)}"`);
  const memory = typeof values['qemu-memory'] === 'string' ? count('qemu-memory', values['qemu-memory'], 64) : undefined;
  const disk = typeof values['qemu-disk'] === 'string' ? count('qemu-disk', values['qemu-disk'], 1) : undefined;
  return {
    ...(accel ? { accel } : {}),
    ...(memory ? { memoryMiB: memory } : {}),
    ...(disk ? { diskMiB: disk } : {}),
    ...(typeof values['qemu-dir'] === 'string' ? { workDir: values['qemu-dir'] } : {}),
    ...(values['qemu-agent-port'] ? { agentPort: true } : {}),
  };
}

function seconds(name: string, v: string | undefined): [number, number] | undefined {
  if (v === undefined) return undefined;
  const m = /^(\d+(?:\.\d+)?)(?:-(\d+(?:\.\d+)?))?$/.exec(v);
  if (!m) throw new Error(`--${name} must be S or MIN-MAX in seconds, got "${v}"`);
  const lo = Number(m[1]);
  const hi = m[2] === undefined ? lo : Number(m[2]);
  if (hi < lo) throw new Error(`--${name}: ${hi} is below ${lo}`);
  return [lo, hi];
}

function agentOptions(values: Record<string, string | boolean | undefined>): AgentSimOptions | undefined {
  const str = (k: string) => (typeof values[k] === 'string' ? (values[k] as string) : undefined);
  const url = str('agent-api-url');
  const others = ['agent-iso', 'agent-boot-seconds', 'agent-write-mbps', 'agent-heartbeat-min-gap-ms', 'agent-lookup-retry-ms', 'agent-port', 'agent-no-auto-tls', 'agent-coreos-installer'].filter((k) => values[k] !== undefined);
  if (url === undefined) {
    if (others.length) throw new Error(`--${others[0]} needs --agent-api-url`);
    return undefined;
  }
  if (!/^https?:\/\/[^/]+/i.test(url)) throw new Error(`--agent-api-url must be an http(s) URL, got "${url}"`);
  let isoPattern: RegExp | undefined;
  const iso = str('agent-iso');
  if (iso !== undefined) {
    try {
      isoPattern = new RegExp(iso, 'i');
    } catch (err) {
      throw new Error(`--agent-iso: ${(err as Error).message}`);
    }
  }
  const mbps = str('agent-write-mbps');
  const writeMBps = mbps === undefined ? undefined : Number(mbps);
  if (writeMBps !== undefined && !(Number.isFinite(writeMBps) && writeMBps > 0)) throw new Error(`--agent-write-mbps must be a number above 0, got "${mbps}"`);
  const port = count('agent-port', str('agent-port'), 0);
  if (port !== undefined && port > 65535) throw new Error(`--agent-port must be at most 65535, got ${port}`);
  return {
    apiUrl: url,
    isoPattern,
    bootSeconds: seconds('agent-boot-seconds', str('agent-boot-seconds')),
    writeMBps,
    heartbeatMinGapMs: count('agent-heartbeat-min-gap-ms', str('agent-heartbeat-min-gap-ms'), 0),
    lookupRetryMs: count('agent-lookup-retry-ms', str('agent-lookup-retry-ms'), 1),
    port,
    autoTls: values['agent-no-auto-tls'] !== true,
    coreosInstaller: values['agent-coreos-installer'] === true,
  };
}

/** Runs `galvanic sim redfish`; resolves with the exit code once stopped by a signal. */
export async function runRedfishSim(argv: string[]): Promise<number> {
  if (argv.includes('-h') || argv.includes('--help')) {
    process.stdout.write(`${SIM_REDFISH_USAGE}\n`);
    return 0;
  }
  let opts: RedfishSimOptions;
  try {
    opts = parseSimArgs(argv);
  } catch (err) {
    process.stderr.write(`galvanic sim redfish: ${(err as Error).message}\n${SIM_REDFISH_USAGE}\n`);
    return 2;
  }
  const sim = await startRedfishSim(opts);
  const ports = sim.bmcs.map((b) => b.port);
  process.stdout.write(`${JSON.stringify({ listening: sim.bmcs.length, host: '127.0.0.1', firstPort: ports[0], lastPort: ports[ports.length - 1], mockup: opts.mockup ?? null, agentUrl: sim.agentUrl ?? null, agentCertificate: sim.agentCertificate ?? null })}\n`);
  await new Promise<void>((resolve) => {
    process.once('SIGTERM', () => resolve());
    process.once('SIGINT', () => resolve());
  });
  await sim.stop();
  return 0;
}
