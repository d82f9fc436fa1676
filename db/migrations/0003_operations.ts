import type { Knex } from 'knex';

/**
 * Group operations: one row per operation (its policy and lifecycle), one row per node it
 * covers, and a `held` flag on intents: the first intent of each node of an operation waits,
 * queued but unclaimable, until the operation admits the node (max_parallel).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('operations', (t) => {
    t.bigIncrements('id').primary();
    t.uuid('uuid').notNullable().unique();
    // queued | running | succeeded | partially_failed | failed | cancelled
    t.string('state', 20).notNullable();
    t.string('description', 255);
    t.jsonb('steps').notNullable();
    t.integer('max_parallel').notNullable();
    t.integer('max_attempts').notNullable();
    t.integer('initial_delay_ms').notNullable();
    t.integer('max_delay_ms').notNullable();
    t.string('on_failure', 16).notNullable();
    t.boolean('queue').notNullable().defaultTo(false);
    t.integer('round').notNullable().defaultTo(1);
    t.integer('node_count').notNullable();
    // Set when on_failure=abort stopped the rest after a failure.
    t.text('abort_reason');
    t.string('requester', 255);
    t.string('request_id', 255);
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('started_at', { useTz: true });
    t.timestamp('finished_at', { useTz: true });
    t.timestamp('cancelled_at', { useTz: true });
    t.timestamp('progress_notified_at', { useTz: true });
  });
  // Conductors look for unfinished operations at every claim pass.
  await knex.raw('CREATE INDEX operations_open_idx ON operations (id) WHERE finished_at IS NULL');
  await knex.raw('CREATE INDEX operations_state_idx ON operations (state, id)');

  await knex.schema.createTable('operation_nodes', (t) => {
    t.bigInteger('operation_id').notNullable().references('operations.id').onDelete('CASCADE');
    t.integer('node_id').notNullable().references('nodes.id').onDelete('CASCADE');
    t.integer('position').notNullable();
    // The batch of the node's intents in the current round (a retry starts a new one).
    t.uuid('batch').notNullable();
    t.integer('round').notNullable().defaultTo(1);
    // The batch's first intent, the one held until admission: admission looks it up by key.
    t.bigInteger('head_intent_id');
    t.timestamp('admitted_at', { useTz: true });
    t.primary(['operation_id', 'node_id']);
    t.unique(['operation_id', 'position']);
  });
  // Admission walks the nodes not admitted yet, in order.
  await knex.raw('CREATE INDEX operation_nodes_waiting_idx ON operation_nodes (operation_id, position) WHERE admitted_at IS NULL');

  await knex.schema.alterTable('intents', (t) => {
    t.boolean('held').notNullable().defaultTo(false);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('intents', (t) => {
    t.dropColumn('held');
  });
  await knex.schema.dropTable('operation_nodes');
  await knex.schema.dropTable('operations');
}
