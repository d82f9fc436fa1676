/**
 * Loads etc/galvanic.conf, applies GALVANIC_<SECTION>__<OPTION> environment
 * overrides, validates everything against SCHEMA and returns a deep-frozen
 * Config. Nothing is read at import time: the composition root calls
 * loadConfig once and passes the result down.
 */
import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ConfigError } from './errors.js';
import { parseIni } from './ini.js';
import { CROSS_CHECKS, SCHEMA, type Config, type OptionSpec, type SchemaShape } from './config-schema.js';

export type { Config } from './config-schema.js';

/** Used when loadConfig gets no path, relative to its cwd; a missing file there means defaults. */
export const DEFAULT_CONFIG_PATH = 'etc/galvanic.conf';
/** What secret options print as. */
export const SECRET_MASK = '******';
const ENV_PREFIX = 'GALVANIC_';
const BOOLEANS: Readonly<Record<string, boolean>> = {
  true: true,
  yes: true,
  '1': true,
  on: true,
  false: false,
  no: false,
  '0': false,
  off: false,
};

// The literal SCHEMA type is for Config; the loader walks it generically.
const schema: SchemaShape = SCHEMA;

type Value = string | number | boolean | string[];
type Parsed = { ok: true; value: Value } | { ok: false; problem: string };
type Values = Record<string, Record<string, Value>>;
/** Where each option the file or the environment set was set (`file:line`, or `env NAME`), by optionKey. */
type Origins = Map<string, string>;

function optionKey(section: string, key: string): string {
  return `${section}\0${key}`;
}

export interface LoadConfigOptions {
  /** Config file; when absent, DEFAULT_CONFIG_PATH is used if it exists. */
  path?: string;
  /** Defaults to process.env. */
  env?: NodeJS.ProcessEnv;
  /** Base of relative paths; defaults to process.cwd(). */
  cwd?: string;
}

/**
 * Reads, overrides and validates the configuration.
 * @throws ConfigError listing every problem found, each `where: [section] option: what`.
 */
export function loadConfig(opts: LoadConfigOptions = {}): Readonly<Config> {
  const env = opts.env ?? process.env;
  const cwd = opts.cwd ?? process.cwd();
  const problems: string[] = [];
  const values = defaults();
  const origins: Origins = new Map();

  const file = opts.path ?? DEFAULT_CONFIG_PATH;
  const text = readConfigFile(file, path.resolve(cwd, file), opts.path !== undefined, problems);
  if (text !== undefined) applyFile(text, file, values, origins, problems);
  applyEnv(env, values, origins, problems);
  checkAcrossOptions(values, origins, problems);

  if (problems.length > 0) throw new ConfigError(problems);
  // Resolved here, not in the schema, so that the sample shows the empty default.
  if (values.DEFAULT.host === '') values.DEFAULT.host = os.hostname();
  return deepFreeze(values) as unknown as Config;
}

/** A copy of `config` fit for logging: non-empty secret options read SECRET_MASK. */
export function describeConfigForLog(config: Readonly<Config>): Config {
  const source = config as unknown as Values;
  const copy: Values = {};
  for (const [section, options] of Object.entries(schema)) {
    copy[section] = {};
    for (const [key, spec] of Object.entries(options)) {
      const value = source[section][key];
      // An empty secret hides nothing and tells the reader which default applies.
      copy[section][key] = spec.secret && value !== '' ? SECRET_MASK : Array.isArray(value) ? [...value] : value;
    }
  }
  return copy as unknown as Config;
}

/** The content of etc/galvanic.conf.sample: every option, its help, type, bounds and default. */
export function renderSample(): string {
  const out: string[] = [
    '# Galvanic configuration sample: every option with its help, type and default.',
    '#',
    ...wrap(
      'Generated from common/config-schema.ts by `galvanic config sample`; do not edit by hand. ' +
        'Copy the options you change to etc/galvanic.conf and uncomment them. ' +
        'Any option can also be set in the environment as GALVANIC_<SECTION>__<OPTION> ' +
        '(e.g. GALVANIC_API__PORT=6390), which wins over the file.',
    ),
  ];
  for (const [section, options] of Object.entries(schema)) {
    out.push('', `[${section}]`);
    for (const [key, spec] of Object.entries(options)) {
      out.push('', ...wrap(spec.help), `# ${describeType(spec)}`);
      out.push(`#${key} = ${formatValue(spec.default)}`.trimEnd());
    }
  }
  return out.join('\n') + '\n';
}

function defaults(): Values {
  const values: Values = {};
  for (const [section, options] of Object.entries(schema)) {
    values[section] = {};
    for (const [key, spec] of Object.entries(options)) {
      values[section][key] = Array.isArray(spec.default) ? [...spec.default] : (spec.default as Value);
    }
  }
  return values;
}

function readConfigFile(label: string, resolved: string, explicit: boolean, problems: string[]): string | undefined {
  try {
    return readFileSync(resolved, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') {
      if (explicit) problems.push(`${label}: no such file`);
    } else {
      problems.push(`${label}: cannot read: ${code ?? (err as Error).message}`);
    }
    return undefined;
  }
}

function applyFile(text: string, file: string, values: Values, origins: Origins, problems: string[]): void {
  const ini = parseIni(text, file);
  // Syntax, unknown-section and value problems are merged in line order.
  const found: { line: number; problem: string }[] = [];
  for (const { line, message } of ini.problems) found.push({ line, problem: message });
  for (const { name, line } of ini.sections) {
    if (!Object.hasOwn(schema, name)) found.push({ line, problem: `${file}:${line}: [${name}]: unknown section` });
  }
  for (const { section, key, value, line } of ini.entries) {
    if (!Object.hasOwn(schema, section)) continue;
    const problem = apply(values, origins, section, key, value, `${file}:${line}`);
    if (problem !== undefined) found.push({ line, problem });
  }
  found.sort((a, b) => a.line - b.line);
  problems.push(...found.map((f) => f.problem));
}

function applyEnv(env: NodeJS.ProcessEnv, values: Values, origins: Origins, problems: string[]): void {
  for (const name of Object.keys(env).sort()) {
    const raw = env[name];
    // Other GALVANIC_* variables (without "__") are not config overrides.
    if (raw === undefined || !name.startsWith(ENV_PREFIX)) continue;
    const rest = name.slice(ENV_PREFIX.length);
    const sep = rest.indexOf('__');
    if (sep < 0) continue;
    const given = rest.slice(0, sep);
    const key = rest.slice(sep + 2).toLowerCase();
    const section = Object.keys(schema).find((s) => s.toLowerCase() === given.toLowerCase());
    if (section === undefined) {
      problems.push(`env ${name}: [${given.toLowerCase()}]: unknown section`);
      continue;
    }
    const problem = apply(values, origins, section, key, raw.trim(), `env ${name}`);
    if (problem !== undefined) problems.push(problem);
  }
}

/** Stores one raw value and where it came from; returns the problem text when it is unknown or invalid. */
function apply(values: Values, origins: Origins, section: string, key: string, raw: string, where: string): string | undefined {
  const spec = Object.hasOwn(schema[section], key) ? schema[section][key] : undefined;
  if (spec === undefined) return `${where}: [${section}] ${key}: unknown option`;
  origins.set(optionKey(section, key), where);
  const parsed = parseValue(spec, raw);
  if (!parsed.ok) return `${where}: [${section}] ${key}: ${parsed.problem}`;
  values[section][key] = parsed.value;
  return undefined;
}

/** The schema's rules across options (CROSS_CHECKS), each reported where the first of its options that was set was set. */
function checkAcrossOptions(values: Values, origins: Origins, problems: string[]): void {
  const config = values as unknown as Config;
  for (const rule of CROSS_CHECKS) {
    const problem = rule.check(config);
    if (problem === undefined) continue;
    const [section, key] = rule.options.find(([s, k]) => origins.has(optionKey(s, k))) ?? rule.options[0];
    const where = origins.get(optionKey(section, key));
    problems.push(`${where === undefined ? '' : `${where}: `}[${section}] ${key}: ${problem}`);
  }
}

function parseValue(spec: OptionSpec, raw: string): Parsed {
  // A secret must not reach logs through its own error message.
  const shown = spec.secret ? JSON.stringify(SECRET_MASK) : JSON.stringify(raw);
  switch (spec.type) {
    case 'string':
      return { ok: true, value: raw };
    case 'list':
      return {
        ok: true,
        value: raw
          .split(',')
          .map((item) => item.trim())
          .filter((item) => item !== ''),
      };
    case 'bool': {
      const value = BOOLEANS[raw.toLowerCase()];
      if (value === undefined) return { ok: false, problem: `${shown} is not a boolean (true/false/yes/no/1/0/on/off)` };
      return { ok: true, value };
    }
    case 'enum':
      if (!spec.choices.includes(raw)) return { ok: false, problem: `${shown} is not one of ${spec.choices.join(', ')}` };
      return { ok: true, value: raw };
    case 'int':
    case 'float': {
      const isInt = spec.type === 'int';
      const pattern = isInt ? /^[+-]?\d+$/ : /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;
      const value = Number(raw);
      if (!pattern.test(raw) || !(isInt ? Number.isSafeInteger(value) : Number.isFinite(value))) {
        return { ok: false, problem: `${shown} is not ${isInt ? 'an integer' : 'a number'}` };
      }
      const num = spec.secret ? SECRET_MASK : String(value);
      if (spec.min !== undefined && value < spec.min) {
        return { ok: false, problem: `${num} is below the minimum ${spec.min}` };
      }
      if (spec.max !== undefined && value > spec.max) {
        return { ok: false, problem: `${num} is above the maximum ${spec.max}` };
      }
      return { ok: true, value };
    }
  }
}

function describeType(spec: OptionSpec): string {
  const parts = [`Type: ${spec.type === 'list' ? 'list (comma-separated)' : spec.type}`];
  parts.push(`default ${spec.default === '' || (Array.isArray(spec.default) && spec.default.length === 0) ? '(empty)' : formatValue(spec.default)}`);
  if ((spec.type === 'int' || spec.type === 'float') && spec.min !== undefined) parts.push(`min ${spec.min}`);
  if ((spec.type === 'int' || spec.type === 'float') && spec.max !== undefined) parts.push(`max ${spec.max}`);
  if (spec.type === 'enum') parts.push(`choices ${spec.choices.join(', ')}`);
  return parts.join('; ');
}

function formatValue(value: string | number | boolean | readonly string[]): string {
  return Array.isArray(value) ? value.join(',') : String(value);
}

/** Word-wraps `text` into `# ` comment lines of at most ~78 columns. */
function wrap(text: string, width = 78): string[] {
  const lines: string[] = [];
  let current = '#';
  for (const word of text.split(/\s+/).filter(Boolean)) {
    if (current !== '#' && current.length + 1 + word.length > width) {
      lines.push(current);
      current = '#';
    }
    current += ' ' + word;
  }
  if (current !== '#') lines.push(current);
  return lines;
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    for (const child of Object.values(value)) deepFreeze(child);
    Object.freeze(value);
  }
  return value;
}
