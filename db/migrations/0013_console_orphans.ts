import type { Knex } from 'knex';

/**
 * Console processes that lost their record: when a conductor takes over a console from a dead
 * holder, the holder's process (pid, kernel start time, and the boot it ran in) moves here
 * instead of being overwritten, until a conductor on that machine has seen it gone. The boot
 * id is what makes a pid meaningful: a conductor only trusts /proc for rows of its own boot.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('console_processes', (t) => {
    // /proc/sys/kernel/random/boot_id of the machine the process runs on.
    t.string('boot_id', 36);
  });
  await knex.schema.createTable('console_orphans', (t) => {
    t.bigIncrements('id').primary();
    // Not a foreign key: a process of a deleted node must still be reaped.
    t.integer('node_id').notNullable();
    // The conductor that started it (it reaps its own orphans when it starts again).
    t.string('conductor', 255).notNullable();
    t.integer('pid').notNullable();
    t.bigInteger('start_ticks').notNullable();
    t.string('boot_id', 36);
    t.timestamp('orphaned_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.unique(['pid', 'start_ticks', 'boot_id']);
    t.index(['boot_id']);
    t.index(['conductor']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('console_orphans');
  await knex.schema.alterTable('console_processes', (t) => {
    t.dropColumn('boot_id');
  });
}
