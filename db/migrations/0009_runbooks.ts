import type { Knex } from 'knex';

/**
 * Runbooks (API 1.92): named lists of steps that manual cleaning and servicing may run on a
 * node that carries a trait of the runbook's name. Steps are kept in the row, in the order given.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('runbooks', (t) => {
    t.increments('id').primary();
    t.uuid('uuid').notNullable().unique();
    t.string('name', 255).notNullable().unique();
    t.boolean('public').notNullable().defaultTo(false);
    t.string('owner', 255);
    t.boolean('disable_ramdisk').notNullable().defaultTo(false);
    // [{interface, step, args, order}]
    t.jsonb('steps').notNullable().defaultTo('[]');
    t.jsonb('extra').notNullable().defaultTo('{}');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true });
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('runbooks');
}
