import type { Knex } from 'knex';

/** The service step a node runs now (API 1.87's `service_step`), kept while servicing waits for its agent. */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('nodes', (t) => {
    t.jsonb('service_step').notNullable().defaultTo('{}');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('nodes', (t) => {
    t.dropColumn('service_step');
  });
}
