/** The intent benchmark's options, and the settings its phases share. */
import path from 'node:path';
import { SCHEMA } from '../../common/config-schema.js';
import { parseBenchArgs, positiveInt, ROOT } from '../lib/util.js';

export const CONFIG_FILE = path.join(ROOT, 'etc/galvanic.conf.sample');
export const SERVER_LOG_LEVEL = 'warn';
export const POLL_MS = 250;

export interface Options {
  nodes: number;
  intents: number;
  conductors: number[];
  concurrency: number;
  latencyRequests: number;
  latencyGapMs: number;
  workers: number | undefined;
  poolMax: number | undefined;
  pgFast: boolean;
  pgStatStatements: boolean;
  cpuProf: string | undefined;
  stallTimeoutS: number;
  phases: Set<Phase>;
  explainClaim: boolean;
  strict: boolean;
  resultsName: string;
}

const USAGE = `Usage: node dist/bench/intents.js [options]

  --nodes N               fake-hardware nodes, inserted with SQL (default 10000)
  --intents M             power intents in the throughput phase, M/N per node (default 100000)
  --conductors LIST       conductor counts to run the benchmark with, comma-separated (default 1,3)
                          (each K>1 is compared with the K=1 runs beside it: 1,3,1,5,1 evens out drift)
  --concurrency C         concurrent HTTP clients in the throughput phase (default 64)
  --latency-requests L    single requests in the latency phase (default 500)
  --latency-gap-ms G      pause between two latency requests (default 5)
  --phases LIST           throughput,latency,idle (default throughput,latency; idle: each process's CPU
                          over 30 s with nothing to do, before the other phases)
  --workers W             GALVANIC_CONDUCTOR__WORKERS_POOL_SIZE (default: the config's, ${SCHEMA.conductor.workers_pool_size.default})
  --pool P                GALVANIC_DATABASE__MAX_POOL_SIZE of api and conductors (default: the config's, ${SCHEMA.database.max_pool_size.default})
  --pg-fast               embedded Postgres without fsync/synchronous_commit (default: durable)
  --pg-stat-statements    embedded Postgres with pg_stat_statements; report the top statements per phase
  --cpu-prof DIR          run api and conductors with --cpu-prof; profiles go to DIR
  --stall-timeout S       give up when no intent finishes for S seconds (default 120)
  --explain-claim         only EXPLAIN ANALYZE the claim query with M queued intents, then exit
  --strict                exit 1 when a target is missed (default: only on errors)
  --results-name NAME     results go to bench/results/NAME-latest.json (default intents)

Environment: DATABASE_URL=postgres://... uses that server instead of an embedded one.`;

export const PHASES = ['throughput', 'latency', 'idle'] as const;
export type Phase = (typeof PHASES)[number];

export function parseOptions(argv: string[]): Options | undefined {
  const values = parseBenchArgs(
    argv, USAGE,
    ['nodes', 'intents', 'conductors', 'concurrency', 'latency-requests', 'latency-gap-ms', 'phases', 'workers', 'pool', 'cpu-prof', 'stall-timeout', 'results-name'],
    ['pg-fast', 'pg-stat-statements', 'explain-claim', 'strict'],
  );
  if (!values) return undefined;
  const conductors = (values.conductors ?? '1,3').split(',').map((s) => positiveInt('conductors', s.trim(), 1));
  const phases = new Set((values.phases ?? 'throughput,latency').split(',').map((s) => s.trim()));
  for (const p of phases) if (!PHASES.includes(p as Phase)) throw new Error(`--phases: unknown phase "${p}"`);
  return {
    nodes: positiveInt('nodes', values.nodes, 10_000),
    intents: positiveInt('intents', values.intents, 100_000),
    conductors,
    concurrency: positiveInt('concurrency', values.concurrency, 64),
    latencyRequests: positiveInt('latency-requests', values['latency-requests'], 500),
    latencyGapMs: positiveInt('latency-gap-ms', values['latency-gap-ms'], 5, true),
    workers: values.workers === undefined ? undefined : positiveInt('workers', values.workers, 100),
    poolMax: values.pool === undefined ? undefined : positiveInt('pool', values.pool, 10),
    pgFast: values['pg-fast'] ?? false,
    pgStatStatements: values['pg-stat-statements'] ?? false,
    cpuProf: values['cpu-prof'] === undefined ? undefined : path.resolve(values['cpu-prof']),
    stallTimeoutS: positiveInt('stall-timeout', values['stall-timeout'], 120),
    phases: phases as Set<Phase>,
    explainClaim: values['explain-claim'] ?? false,
    strict: values.strict ?? false,
    resultsName: values['results-name'] ?? 'intents',
  };
}
