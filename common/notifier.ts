import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import type { Logger } from 'pino';

export type Priority = 'info' | 'error' | 'warn';

/** Ironic's versioned notification envelope. */
export interface Notification {
  message_id: string;
  publisher_id: string;
  event_type: string;
  /** Upper case on the wire, as oslo.messaging's Notifier.info/warn/error send it. */
  priority: Uppercase<Priority>;
  timestamp: string;
  payload: {
    'ironic_object.namespace': 'ironic';
    'ironic_object.name': string;
    'ironic_object.version': string;
    'ironic_object.data': Record<string, unknown>;
  };
}

/** Publishes notifications. Emitting never throws and never blocks the caller's work. */
export interface Notifier {
  emit(eventType: string, priority: Priority, payloadName: string, data: Record<string, unknown>): void;
  close(): Promise<void>;
}

/** Python's str(datetime.utcnow()) shape, which Ironic's consumers parse. */
export function ironicTimestamp(d = new Date()): string {
  return d.toISOString().replace('T', ' ').replace('Z', '000');
}

function envelope(publisherId: string, eventType: string, priority: Priority, name: string, data: Record<string, unknown>): Notification {
  return {
    message_id: randomUUID(),
    publisher_id: publisherId,
    event_type: eventType,
    priority: priority.toUpperCase() as Uppercase<Priority>,
    timestamp: ironicTimestamp(),
    payload: { 'ironic_object.namespace': 'ironic', 'ironic_object.name': name, 'ironic_object.version': '1.0', 'ironic_object.data': data },
  };
}

class NoopNotifier implements Notifier {
  emit(): void {}
  async close(): Promise<void> {}
}

/** JSON lines to a file (appended) or to stdout. */
class LogNotifier implements Notifier {
  private readonly stream: NodeJS.WritableStream;

  constructor(private readonly publisherId: string, file: string, private readonly log: Logger) {
    this.stream = file ? fs.createWriteStream(file, { flags: 'a' }) : process.stdout;
    this.stream.on('error', (err) => this.log.error({ err }, 'notification log failed'));
  }

  emit(eventType: string, priority: Priority, name: string, data: Record<string, unknown>): void {
    this.stream.write(`${JSON.stringify(envelope(this.publisherId, eventType, priority, name, data))}\n`);
  }

  async close(): Promise<void> {
    if (this.stream === process.stdout) return;
    await new Promise<void>((resolve) => (this.stream as fs.WriteStream).end(resolve));
  }
}

export function createNotifier(opts: { driver: string; logFile: string; host: string; service: string; log: Logger }): Notifier {
  const publisherId = `${opts.service}.${opts.host}`;
  switch (opts.driver) {
    case 'log':
      return new LogNotifier(publisherId, opts.logFile, opts.log);
    default:
      return new NoopNotifier();
  }
}
