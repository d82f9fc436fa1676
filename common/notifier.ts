import fs from 'node:fs';
import type { Logger } from 'pino';
import type { Config } from './config.js';
import { AmqpNotifier, type AmqpNotifierOptions } from './notifier-amqp.js';
import { EnvelopeNotifier, type Notification, type Notifier } from './notification.js';

export * from './notification.js';

class NoopNotifier implements Notifier {
  emit(): void {}
  send(): void {}
  async close(): Promise<void> {}
}

/** JSON lines to a file (appended) or to stdout. */
class LogNotifier extends EnvelopeNotifier {
  private readonly stream: NodeJS.WritableStream;

  constructor(publisherId: string, file: string, private readonly log: Logger) {
    super(publisherId);
    this.stream = file ? fs.createWriteStream(file, { flags: 'a' }) : process.stdout;
    this.stream.on('error', (err) => this.log.error({ err }, 'notification log failed'));
  }

  protected publish(n: Notification<unknown>): void {
    this.stream.write(`${JSON.stringify(n)}\n`);
  }

  async close(): Promise<void> {
    if (this.stream === process.stdout) return;
    await new Promise<void>((resolve) => (this.stream as fs.WriteStream).end(resolve));
  }
}

export interface NotifierOptions {
  driver: string;
  logFile: string;
  host: string;
  service: string;
  log: Logger;
  /** The amqp driver's settings; required when driver is amqp. */
  amqp?: AmqpNotifierOptions;
}

export function createNotifier(opts: NotifierOptions): Notifier {
  const publisherId = `${opts.service}.${opts.host}`;
  switch (opts.driver) {
    case 'log':
      return new LogNotifier(publisherId, opts.logFile, opts.log);
    case 'amqp':
      if (!opts.amqp) throw new Error('the amqp notification driver needs its options');
      return new AmqpNotifier(publisherId, opts.amqp, opts.log);
    default:
      return new NoopNotifier();
  }
}

/** The notifier of a service as `[notifications]` configures it. */
export function notifierFromConfig(config: Readonly<Config>, service: string, log: Logger): Notifier {
  const n = config.notifications;
  return createNotifier({
    driver: n.driver, logFile: n.log_file, host: config.DEFAULT.host, service, log,
    amqp: { url: n.transport_url, exchange: n.exchange, topic: n.topic, declareQueue: n.declare_queue, bufferSize: n.buffer_size },
  });
}
