/**
 * `galvanic exporter`: consumes sensor notifications from RabbitMQ (its own durable queue,
 * bound to the notification exchange with routing key `<topic>.info`) and serves them at
 * GET /metrics with ironic-prometheus-exporter's names, plus its own health: messages
 * consumed, parse errors, lag behind the producers, nodes exported, broker connection.
 */
import type { Channel, ChannelModel, ConsumeMessage } from 'amqplib';
import type { Logger } from 'pino';
import { Counter, Gauge, Registry } from 'prom-client';
import { AmqpLink } from '../common/amqp-link.js';
import type { Config } from '../common/config.js';
import { serveMetrics, type MetricsServer } from '../common/metrics-server.js';
import { LogFollower } from './log-follower.js';
import { NodeSeries } from './node-series.js';
import { samplesOf, type SensorNotification } from './sensor-metrics.js';

export interface ExporterOptions {
  /** `amqp`: consume from the bus; `log`: follow `logFile`, the log driver's file. */
  source: 'amqp' | 'log';
  logFile: string;
  url: string;
  exchange: string;
  topic: string;
  queue: string;
  host: string;
  port: number;
  /** A node's series go after this long without a notification. */
  staleAfterMs: number;
}

export function exporterOptions(config: Readonly<Config>): ExporterOptions {
  const n = config.notifications;
  const e = config.exporter;
  return {
    source: e.source as 'amqp' | 'log', logFile: n.log_file,
    url: n.transport_url, exchange: n.exchange, topic: n.topic, queue: e.queue, host: e.host_ip, port: e.port,
    staleAfterMs: e.stale_after * config.sensor_data.interval * 1000,
  };
}

/** Unacknowledged deliveries at once: a burst of a whole fleet's iteration streams in. */
const PREFETCH = 1000;

/** The envelope inside a message: oslo.messaging v2 wraps it as a JSON string, v1 sends it bare. */
export function unwrapOslo(body: Buffer): Record<string, unknown> {
  const outer = JSON.parse(body.toString('utf8')) as Record<string, unknown>;
  if (typeof outer['oslo.message'] === 'string') return JSON.parse(outer['oslo.message']) as Record<string, unknown>;
  return outer;
}

/** Seconds since the epoch of oslo's `YYYY-MM-DD HH:MM:SS.ffffff` (UTC), or null. */
function envelopeSeconds(ts: unknown): number | null {
  if (typeof ts !== 'string') return null;
  const ms = Date.parse(`${ts.replace(' ', 'T').slice(0, 23)}Z`);
  return Number.isNaN(ms) ? null : ms / 1000;
}

export class Exporter {
  readonly registry = new Registry();
  readonly series: NodeSeries;
  private readonly consumed = new Counter({ name: 'galvanic_exporter_messages_consumed_total', help: 'Notifications consumed from the bus.', labelNames: ['event_type'], registers: [this.registry] });
  private readonly parseErrors = new Counter({ name: 'galvanic_exporter_parse_errors_total', help: 'Messages that were not a notification the exporter could read.', registers: [this.registry] });
  private readonly lag = new Gauge({ name: 'galvanic_exporter_lag_seconds', help: 'Age of the last consumed notification when it arrived.', registers: [this.registry] });
  private readonly connected = new Gauge({ name: 'galvanic_exporter_bus_connected', help: '1 while the exporter is connected to the bus.', registers: [this.registry] });
  private readonly nodes: Gauge;
  private server: MetricsServer | null = null;
  private follower: LogFollower | undefined;
  private link: AmqpLink<Channel> | undefined;
  private sweepTimer: NodeJS.Timeout | undefined;
  private readonly log: Logger;

  constructor(private readonly opts: ExporterOptions, log: Logger) {
    this.log = log.child({ component: 'exporter' });
    this.series = new NodeSeries(this.registry, opts.staleAfterMs);
    const series = this.series;
    this.nodes = new Gauge({
      name: 'galvanic_exporter_nodes', help: 'Nodes whose series are exported.', registers: [this.registry],
      collect() {
        this.set(series.nodeCount);
      },
    });
  }

  /** Serves /metrics and starts consuming; resolves with the bound address once listening. */
  async start(): Promise<{ url: string }> {
    this.server = await serveMetrics(this.registry, this.opts.host, this.opts.port, this.log);
    const sweepMs = Math.max(250, Math.min(5000, this.opts.staleAfterMs / 4));
    this.sweepTimer = setInterval(() => {
      const gone = this.series.sweep();
      if (gone) this.log.info({ gone }, 'series of silent nodes dropped');
    }, sweepMs);
    if (this.opts.source === 'log') {
      this.follower = new LogFollower(this.opts.logFile, (line) => this.ingest(Buffer.from(line)));
      await this.follower.start();
      this.log.info({ file: this.opts.logFile }, 'exporter following the notification log');
    } else {
      this.link = new AmqpLink({
        url: this.opts.url, connectionName: 'galvanic-exporter', log: this.log,
        open: (conn) => this.openConsumer(conn),
        onUp: () => {
          this.connected.set(1);
          this.log.info({ queue: this.opts.queue }, 'exporter consuming');
        },
        onDown: () => this.connected.set(0),
      });
      this.link.start();
    }
    return { url: this.server.url };
  }

  async stop(): Promise<void> {
    clearInterval(this.sweepTimer);
    await this.follower?.stop();
    await this.link?.close();
    await this.server?.close();
    this.server = null;
  }

  /** Handles one delivery; exported for tests of the parsing without a broker. */
  ingest(body: Buffer): void {
    let n: Record<string, unknown>;
    try {
      n = unwrapOslo(body);
    } catch {
      this.parseErrors.inc();
      return;
    }
    const eventType = typeof n.event_type === 'string' ? n.event_type : 'unknown';
    this.consumed.inc({ event_type: eventType });
    const sent = envelopeSeconds(n.timestamp);
    if (sent !== null) this.lag.set(Math.max(0, Date.now() / 1000 - sent));
    if (!/^hardware\.[^.]+\.metrics$/.test(eventType)) return;
    const payload = n.payload as SensorNotification['payload'] | undefined;
    if (!payload || typeof payload.node_uuid !== 'string') {
      this.parseErrors.inc();
      return;
    }
    this.series.update(payload.node_uuid, samplesOf({ event_type: eventType, payload }));
  }

  /** The exporter's queue, bound and consumed; declared again on each new connection. */
  private async openConsumer(conn: ChannelModel): Promise<Channel> {
    const ch = await conn.createChannel();
    await ch.assertExchange(this.opts.exchange, 'topic', { durable: false });
    await ch.assertQueue(this.opts.queue, { durable: true });
    await ch.bindQueue(this.opts.queue, this.opts.exchange, `${this.opts.topic}.info`);
    await ch.prefetch(PREFETCH);
    await ch.consume(this.opts.queue, (msg: ConsumeMessage | null) => {
      if (!msg) return;
      this.ingest(msg.content);
      ch.ack(msg);
    });
    return ch;
  }
}
