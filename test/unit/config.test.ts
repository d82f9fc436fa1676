import { expect } from 'chai';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describeConfigForLog, loadConfig, renderSample, SECRET_MASK, type Config } from '../../common/config.js';
import { SCHEMA, type OptionSpec, type SchemaShape } from '../../common/config-schema.js';
import { ConfigError } from '../../common/errors.js';
import { parseIni } from '../../common/ini.js';

// The compiled test lives at dist/test/unit/, three levels below the package root.
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

describe('config', () => {
  let dir: string;

  beforeEach(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'galvanic-config-'));
  });
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  /** Writes `text` as a config file in the temp dir and returns its path. */
  function conf(text: string, name = 'galvanic.conf'): string {
    const file = path.join(dir, name);
    writeFileSync(file, text);
    return file;
  }

  /** Loads and returns the problems of the ConfigError it must throw. */
  function problemsOf(opts: Parameters<typeof loadConfig>[0]): string[] {
    try {
      loadConfig({ env: {}, cwd: dir, ...opts });
    } catch (err) {
      expect(err).to.be.instanceOf(ConfigError);
      return (err as ConfigError).problems;
    }
    expect.fail('loadConfig did not throw');
  }

  describe('sources', () => {
    it('loads the built-in defaults when there is no file', () => {
      const config = loadConfig({ env: {}, cwd: dir });
      expect(config.api.port).to.equal(6385);
      expect(config.api.host_ip).to.equal('127.0.0.1');
      expect(config.api.auth_strategy).to.equal('noauth');
      expect(config.DEFAULT.debug).to.equal(false);
      expect(config.DEFAULT.enabled_hardware_types).to.deep.equal(['fake-hardware', 'redfish', 'ipmi']);
      expect(config.database.connection).to.equal('');
      expect(config.conductor.poll_interval).to.equal(5);
      expect(config.notifications.driver).to.equal('noop');
    });

    it("fills an empty host with the machine's hostname", () => {
      expect(loadConfig({ env: {}, cwd: dir }).DEFAULT.host).to.equal(os.hostname());
      const file = conf('[DEFAULT]\nhost = conductor-7\n');
      expect(loadConfig({ path: file, env: {} }).DEFAULT.host).to.equal('conductor-7');
    });

    it('reads etc/galvanic.conf under cwd when no path is given', () => {
      mkdirSync(path.join(dir, 'etc'));
      writeFileSync(path.join(dir, 'etc', 'galvanic.conf'), '[api]\nport = 7000\n');
      expect(loadConfig({ env: {}, cwd: dir }).api.port).to.equal(7000);
    });

    it('lets a file override defaults and leaves the other options alone', () => {
      const file = conf(
        [
          '# a comment',
          '; another comment',
          '',
          '[DEFAULT]',
          'debug = true',
          'enabled_hardware_types=redfish',
          '',
          '[api]',
          '  port   =   6390  ',
          'auth_strategy = http_basic',
        ].join('\n'),
      );
      const config = loadConfig({ path: file, env: {} });
      expect(config.DEFAULT.debug).to.equal(true);
      expect(config.DEFAULT.enabled_hardware_types).to.deep.equal(['redfish']);
      expect(config.api.port).to.equal(6390);
      expect(config.api.auth_strategy).to.equal('http_basic');
      expect(config.api.max_limit).to.equal(1000);
    });

    it('keeps the last value of a key repeated in a section', () => {
      const file = conf('[api]\nport = 7000\n[database]\nmax_pool_size = 3\n[api]\nport = 7001\n');
      const config = loadConfig({ path: file, env: {} });
      expect(config.api.port).to.equal(7001);
      expect(config.database.max_pool_size).to.equal(3);
    });

    it('lets environment variables beat the file, in either case of section name', () => {
      const file = conf('[api]\nport = 7000\n[DEFAULT]\ndebug = false\n');
      const config = loadConfig({
        path: file,
        env: {
          GALVANIC_API__PORT: '6390',
          GALVANIC_default__DEBUG: 'yes',
          GALVANIC_DATABASE__CONNECTION: 'postgres://u:p@db/galvanic',
          GALVANIC_LOG_LEVEL: 'debug', // not an override: no "__"
          PATH: '/bin',
        },
      });
      expect(config.api.port).to.equal(6390);
      expect(config.DEFAULT.debug).to.equal(true);
      expect(config.database.connection).to.equal('postgres://u:p@db/galvanic');
    });

    it('fails when an explicit path does not exist', () => {
      expect(problemsOf({ path: 'nowhere.conf' })).to.deep.equal(['nowhere.conf: no such file']);
    });
  });

  describe('value parsing', () => {
    function load(section: string, text: string): ReturnType<typeof loadConfig> {
      return loadConfig({ path: conf(`[${section}]\n${text}\n`), env: {} });
    }

    it('parses lists: comma-separated, trimmed, empties dropped', () => {
      expect(load('DEFAULT', 'enabled_hardware_types = a , b,,c ,').DEFAULT.enabled_hardware_types).to.deep.equal([
        'a',
        'b',
        'c',
      ]);
      expect(load('DEFAULT', 'enabled_hardware_types =').DEFAULT.enabled_hardware_types).to.deep.equal([]);
    });

    it('parses every boolean spelling, case-insensitively', () => {
      for (const word of ['true', 'yes', '1', 'on', 'TRUE', 'On']) {
        expect(load('DEFAULT', `debug = ${word}`).DEFAULT.debug, word).to.equal(true);
      }
      for (const word of ['false', 'no', '0', 'off', 'False', 'NO']) {
        expect(load('DEFAULT', `debug = ${word}`).DEFAULT.debug, word).to.equal(false);
      }
    });

    it('parses enums and floats', () => {
      expect(load('notifications', 'driver = log').notifications.driver).to.equal('log');
      expect(load('conductor', 'poll_interval = 0.25').conductor.poll_interval).to.equal(0.25);
      expect(load('conductor', 'intent_retry_initial_delay = 2').conductor.intent_retry_initial_delay).to.equal(2);
      expect(load('conductor', 'intent_retry_max_delay = 1.5e2').conductor.intent_retry_max_delay).to.equal(150);
    });

    it('strips one pair of surrounding quotes, as oslo.config does', () => {
      expect(load('database', 'connection = "postgres://h/db"').database.connection).to.equal('postgres://h/db');
      expect(load('api', "public_endpoint = 'http://x'").api.public_endpoint).to.equal('http://x');
    });

    it('accepts values at the bounds', () => {
      expect(load('api', 'port = 65535').api.port).to.equal(65535);
      expect(load('api', 'port = 1').api.port).to.equal(1);
      expect(load('conductor', 'poll_interval = 0.1').conductor.poll_interval).to.equal(0.1);
      expect(load('conductor', 'sync_power_state_interval = 0').conductor.sync_power_state_interval).to.equal(0);
    });
  });

  describe('problems', () => {
    function fileProblems(text: string): { file: string; problems: string[] } {
      const file = conf(text);
      return { file, problems: problemsOf({ path: file }) };
    }

    it('reports a value above the maximum', () => {
      const { file, problems } = fileProblems('[api]\nport = 70000\n');
      expect(problems).to.deep.equal([`${file}:2: [api] port: 70000 is above the maximum 65535`]);
    });

    it('reports a value below the minimum, for ints and floats', () => {
      const { file, problems } = fileProblems('[api]\nmax_body_bytes = 10\n[conductor]\npoll_interval = 0.05\n');
      expect(problems).to.deep.equal([
        `${file}:2: [api] max_body_bytes: 10 is below the minimum 1024`,
        `${file}:4: [conductor] poll_interval: 0.05 is below the minimum 0.1`,
      ]);
    });

    it('reports values of the wrong type', () => {
      const { file, problems } = fileProblems(
        [
          '[api]',
          'port = 80a',
          'max_limit = 1.5',
          'auth_strategy = ldap',
          '[DEFAULT]',
          'debug = maybe',
          '[conductor]',
          'poll_interval = soon',
        ].join('\n'),
      );
      expect(problems).to.deep.equal([
        `${file}:2: [api] port: "80a" is not an integer`,
        `${file}:3: [api] max_limit: "1.5" is not an integer`,
        `${file}:4: [api] auth_strategy: "ldap" is not one of noauth, http_basic`,
        `${file}:6: [DEFAULT] debug: "maybe" is not a boolean (true/false/yes/no/1/0/on/off)`,
        `${file}:8: [conductor] poll_interval: "soon" is not a number`,
      ]);
    });

    it('reports unknown sections and options', () => {
      const { file, problems } = fileProblems('[api]\nprot = 1\n[apii]\nport = 1\nhost = x\n');
      expect(problems).to.deep.equal([`${file}:2: [api] prot: unknown option`, `${file}:3: [apii]: unknown section`]);
    });

    it('reports syntax errors with their line', () => {
      const { file, problems } = fileProblems('port = 1\n[api\nport = 2\n[api]\njust words\n= 3\n[]\n');
      expect(problems).to.deep.equal([
        `${file}:1: option "port" is outside any [section]`,
        `${file}:2: malformed section header "[api"`,
        `${file}:5: line has no "=" (expected "option = value")`,
        `${file}:6: no option name before "="`,
        `${file}:7: malformed section header "[]"`,
      ]);
    });

    it('reports bad environment overrides', () => {
      const problems = problemsOf({
        env: {
          GALVANIC_API__PORT: '0',
          GALVANIC_API__PROT: '1',
          GALVANIC_APII__PORT: '1',
          GALVANIC_DEFAULT__DEBUG: 'maybe',
        },
      });
      expect(problems).to.deep.equal([
        'env GALVANIC_APII__PORT: [apii]: unknown section',
        'env GALVANIC_API__PORT: [api] port: 0 is below the minimum 1',
        'env GALVANIC_API__PROT: [api] prot: unknown option',
        'env GALVANIC_DEFAULT__DEBUG: [DEFAULT] debug: "maybe" is not a boolean (true/false/yes/no/1/0/on/off)',
      ]);
    });

    it('reports every problem of the file and the environment at once', () => {
      const file = conf('[api]\nport = 70000\nprot = 1\n[apii]\n[DEFAULT]\ndebug = maybe\n');
      const problems = problemsOf({ path: file, env: { GALVANIC_CONDUCTOR__WORKERS_POOL_SIZE: '0' } });
      expect(problems).to.deep.equal([
        `${file}:2: [api] port: 70000 is above the maximum 65535`,
        `${file}:3: [api] prot: unknown option`,
        `${file}:4: [apii]: unknown section`,
        `${file}:6: [DEFAULT] debug: "maybe" is not a boolean (true/false/yes/no/1/0/on/off)`,
        'env GALVANIC_CONDUCTOR__WORKERS_POOL_SIZE: [conductor] workers_pool_size: 0 is below the minimum 1',
      ]);
    });

    it('reports a rule across options where the option was set, after the values', () => {
      const file = conf('[DEFAULT]\nhost = x\n\n[inspector]\nhooks = $default_hooks,bogus\n[exporter]\nsource = log\n');
      const problems = problemsOf({
        path: file,
        env: { GALVANIC_DEFAULT__DEFAULT_POWER_INTERFACE: 'ipmitool', GALVANIC_DEFAULT__ENABLED_POWER_INTERFACES: 'fake,redfish' },
      });
      expect(problems).to.deep.equal([
        'env GALVANIC_DEFAULT__DEFAULT_POWER_INTERFACE: [DEFAULT] default_power_interface: "ipmitool" is not in enabled_power_interfaces',
        `${file}:5: [inspector] hooks: The following hook(s) are missing or failed to load: bogus`,
        `${file}:7: [exporter] source: log follows [notifications] log_file, which is empty.`,
      ]);
    });

    it('names the option of a rule that was set when another it reads keeps its default', () => {
      // hooks keeps "$default_hooks": default_hooks, set here, is the one at fault.
      const file = conf('[inspector]\ndefault_hooks = ports,validate-interfaces\n');
      expect(problemsOf({ path: file })).to.deep.equal([
        `${file}:2: [inspector] default_hooks: Some hooks failed to load due to dependency problems: Hook ports requires these missing hooks to be enabled before it: validate-interfaces`,
      ]);
      // Set in the file and again in the environment: the environment's value is the one used.
      expect(problemsOf({ path: conf('[api]\nauth_strategy = http_basic\nhttp_basic_auth_user_file = etc/htpasswd\n'), env: { GALVANIC_API__HTTP_BASIC_AUTH_USER_FILE: '' } }))
        .to.deep.equal(['env GALVANIC_API__HTTP_BASIC_AUTH_USER_FILE: [api] http_basic_auth_user_file: auth_strategy http_basic needs a user file.']);
    });

    it('names the file as given, relative to cwd', () => {
      mkdirSync(path.join(dir, 'etc'));
      writeFileSync(path.join(dir, 'etc', 'galvanic.conf'), '[api]\n\nport = 70000\n');
      expect(problemsOf({})).to.deep.equal(['etc/galvanic.conf:3: [api] port: 70000 is above the maximum 65535']);
    });

    it('joins the problems into the error message', () => {
      const file = conf('[api]\nport = x\nmax_limit = 0\n');
      expect(() => loadConfig({ path: file, env: {} }))
        .to.throw(ConfigError)
        .with.property('message', `${file}:2: [api] port: "x" is not an integer\n${file}:3: [api] max_limit: 0 is below the minimum 1`);
    });
  });

  it('types options from the schema', () => {
    const config = loadConfig({ env: {}, cwd: dir });
    const port: number = config.api.port;
    const types: string[] = config.DEFAULT.enabled_hardware_types;
    const strategy: 'noauth' | 'http_basic' = config.api.auth_strategy;
    const connection: string = config.database.connection;
    const debug: boolean = config.DEFAULT.debug;
    // @ts-expect-error enum options are typed by their choices, not as string
    const bad: Config['api']['auth_strategy'] = 'ldap';
    expect([port, types, strategy, connection, debug, bad]).to.have.length(6);
  });

  it('returns a deep-frozen config', () => {
    const config = loadConfig({ env: {}, cwd: dir });
    expect(Object.isFrozen(config)).to.equal(true);
    expect(Object.isFrozen(config.api)).to.equal(true);
    expect(Object.isFrozen(config.DEFAULT.enabled_hardware_types)).to.equal(true);
    expect(() => {
      (config.api as { port: number }).port = 1;
    }).to.throw(TypeError);
    expect(() => config.DEFAULT.enabled_hardware_types.push('x')).to.throw(TypeError);
  });

  it('masks secrets in describeConfigForLog and leaves the config untouched', () => {
    const config = loadConfig({ env: { GALVANIC_DATABASE__CONNECTION: 'postgres://u:hunter2@db/g' }, cwd: dir });
    const described = describeConfigForLog(config);
    expect(described.database.connection).to.equal(SECRET_MASK);
    expect(described.notifications.transport_url).to.equal(SECRET_MASK);
    expect(described.api.port).to.equal(6385);
    expect(JSON.stringify(described)).not.to.include('hunter2');
    expect(config.database.connection).to.equal('postgres://u:hunter2@db/g');
    // An empty secret hides nothing and says the embedded database is used.
    expect(describeConfigForLog(loadConfig({ env: {}, cwd: dir })).database.connection).to.equal('');
  });

  describe('schema', () => {
    const schema: SchemaShape = SCHEMA;
    const all = Object.entries(schema).flatMap(([section, options]) =>
      Object.entries(options).map(([key, spec]): [string, string, OptionSpec] => [section, key, spec]),
    );

    it('has defaults that pass its own validation', () => {
      for (const [section, key, spec] of all) {
        const where = `[${section}] ${key}`;
        expect(spec.help.trim(), where).not.to.equal('');
        if (spec.type === 'enum') expect(spec.choices, where).to.include(spec.default);
        if (spec.type === 'int') expect(Number.isInteger(spec.default), where).to.equal(true);
        if ((spec.type === 'int' || spec.type === 'float') && spec.min !== undefined) {
          expect(spec.default, where).to.be.at.least(spec.min);
        }
        if ((spec.type === 'int' || spec.type === 'float') && spec.max !== undefined) {
          expect(spec.default, where).to.be.at.most(spec.max);
        }
      }
    });
  });

  describe('sample', () => {
    it('lists every option commented out with its default', () => {
      const sample = renderSample();
      expect(sample).to.include('[api]\n');
      expect(sample).to.include('\n#port = 6385\n');
      expect(sample).to.include('# Type: int; default 6385; min 1; max 65535\n');
      expect(sample).to.include('# Type: enum; default noauth; choices noauth, http_basic\n');
      expect(sample).to.include('\n#host =\n');
      expect(sample).to.include('\n#enabled_hardware_types = fake-hardware,redfish,ipmi\n');
      for (const line of sample.split('\n')) {
        if (line.startsWith('# ') && !line.startsWith('# Type:')) expect(line.length, line).to.be.at.most(78);
      }
    });

    it('is loaded by loadConfig as the defaults', () => {
      const fromSample = loadConfig({ path: conf(renderSample()), env: {} });
      expect(fromSample).to.deep.equal(loadConfig({ env: {}, cwd: dir }));
    });

    it('matches the checked-in etc/galvanic.conf.sample (regenerate with `galvanic config sample`)', () => {
      const checkedIn = readFileSync(path.join(ROOT, 'etc', 'galvanic.conf.sample'), 'utf8');
      expect(checkedIn, 'etc/galvanic.conf.sample is stale').to.equal(renderSample());
    });
  });

  describe('ini parser', () => {
    it('keeps line numbers, trims values and handles CRLF', () => {
      const ini = parseIni('[a]\r\n x = 1 \r\n\r\ny=\r\n', 'f.conf');
      expect(ini.problems).to.deep.equal([]);
      expect(ini.sections).to.deep.equal([{ name: 'a', line: 1 }]);
      expect(ini.entries).to.deep.equal([
        { section: 'a', key: 'x', value: '1', line: 2 },
        { section: 'a', key: 'y', value: '', line: 4 },
      ]);
    });

    it('keeps "=" inside values and skips the keys of a malformed header', () => {
      const ini = parseIni('[a]\nurl = x?a=b\n[b\nz = 1\n', 'f.conf');
      expect(ini.entries).to.deep.equal([{ section: 'a', key: 'url', value: 'x?a=b', line: 2 }]);
      expect(ini.problems).to.deep.equal([{ line: 3, message: 'f.conf:3: malformed section header "[b"' }]);
    });
  });
});
