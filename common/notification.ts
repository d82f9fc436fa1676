/**
 * Notifications as oslo.messaging carries Ironic's: the envelope, its timestamps, and the base
 * class of the drivers (which only publish finished envelopes).
 */
import { randomUUID } from 'node:crypto';

export type Priority = 'info' | 'error' | 'warn';

/** The payload of Ironic's versioned notifications (baremetal.node.*). */
export interface VersionedPayload {
  'ironic_object.namespace': 'ironic';
  'ironic_object.name': string;
  'ironic_object.version': string;
  'ironic_object.data': Record<string, unknown>;
}

/** oslo.messaging's notification envelope; `payload` is versioned or, for sensor data, plain. */
export interface Notification<P = VersionedPayload> {
  message_id: string;
  publisher_id: string;
  event_type: string;
  /** Upper case on the wire, as oslo.messaging's Notifier.info/warn/error send it. */
  priority: Uppercase<Priority>;
  timestamp: string;
  payload: P;
}

/** Publishes notifications. Emitting never throws and never blocks the caller's work. */
export interface Notifier {
  /** A versioned notification (Ironic's baremetal.* events). */
  emit(eventType: string, priority: Priority, payloadName: string, data: Record<string, unknown>): void;
  /** An unversioned notification: `payload` goes out as given (Ironic's hardware.*.metrics). */
  send(eventType: string, priority: Priority, payload: Record<string, unknown>): void;
  close(): Promise<void>;
}

/** Python's str(datetime.utcnow()) shape, which Ironic's consumers parse. */
export function ironicTimestamp(d = new Date()): string {
  return d.toISOString().replace('T', ' ').replace('Z', '000');
}

/** Python's datetime.utcnow().isoformat(): microseconds, no zone (IPE rejects a timestamp without them). */
export function isoTimestamp(d = new Date()): string {
  return d.toISOString().replace('Z', '000');
}

export function envelope<P>(publisherId: string, eventType: string, priority: Priority, payload: P): Notification<P> {
  return {
    message_id: randomUUID(),
    publisher_id: publisherId,
    event_type: eventType,
    priority: priority.toUpperCase() as Uppercase<Priority>,
    timestamp: ironicTimestamp(),
    payload,
  };
}

export function versionedPayload(name: string, data: Record<string, unknown>): VersionedPayload {
  return { 'ironic_object.namespace': 'ironic', 'ironic_object.name': name, 'ironic_object.version': '1.0', 'ironic_object.data': data };
}

/** Turns emit/send into envelopes for `publish`; drivers implement only that. */
export abstract class EnvelopeNotifier implements Notifier {
  constructor(protected readonly publisherId: string) {}

  emit(eventType: string, priority: Priority, name: string, data: Record<string, unknown>): void {
    this.publish(envelope(this.publisherId, eventType, priority, versionedPayload(name, data)));
  }

  send(eventType: string, priority: Priority, payload: Record<string, unknown>): void {
    this.publish(envelope(this.publisherId, eventType, priority, payload));
  }

  protected abstract publish(n: Notification<unknown>): void;
  abstract close(): Promise<void>;
}
