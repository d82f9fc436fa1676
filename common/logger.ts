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

/** How log records are written: see `[DEFAULT] log_format`. */
export type LogFormat = 'auto' | 'json' | 'text';

export interface LoggerOptions {
  /** `[DEFAULT] log_level`; info when absent. */
  level?: string;
  /** `[DEFAULT] debug`: lowers the level to debug. */
  debug?: boolean;
  format?: LogFormat;
  name?: string;
  /** Where the lines go; standard output when absent (and then auto may mean text). */
  destination?: pino.DestinationStream;
}

/**
 * The root logger of a process: ISO times and level names (what an operator reads and what
 * log collectors parse without a table of pino's numbers), secrets redacted.
 */
export function createLogger(opts: LoggerOptions): Logger {
  const level = opts.level ?? 'info';
  // auto: a person reads a terminal; anything else (a pipe, a file, journald) gets JSON.
  const auto = opts.destination === undefined && process.stdout.isTTY ? 'text' : 'json';
  const format = opts.format === 'auto' || opts.format === undefined ? auto : opts.format;
  const out = opts.destination ?? (format === 'text' ? process.stdout : undefined);
  return pino(
    {
      name: opts.name ?? 'galvanic',
      level: opts.debug && level !== 'trace' ? 'debug' : level,
      redact: { paths: REDACT_PATHS, censor: '******' },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    format === 'text' && out ? textDestination(out) : out,
  );
}

/** Fields every record has, which a text line shows in its fixed columns instead. */
const FIXED = new Set(['time', 'level', 'pid', 'hostname', 'name', 'component', 'msg', 'err']);

/**
 * Turns pino's JSON lines into oslo.log-like text: `time pid LEVEL component message key=value…`,
 * then an error's stack indented below. Meant for a terminal, where a person reads each line.
 */
export function textDestination(out: { write(s: string): unknown }): pino.DestinationStream {
  return {
    write(line: string) {
      let rec: Record<string, unknown>;
      try {
        rec = JSON.parse(line) as Record<string, unknown>;
      } catch {
        out.write(line);
        return;
      }
      out.write(`${formatTextLine(rec)}\n`);
    },
  };
}

/** One record as a text line (see textDestination). */
export function formatTextLine(rec: Record<string, unknown>): string {
  const head = [String(rec.time ?? ''), String(rec.pid ?? ''), String(rec.level ?? '').toUpperCase(), String(rec.component ?? rec.name ?? '')];
  const fields = Object.entries(rec).filter(([k]) => !FIXED.has(k)).map(([k, v]) => `${k}=${textValue(v)}`);
  let text = `${head.join(' ')} ${String(rec.msg ?? '')}${fields.length ? ` ${fields.join(' ')}` : ''}`;
  const err = rec.err as { message?: string; stack?: string } | undefined;
  if (err && typeof err === 'object') {
    const stack = err.stack ?? err.message ?? JSON.stringify(err);
    text += `\n    ${stack.split('\n').join('\n    ')}`;
  }
  return text;
}

function textValue(v: unknown): string {
  if (typeof v === 'string') return /^[^\s"=]*$/.test(v) && v !== '' ? v : JSON.stringify(v);
  return JSON.stringify(v) ?? String(v);
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
