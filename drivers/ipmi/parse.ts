/**
 * Parsers of ipmitool's output, following Ironic's `drivers/modules/ipmitool.py`. Pure
 * functions, tested on captured output as well as against ipmi_sim.
 */
import { BmcBadResponse } from '../../common/errors.js';
import type { BootDevice, PowerStateValue, SensorData } from '../interfaces.js';

/** `power status` → Ironic's power state; anything unexpected is 'error', as Ironic does. */
export function parsePowerStatus(stdout: string): PowerStateValue {
  const text = stdout.trim();
  if (text === 'Chassis Power is on') return 'power on';
  if (text === 'Chassis Power is off') return 'power off';
  return 'error';
}

/**
 * `chassis bootparam get 5` → boot device and persistence. The device comes from the
 * "Boot Device Selector" line; persistence from "Options apply to all future boots".
 */
export function parseBootDevice(stdout: string): BootDevice {
  const m = /Boot Device Selector : (.+)?\n/.exec(stdout.endsWith('\n') ? stdout : `${stdout}\n`);
  let bootDevice: string | null = null;
  const selector = m?.[1] ?? '';
  if (selector.includes('PXE')) bootDevice = 'pxe';
  else if (selector.includes('Hard-Drive')) bootDevice = selector.includes('Safe-Mode') ? 'safe' : 'disk';
  else if (selector.includes('BIOS')) bootDevice = 'bios';
  else if (selector.includes('CD/DVD')) bootDevice = 'cdrom';
  return { bootDevice, persistent: stdout.includes('Options apply to all future boots') };
}

/**
 * `chassis bootdev` exits 0 even when the BMC refuses (ipmitool prints the completion code on
 * stderr and no confirmation), so success is the confirmation line.
 */
export function bootdevAccepted(stdout: string): boolean {
  return /^Set Boot Device to /m.test(stdout);
}

/** One `sdr -v` record: every `key: value` line with exactly one colon (Ironic's _process_sensor). */
function parseRecord(record: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of record.split('\n')) {
    if (!line) continue;
    const kv = line.split(':');
    if (kv.length !== 2) continue;
    out[kv[0].trim()] = kv[1].trim();
  }
  return out;
}

const SENSOR_TYPE_KEYS = ['Sensor Type (Analog)', 'Sensor Type (Discrete)', 'Sensor Type (Threshold)'];

/**
 * `ipmitool sdr -v` → Ironic's sensor structure: records split on blank lines, grouped by the
 * first word of their "Sensor Type (…)" value, keyed by "Sensor ID" (e.g. "Inlet Temp (0x1)"),
 * every field a string; records without "Sensor Reading" are dropped.
 * @throws BmcBadResponse for a record without a sensor type, or output without any reading
 */
export function parseSensorData(stdout: string): SensorData {
  const result: SensorData = {};
  if (!stdout) return result;
  for (const chunk of stdout.split('\n\n')) {
    const record = parseRecord(chunk);
    if (Object.keys(record).length === 0) continue;
    const typeKey = SENSOR_TYPE_KEYS.find((k) => k in record);
    if (typeKey === undefined) {
      throw new BmcBadResponse(`parse ipmi sensor data failed, unknown sensor type data: ${JSON.stringify(record)}`);
    }
    const type = record[typeKey].split(' ', 1)[0];
    if (!('Sensor Reading' in record)) continue;
    const id = record['Sensor ID'];
    if (id === undefined) throw new BmcBadResponse(`parse ipmi sensor data failed, a sensor has no Sensor ID: ${JSON.stringify(record)}`);
    (result[type] ??= {})[id] = record;
  }
  if (Object.keys(result).length === 0) {
    throw new BmcBadResponse(`parse ipmi sensor data failed, get nothing with input data: ${stdout.slice(0, 2000)}`);
  }
  return result;
}
