import type { Knex } from 'knex';

/**
 * Volume connectors and targets (boot from volume, API 1.32) and a node's RAID
 * configuration (API 1.12): what was asked (`target_raid_config`) and what the conductor
 * applied (`raid_config`).
 */
export async function up(knex: Knex): Promise<void> {
  // Guarded: a node column of the same name may come from another migration first.
  for (const column of ['target_raid_config', 'raid_config']) {
    if (!(await knex.schema.hasColumn('nodes', column))) {
      await knex.schema.alterTable('nodes', (t) => {
        t.jsonb(column).notNullable().defaultTo('{}');
      });
    }
  }

  await knex.schema.createTable('volume_connectors', (t) => {
    t.increments('id').primary();
    t.uuid('uuid').notNullable().unique();
    t.integer('node_id').notNullable().references('nodes.id').onDelete('CASCADE');
    t.string('type', 32).notNullable();
    t.string('connector_id', 255).notNullable();
    t.jsonb('extra').notNullable().defaultTo('{}');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true });
    // As in Ironic: one connector of a type and id in the whole deployment, not per node.
    t.unique(['type', 'connector_id'], { indexName: 'volume_connectors_type_connector_id_unique' });
    t.index(['node_id']);
  });

  await knex.schema.createTable('volume_targets', (t) => {
    t.increments('id').primary();
    t.uuid('uuid').notNullable().unique();
    t.integer('node_id').notNullable().references('nodes.id').onDelete('CASCADE');
    t.string('volume_type', 64).notNullable();
    t.jsonb('properties').notNullable().defaultTo('{}');
    t.integer('boot_index').notNullable();
    t.string('volume_id', 36).notNullable();
    t.jsonb('extra').notNullable().defaultTo('{}');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true });
    // Also serves the per-node lookups.
    t.unique(['node_id', 'boot_index'], { indexName: 'volume_targets_node_id_boot_index_unique' });
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('volume_targets');
  await knex.schema.dropTable('volume_connectors');
  await knex.schema.alterTable('nodes', (t) => {
    t.dropColumn('raid_config');
    t.dropColumn('target_raid_config');
  });
}
