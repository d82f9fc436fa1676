import { pino, type Logger } from 'pino';

/**
 * Paths pino blanks out wherever they appear in a log record: BMC credentials inside
 * driver_info, auth headers, connection URLs. Redaction is the last line; code also
 * avoids logging these objects at all.
 */
export const REDACT_PATHS = [
  '*.password', '*.*.password', '*.ipmi_password', '*.*.ipmi_password', '*.redfish_password', '*.*.redfish_password',
  '*.driver_info', '*.driverInfo', '*.*.driverInfo', '*.*.driver_info',
  'req.headers.authorization', '*.authorization', '*.connection', '*.connectionString', '*.transport_url',
];

export function createLogger(opts: { debug: boolean; name?: string; destination?: pino.DestinationStream }): Logger {
  return pino(
    {
      name: opts.name ?? 'galvanic',
      level: process.env.GALVANIC_LOG_LEVEL ?? (opts.debug ? 'debug' : 'info'),
      redact: { paths: REDACT_PATHS, censor: '******' },
    },
    opts.destination,
  );
}
