/**
 * A database outage tried as an operator would: API servers and conductors (real processes)
 * and simulated Redfish BMCs (real HTTP) on a private Postgres, a burst of actions fired
 * without waiting, and the database restarted, stopped for a while, or its LISTEN backends
 * terminated in the middle. The BMCs' event logs are the witness of what reached them.
 * Used by test/integration/database-outage.test.ts (a few rounds) and bench/outage.ts (many).
 */
import diagnostics from 'node:diagnostics_channel';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Knex } from 'knex';
import { createKnex } from '../../db/connection.js';
import { startRedfishSim, type RedfishSim, type SimEvent } from '../../sim/redfish/index.js';
import { startConductor, startGalvanic, type RunningConductor, type RunningGalvanic } from './app.js';
import { startPrivatePostgres, type PrivatePostgres } from './private-postgres.js';

export type Fault = 'none' | 'restart' | 'outage' | 'terminate-listen';

export interface OutageClusterOptions {
  nodes: number;
  apis: number;
  conductors: number;
  /** Extra environment of the conductors. */
  conductorEnv?: Record<string, string>;
}

export interface OutageCluster {
  pg: PrivatePostgres;
  db: Knex;
  sim: RedfishSim;
  apis: RunningGalvanic[];
  conductors: RunningConductor[];
  nodes: Array<{ uuid: string; bmc: string }>;
  /** Every event of each BMC seen so far (by BMC URL), kept across rounds. */
  events: Map<string, SimEvent[]>;
  /** The client's connections to the API servers, to describe a failed request. */
  connections: ConnectionWatch;
  /** Witness disagreements reported by an earlier round (the witness reads every round's events). */
  reported: Set<string>;
  close(): Promise<void>;
}

export const OUTAGE_CONDUCTOR_ENV: Record<string, string> = {
  GALVANIC_CONDUCTOR__HEARTBEAT_INTERVAL: '1',
  GALVANIC_CONDUCTOR__HEARTBEAT_TIMEOUT: '5',
  GALVANIC_CONDUCTOR__SYNC_POWER_STATE_INTERVAL: '0',
  // Slow on purpose: a wake-up that arrives faster came over LISTEN.
  GALVANIC_CONDUCTOR__POLL_INTERVAL: '2',
  GALVANIC_CONDUCTOR__ORPHANED_INTENT_TIMEOUT: '20',
};

async function json(res: Response): Promise<Record<string, unknown>> {
  const text = await res.text();
  return text ? JSON.parse(text) as Record<string, unknown> : {};
}

const HEADERS = { 'content-type': 'application/json', 'x-openstack-ironic-api-version': 'latest' };

export async function startOutageCluster(opts: OutageClusterOptions): Promise<OutageCluster> {
  const pg = await startPrivatePostgres();
  const connections = new ConnectionWatch();
  const closers: Array<() => Promise<unknown>> = [async () => connections.close(), () => pg.close()];
  const close = async () => {
    for (const c of closers.reverse()) await c().catch(() => undefined);
  };
  try {
    const db = createKnex(pg.url, { poolMax: 4, applicationName: 'galvanic-test' });
    closers.push(() => db.destroy());
    const sim = await startRedfishSim({ count: opts.nodes });
    closers.push(() => sim.stop());
    const apis: RunningGalvanic[] = [];
    const conductors: RunningConductor[] = [];
    closers.push(() => Promise.all([...apis, ...conductors].map((p) => p.stop())));
    const env = { ...OUTAGE_CONDUCTOR_ENV, ...opts.conductorEnv };
    for (let i = 0; i < opts.apis; i++) apis.push(await startGalvanic({ databaseUrl: pg.url, command: 'api', env: { GALVANIC_DEFAULT__LOG_LEVEL: 'warn' } }));
    const hosts = Array.from({ length: opts.conductors }, (_, i) => `outage-c${i + 1}`);
    for (const host of hosts) conductors.push(await startConductor({ databaseUrl: pg.url, host, env }));
    const full = `"ring":${JSON.stringify([...hosts].sort())}`;
    const deadline = Date.now() + 30_000;
    while (!conductors.every((c) => c.output().includes(full))) {
      if (Date.now() > deadline) throw new Error(`the conductors never saw the whole ring:\n${conductors.map((c) => c.output()).join('\n')}`);
      await sleep(100);
    }
    const nodes: Array<{ uuid: string; bmc: string }> = [];
    for (const bmc of sim.bmcs) {
      const res = await fetch(`${apis[0].url}/v1/nodes`, {
        method: 'POST', headers: HEADERS,
        body: JSON.stringify({ driver: 'redfish', driver_info: { redfish_address: bmc.url, redfish_username: 'admin', redfish_password: 'password' } }),
      });
      if (res.status !== 201) throw new Error(`creating a node: ${res.status} ${await res.text()}`);
      nodes.push({ uuid: (await json(res)).uuid as string, bmc: bmc.url });
    }
    return { pg, db, sim, apis, conductors, nodes, events: new Map(), connections, reported: new Set(), close };
  } catch (err) {
    await close();
    throw err;
  }
}

/** One action: a reboot (a Reset at the BMC) or a boot device (a PATCH of Boot), each always reaching the BMC. */
interface Action {
  node: string;
  path: string;
  body: Record<string, unknown>;
}

const BOOT_TARGETS: Record<string, string> = { pxe: 'Pxe', disk: 'Hdd', cdrom: 'Cd' };

function randomAction(node: string): Action {
  if (Math.random() < 0.4) return { node, path: `/v1/nodes/${node}/states/power`, body: { target: 'rebooting' } };
  const device = Object.keys(BOOT_TARGETS)[Math.floor(Math.random() * 3)];
  return { node, path: `/v1/nodes/${node}/management/boot_device?wait=0`, body: { boot_device: device } };
}

/** What the API answered while firing. */
export interface Answers {
  accepted: number;
  status503: number;
  /** 503s without a Retry-After header. */
  withoutRetryAfter: number;
  status500: number;
  /**
   * Requests whose connection failed (then retried): when, relative to the fault, and whether
   * the connection was new or reused after how long idle.
   */
  transportErrors: string[];
  other: string[];
  /** When the fault was injected (ms since the epoch), once it was. */
  faultAt?: number;
}

/**
 * What the client knew of the connection each request went out on, from the diagnostics
 * channels of fetch's undici: a connection reset on one reused after about the server's
 * keep-alive timeout is the client's race with the idle timeout, one on a busy or new
 * connection is the server's doing.
 */
export class ConnectionWatch {
  private readonly lastDone = new WeakMap<object, number>();
  private readonly socketOf = new WeakMap<object, object>();
  private readonly sentOn = new Map<string, string>();
  private readonly onSend = (m: unknown) => {
    const { request, socket } = m as { request: { origin: string; path: string }; socket: object };
    this.socketOf.set(request, socket);
    const done = this.lastDone.get(socket);
    this.sentOn.set(`${request.origin}${request.path}`, done === undefined ? 'a new connection' : `a connection idle for ${Date.now() - done} ms`);
  };
  private readonly onDone = (m: unknown) => {
    const socket = this.socketOf.get((m as { request: object }).request);
    if (socket) this.lastDone.set(socket, Date.now());
  };

  constructor() {
    diagnostics.subscribe('undici:client:sendHeaders', this.onSend);
    diagnostics.subscribe('undici:request:trailers', this.onDone);
  }

  /** The connection the last request to `url` went out on. */
  describe(url: string): string {
    return this.sentOn.get(url) ?? 'an unknown connection';
  }

  close(): void {
    diagnostics.unsubscribe('undici:client:sendHeaders', this.onSend);
    diagnostics.unsubscribe('undici:request:trailers', this.onDone);
  }
}

/**
 * Fires `action` as a client of Ironic would: a 503 is retried after its Retry-After (as
 * python-ironicclient and openstacksdk do), anything else is final. Returns the intent UUID once accepted.
 */
async function fire(base: string, a: Action, answers: Answers, watch: ConnectionWatch): Promise<string | undefined> {
  for (let attempt = 0; attempt < 60; attempt++) {
    let res: Response;
    const sentAt = Date.now();
    try {
      res = await fetch(`${base}${a.path}`, { method: 'PUT', headers: HEADERS, body: JSON.stringify(a.body) });
    } catch (err) {
      // A connection reset: retried, as python-ironicclient retries connection errors.
      const cause = (err as Error & { cause?: Error }).cause;
      const when = answers.faultAt === undefined ? 'with no fault injected yet' : `${sentAt - answers.faultAt} ms after the fault began`;
      answers.transportErrors.push(`${a.path}: ${(err as Error).message}${cause ? ` (${cause.message})` : ''}, sent ${when} on ${watch.describe(`${base}${a.path}`)}`);
      await sleep(500);
      continue;
    }
    const text = await res.text();
    if (res.status === 202) {
      answers.accepted++;
      return /\/v1\/intents\/([0-9a-f-]{36})$/.exec(res.headers.get('location') ?? '')?.[1];
    }
    if (res.status === 503) {
      answers.status503++;
      const after = Number(res.headers.get('retry-after'));
      if (!(after > 0)) answers.withoutRetryAfter++;
      await sleep(Math.min(after > 0 ? after : 2, 2) * 1000);
      continue;
    }
    if (res.status === 500) answers.status500++;
    else answers.other.push(`${a.path}: ${res.status} ${text.slice(0, 200)}`);
    return undefined;
  }
  answers.other.push(`${a.path}: still 503 after 60 tries`);
  return undefined;
}

async function pool<T>(concurrency: number, items: readonly T[], fn: (item: T, index: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, async () => {
    while (next < items.length) {
      const i = next++;
      await fn(items[i], i);
    }
  }));
}

/** Runs `fn` against the database until it answers (the test's own reads ride out the outage too). */
async function retrying<T>(fn: () => Promise<T>, ms = 60_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await sleep(200);
    }
  }
}

async function openCount(db: Knex): Promise<number> {
  const { rows } = await db.raw<{ rows: Array<{ n: number }> }>("SELECT count(*)::int AS n FROM intents WHERE state IN ('queued', 'running')");
  return rows[0].n;
}

async function waitAllFinal(db: Knex, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if ((await retrying(() => openCount(db))) === 0) return true;
    await sleep(100);
  }
  return false;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s[Math.floor((s.length - 1) / 2)];
}

/**
 * The wake-up latency of an idle cluster: accept → start (the database's own timestamps) of
 * `samples` actions fired one after the other, and the time of synchronous boot device
 * requests (the API waiting for the conductor's outcome) on each API server.
 */
export async function measureWakeUp(c: OutageCluster, samples = 8): Promise<{ acceptToStartP50Ms: number; syncP50Ms: number }> {
  const starts: number[] = [];
  const syncs: number[] = [];
  const answers: Answers = { accepted: 0, status503: 0, withoutRetryAfter: 0, status500: 0, transportErrors: [], other: [] };
  for (let i = 0; i < samples; i++) {
    const node = c.nodes[(i * 7) % c.nodes.length].uuid;
    const uuid = await fire(c.apis[i % c.apis.length].url, { node, path: `/v1/nodes/${node}/management/boot_device?wait=0`, body: { boot_device: 'pxe' } }, answers, c.connections);
    if (!uuid) throw new Error(`a wake-up sample was not accepted: ${JSON.stringify(answers)}`);
    const deadline = Date.now() + 30_000;
    for (;;) {
      const row = await c.db('intents').where({ uuid }).first('state', c.db.raw('extract(epoch FROM started_at - created_at) * 1000 AS ms'));
      if (row.state === 'succeeded') {
        starts.push(Number(row.ms));
        break;
      }
      if (Date.now() > deadline || (row.state !== 'queued' && row.state !== 'running')) throw new Error(`wake-up sample ${uuid} is ${row.state}`);
      await sleep(20);
    }
    const t0 = Date.now();
    const res = await fetch(`${c.apis[i % c.apis.length].url}/v1/nodes/${node}/management/boot_device?wait=20`, { method: 'PUT', headers: HEADERS, body: JSON.stringify({ boot_device: 'disk' }) });
    await res.text();
    if (res.status >= 300) throw new Error(`a synchronous boot device request answered ${res.status}`);
    syncs.push(Date.now() - t0);
  }
  return { acceptToStartP50Ms: median(starts), syncP50Ms: median(syncs) };
}

export interface RoundResult {
  fault: Fault;
  /** How long the database was down (ms); 0 for terminate-listen. */
  downMs: number;
  fired: number;
  answers: Answers;
  /** Accepted intents that did not succeed, with their errors. */
  failed: string[];
  /** Accepted intents missing from the database. */
  lost: number;
  /** Disagreements between a node's queue and what its BMC saw. */
  witness: string[];
  /** Longest a node's next intent waited, beyond its predecessor and its own acceptance (ms). */
  maxHoldUpMs: number;
  reservationsLeft: number;
  /** Open intents left at the deadline (0 when all ended). */
  openLeft: number;
  /** LISTEN backends after the round, by application name. */
  listeners: Record<string, number>;
  /** During an outage: GET /healthz's status and Retry-After, and galvanic_database_up on /metrics. */
  probe?: { healthz: number; retryAfter: string | null; databaseUp: string | null };
  /** What the API servers logged as internal errors (the cause of any 500). */
  internalErrors: string[];
  /** Claims the conductors undid after a failed COMMIT: how many, their intents, and those put back (the rest had not committed). */
  undoneClaims: { claims: number; intents: number; requeued: number };
  /** Processes that exited or stopped serving. */
  dead: string[];
  seconds: number;
}

const seenErrors = new Set<string>();

async function collectEvents(c: OutageCluster): Promise<void> {
  await Promise.all(c.sim.bmcs.map(async (b) => {
    const got = (await (await fetch(`${b.url}/_sim/events`)).json()) as SimEvent[] | { events: SimEvent[] };
    const list = Array.isArray(got) ? got : got.events;
    const known = c.events.get(b.url) ?? [];
    const last = known.length ? known[known.length - 1].seq : 0;
    known.push(...list.filter((e) => e.seq > last));
    c.events.set(b.url, known);
  }));
}

interface IntentRow {
  uuid: string;
  seq: number;
  kind: string;
  args: Record<string, unknown>;
  state: string;
  attempts: number;
  error: string | null;
  conductor: string | null;
  created_ms: number;
  started_ms: number | null;
  finished_ms: number | null;
}

/** Who sent the request behind a BMC event (its trace, the conductor by pid, the connection). */
function sender(e: SimEvent, senders: ReadonlyMap<string, string>): string {
  if (typeof e.trace !== 'string') return e.conn ? ` on ${String(e.conn)}` : '';
  const trace = e.trace.replace(/pid=(\d+)/, (m, pid: string) => senders.get(pid) ?? m);
  return ` (${trace} on ${String(e.conn)})`;
}

/**
 * Matches a node's intents (seq order) against its BMC's events: each intent's attempts made
 * between one and `attempts` events of its kind, in order, and nothing else reached the BMC.
 */
function witnessNode(node: string, intents: IntentRow[], events: SimEvent[], senders: ReadonlyMap<string, string>): string[] {
  // A boot-override to None is the BMC consuming a one-time override at boot, not a request.
  const seen = events.filter((e) => e.type === 'reset' || (e.type === 'boot-override' && e.target !== 'None'));
  const labels = seen.map((e) => (e.type === 'reset' ? 'reset' : `boot:${String(e.target)}`));
  const wanted = (i: IntentRow) => (i.kind === 'power' ? 'reset' : i.kind === 'set_boot_device' ? `boot:${BOOT_TARGETS[String(i.args.device ?? i.args.boot_device)] ?? '?'}` : undefined);
  // What surrounds a disagreement: the intents (with who ran them and when) and the BMC's events.
  const around = (at: number, k: number) => {
    const t0 = Number(intents[at].created_ms);
    const rel = (ms: number | null) => (ms === null ? '-' : `${Math.round(Number(ms) - t0)}`);
    const rows = intents.slice(Math.max(0, at - 3), at + 3).map((i) => `seq ${i.seq} ${wanted(i) ?? i.kind} ${i.state} x${i.attempts} on ${i.conductor ?? '-'} created ${rel(i.created_ms)} started ${rel(i.started_ms)} finished ${rel(i.finished_ms)}`);
    const evs = seen.slice(Math.max(0, k - 3), k + 3).map((e, j) => `#${Math.max(0, k - 3) + j} ${labels[Math.max(0, k - 3) + j]} at ${rel(e.at)}${sender(e, senders)}`);
    return ` [intents (ms from seq ${intents[at].seq}'s creation): ${rows.join('; ')}] [BMC: ${evs.join('; ')}]`;
  };
  let k = 0;
  for (let at = 0; at < intents.length; at++) {
    const i = intents[at];
    const want = wanted(i);
    if (want === undefined) continue;
    let n = 0;
    while (k < labels.length && labels[k] === want && n < Math.max(1, i.attempts)) {
      k++;
      n++;
    }
    if (n === 0) return [`${node}: intent ${i.uuid} (seq ${i.seq}, ${want}, ${i.state}) has no BMC event at position ${k} (found ${labels[k] ?? 'nothing'})${around(at, k)}`];
  }
  if (k < labels.length) return [`${node}: ${labels.length - k} BMC event(s) no intent accounts for, from position ${k}: ${labels.slice(k, k + 3).join(', ')}${intents.length ? around(intents.length - 1, k) : ''}`];
  return [];
}

/** Fires `perNode` actions at every node without waiting and injects `fault` once a third are accepted. */
export async function runRound(c: OutageCluster, fault: Fault, opts: { perNode: number; outageMs: number; deadlineMs?: number }): Promise<RoundResult> {
  const t0 = Date.now();
  const actions: Action[] = [];
  for (const n of c.nodes) for (let k = 0; k < opts.perNode; k++) actions.push(randomAction(n.uuid));
  for (let i = actions.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [actions[i], actions[j]] = [actions[j], actions[i]];
  }
  const answers: Answers = { accepted: 0, status503: 0, withoutRetryAfter: 0, status500: 0, transportErrors: [], other: [] };
  const accepted: string[] = [];
  let faulted: Promise<number> | undefined;
  let probe: RoundResult['probe'];
  const inject = async (): Promise<number> => {
    answers.faultAt = Date.now();
    switch (fault) {
      case 'restart': return c.pg.restart();
      case 'outage': {
        const down = c.pg.outage(opts.outageMs);
        // What a load balancer and Prometheus see meanwhile.
        await sleep(Math.min(2000, opts.outageMs / 2));
        const health = await fetch(`${c.apis[0].url}/healthz`).catch(() => undefined);
        const metrics = await fetch(`${c.apis[0].url}/metrics`).then((r) => r.text()).catch(() => '');
        probe = { healthz: health?.status ?? 0, retryAfter: health?.headers.get('retry-after') ?? null, databaseUp: /^galvanic_database_up (\d)/m.exec(metrics)?.[1] ?? null };
        return down;
      }
      case 'terminate-listen': {
        await c.db.raw("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE 'galvanic-%-listen' AND pid <> pg_backend_pid()");
        return 0;
      }
      default: return 0;
    }
  };
  await pool(32, actions, async (a, i) => {
    if (i === Math.floor(actions.length / 3) && !faulted) faulted = inject();
    const uuid = await fire(c.apis[i % c.apis.length].url, a, answers, c.connections);
    if (uuid) accepted.push(uuid);
  });
  const downMs = (await faulted) ?? 0;
  const finished = await waitAllFinal(c.db, opts.deadlineMs ?? 120_000);
  await collectEvents(c);

  const rows = await retrying(() => c.db('intents as i').join('nodes as n', 'n.id', 'i.node_id')
    .select('i.uuid', 'n.uuid as node', 'i.seq', 'i.kind', 'i.args', 'i.state', 'i.attempts', 'i.error', 'i.conductor',
      c.db.raw('extract(epoch FROM i.created_at) * 1000 AS created_ms'), c.db.raw('extract(epoch FROM i.started_at) * 1000 AS started_ms'),
      c.db.raw('extract(epoch FROM i.finished_at) * 1000 AS finished_ms'))
    .orderBy([{ column: 'n.uuid' }, { column: 'i.seq' }]) as Promise<Array<IntentRow & { node: string }>>);
  const byUuid = new Map(rows.map((r) => [r.uuid, r]));
  const mine = new Set(accepted);
  const failed = accepted.filter((u) => byUuid.get(u)?.state !== 'succeeded' && byUuid.has(u)).map((u) => `${u}: ${byUuid.get(u)!.state}: ${byUuid.get(u)!.error}`);
  const lost = accepted.filter((u) => !byUuid.has(u)).length;
  const byNode = new Map<string, IntentRow[]>();
  for (const r of rows) byNode.set(r.node, [...(byNode.get(r.node) ?? []), { ...r, seq: Number(r.seq) }]);
  const witness: string[] = [];
  const senders = new Map(c.conductors.map((p) => [String(p.proc.pid), p.host]));
  let maxHoldUpMs = 0;
  for (const n of c.nodes) {
    const intents = byNode.get(n.uuid) ?? [];
    // Once a node disagrees, later rounds find the same disagreement again: it counts once.
    for (const w of witnessNode(n.uuid, intents, c.events.get(n.bmc) ?? [], senders)) {
      const key = /^[^ ]+ [^(]*/.exec(w)?.[0] ?? w;
      if (!c.reported.has(key)) witness.push(w);
      c.reported.add(key);
    }
    for (let k = 1; k < intents.length; k++) {
      const cur = intents[k];
      const prev = intents[k - 1];
      if (!mine.has(cur.uuid) || cur.started_ms === null || prev.finished_ms === null) continue;
      maxHoldUpMs = Math.max(maxHoldUpMs, Number(cur.started_ms) - Math.max(Number(cur.created_ms), Number(prev.finished_ms)));
    }
  }
  const reservationsLeft = Number((await c.db('nodes').whereNotNull('reservation').count<Array<{ count: string }>>('* as count'))[0].count);
  const openLeft = finished ? 0 : await openCount(c.db);
  const dead: string[] = [];
  for (const p of c.conductors) if (p.proc.exitCode !== null || p.proc.signalCode !== null) dead.push(`conductor ${p.host}`);
  for (const a of c.apis) {
    const res = await fetch(`${a.url}/v1/nodes?limit=1`, { headers: HEADERS }).catch(() => undefined);
    if (res?.status !== 200) dead.push(`api ${a.url} (GET /v1/nodes: ${res?.status})`);
  }
  const listenRows = await c.db.raw<{ rows: Array<{ name: string; n: number }> }>(
    "SELECT application_name AS name, count(*)::int AS n FROM pg_stat_activity WHERE application_name LIKE 'galvanic-%-listen' GROUP BY 1",
  );
  const internalErrors = c.apis.flatMap((a) => a.output().split('\n').filter((l) => l.includes('"msg":"internal error"') || l.includes('"request failed"')))
    .filter((l) => !seenErrors.has(l));
  for (const l of internalErrors) seenErrors.add(l);
  const undoneClaims = { claims: 0, intents: 0, requeued: 0 };
  for (const l of c.conductors.flatMap((p) => p.output().split('\n')).filter((x) => x.includes('"msg":"claim did not complete') && !seenErrors.has(x))) {
    seenErrors.add(l);
    const u = JSON.parse(l) as { intents: number; requeued: number };
    undoneClaims.claims++;
    undoneClaims.intents += u.intents;
    undoneClaims.requeued += u.requeued;
  }
  return {
    fault, downMs, probe, internalErrors: internalErrors.slice(0, 5).map((l) => l.slice(0, 1500)), undoneClaims, fired: actions.length, answers, failed, lost, witness: witness.slice(0, 20), maxHoldUpMs: Math.round(maxHoldUpMs),
    reservationsLeft, openLeft, listeners: Object.fromEntries(listenRows.rows.map((r) => [r.name, r.n])), dead, seconds: Math.round((Date.now() - t0) / 100) / 10,
  };
}
