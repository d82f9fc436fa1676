/**
 * Ironic's sensor notification (ironic/conductor/manager.py `_send_sensor_data`;
 * IRONIC-API.md 3.1): event type `hardware.<driver>.metrics`, and a message whose own
 * event_type is `<event type>.update`, timestamped with microseconds, carrying the sensor
 * data filtered by `[sensor_data] data_types`.
 */
import { randomUUID } from 'node:crypto';
import { isoTimestamp } from '../../common/notification.js';
import type { SensorData } from '../../drivers/interfaces.js';

export interface SensorMessageNode {
  uuid: string;
  name: string | null;
  driver: string;
  instanceUuid: string | null;
}

export function sensorEventType(driver: string): string {
  return `hardware.${driver}.metrics`;
}

/** Keeps the sensor types named in `dataTypes` (case-insensitive, as Ironic); `ALL` keeps every one. */
export function filterDataTypes(data: SensorData, dataTypes: readonly string[]): SensorData {
  const allowed = new Set(dataTypes.map((t) => t.toLowerCase()));
  if (allowed.has('all')) return data;
  return Object.fromEntries(Object.entries(data).filter(([k]) => allowed.has(k.toLowerCase())));
}

/** The notification payload of one node's sensor read. */
export function sensorMessage(node: SensorMessageNode, data: SensorData, at = new Date()): Record<string, unknown> {
  return {
    message_id: randomUUID(),
    instance_uuid: node.instanceUuid,
    node_uuid: node.uuid,
    node_name: node.name,
    timestamp: isoTimestamp(at),
    event_type: `${sensorEventType(node.driver)}.update`,
    payload: data,
  };
}
