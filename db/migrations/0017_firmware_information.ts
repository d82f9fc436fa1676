import type { Knex } from 'knex';

/**
 * Firmware components of nodes (API 1.86), Ironic's `firmware_information` table: the version
 * each component had when first read, the one it runs, and the last one flashed.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('firmware_information', (t) => {
    t.increments('id').primary();
    t.integer('node_id').notNullable().references('id').inTable('nodes').onDelete('CASCADE');
    t.string('component', 255).notNullable();
    t.string('initial_version', 255).notNullable();
    t.string('current_version', 255).nullable();
    t.string('last_version_flashed', 255).nullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).nullable();
    t.unique(['node_id', 'component'], { indexName: 'uniq_firmware_information0node_id0component' });
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('firmware_information');
}
