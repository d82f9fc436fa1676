import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { Config } from '../common/config.js';
import type { DriverRegistry } from '../drivers/registry.js';

/** Everything the API needs, built by the composition root (cli/) and passed in. */
export interface ApiDeps {
  config: Readonly<Config>;
  db: Knex;
  /** Lets ?wait= requests LISTEN for finished intents; without it they poll. */
  connectionString?: string;
  registry: DriverRegistry;
  log: Logger;
}
