/**
 * Sensor data at fleet size, end to end on real parts: 400 simulated Redfish BMCs (0–50 ms
 * per request), the sensor task with the amqp notifier on the real RabbitMQ, the exporter
 * consuming from it, and real Postgres. Faults, a broker outage through a TCP proxy, and a
 * mixed fleet with ipmi_sim BMCs on the synchronous path. bench/sensors.ts carries the scale.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../api/app.js';
import { pino } from 'pino';
import type { Config } from '../../common/config.js';
import { AmqpNotifier } from '../../common/notifier-amqp.js';
import { notifierFromConfig, type Notifier } from '../../common/notifier.js';
import { buildConductorMetrics } from '../../conductor/metrics.js';
import { PeriodicRunner } from '../../conductor/periodic.js';
import { ConductorService } from '../../conductor/service.js';
import { NODE_TIMEOUT, sensorDataTask, type SensorIteration } from '../../conductor/periodics/sensor-data.js';
import { listHistory } from '../../db/node-history.js';
import { createNode, deleteNode, type Node } from '../../db/nodes.js';
import { buildRegistry } from '../../drivers/build-registry.js';
import type { DriverRegistry } from '../../drivers/registry.js';
import { Exporter, exporterOptions } from '../../exporter/service.js';
import { startRedfishSim, type RedfishSim } from '../../sim/redfish/index.js';
import { testConfig } from '../helpers/app.js';
import { freshDatabase, type TestDatabase } from '../helpers/database.js';
import { freePort } from '../helpers/net.js';
import { until } from '../helpers/until.js';
import { requireIpmiSim, startSimBmcs, stopSimBmcs, type SimBmc } from '../helpers/ipmi-sim.js';
import {
  brokerAddress, deleteBusObjects, recordQueue, requireRabbitMq, RABBITMQ_URL, TcpProxy, uniqueBusNames, urlThrough, type Recorder,
} from '../helpers/rabbitmq.js';
import { setFaults, simControl, simStats } from '../helpers/redfish.js';

const log = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });
const FLEET = 400;
/** The faults: 5 % of the fleet hung, 5 % answering 500, 1 % sending broken JSON. */
const HUNG = FLEET / 20;
const FAILING = FLEET / 20;
const GARBAGE = FLEET / 100;
/** Generous: the first iteration logs in to every BMC on a machine the test shares. */
const NODE_TIMEOUT_S = 30;
/** For the faults: short, so the hung BMCs cost little; reads are warm by then. */
const FAULT_NODE_TIMEOUT_S = 6;
const INTERVAL_S = 3;
const STALE_AFTER = 2;

const MICROS_ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}$/;
const MICROS_OSLO = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{6}$/;

function sensorConfig(bus: { exchange: string; topic: string; queue: string }, env: Record<string, string> = {}): Readonly<Config> {
  return testConfig({
    GALVANIC_NOTIFICATIONS__DRIVER: 'amqp',
    GALVANIC_NOTIFICATIONS__TRANSPORT_URL: RABBITMQ_URL,
    GALVANIC_NOTIFICATIONS__EXCHANGE: bus.exchange,
    GALVANIC_NOTIFICATIONS__TOPIC: bus.topic,
    GALVANIC_NOTIFICATIONS__DECLARE_QUEUE: 'false',
    GALVANIC_SENSOR_DATA__SEND_SENSOR_DATA: 'true',
    GALVANIC_SENSOR_DATA__INTERVAL: String(INTERVAL_S),
    GALVANIC_SENSOR_DATA__NODE_TIMEOUT: String(NODE_TIMEOUT_S),
    GALVANIC_EXPORTER__QUEUE: bus.queue,
    GALVANIC_EXPORTER__PORT: '0',
    GALVANIC_EXPORTER__STALE_AFTER: String(STALE_AFTER),
    // Fail fast on a 500 so that it is counted as such, well within node_timeout.
    GALVANIC_REDFISH__CONNECTION_ATTEMPTS: '2',
    GALVANIC_REDFISH__CONNECTION_RETRY_INTERVAL: '0.1',
    GALVANIC_REDFISH__CONNECTION_CACHE_SIZE: '2000',
    GALVANIC_REDFISH__REQUEST_TIMEOUT: '20',
    ...env,
  });
}

async function enrollRedfish(db: TestDatabase, sim: RedfishSim, count: number): Promise<Node[]> {
  const nodes: Node[] = [];
  for (let i = 0; i < count; i++) {
    nodes.push(await createNode(db.knex, {
      name: `rf-${i}`, driver: 'redfish', managementInterface: 'redfish', powerInterface: 'redfish', provisionState: 'active',
      driverInfo: { redfish_address: sim.bmcs[i].url, redfish_username: 'admin', redfish_password: 'password' },
    }));
  }
  return nodes;
}

/** Sensor notifications per node UUID among `messages`. */
function countByNode(rec: Recorder, from = 0): Map<string, number> {
  const counts = new Map<string, number>();
  for (const m of rec.messages.slice(from)) {
    const uuid = m.envelope.payload.node_uuid as string;
    counts.set(uuid, (counts.get(uuid) ?? 0) + 1);
  }
  return counts;
}

async function scrape(url: string): Promise<string> {
  const res = await fetch(`${url}/metrics`);
  expect(res.status).to.equal(200);
  return res.text();
}

/** Polls /metrics until `ok` holds for its text; returns that text. */
function scrapeUntil(url: string, ok: (text: string) => boolean, timeoutMs: number, what: string): Promise<string> {
  return until(`/metrics: ${what}`, async () => {
    const text = await scrape(url);
    return ok(text) && text;
  }, timeoutMs, 200);
}

function taskFor(db: TestDatabase, config: Readonly<Config>, registry: DriverRegistry, notifier: Notifier) {
  return sensorDataTask({ db: db.knex, registry, notifier, log, hostname: 'test-host', config, owns: () => true });
}

describe(`sensor data on the bus: ${FLEET} Redfish nodes`, function () {
  this.timeout(180_000);
  const bus = uniqueBusNames();
  let db: TestDatabase;
  let sim: RedfishSim;
  let nodes: Node[];
  let config: Readonly<Config>;
  let registry: DriverRegistry;
  let notifier: AmqpNotifier;
  let recorder: Recorder;
  let exporter: Exporter;
  let exporterUrl: string;
  let task: ReturnType<typeof sensorDataTask>;
  const abort = new AbortController();

  before(async function () {
    await requireRabbitMq(this);
    db = await freshDatabase();
    sim = await startRedfishSim({ count: FLEET, latencyMs: [0, 50] });
    nodes = await enrollRedfish(db, sim, FLEET);
    config = sensorConfig(bus);
    registry = buildRegistry(config, log);
    notifier = notifierFromConfig(config, 'galvanic-conductor', log) as AmqpNotifier;
    recorder = await recordQueue(bus.exchange, `${bus.topic}.info`);
    exporter = new Exporter(exporterOptions(config), log);
    exporterUrl = (await exporter.start()).url;
    task = taskFor(db, config, registry, notifier);
  });

  after(async () => {
    abort.abort();
    await exporter?.stop();
    await notifier?.close();
    await recorder?.close();
    await registry?.close();
    await sim?.stop();
    await db?.drop();
    if (bus) await deleteBusObjects({ exchange: bus.exchange, queues: [bus.queue] }).catch(() => undefined);
  });

  async function iteration(t = task): Promise<SensorIteration> {
    await t.run(abort.signal);
    expect(await notifier.flush(30_000), 'notifier flushed').to.equal(true);
    return t.stats.lastIteration!;
  }

  it('sends each node exactly one notification per iteration, in Ironic\'s format, and the exporter serves every node', async () => {
    const first = await iteration();
    expect(first, JSON.stringify(first.failures)).to.include({ nodes: FLEET, async: FLEET, sync: 0, ok: FLEET, failed: 0 });
    await recorder.waitFor(FLEET, 20_000);
    // Anything sent twice would have arrived by now, right behind the rest.
    await sleep(300);
    const counts = countByNode(recorder);
    expect(recorder.messages).to.have.length(FLEET);
    expect(counts.size).to.equal(FLEET);
    for (const n of nodes) expect(counts.get(n.uuid), n.uuid).to.equal(1);

    const m = recorder.messages.find((x) => x.envelope.payload.node_uuid === nodes[7].uuid)!;
    expect(m.routingKey).to.equal(`${bus.topic}.info`);
    expect(m).to.include({ contentType: 'application/json', contentEncoding: 'utf-8', deliveryMode: 2 });
    expect(m.wrapper['oslo.version']).to.equal('2.0');
    const env = m.envelope;
    expect(Object.keys(env).sort()).to.deep.equal(['event_type', 'message_id', 'payload', 'priority', 'publisher_id', 'timestamp']);
    expect(env).to.include({ priority: 'INFO', event_type: 'hardware.redfish.metrics', publisher_id: 'galvanic-conductor.test-host' });
    expect(env.timestamp).to.match(MICROS_OSLO);
    const p = env.payload;
    expect(Object.keys(p).sort()).to.deep.equal(['event_type', 'instance_uuid', 'message_id', 'node_name', 'node_uuid', 'payload', 'timestamp']);
    expect(p).to.include({ node_uuid: nodes[7].uuid, node_name: 'rf-7', instance_uuid: null, event_type: 'hardware.redfish.metrics.update' });
    expect(p.timestamp).to.match(MICROS_ISO);
    expect(p.message_id).to.not.equal(env.message_id);
    const data = p.payload as Record<string, Record<string, Record<string, unknown>>>;
    expect(Object.keys(data).sort()).to.deep.equal(['Drive', 'Fan', 'Power', 'Temperature']);
    const [tempId, temp] = Object.entries(data.Temperature)[0];
    expect(tempId).to.match(/^[^@]+@[^@]+$/);
    expect(Object.keys(temp).sort()).to.deep.equal(['health', 'identity', 'max_reading_range_temp', 'min_reading_range_temp', 'physical_context', 'reading_celsius', 'sensor_number', 'state']);
    const [fanId, fan] = Object.entries(data.Fan)[0];
    expect(fanId).to.match(/^[^@]+@[^@]+$/);
    expect(Object.keys(fan).sort()).to.deep.equal(['health', 'identity', 'max_reading_range', 'min_reading_range', 'physical_context', 'reading', 'reading_units', 'serial_number', 'state']);
    const [psuId, psu] = Object.entries(data.Power)[0];
    expect(psuId).to.match(/^[^:]+:[^@]+@.+$/);
    expect(Object.keys(psu).sort()).to.deep.equal(['health', 'last_power_output_watts', 'line_input_voltage', 'power_capacity_watts', 'serial_number', 'state']);
    const [driveId, drive] = Object.entries(data.Drive)[0];
    expect(driveId).to.match(/^[^:]+:[^@]+@.+$/);
    expect(Object.keys(drive).sort()).to.deep.equal(['capacity_bytes', 'health', 'model', 'name', 'state']);

    const text = await scrapeUntil(exporterUrl, (t) => new RegExp(`^galvanic_exporter_nodes ${FLEET}$`, 'm').test(t), 20_000, `all ${FLEET} nodes`);
    for (const n of nodes) {
      expect(text, n.uuid).to.include(`baremetal_last_payload_timestamp_seconds{node_uuid="${n.uuid}",instance_uuid="${n.uuid}",node_name="${n.name}"}`);
    }
    const cpu = text.split('\n').find((l) => l.startsWith('baremetal_temp_cpu_celsius{') && l.includes(`node_uuid="${nodes[7].uuid}"`));
    expect(cpu, 'a CPU temperature series of rf-7').to.be.a('string');
    expect(cpu).to.match(/sensor_id="[^"]+@[^"]+"/).and.match(/ \d+(\.\d+)?$/);
    expect(text).to.match(new RegExp(`^baremetal_fan_status\\{[^}]*node_uuid="${nodes[7].uuid}"[^}]*\\} 0$`, 'm'));
    expect(text).to.match(new RegExp(`^galvanic_exporter_messages_consumed_total\\{event_type="hardware.redfish.metrics"\\} ${FLEET}$`, 'm'));
  });

  it('sends exactly one more per node on the next iteration, and drops a deleted node after stale_after', async () => {
    const before = recorder.messages.length;
    await iteration();
    await recorder.waitFor(before + FLEET, 20_000);
    await sleep(300);
    expect(recorder.messages.length - before).to.equal(FLEET);
    const counts = countByNode(recorder, before);
    for (const n of nodes) expect(counts.get(n.uuid), n.uuid).to.equal(1);

    const gone = nodes[3];
    await deleteNode(db.knex, gone.id);
    // Let the deleted node's last data age half its stale time before the others are refreshed.
    await sleep((STALE_AFTER * INTERVAL_S * 1000) / 2);
    const third = await iteration();
    expect(third).to.include({ nodes: FLEET - 1, ok: FLEET - 1 });
    const text = await scrapeUntil(exporterUrl, (t) => !t.includes(`node_uuid="${gone.uuid}"`), STALE_AFTER * INTERVAL_S * 1000 + 10_000, 'the deleted node gone');
    for (const n of nodes) if (n !== gone) expect(text, n.uuid).to.include(`node_uuid="${n.uuid}"`);
    expect(text).to.match(new RegExp(`^galvanic_exporter_nodes ${FLEET - 1}$`, 'm'));
  });

  it('with 5% timing out, 5% answering 500 and 1% broken JSON, every other node arrives in the same iteration and failures are counted by kind', async () => {
    const live = nodes.filter((_, i) => i !== 3);
    const hung = live.slice(0, HUNG);
    const failing = live.slice(HUNG, HUNG + FAILING);
    const garbage = live.slice(HUNG + FAILING, HUNG + FAILING + GARBAGE);
    const bad = HUNG + FAILING + GARBAGE;
    const index = (n: Node) => nodes.indexOf(n);
    await Promise.all([
      ...hung.map((n) => setFaults(sim.bmcs[index(n)].url, { timeoutRate: 1 })),
      ...failing.map((n) => setFaults(sim.bmcs[index(n)].url, { failRate: 1 })),
      ...garbage.map((n) => setFaults(sim.bmcs[index(n)].url, { garbageRate: 1 })),
    ]);
    try {
      const faultTask = taskFor(db, sensorConfig(bus, { GALVANIC_SENSOR_DATA__NODE_TIMEOUT: String(FAULT_NODE_TIMEOUT_S) }), registry, notifier);
      const before = recorder.messages.length;
      const started = Date.now();
      const it = await iteration(faultTask);
      const took = Date.now() - started;
      const healthy = live.length - bad;
      expect(it, JSON.stringify(it.failures)).to.include({ nodes: live.length, ok: healthy, failed: bad, timedOut: HUNG });
      expect(it.failures).to.deep.equal({ [NODE_TIMEOUT]: HUNG, BMC_REJECTED: FAILING, BMC_BAD_RESPONSE: GARBAGE });
      // The hung BMCs cost their own node_timeout, not the others' turn.
      expect(took).to.be.below(FAULT_NODE_TIMEOUT_S * 1000 + 10_000);
      await recorder.waitFor(before + healthy, 20_000);
      await sleep(300);
      const counts = countByNode(recorder, before);
      expect(recorder.messages.length - before).to.equal(healthy);
      const badUuids = new Set([...hung, ...failing, ...garbage].map((n) => n.uuid));
      for (const n of live) expect(counts.get(n.uuid) ?? 0, n.uuid).to.equal(badUuids.has(n.uuid) ? 0 : 1);
      expect(faultTask.stats.failures).to.include({ [NODE_TIMEOUT]: HUNG, BMC_REJECTED: FAILING, BMC_BAD_RESPONSE: GARBAGE });

      // A timeout goes into the node's history at most once an hour.
      await iteration(faultTask);
      for (const n of [hung[0], hung[HUNG - 1]]) {
        const events = (await listHistory(db.knex, n.id, 100)).filter((e) => e.eventType === 'sensor');
        expect(events, n.uuid).to.have.length(1);
        expect(events[0].event).to.include(`took longer than ${FAULT_NODE_TIMEOUT_S} s`);
      }
      expect((await listHistory(db.knex, failing[0].id, 100)).filter((e) => e.eventType === 'sensor')).to.have.length(0);
      expect(faultTask.stats.timedOut).to.equal(2 * HUNG);

      // The conductor's /metrics shows them by kind.
      const metrics = await buildConductorMetrics({
        hostname: 'test-host', periodic: new PeriodicRunner(log), sensors: faultTask.stats, bus: () => notifier.stats, db: db.knex,
      }).metrics();
      for (const [kind, n] of [['NODE_TIMEOUT', HUNG], ['BMC_REJECTED', FAILING], ['BMC_BAD_RESPONSE', GARBAGE]] as const) {
        expect(metrics).to.match(new RegExp(`^galvanic_sensor_failures\\{kind="${kind}",conductor="test-host"\\} ${2 * n}$`, 'm'));
      }
      expect(metrics).to.match(/^galvanic_notifications\{state="dropped",conductor="test-host"\} 0$/m);
      expect(metrics).to.match(/^nodejs_eventloop_lag_seconds\{conductor="test-host"\} /m);
    } finally {
      await Promise.all([...hung, ...failing, ...garbage].map((n) => setFaults(sim.bmcs[index(n)].url, { timeoutRate: 0, failRate: 0, garbageRate: 0 })));
    }
  });

  it('keeps collecting through a broker outage, bounds its buffer, and delivers again after reconnecting', async () => {
    const proxy = new TcpProxy(brokerAddress());
    await proxy.start();
    // A buffer smaller than what is left after the cut: some notifications are dropped.
    const CUT_AT = FLEET / 10;
    const bufferSize = FLEET / 4;
    const cutNotifier = new AmqpNotifier('galvanic-conductor.test-host', {
      url: urlThrough(proxy), exchange: bus.exchange, topic: bus.topic, declareQueue: false, bufferSize,
    }, log);
    // The outage starts in the middle of the iteration, at its CUT_AT-th notification.
    let sent = 0;
    let cut: Promise<void> | undefined;
    const cutting: Notifier = {
      emit: (...a) => cutNotifier.emit(...a),
      send: (...a) => {
        if (++sent === CUT_AT) cut = proxy.cut();
        cutNotifier.send(...a);
      },
      close: () => cutNotifier.close(),
    };
    const outageTask = taskFor(db, config, registry, cutting);
    try {
      await until('the notifier connecting through the proxy', () => cutNotifier.stats.connected);
      const before = recorder.messages.length;
      await outageTask.run(abort.signal);
      await cut;
      const it = outageTask.stats.lastIteration!;
      expect(it, JSON.stringify(it.failures)).to.include({ nodes: FLEET - 1, ok: FLEET - 1, failed: 0 });
      while (cutNotifier.stats.connected) await sleep(20);
      // Reconnection attempts run (and fail) meanwhile; give them a moment to show they do not deliver.
      await sleep(1000);
      const during = cutNotifier.stats;
      expect(during.connected).to.equal(false);
      expect(during.accepted).to.equal(FLEET - 1);
      expect(during.buffered).to.be.at.most(bufferSize);
      expect(during.dropped).to.be.at.least(FLEET - 1 - CUT_AT - bufferSize);
      const deliveredBefore = recorder.messages.length - before;

      await proxy.restore();
      expect(await cutNotifier.flush(30_000), 'delivered after reconnect').to.equal(true);
      const after = cutNotifier.stats;
      expect(after.connections).to.be.at.least(2);
      expect(after.buffered).to.equal(0);
      expect(after.confirmed + after.dropped).to.equal(after.accepted);
      await recorder.waitFor(before + deliveredBefore + Math.min(bufferSize, during.buffered), 20_000);
      expect(recorder.messages.length - before - deliveredBefore).to.be.at.least(during.buffered);
    } finally {
      await cutNotifier.close();
      await proxy.stop();
    }
  });
});

describe('sensor data of a mixed fleet: redfish on the asynchronous loop, ipmi on the synchronous path', function () {
  this.timeout(120_000);
  const bus = uniqueBusNames();
  let db: TestDatabase;
  let sim: RedfishSim;
  let bmcs: SimBmc[] = [];
  let registry: DriverRegistry;
  let notifier: AmqpNotifier;
  let recorder: Recorder;

  before(async function () {
    await requireRabbitMq(this);
    requireIpmiSim(this);
    db = await freshDatabase();
    sim = await startRedfishSim({ count: 20, latencyMs: [0, 50] });
    bmcs = await startSimBmcs(2);
  });

  after(async () => {
    await notifier?.close();
    await recorder?.close();
    await registry?.close();
    await sim?.stop();
    await stopSimBmcs(bmcs);
    await db?.drop();
    await deleteBusObjects({ exchange: bus.exchange }).catch(() => undefined);
  });

  it('reads both kinds in one iteration and both notify', async () => {
    const redfish = await enrollRedfish(db, sim, 20);
    const ipmi: Node[] = [];
    for (const [i, b] of bmcs.entries()) {
      ipmi.push(await createNode(db.knex, {
        name: `ipmi-${i}`, driver: 'ipmi', managementInterface: 'ipmitool', powerInterface: 'ipmitool', provisionState: 'active',
        driverInfo: b.driverInfo(),
      }));
    }
    const config = sensorConfig(bus, { GALVANIC_SENSOR_DATA__NODE_TIMEOUT: '30', GALVANIC_IPMI__MIN_COMMAND_INTERVAL: '0' });
    registry = buildRegistry(config, log);
    notifier = notifierFromConfig(config, 'galvanic-conductor', log) as AmqpNotifier;
    recorder = await recordQueue(bus.exchange, `${bus.topic}.info`);
    // One node of each kind is held by an exclusive task (of another conductor): read anyway, never waited for.
    await db.knex('nodes').whereIn('id', [redfish[0].id, ipmi[0].id]).update({ reservation: 'another-conductor' });
    const task = taskFor(db, config, registry, notifier);
    await task.run(new AbortController().signal);
    expect(task.stats.lastIteration).to.include({ nodes: 22, async: 20, sync: 2, ok: 22, failed: 0 });
    expect((await db.knex('nodes').where('id', redfish[0].id).first()).reservation).to.equal('another-conductor');
    expect(await notifier.flush(20_000)).to.equal(true);
    await recorder.waitFor(22, 20_000);
    const byNode = new Map(recorder.messages.map((m) => [m.envelope.payload.node_uuid as string, m.envelope]));
    for (const n of redfish) expect(byNode.get(n.uuid)?.event_type, n.name!).to.equal('hardware.redfish.metrics');
    for (const n of ipmi) {
      const env = byNode.get(n.uuid)!;
      expect(env.event_type).to.equal('hardware.ipmi.metrics');
      expect(env.payload.event_type).to.equal('hardware.ipmi.metrics.update');
      // Ironic's `ipmitool sdr -v` grouping: sensor type → Sensor ID → every "key: value" as strings.
      const data = env.payload.payload as Record<string, Record<string, Record<string, string>>>;
      expect(Object.keys(data)).to.include('Temperature');
      const [id, sensor] = Object.entries(data.Temperature)[0];
      expect(id).to.match(/\(0x[0-9a-f]+\)$/i);
      expect(sensor['Sensor ID']).to.equal(id);
      expect(sensor['Sensor Reading']).to.be.a('string');
      expect(sensor['Sensor Type (Threshold)'] ?? sensor['Sensor Type (Analog)']).to.match(/^Temperature/);
    }
  });

  it('takes on reloaded options from the next iteration: asynchronous collection switched off sends every node down the synchronous path', async () => {
    const env = { GALVANIC_SENSOR_DATA__NODE_TIMEOUT: '30', GALVANIC_IPMI__MIN_COMMAND_INTERVAL: '0' };
    const task = taskFor(db, sensorConfig(bus, env), registry, notifier);
    const off = sensorConfig(bus, { ...env, GALVANIC_SENSOR_DATA__ENABLE_ASYNC_COLLECTION: 'false', GALVANIC_SENSOR_DATA__WORKERS: '3', GALVANIC_SENSOR_DATA__INTERVAL: '5' });
    // interval is not among the options a running conductor changes.
    expect(task.reconfigure(off.sensor_data)).to.deep.equal(['enable_async_collection', 'workers']);
    expect(task.reconfigure(off.sensor_data)).to.deep.equal([]);
    await task.run(new AbortController().signal);
    expect(task.stats.lastIteration).to.include({ nodes: 22, async: 0, sync: 22, ok: 22, failed: 0 });
  });

  it('starts the nodes that were slowest last iteration first, when max_concurrency holds the rest back', async () => {
    const slow = sim.bmcs[12].url;
    await setFaults(slow, { latencyMs: [300, 300] });
    try {
      const task = taskFor(db, sensorConfig(bus, { GALVANIC_SENSOR_DATA__MAX_CONCURRENCY: '2', GALVANIC_SENSOR_DATA__NODE_TIMEOUT: '30', GALVANIC_IPMI__MIN_COMMAND_INTERVAL: '0' }), registry, notifier);
      // The first iteration learns how long each node takes; nodes start in id order.
      await task.run(new AbortController().signal);
      for (const b of sim.bmcs) await simControl(b.url, 'reset');
      await task.run(new AbortController().signal);
      expect(task.stats.lastIteration).to.include({ async: 20, ok: 22, failed: 0 });
      const firstRequestAt = async (url: string) => Math.min(...(await simStats(url)).log.map((e) => e[3]));
      const starts = await Promise.all(sim.bmcs.map((b) => firstRequestAt(b.url)));
      const order = starts.map((at, i) => ({ at, i })).sort((a, b) => a.at - b.at).map((x) => x.i);
      // Two slots: the slow node takes one of them at once instead of waiting for twelve others.
      expect(order.slice(0, 2)).to.include(12);
    } finally {
      await setFaults(slow, { latencyMs: [0, 50] });
    }
  });
});

describe('sensor data in a running conductor, and node-state notifications on the same bus', function () {
  this.timeout(60_000);
  const bus = uniqueBusNames();
  let sim: RedfishSim;
  let db: TestDatabase;
  let registry: DriverRegistry;
  let notifier: Notifier;
  let conductor: ConductorService | undefined;
  let app: FastifyInstance | undefined;
  let recorder: Recorder;

  before(async function () {
    await requireRabbitMq(this);
    sim = await startRedfishSim({ count: 5 });
    db = await freshDatabase();
    recorder = await recordQueue(bus.exchange, `${bus.topic}.#`);
  });

  after(async () => {
    await conductor?.stop();
    await app?.close();
    await notifier?.close();
    await registry?.close();
    await recorder?.close();
    await sim?.stop();
    await db?.drop();
    await deleteBusObjects({ exchange: bus.exchange }).catch(() => undefined);
  });

  it('collects at start, serves its /metrics, and sends power notifications over amqp too', async () => {
    const nodes = await enrollRedfish(db, sim, 5);
    const metricsPort = await freePort();
    // One connection per BMC: the driver's single-connection client rather than a pool.
    const config = sensorConfig(bus, {
      GALVANIC_SENSOR_DATA__INTERVAL: '3600', GALVANIC_CONDUCTOR__METRICS_PORT: String(metricsPort), GALVANIC_REDFISH__MAX_CONCURRENT_REQUESTS_PER_BMC: '1',
    });
    registry = buildRegistry(config, log);
    notifier = notifierFromConfig(config, 'galvanic-conductor', log);
    conductor = new ConductorService({ config, db: db.knex, connectionString: db.url, registry, notifier, log });
    await conductor.start();
    await recorder.waitFor(5, 20_000);
    expect(new Set(recorder.messages.map((m) => m.envelope.payload.node_uuid))).to.deep.equal(new Set(nodes.map((n) => n.uuid)));
    expect(recorder.messages.every((m) => m.envelope.event_type === 'hardware.redfish.metrics')).to.equal(true);

    const metrics = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    expect(metrics).to.match(/^galvanic_sensor_nodes_ok\{conductor="test-host"\} 5$/m);
    expect(metrics).to.match(/^galvanic_periodic_task_runs\{task="send_sensor_data",conductor="test-host"\} 1$/m);
    expect(metrics).to.match(/^galvanic_intents_open\{state="queued",conductor="test-host"\} 0$/m);

    app = buildApp({ config, db: db.knex, connectionString: db.url, registry, log });
    const res = await app.inject({
      method: 'PUT', url: `/v1/nodes/${nodes[0].uuid}/states/power`, headers: { 'x-openstack-ironic-api-version': 'latest' },
      payload: { target: 'power off' },
    });
    expect(res.statusCode, res.body).to.equal(202);
    const powerEvents = () => recorder.messages.filter((m) => m.envelope.event_type.startsWith('baremetal.node.power_set.'));
    const end = await until(() => `power_set.end on the bus: ${JSON.stringify(powerEvents().map((m) => m.envelope.event_type))}`,
      () => powerEvents().find((m) => m.envelope.event_type === 'baremetal.node.power_set.end'));
    expect(end.routingKey).to.equal(`${bus.topic}.info`);
    expect(end.envelope.payload['ironic_object.name']).to.equal('NodeSetPowerStatePayload');
    expect((end.envelope.payload['ironic_object.data'] as Record<string, unknown>).uuid).to.equal(nodes[0].uuid);
  });
});
