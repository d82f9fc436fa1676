/**
 * Redfish sensor resources into Ironic's sensor structure (ironic/drivers/modules/redfish/
 * management.py `get_sensors_data`; IRONIC-API.md "Sensor-data notifications"):
 *   Temperature / Fan: `<identity>@<chassis Id>`, PSU: `<psu id>:<Power Id>@<chassis Id>`,
 *   Drive: `<name>:<storage Id>@<system Id>`; fields named as sushy names them, values as plain
 *   strings ("OK", "enabled") rather than the enum objects sushy 4.3 serialises.
 * Every field is always present (null when the BMC leaves it out), like sushy's attributes.
 * Pure functions: they take bodies and fill `out`.
 */
import type { SensorData } from '../interfaces.js';
import { int, isObject, lastSegment, linkPath, num, prop, str, type Json } from './odata.js';

/** Sushy's State enum values. */
const STATES: Readonly<Record<string, string>> = {
  Enabled: 'enabled',
  Disabled: 'disabled',
  Absent: 'absent',
  StandbyOffline: 'standby offline',
  StandbySpare: 'standby spare',
  InTest: 'in test',
  Starting: 'starting',
  UnavailableOffline: 'unavailable offline',
  Deferring: 'deferring',
  Quiesced: 'quiesced',
  Updating: 'updating',
  Qualified: 'qualified',
  Degraded: 'degraded',
};

export function emptySensorData(): SensorData {
  return { Temperature: {}, Fan: {}, Power: {}, Drive: {} };
}

function status(item: Json): { state: string | null; health: string | null } {
  const s = prop(item, 'Status');
  if (!isObject(s)) return { state: null, health: null };
  const state = str(s.State);
  return { state: state === null ? null : (STATES[state] ?? state.toLowerCase()), health: str(s.Health) };
}

/** An array member's identity: MemberId, else the index in its `@odata.id` fragment, else Name, else its position. */
function memberIdentity(item: Json, index: number): string {
  const id = prop(item, 'MemberId');
  if (typeof id === 'string' && id !== '') return id;
  if (typeof id === 'number') return String(id);
  const odata = prop(item, '@odata.id');
  if (typeof odata === 'string' && odata.includes('#')) {
    const frag = odata.slice(odata.indexOf('#') + 1);
    const tail = frag.split('/').filter(Boolean).pop();
    if (tail) return tail;
  }
  return str(prop(item, 'Name')) ?? String(index);
}

function members(body: Json, name: string): Json[] {
  const v = prop(body, name);
  return Array.isArray(v) ? v.filter(isObject) : [];
}

function trimmed(v: unknown): string | null {
  const s = str(v);
  return s === null ? null : s.trim();
}

/** Thermal: Temperatures and Fans. */
export function parseThermal(body: Json, chassisId: string, out: SensorData): void {
  members(body, 'Temperatures').forEach((t, i) => {
    const identity = memberIdentity(t, i);
    out.Temperature[`${identity}@${chassisId}`] = {
      identity,
      max_reading_range_temp: num(prop(t, 'MaxReadingRangeTemp')),
      min_reading_range_temp: num(prop(t, 'MinReadingRangeTemp')),
      reading_celsius: num(prop(t, 'ReadingCelsius')),
      physical_context: str(prop(t, 'PhysicalContext')),
      sensor_number: int(prop(t, 'SensorNumber')),
      ...status(t),
    };
  });
  members(body, 'Fans').forEach((f, i) => {
    const identity = memberIdentity(f, i);
    // Thermal 1.0 named the reading ReadingRPM.
    const rpm = num(prop(f, 'ReadingRPM'));
    out.Fan[`${identity}@${chassisId}`] = {
      identity,
      max_reading_range: int(prop(f, 'MaxReadingRange')),
      min_reading_range: int(prop(f, 'MinReadingRange')),
      reading: int(prop(f, 'Reading')) ?? (rpm === null ? null : Math.trunc(rpm)),
      reading_units: str(prop(f, 'ReadingUnits')) ?? (rpm === null ? null : 'RPM'),
      serial_number: trimmed(prop(f, 'SerialNumber')),
      physical_context: str(prop(f, 'PhysicalContext')),
      ...status(f),
    };
  });
}

/** Power: PowerSupplies (Ironic reports neither PowerControl nor Voltages). */
export function parsePower(body: Json, chassisId: string, out: SensorData): void {
  const powerId = str(prop(body, 'Id')) ?? lastSegment(linkPath(body) ?? 'Power');
  members(body, 'PowerSupplies').forEach((p, i) => {
    out.Power[`${memberIdentity(p, i)}:${powerId}@${chassisId}`] = {
      power_capacity_watts: num(prop(p, 'PowerCapacityWatts')),
      line_input_voltage: num(prop(p, 'LineInputVoltage')),
      last_power_output_watts: num(prop(p, 'LastPowerOutputWatts')),
      serial_number: trimmed(prop(p, 'SerialNumber')),
      ...status(p),
    };
  });
}

/**
 * Members of the newer Sensors collection, mapped onto the same keys: temperatures by
 * ReadingType or UCUM unit `Cel`, fans by `Rotational`/`RPM` (or a percentage with a Fan
 * context), power by `Power`/`W`. Voltages, currents and energy have no place in Ironic's
 * structure, as with Thermal/Power.
 */
export function parseSensors(sensors: Json[], chassisId: string, out: SensorData): void {
  for (const s of sensors) {
    const id = str(prop(s, 'Id')) ?? lastSegment(linkPath(s) ?? 'sensor');
    const type = str(prop(s, 'ReadingType'));
    const units = str(prop(s, 'ReadingUnits'));
    const context = str(prop(s, 'PhysicalContext'));
    const reading = num(prop(s, 'Reading'));
    const max = num(prop(s, 'ReadingRangeMax'));
    const min = num(prop(s, 'ReadingRangeMin'));
    const st = status(s);
    if (type === 'Temperature' || units === 'Cel') {
      out.Temperature[`${id}@${chassisId}`] = {
        identity: id,
        max_reading_range_temp: max,
        min_reading_range_temp: min,
        reading_celsius: reading,
        physical_context: context,
        sensor_number: null,
        ...st,
      };
    } else if (type === 'Rotational' || units === 'RPM' || (context === 'Fan' && (units === '%' || type === 'Percent'))) {
      out.Fan[`${id}@${chassisId}`] = {
        identity: id,
        max_reading_range: max === null ? null : Math.trunc(max),
        min_reading_range: min === null ? null : Math.trunc(min),
        reading: reading === null ? null : Math.trunc(reading),
        reading_units: units === '%' ? 'Percent' : units,
        serial_number: null,
        physical_context: context,
        ...st,
      };
    } else if (type === 'Power' || units === 'W') {
      out.Power[`${id}:Sensors@${chassisId}`] = {
        power_capacity_watts: max,
        line_input_voltage: null,
        last_power_output_watts: reading,
        serial_number: null,
        ...st,
      };
    }
  }
}

/** SimpleStorage: its Devices are Ironic's drives. */
export function parseSimpleStorage(body: Json, systemId: string, out: SensorData): void {
  const storageId = str(prop(body, 'Id')) ?? lastSegment(linkPath(body) ?? 'storage');
  members(body, 'Devices').forEach((d, i) => {
    const name = str(prop(d, 'Name')) ?? String(i);
    out.Drive[`${name}:${storageId}@${systemId}`] = {
      name,
      model: trimmed(prop(d, 'Model')),
      capacity_bytes: num(prop(d, 'CapacityBytes')),
      ...status(d),
    };
  });
}
