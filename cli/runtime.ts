import path from 'node:path';
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { Config } from '../common/config.js';
import { createKnex } from '../db/connection.js';
import { startEmbeddedPostgres } from '../db/embedded.js';

/** Shutdown steps, run in reverse order of registration. */
export class Releasers {
  private readonly steps: Array<{ name: string; run: () => Promise<void> }> = [];

  add(name: string, run: () => Promise<void>): void {
    this.steps.push({ name, run });
  }

  async releaseAll(log: Logger): Promise<void> {
    while (this.steps.length) {
      const step = this.steps.pop()!;
      try {
        await step.run();
      } catch (err) {
        log.error({ err, step: step.name }, 'shutdown step failed');
      }
    }
  }
}

export interface Database {
  db: Knex;
  connectionString: string;
}

/**
 * Connects to `[database] connection`, or starts the embedded Postgres when it is empty
 * (only all-in-one and `db upgrade` may do that: several processes cannot share one).
 */
export async function openDatabase(config: Readonly<Config>, log: Logger, releasers: Releasers, role: string): Promise<Database> {
  let connectionString = config.database.connection;
  if (!connectionString) {
    const dataDir = path.resolve(config.database.embedded_data_dir);
    const pgLog = log.child({ component: 'embedded-postgres' });
    log.info({ dataDir, port: config.database.embedded_port }, 'starting embedded Postgres');
    const embedded = await startEmbeddedPostgres({ dataDir, port: config.database.embedded_port, log: (m) => pgLog.debug(m.trim()) });
    releasers.add('embedded postgres', () => embedded.stop());
    connectionString = embedded.connectionString;
  }
  const knexLog = log.child({ component: 'knex' });
  const db = createKnex(connectionString, {
    poolMax: config.database.max_pool_size, applicationName: `galvanic-${role}`,
    // One line each, through the process's logger, not a stack trace on the console.
    log: { warn: (m) => knexLog.warn(String(m).split('\n')[0]), error: (m) => knexLog.error(String(m)), debug: (m) => knexLog.debug(String(m)) },
  });
  releasers.add('database pool', () => db.destroy());
  return { db, connectionString };
}
