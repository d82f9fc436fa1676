import type { Knex } from 'knex';
import type pg from 'pg';
import { SchemaBehind } from '../common/errors.js';
import { migrations, type Migration } from './migrations/index.js';

const TABLE_NAME = 'knex_migrations';

// Any fixed key works as long as every migrator uses the same one; this is "GALV" in ASCII.
const MIGRATION_LOCK_KEY = 0x47414c56;

const migrationSource: Knex.MigrationSource<Migration> = {
  getMigrations: async () => migrations,
  getMigrationName: (m) => m.name,
  getMigration: async (m) => ({ up: m.up, down: m.down }),
};

const migratorConfig: Knex.MigratorConfig = { migrationSource, tableName: TABLE_NAME };

/**
 * Applies every pending migration and returns the names applied (none when already current).
 * Safe to run from several processes at once: knex's own lock table is created by the first
 * migrator outside any lock, so two starters on an empty database race on CREATE TABLE, and
 * with a non-transactional migration the loser gets "Migration table is already locked".
 * A session advisory lock serialises whole runs; the loser then finds nothing to do.
 */
export async function migrateLatest(knex: Knex): Promise<string[]> {
  // A connection of its own, outside the pool: holding a pooled one while knex migrates with
  // the others would deadlock a pool of size one.
  const lockConn = (await knex.client.acquireRawConnection()) as pg.Client;
  try {
    await lockConn.query('select pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
    const [, applied] = (await knex.migrate.latest(migratorConfig)) as [number, string[]];
    return applied;
  } finally {
    // Closing the session releases the advisory lock even if the unlock was never reached.
    await knex.client.destroyRawConnection(lockConn);
  }
}

/**
 * Compares the database with this program's migrations without writing anything (knex's own
 * `migrate.list` would create its bookkeeping tables on an empty database).
 */
export async function schemaStatus(knex: Knex): Promise<{ current: boolean; pending: string[] }> {
  const applied = new Set<string>();
  if (await knex.schema.hasTable(TABLE_NAME)) {
    const rows = (await knex(TABLE_NAME).select('name')) as Array<{ name: string }>;
    for (const row of rows) applied.add(row.name);
  }
  const pending = migrations.map((m) => m.name).filter((name) => !applied.has(name));
  return { current: pending.length === 0, pending };
}

/** Throws SchemaBehind unless every migration has been applied; services call it at start. */
export async function assertSchemaCurrent(knex: Knex): Promise<void> {
  const { pending } = await schemaStatus(knex);
  if (pending.length > 0) {
    throw new SchemaBehind(
      `The database schema is behind this version of Galvanic: pending migration(s) ` +
        `${pending.join(', ')}. Run \`galvanic db upgrade\` to apply them.`,
    );
  }
}
