/**
 * A Postgres restart or outage loses nothing and fails nothing falsely. Two API servers,
 * three conductors and 60 simulated Redfish BMCs on a private Postgres; 720 actions fired
 * without waiting while the database restarts (fast), stops for 8 s (longer than the
 * conductors' heartbeat_timeout), or loses only its LISTEN backends. Every accepted action
 * succeeds, in order, once, at its BMC; no queue waits much past the outage; nothing stays
 * reserved; the API answers 503 with Retry-After meanwhile, never 500; and LISTEN is back,
 * so an action starts as fast after the fault as before it. bench/outage.ts runs many rounds.
 */
import { expect } from 'chai';
import { measureWakeUp, runRound, startOutageCluster, type Fault, type OutageCluster, type RoundResult } from '../helpers/outage.js';

const ROUNDS = Number(process.env.OUTAGE_ROUNDS ?? 1);
const NODES = 60;
const PER_NODE = 12;
const OUTAGE_MS = 8000;
/** Wake-up latencies below this are noise on a loaded machine (one claim round trip). */
const LATENCY_FLOOR_MS = 50;

function note(msg: string): void {
  if (process.env.TEST_VERBOSE === '1') process.stderr.write(`      [database-outage] ${msg}\n`);
}

function expectGoodRound(r: RoundResult, conductors: number, apis: number, baselineHoldUpMs: number): void {
  const what = `${r.fault} round: ${JSON.stringify({ ...r, failed: r.failed.slice(0, 5) })}`;
  expect(r.answers.status500, `${what}: 500 answers`).to.equal(0);
  expect(r.answers.withoutRetryAfter, `${what}: 503 without Retry-After`).to.equal(0);
  expect(r.answers.other, `${what}: other answers`).to.deep.equal([]);
  expect(r.answers.accepted, `${what}: accepted`).to.equal(r.fired);
  expect(r.lost, `${what}: accepted intents lost`).to.equal(0);
  expect(r.openLeft, `${what}: intents still open`).to.equal(0);
  expect(r.failed, `${what}: accepted intents failed`).to.deep.equal([]);
  expect(r.witness, `${what}: queue and BMC disagree`).to.deep.equal([]);
  expect(r.reservationsLeft, `${what}: reservations left`).to.equal(0);
  expect(r.dead, `${what}: processes not serving`).to.deep.equal([]);
  // Beyond what the same burst shows without a fault: on a loaded machine that alone can be seconds.
  expect(r.maxHoldUpMs, `${what}: longest hold-up of a queue (without a fault: ${baselineHoldUpMs} ms)`).to.be.at.most(r.downMs + 2000 + baselineHoldUpMs);
  expect(r.listeners, `${what}: LISTEN connections`).to.deep.equal({
    'galvanic-api-listen': apis, 'galvanic-conductor-listen': conductors, 'galvanic-console-listen': conductors,
  });
}

describe('database outage (real processes, a private Postgres the test restarts)', function () {
  this.timeout(600_000);
  let c: OutageCluster | undefined;
  let baseline: RoundResult | undefined;

  before(async () => {
    c = await startOutageCluster({ nodes: NODES, apis: 2, conductors: 3 });
    // Also opens each API's LISTEN connection (the intent waiter's, on its first wait).
    await measureWakeUp(c);
    baseline = await runRound(c, 'none', { perNode: PER_NODE, outageMs: 0 });
    note(`baseline round: ${JSON.stringify({ ...baseline, failed: baseline.failed.slice(0, 3) })}`);
    expectGoodRound(baseline, c.conductors.length, c.apis.length, baseline.maxHoldUpMs);
  });

  after(async () => {
    await c?.close();
  });

  const scenarios: Array<{ fault: Fault; title: string }> = [
    { fault: 'restart', title: `a fast restart (pg_ctl restart -m fast) mid-burst, ${ROUNDS} round(s)` },
    { fault: 'outage', title: `an ${OUTAGE_MS / 1000} s outage (longer than heartbeat_timeout) mid-burst, ${ROUNDS} round(s)` },
    { fault: 'terminate-listen', title: `pg_terminate_backend of only the LISTEN backends mid-burst, ${ROUNDS} round(s)` },
  ];
  for (const s of scenarios) {
    it(`${s.title}: nothing lost or failed, in order, no reservation left, 503 not 500, wake-up as fast as before`, async () => {
      for (let round = 1; round <= ROUNDS; round++) {
        const before = await measureWakeUp(c!);
        const r = await runRound(c!, s.fault, { perNode: PER_NODE, outageMs: OUTAGE_MS });
        const after = await measureWakeUp(c!);
        note(`${s.fault} round ${round}: ${JSON.stringify({ ...r, failed: r.failed.slice(0, 3), before, after })}`);
        expectGoodRound(r, c!.conductors.length, c!.apis.length, baseline!.maxHoldUpMs);
        if (s.fault === 'outage') {
          expect(r.probe, 'GET /healthz and /metrics during the outage').to.deep.equal({ healthz: 503, retryAfter: '2', databaseUp: '0' });
          for (const a of c!.apis) expect((await fetch(`${a.url}/healthz`)).status, 'GET /healthz after the outage').to.equal(200);
        }
        expect(after.acceptToStartP50Ms, `accept→start p50 after the ${s.fault} (before: ${before.acceptToStartP50Ms} ms)`)
          .to.be.at.most(Math.max(2 * before.acceptToStartP50Ms, LATENCY_FLOOR_MS));
        expect(after.syncP50Ms, `synchronous boot device p50 after the ${s.fault} (before: ${before.syncP50Ms} ms)`)
          .to.be.at.most(Math.max(2 * before.syncP50Ms, before.syncP50Ms + LATENCY_FLOOR_MS * 4));
      }
    });
  }
});
