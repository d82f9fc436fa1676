import type { Knex } from 'knex';

/**
 * The BIOS settings a node's BIOS interface last read from its BMC (Ironic's bios_settings
 * table): one row per setting, with the attribute registry's description of it. Written by
 * the conductor after inspection and after a BIOS step; read by GET /v1/nodes/{n}/bios.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('bios_settings', (t) => {
    t.integer('node_id').notNullable().references('nodes.id').onDelete('CASCADE');
    t.string('name', 255).notNullable();
    t.text('value');
    t.string('attribute_type', 255);
    t.jsonb('allowable_values');
    t.integer('lower_bound');
    t.integer('max_length');
    t.integer('min_length');
    t.boolean('read_only');
    t.boolean('reset_required');
    t.boolean('unique');
    t.integer('upper_bound');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true });
    t.primary(['node_id', 'name']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('bios_settings');
}
