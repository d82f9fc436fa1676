/** Sensor notifications into ironic-prometheus-exporter's metric names and labels. */
import { expect } from 'chai';
import { Registry } from 'prom-client';
import { NodeSeries } from '../../exporter/node-series.js';
import { payloadSeconds, samplesOf, type Sample } from '../../exporter/sensor-metrics.js';

const NODE = { node_uuid: 'ac2a0000-0000-4000-8000-000000000001', node_name: 'knilab-master-u9', instance_uuid: null, timestamp: '2019-03-29T20:12:22.989020' };

function byName(samples: Sample[], name: string): Sample[] {
  return samples.filter((s) => s.name === name);
}

describe('exporter: sensor notifications to metrics', () => {
  it('names Redfish sensors as ironic-prometheus-exporter does and skips sensors that are not enabled', () => {
    const samples = samplesOf({
      event_type: 'hardware.redfish.metrics',
      payload: {
        ...NODE,
        payload: {
          Temperature: {
            'CPU1@1': { identity: 'CPU1', max_reading_range_temp: 120, min_reading_range_temp: 0, physical_context: 'CPU', reading_celsius: 62, sensor_number: 1, health: 'OK', state: 'enabled' },
            'Off@1': { identity: 'Off', physical_context: 'CPU', reading_celsius: 1, sensor_number: 2, health: 'OK', state: 'absent' },
          },
          Fan: { 'Fan1@1': { identity: 'Fan1', reading: 6000, reading_units: 'RPM', physical_context: 'CPU', health: 'Warning', state: 'enabled', serial_number: null } },
          Power: { '0:Power@1': { health: 'Critical', last_power_output_watts: 650, state: 'enabled' } },
          Drive: { 'd1:s1@sys': { name: 'd1', model: 'M', capacity_bytes: 1, health: 'OK', state: 'enabled' } },
        },
      },
    });
    const [temp] = byName(samples, 'baremetal_temp_cpu_celsius');
    expect(temp.value).to.equal(62);
    expect(temp.labels).to.deep.equal({
      node_uuid: NODE.node_uuid, instance_uuid: NODE.node_uuid, node_name: 'knilab-master-u9', identity: 'CPU1', max_reading_range_temp: '120',
      min_reading_range_temp: '0', physical_context: 'CPU', sensor_number: '1', health: 'OK', state: 'enabled', sensor_id: 'CPU1@1',
    });
    expect(byName(samples, 'baremetal_temp_cpu_celsius')).to.have.length(1);
    expect(byName(samples, 'baremetal_temperature_status').map((s) => s.value)).to.deep.equal([0]);
    expect(byName(samples, 'baremetal_fan_status')[0]).to.include({ value: 1 });
    expect(byName(samples, 'baremetal_fan_status')[0].labels).to.not.have.property('reading');
    expect(byName(samples, 'baremetal_fan_status')[0].labels).to.not.have.property('serial_number');
    expect(byName(samples, 'baremetal_power_status')[0]).to.include({ value: 2 });
    expect(byName(samples, 'baremetal_drive_status')[0].labels.sensor_id).to.equal('d1:s1@sys');
    expect(byName(samples, 'baremetal_last_payload_timestamp_seconds')[0].value).to.be.closeTo(Date.UTC(2019, 2, 29, 20, 12, 22, 989) / 1000, 0.001);
  });

  it('names IPMI sensors from their category and Sensor ID, with the reading unit', () => {
    const sensor = (id: string, reading: string, extra: Record<string, string> = {}) => ({ 'Sensor ID': id, 'Sensor Reading': reading, 'Entity ID': '7.1 (System Board)', Status: 'ok', ...extra });
    const samples = samplesOf({
      event_type: 'hardware.ipmi.metrics',
      payload: {
        ...NODE,
        payload: {
          Temperature: { 'Inlet Temp (0x5)': sensor('Inlet Temp (0x5)', '21 (+/- 1) degrees C'), 'Temp (0x1)': sensor('Temp (0x1)', '40 (+/- 1) degrees C') },
          Fan: { 'Fan1A RPM (0x30)': sensor('Fan1A RPM (0x30)', '4560 (+/- 120) RPM') },
          Voltage: { 'Voltage 1 (0x6c)': sensor('Voltage 1 (0x6c)', '230 (+/- 0) Volts'), 'Off (0x70)': sensor('Off (0x70)', 'No Reading') },
          Power: { 'PS Redundancy (0x77)': sensor('PS Redundancy (0x77)', '0h') },
        },
      },
    });
    const names = samples.map((s) => s.name);
    expect(names).to.include.members(['baremetal_inlet_temp_celsius', 'baremetal_temp_celsius', 'baremetal_fana_rpm', 'baremetal_voltage_volts', 'baremetal_power_ps_redundancy']);
    expect(byName(samples, 'baremetal_inlet_temp_celsius')[0]).to.deep.include({ value: 21 });
    expect(byName(samples, 'baremetal_inlet_temp_celsius')[0].labels).to.include({ sensor_id: 'Inlet Temp (0x5)', entity_id: '7.1 (System Board)', status: 'ok' });
    expect(byName(samples, 'baremetal_power_ps_redundancy')[0].value).to.equal(0);
    expect(names.some((n) => n.includes('off'))).to.equal(false);
  });

  it('rejects a payload timestamp without microseconds, as the exporter it mimics does', () => {
    expect(payloadSeconds('2019-03-29T20:12:22')).to.equal(null);
    expect(payloadSeconds('2019-03-29T20:12:22.000001')).to.be.a('number');
  });

  it('replaces a node\'s series on update and forgets a silent node after stale_after', async () => {
    const registry = new Registry();
    const series = new NodeSeries(registry, 1000);
    const s = (uuid: string, v: number): Sample => ({ name: 'baremetal_power_status', labels: { node_uuid: uuid, sensor_id: 'p' }, value: v });
    series.update('a', [s('a', 0)], 0);
    series.update('b', [s('b', 1)], 0);
    series.update('a', [s('a', 2)], 900);
    let text = await registry.metrics();
    expect(text).to.include('baremetal_power_status{node_uuid="a",sensor_id="p"} 2').and.include('node_uuid="b"');
    expect(text.match(/node_uuid="a"/g)).to.have.length(1);
    expect(series.sweep(1500)).to.equal(1);
    text = await registry.metrics();
    expect(text).to.not.include('node_uuid="b"');
    expect(text).to.include('node_uuid="a"');
  });
});
