/**
 * Database outage benchmark (not a test): many rounds of the scenario of
 * test/integration/database-outage.test.ts. Two API servers, three conductors and simulated
 * Redfish BMCs on a private Postgres; each round fires actions at every node without waiting
 * and, a third of the way in, restarts Postgres (fast), stops it for a while, or terminates
 * its LISTEN backends. Counts per fault: rounds, accepted actions lost or failed, BMC order
 * violations, 500 answers, the longest hold-up of a node's queue, reservations left, the
 * p50 accept→start before and after the fault, and the claims the conductors undid after a
 * failed COMMIT (with how many of their intents had committed and were put back).
 *
 *   npm run bench:outage -- [--rounds N] [--nodes N] [--per-node K] [--outage-ms MS] [--faults restart,outage,terminate-listen] [--logs DIR]
 *
 * Results go to stdout and to bench/results/outage-<timestamp>.json and outage-latest.json.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { runBenchmark } from './lib/cleanup.js';
import { benchLog, gitState, loadAvg, machineInfo, positiveInt, table, writeResults } from './lib/util.js';
import { measureWakeUp, runRound, startOutageCluster, type Fault, type RoundResult } from '../test/helpers/outage.js';

const USAGE = `Usage: node dist/bench/outage.js [options]

  --rounds N        rounds per fault (default 10)
  --nodes N         simulated Redfish BMCs, one node each (default 60)
  --per-node K      actions fired at each node per round (default 12)
  --outage-ms MS    how long the database is stopped in an 'outage' round (default 8000)
  --faults LIST     comma-separated, of restart, outage, terminate-listen, none (default the first three)
  --logs DIR        after a round whose witness disagrees, write each conductor's log there`;

interface Summary {
  fault: Fault;
  rounds: number;
  fired: number;
  accepted: number;
  lost: number;
  failed: number;
  witnessViolations: number;
  status500: number;
  status503: number;
  reservationsLeft: number;
  maxDownMs: number;
  maxHoldUpMs: number;
  /** Worst (largest) hold-up beyond the outage itself over the rounds. */
  maxHoldUpBeyondOutageMs: number;
  p50AcceptToStartBeforeMs: number[];
  p50AcceptToStartAfterMs: number[];
  /** Claims undone after a failed COMMIT, their intents, and those put back (the others had not committed). */
  undoneClaims: number;
  undoneClaimIntents: number;
  undoneClaimRequeued: number;
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      rounds: { type: 'string' }, nodes: { type: 'string' }, 'per-node': { type: 'string' }, 'outage-ms': { type: 'string' },
      faults: { type: 'string' }, logs: { type: 'string' }, help: { type: 'boolean' },
    },
  });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const rounds = positiveInt('rounds', values.rounds, 10);
  const nodes = positiveInt('nodes', values.nodes, 60);
  const perNode = positiveInt('per-node', values['per-node'], 12);
  const outageMs = positiveInt('outage-ms', values['outage-ms'], 8000);
  const faults = (values.faults ?? 'restart,outage,terminate-listen').split(',') as Fault[];
  const log = benchLog();
  const startedAt = new Date();
  log(`starting 2 APIs, 3 conductors, ${nodes} Redfish BMCs on a private Postgres (load ${loadAvg().join(' ')})`);
  const c = await startOutageCluster({ nodes, apis: 2, conductors: 3 });
  const all: Array<RoundResult & { before: unknown; after: unknown }> = [];
  const summaries: Summary[] = [];
  try {
    await measureWakeUp(c);
    for (const fault of faults) {
      const s: Summary = {
        fault, rounds: 0, fired: 0, accepted: 0, lost: 0, failed: 0, witnessViolations: 0, status500: 0, status503: 0, reservationsLeft: 0,
        maxDownMs: 0, maxHoldUpMs: 0, maxHoldUpBeyondOutageMs: 0, p50AcceptToStartBeforeMs: [], p50AcceptToStartAfterMs: [],
        undoneClaims: 0, undoneClaimIntents: 0, undoneClaimRequeued: 0,
      };
      for (let round = 1; round <= rounds; round++) {
        const before = await measureWakeUp(c);
        const r = await runRound(c, fault, { perNode, outageMs });
        const after = await measureWakeUp(c);
        all.push({ ...r, before, after });
        s.rounds++;
        s.fired += r.fired;
        s.accepted += r.answers.accepted;
        s.lost += r.lost;
        s.failed += r.failed.length;
        s.witnessViolations += r.witness.length;
        s.status500 += r.answers.status500;
        s.status503 += r.answers.status503;
        s.reservationsLeft += r.reservationsLeft;
        s.maxDownMs = Math.max(s.maxDownMs, r.downMs);
        s.maxHoldUpMs = Math.max(s.maxHoldUpMs, r.maxHoldUpMs);
        s.maxHoldUpBeyondOutageMs = Math.max(s.maxHoldUpBeyondOutageMs, r.maxHoldUpMs - r.downMs);
        s.p50AcceptToStartBeforeMs.push(Math.round(before.acceptToStartP50Ms));
        s.p50AcceptToStartAfterMs.push(Math.round(after.acceptToStartP50Ms));
        s.undoneClaims += r.undoneClaims.claims;
        s.undoneClaimIntents += r.undoneClaims.intents;
        s.undoneClaimRequeued += r.undoneClaims.requeued;
        log(`${fault} round ${round}/${rounds}: down ${r.downMs} ms, accepted ${r.answers.accepted}/${r.fired}, failed ${r.failed.length}, lost ${r.lost}, `
          + `witness ${r.witness.length}, 500s ${r.answers.status500}, 503s ${r.answers.status503}, hold-up ${r.maxHoldUpMs} ms, `
          + `p50 accept→start ${Math.round(before.acceptToStartP50Ms)} → ${Math.round(after.acceptToStartP50Ms)} ms, `
          + `claims undone ${r.undoneClaims.claims} (${r.undoneClaims.requeued}/${r.undoneClaims.intents} intents put back) (load ${loadAvg().join(' ')})`);
        for (const f of r.failed.slice(0, 3)) log(`  failed: ${f}`);
        for (const w of r.witness.slice(0, 3)) log(`  witness: ${w}`);
        if (values.logs && r.witness.length > 0) {
          await mkdir(values.logs, { recursive: true });
          for (const p of c.conductors) await writeFile(path.join(values.logs, `outage-${fault}-${round}-${p.host}.log`), p.output());
          log(`  conductor logs in ${values.logs}`);
        }
        for (const e of r.internalErrors.slice(0, 2)) log(`  api: ${e.slice(0, 300)}`);
        for (const e of r.answers.transportErrors.slice(0, 2)) log(`  connection error (retried): ${e}`);
      }
      summaries.push(s);
    }
  } finally {
    await c.close();
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)];
  process.stdout.write(`\n${table([
    ['fault', 'rounds', 'accepted', 'lost', 'failed', 'out of order', '500', '503', 'reserved left', 'max down ms', 'max hold-up ms', 'p50 a→s before', 'p50 a→s after',
      'claims undone (put back/intents)'],
    ...summaries.map((s) => [s.fault, String(s.rounds), `${s.accepted}/${s.fired}`, String(s.lost), String(s.failed), String(s.witnessViolations), String(s.status500),
      String(s.status503), String(s.reservationsLeft), String(s.maxDownMs), String(s.maxHoldUpMs), String(median(s.p50AcceptToStartBeforeMs)), String(median(s.p50AcceptToStartAfterMs)),
      `${s.undoneClaims} (${s.undoneClaimRequeued}/${s.undoneClaimIntents})`]),
  ])}\n`);
  const file = await writeResults('outage', startedAt, {
    startedAt, machine: machineInfo(), git: gitState(), load: loadAvg(), options: { rounds, nodes, perNode, outageMs, faults }, summaries, rounds: all,
  });
  log(`results in ${file}`);
  const bad = summaries.some((s) => s.lost + s.failed + s.witnessViolations + s.status500 + s.reservationsLeft > 0);
  return bad ? 1 : 0;
}

runBenchmark(main);
