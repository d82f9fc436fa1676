import type { Knex } from 'knex';

/**
 * Agent tokens (API 1.62), one per node while an agent works on it. Kept apart from the node
 * row so that nothing that reads, logs or notifies a node can carry the secret.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('agent_tokens', (t) => {
    t.integer('node_id').primary().references('id').inTable('nodes').onDelete('CASCADE');
    t.text('token').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('agent_tokens');
}
