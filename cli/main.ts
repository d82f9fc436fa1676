#!/usr/bin/env node
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import v8 from 'node:v8';
import { loadConfig, describeConfigForLog, renderSample, type Config } from '../common/config.js';
import { ConfigError, GalvanicError } from '../common/errors.js';
import { createLogger, type LogFormat } from '../common/logger.js';
import { notifierFromConfig } from '../common/notifier.js';
import { buildApp } from '../api/app.js';
import { startBootMedia } from '../conductor/boot-media.js';
import { ConductorService } from '../conductor/service.js';
import { serverConfigWarnings } from '../db/connection.js';
import { assertSchemaCurrent, migrateLatest } from '../db/migrate.js';
import { buildRegistry } from '../drivers/build-registry.js';
import { openDatabase, Releasers } from './runtime.js';

const USAGE = `Usage: galvanic <command> [--config PATH]

Commands:
  all-in-one      API and conductor in one process (embedded Postgres when [database] connection is empty)
  api             the REST API only
  conductor       a conductor only
  exporter        Prometheus exporter of the sensor notifications on the bus ([exporter])
  db upgrade      apply pending database migrations
  config sample   print the sample configuration file
  sim redfish     simulated Redfish BMCs for tests and benchmarks (--help for options)
  op ...          group operations over HTTP: create, show, list, cancel, retry (op --help)

Options:
  --config PATH   configuration file (default: etc/galvanic.conf when present)
  -h, --help      this help, or a command's with "galvanic <command> --help"
  --version       the version of galvanic
Environment: GALVANIC_<SECTION>__<OPTION> overrides one option, e.g. GALVANIC_API__PORT=6390.`;

const COMMON_OPTIONS = `Options:
  --config PATH   configuration file (default: etc/galvanic.conf when present)
  -h, --help      this help
Environment: GALVANIC_<SECTION>__<OPTION> overrides one option, e.g. GALVANIC_API__PORT=6390.`;

/** Each command's help: what it runs and which configuration sections it reads. */
const COMMAND_HELP: Record<string, string> = {
  'all-in-one': `Usage: galvanic all-in-one [--config PATH]

The API and a conductor in one process. With [database] connection empty, an embedded Postgres
is started (data in [database] embedded_data_dir) and migrated.
Sections read: [DEFAULT], [api], [conductor], [database], the driver sections, [notifications].`,
  api: `Usage: galvanic api [--config PATH]

The REST API only, against a shared database whose schema is current ("galvanic db upgrade").
Sections read: [DEFAULT] (logging, enabled interfaces), [api], [database].`,
  conductor: `Usage: galvanic conductor [--config PATH]

A conductor only: claims and runs intents, periodic tasks and consoles for its share of the nodes.
SIGHUP reads the configuration file again. Sections read: [DEFAULT], [conductor], [database],
the driver sections ([redfish], [ipmi], ...), [sensor_data], [console], [operations], [notifications].`,
  exporter: `Usage: galvanic exporter [--config PATH]

Prometheus exporter of the sensor notifications on the bus; needs no database.
Sections read: [DEFAULT] (logging), [exporter].`,
  db: `Usage: galvanic db upgrade [--config PATH]

Subcommands:
  upgrade         apply pending database migrations ([database] connection); a second run does nothing.`,
  config: `Usage: galvanic config sample

Subcommands:
  sample          print the sample configuration file, every option with its default and help.`,
};

/** The help of `command` ("db upgrade" shows the db help), or null for an unknown one. */
function commandHelp(command: string): string | null {
  const help = COMMAND_HELP[command] ?? COMMAND_HELP[command.split(' ')[0]!];
  return help ? `${help}\n\n${COMMON_OPTIONS}` : null;
}

function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}

async function run(argv: string[]): Promise<number> {
  // The simulator has its own options; it is loaded only when asked for.
  if (argv[0] === 'sim' && argv[1] === 'redfish') return (await import('../sim/redfish/cli.js')).runRedfishSim(argv.slice(2));
  if (argv[0] === 'op') return (await import('./op.js')).runOperationCli(argv.slice(1));
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      options: { config: { type: 'string' }, help: { type: 'boolean', short: 'h' }, version: { type: 'boolean' } },
      allowPositionals: true,
    });
  } catch (err) {
    // parseArgs's own errors (unknown option, missing value) are a usage error, not a crash.
    const command = argv.filter((a) => !a.startsWith('-')).join(' ');
    process.stderr.write(`galvanic: ${(err as Error).message}\n${commandHelp(command) ?? USAGE}\n`);
    return 2;
  }
  const { values, positionals } = parsed;
  const command = positionals.join(' ');
  if (values.version) {
    process.stdout.write(`galvanic ${packageVersion()}\n`);
    return 0;
  }
  if (values.help || !command) {
    process.stdout.write(`${(command && commandHelp(command)) || USAGE}\n`);
    return values.help ? 0 : 2;
  }
  if (command === 'config sample') {
    process.stdout.write(renderSample());
    return 0;
  }
  const known = ['all-in-one', 'api', 'conductor', 'db upgrade', 'exporter'];
  if (!known.includes(command)) {
    const help = command === 'db' || command === 'config' ? commandHelp(command) : null;
    process.stderr.write(help ? `galvanic: "${command}" needs a subcommand\n${help}\n` : `galvanic: unknown command "${command}"\n${USAGE}\n`);
    return 2;
  }
  const config = loadConfig({ path: values.config });
  // Read by V8 at every full collection, so setting it now, before the work starts, is enough.
  if (config.DEFAULT.heap_growing_percent > 0) v8.setFlagsFromString(`--heap-growing-percent=${config.DEFAULT.heap_growing_percent}`);
  const log = createLogger({ debug: config.DEFAULT.debug, level: config.DEFAULT.log_level, format: config.DEFAULT.log_format as LogFormat });
  log.debug({ config: describeConfigForLog(config) }, 'configuration');
  const releasers = new Releasers();
  const shutdown = async (code: number) => {
    await releasers.releaseAll(log);
    return code;
  };
  try {
    if (command === 'db upgrade') {
      const { db } = await openDatabase(config, log, releasers, 'db');
      const applied = await migrateLatest(db);
      log.info({ applied }, applied.length ? 'migrations applied' : 'schema already current');
      return await shutdown(0);
    }
    if (command === 'exporter') {
      // The exporter needs only the bus: no database, no drivers.
      const { Exporter, exporterOptions } = await import('../exporter/service.js');
      const exporter = new Exporter(exporterOptions(config), log);
      const { url } = await exporter.start();
      releasers.add('exporter', () => exporter.stop());
      log.info({ url: `${url}/metrics` }, 'exporter listening');
      return await waitForSignal(log, releasers);
    }
    const conductor = await serve(command, config, log, releasers);
    if (conductor) {
      // As Ironic's mutable options: SIGHUP reads the configuration again.
      const onHup = () => {
        try {
          conductor.reloadConfig(loadConfig({ path: values.config }));
        } catch (err) {
          log.error({ err: err instanceof ConfigError ? err.problems : err }, 'configuration reload failed; the running configuration is kept');
        }
      };
      process.on('SIGHUP', onHup);
      releasers.add('reload', async () => {
        process.off('SIGHUP', onHup);
      });
    }
    return await waitForSignal(log, releasers);
  } catch (err) {
    await shutdown(1);
    throw err;
  }
}

/** Starts the processes of `command`; returns the conductor when there is one. */
async function serve(command: string, config: Readonly<Config>, log: ReturnType<typeof createLogger>, releasers: Releasers): Promise<ConductorService | null> {
  if (command !== 'all-in-one' && !config.database.connection) {
    throw new ConfigError([`[database] connection: "galvanic ${command}" needs a shared database; the embedded one is for all-in-one only`]);
  }
  // Only a conductor builds and serves what BMCs boot; the API validates.
  const runsConductor = command === 'all-in-one' || command === 'conductor';
  const media = runsConductor ? await startBootMedia(config, log) : null;
  if (media) releasers.add('boot media', () => media.close());
  const registry = buildRegistry(config, log, media ? {
    bootImages: media.bootImages, imageCache: media.cache,
    // Nodes fetch their network boot from the provisioning network's URL, not the BMCs' external one.
    httpUrl: () => config.deploy.http_url || media.server?.url || '',
  } : {});
  releasers.add('drivers', () => registry.close());
  const { db, connectionString } = await openDatabase(config, log, releasers, command);
  if (command === 'all-in-one') await migrateLatest(db);
  else await assertSchemaCurrent(db);
  for (const warning of await serverConfigWarnings(db)) log.warn(warning);

  let conductor: ConductorService | null = null;
  if (runsConductor) {
    const notifier = notifierFromConfig(config, 'galvanic-conductor', log);
    releasers.add('notifier', () => notifier.close());
    conductor = new ConductorService({ config, db, connectionString, registry, notifier, log, ...(media ? { httpRoot: media.httpRoot } : {}) });
    await conductor.start();
    releasers.add('conductor', () => conductor!.stop());
  }
  if (command === 'all-in-one' || command === 'api') {
    const app = buildApp({ config, db, connectionString, registry, log });
    await app.listen({ host: config.api.host_ip, port: config.api.port });
    log.info({ url: `http://${config.api.host_ip}:${config.api.port}/` }, 'API listening');
    releasers.add('api', () => app.close());
  }
  return conductor;
}

function waitForSignal(log: ReturnType<typeof createLogger>, releasers: Releasers): Promise<number> {
  return new Promise((resolve) => {
    let stopping = false;
    const onSignal = (signal: NodeJS.Signals) => {
      if (stopping) return;
      stopping = true;
      log.info({ signal }, 'shutting down');
      void releasers.releaseAll(log).then(() => resolve(0));
    };
    process.once('SIGTERM', onSignal);
    process.once('SIGINT', onSignal);
  });
}

/** Each problem says where (file:line, or the environment variable) and what: a line each, no stack. */
function configErrorText(problems: readonly string[]): string {
  return problems.length === 1 ? `galvanic: configuration error: ${problems[0]}\n` : `galvanic: configuration errors:\n${problems.join('\n')}\n`;
}

run(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    if (err instanceof ConfigError) process.stderr.write(configErrorText(err.problems));
    else if (err instanceof GalvanicError) process.stderr.write(`galvanic: ${err.message}\n`);
    else process.stderr.write(`galvanic: ${(err as Error)?.stack ?? String(err)}\n`);
    process.exit(1);
  },
);
