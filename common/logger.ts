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

const LEVELS = new Set(['trace', 'debug', 'info', 'warn', 'error', 'fatal']);

/**
 * `parent.child(bindings)`, made when first written to. pino serialises and redacts a child's
 * bindings when the child is created, which for a logger per intent or per node read costs
 * more than the few lines such work usually writes (none when it goes well).
 * A call at a level that is off never makes the child; nor does looking a level method up.
 */
export function lazyChild(parent: Logger, bindings: Record<string, unknown>): Logger {
  let child: Logger | undefined;
  const real = () => (child ??= parent.child(bindings));
  const noop = () => undefined;
  return new Proxy({} as Logger, {
    get(_target, prop) {
      if (typeof prop === 'string' && LEVELS.has(prop)) {
        if (!parent.isLevelEnabled(prop)) return noop;
        return (...args: unknown[]) => (real()[prop as 'info'] as (...a: unknown[]) => void)(...args);
      }
      if (prop === 'level') return parent.level;
      const c = real();
      const value: unknown = Reflect.get(c, prop, c);
      return typeof value === 'function' ? value.bind(c) : value;
    },
  });
}
