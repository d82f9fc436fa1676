/**
 * Sensor notifications into Prometheus samples, named and labelled as ironic-prometheus-exporter
 * names them (IRONIC-API.md 3.2), so existing dashboards and alerts keep working:
 *  - every node: baremetal_last_payload_timestamp_seconds{node_name, node_uuid, instance_uuid};
 *  - redfish (and idrac): baremetal_temp_<context>_celsius, baremetal_temperature_status,
 *    baremetal_fan_status, baremetal_power_status, baremetal_drive_status (health OK=0,
 *    Warning=1, Critical=2), labelled with every non-null field but the reading, and sensor_id;
 *    sensors whose state is not "enabled" are skipped;
 *  - ipmi: one metric per sensor, named from its category and Sensor ID (digits and "(0x..)"
 *    stripped), valued by the first token of its reading (discrete: 0h → 0, other → 1).
 * Pure functions: a notification in, samples out.
 */

export type Labels = Record<string, string>;

export interface Sample {
  name: string;
  labels: Labels;
  value: number;
}

/** The parts of a hardware.*.metrics notification the exporter reads. */
export interface SensorNotification {
  event_type: string;
  payload: {
    node_uuid: string;
    node_name?: string | null;
    instance_uuid?: string | null;
    timestamp?: string;
    payload?: Record<string, Record<string, Record<string, unknown>>>;
  };
}

export const HELP: Readonly<Record<string, string>> = {
  baremetal_last_payload_timestamp_seconds: 'Time of the last sensor data received for the node (seconds since the epoch).',
  baremetal_temperature_status: 'Health of a temperature sensor: 0 OK, 1 Warning, 2 Critical.',
  baremetal_fan_status: 'Health of a fan: 0 OK, 1 Warning, 2 Critical.',
  baremetal_power_status: 'Health of a power supply: 0 OK, 1 Warning, 2 Critical.',
  baremetal_drive_status: 'Health of a drive: 0 OK, 1 Warning, 2 Critical.',
};

const HEALTH: Readonly<Record<string, number>> = { OK: 0, Warning: 1, Critical: 2 };

/** IPE's labels of the node; instance_uuid falls back to node_uuid, an empty name is dropped. */
export function nodeLabels(p: SensorNotification['payload']): Labels {
  const labels: Labels = { node_uuid: p.node_uuid, instance_uuid: p.instance_uuid || p.node_uuid };
  if (p.node_name) labels.node_name = p.node_name;
  return labels;
}

/** `%Y-%m-%dT%H:%M:%S.%f` (UTC) in seconds; null for anything else, as IPE skips it. */
export function payloadSeconds(ts: string | undefined): number | null {
  if (!ts || !/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{1,6}$/.test(ts)) return null;
  const ms = Date.parse(`${ts.slice(0, 23)}Z`);
  return Number.isNaN(ms) ? null : ms / 1000;
}

function metricName(raw: string): string {
  return raw.toLowerCase().replace(/[^a-z0-9_]+/g, '_').replace(/_+/g, '_').replace(/^_|_$/g, '');
}

function fieldLabels(base: Labels, sensorId: string, fields: Record<string, unknown>, reading: string): Labels {
  const labels: Labels = { ...base };
  for (const [k, v] of Object.entries(fields)) {
    if (k === reading || v === null || v === undefined || typeof v === 'object') continue;
    labels[k] = String(v);
  }
  labels.sensor_id = sensorId;
  return labels;
}

function redfishSamples(base: Labels, data: Record<string, Record<string, Record<string, unknown>>>): Sample[] {
  const out: Sample[] = [];
  const extra = data.Extra as unknown as Record<string, unknown> | undefined;
  const withExtra: Labels = { ...base };
  if (extra && typeof extra === 'object') {
    for (const [k, v] of Object.entries(extra)) {
      if (typeof v === 'string') withExtra[k.toLowerCase() === 'uuid' ? 'redfish_system_uuid' : k.toLowerCase()] = v;
    }
  }
  const status = (kind: string, name: string, reading: string): void => {
    for (const [id, s] of Object.entries(data[kind] ?? {})) {
      if (s.state !== 'enabled') continue;
      const labels = fieldLabels(withExtra, id, s, reading);
      const health = typeof s.health === 'string' ? HEALTH[s.health] : undefined;
      if (health !== undefined) out.push({ name, labels, value: health });
      if (kind === 'Temperature' && typeof s.reading_celsius === 'number' && typeof s.physical_context === 'string') {
        out.push({ name: `baremetal_temp_${metricName(s.physical_context)}_celsius`, labels, value: s.reading_celsius });
      }
    }
  };
  status('Temperature', 'baremetal_temperature_status', 'reading_celsius');
  status('Fan', 'baremetal_fan_status', 'reading');
  status('Power', 'baremetal_power_status', 'last_power_output_watts');
  status('Drive', 'baremetal_drive_status', '');
  return out;
}

/** IPE's name for an IPMI sensor: its category as prefix where the id lacks it, the unit as suffix. */
function ipmiName(category: string, sensorId: string, unit: string | null): string {
  const base = metricName(sensorId.replace(/\(0x[0-9a-f]+\)/gi, '').replace(/[0-9]/g, ''));
  let name = base;
  if ((category === 'power' || category === 'system' || category === 'voltage') && !base.startsWith(category)) name = `${category}_${base}`;
  if (category === 'temperature') name = `${name}_celsius`;
  else if (unit && !name.endsWith(unit)) name = `${name}_${unit}`;
  return `baremetal_${metricName(name)}`;
}

function ipmiSamples(base: Labels, data: Record<string, Record<string, Record<string, unknown>>>): Sample[] {
  const out: Sample[] = [];
  for (const [category, sensors] of Object.entries(data)) {
    for (const [id, s] of Object.entries(sensors)) {
      const reading = String(s['Sensor Reading'] ?? '').trim();
      if (!reading || /^(No Reading|Disabled)/i.test(reading)) continue;
      let value: number;
      let unit: string | null = null;
      const hex = /^([0-9a-f]+)h$/i.exec(reading);
      if (hex) value = Number.parseInt(hex[1], 16) === 0 ? 0 : 1;
      else {
        value = Number.parseFloat(reading.split(/\s+/)[0]);
        if (Number.isNaN(value)) continue;
        const u = /\)\s+(.+)$/.exec(reading)?.[1] ?? reading.split(/\s+/).slice(1).join(' ');
        if (/^RPM$/i.test(u)) unit = 'rpm';
        else if (/^Volts$/i.test(u)) unit = 'volts';
        else if (/^Watts$/i.test(u)) unit = 'watts';
        else if (/^Amps$/i.test(u)) unit = 'amps';
      }
      const labels: Labels = { ...base, sensor_id: id };
      if (typeof s['Entity ID'] === 'string') labels.entity_id = s['Entity ID'];
      if (typeof s.Status === 'string') labels.status = s.Status;
      out.push({ name: ipmiName(category.toLowerCase(), id, unit), labels, value });
    }
  }
  return out;
}

/** Samples of one node's notification; [] for an event type the exporter does not know. */
export function samplesOf(n: SensorNotification): Sample[] {
  const base = nodeLabels(n.payload);
  const data = n.payload.payload ?? {};
  const out: Sample[] = [];
  const ts = payloadSeconds(n.payload.timestamp);
  if (ts !== null) out.push({ name: 'baremetal_last_payload_timestamp_seconds', labels: base, value: ts });
  if (n.event_type === 'hardware.ipmi.metrics') out.push(...ipmiSamples(base, data));
  else if (n.event_type === 'hardware.redfish.metrics' || n.event_type === 'hardware.idrac.metrics') out.push(...redfishSamples(base, data));
  return out;
}
