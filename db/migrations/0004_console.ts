import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';

/**
 * Serial consoles: tokens (hashed, bound to the node's access epoch), the console process
 * each node has at most one of (and where to reach it), the secret API servers use to
 * prove themselves to a conductor's internal console endpoint, and a trigger that wakes
 * console holders when a node's console or access changes.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('console_tokens', (t) => {
    t.bigIncrements('id').primary();
    // SHA-256 of the token; the token itself is never stored.
    t.string('token_hash', 64).notNullable().unique();
    t.integer('node_id').notNullable().references('nodes.id').onDelete('CASCADE');
    t.bigInteger('access_epoch').notNullable();
    t.string('mode', 2).notNullable();
    t.string('requester', 255);
    t.timestamp('expires_at', { useTz: true }).notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['node_id']);
    t.index(['expires_at']);
  });
  await knex.raw("ALTER TABLE console_tokens ADD CONSTRAINT console_tokens_mode_check CHECK (mode IN ('ro', 'rw'))");

  // node_id is the primary key: at most one console process per node, whoever runs it.
  await knex.schema.createTable('console_processes', (t) => {
    t.integer('node_id').primary().references('nodes.id').onDelete('CASCADE');
    t.string('conductor', 255).notNullable();
    // host:port of the holder's internal console endpoint.
    t.string('endpoint', 300).notNullable();
    t.integer('pid');
    // Kernel start time of the process (clock ticks since boot, /proc/<pid>/stat field 22):
    // with the pid it names one process, so a reused pid is never killed by mistake.
    t.bigInteger('start_ticks');
    t.timestamp('started_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['conductor']);
  });

  await knex.schema.createTable('console_secret', (t) => {
    t.integer('id').primary();
    t.string('secret', 128).notNullable();
  });
  await knex('console_secret').insert({ id: 1, secret: randomBytes(32).toString('hex') });

  // A NOTIFY inside a transaction serialises commits, which is why intents notify after
  // commit; these changes are rare (owner, lessee, console on/off, maintenance, deletion)
  // and must reach console holders at commit, not before, so a trigger does it here.
  await knex.raw(`
    CREATE FUNCTION galvanic_console_notify() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF TG_OP = 'DELETE' THEN
        PERFORM pg_notify('galvanic_console', OLD.id::text);
        RETURN OLD;
      END IF;
      IF NEW.access_epoch IS DISTINCT FROM OLD.access_epoch
         OR NEW.console_enabled IS DISTINCT FROM OLD.console_enabled
         OR NEW.console_interface IS DISTINCT FROM OLD.console_interface
         OR NEW.driver_info IS DISTINCT FROM OLD.driver_info
         OR NEW.conductor_group IS DISTINCT FROM OLD.conductor_group THEN
        PERFORM pg_notify('galvanic_console', NEW.id::text);
      END IF;
      RETURN NEW;
    END $$`);
  await knex.raw(`CREATE TRIGGER nodes_console_notify AFTER UPDATE OR DELETE ON nodes
    FOR EACH ROW EXECUTE FUNCTION galvanic_console_notify()`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TRIGGER IF EXISTS nodes_console_notify ON nodes');
  await knex.raw('DROP FUNCTION IF EXISTS galvanic_console_notify()');
  await knex.schema.dropTable('console_secret');
  await knex.schema.dropTable('console_processes');
  await knex.schema.dropTable('console_tokens');
}
