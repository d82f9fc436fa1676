import type { Knex } from 'knex';

/**
 * The first schema: nodes, ports, conductors, intents, node_history.
 * Later issues add tables in migrations of their own; this one is never edited once shipped.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('conductors', (t) => {
    t.increments('id').primary();
    t.string('hostname', 255).notNullable().unique();
    t.string('conductor_group', 255).notNullable().defaultTo('');
    t.jsonb('drivers').notNullable().defaultTo('[]');
    t.boolean('online').notNullable().defaultTo(true);
    t.timestamp('heartbeat_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true });
  });

  await knex.schema.createTable('nodes', (t) => {
    t.increments('id').primary();
    t.uuid('uuid').notNullable().unique();
    t.string('name', 255).unique();
    t.string('driver', 255).notNullable();
    t.string('power_interface', 255);
    t.string('management_interface', 255);
    t.string('console_interface', 255);
    t.jsonb('driver_info').notNullable().defaultTo('{}');
    t.jsonb('driver_internal_info').notNullable().defaultTo('{}');
    t.jsonb('properties').notNullable().defaultTo('{}');
    t.jsonb('instance_info').notNullable().defaultTo('{}');
    t.jsonb('extra').notNullable().defaultTo('{}');
    t.uuid('instance_uuid').unique();
    t.string('description', 4096);
    t.string('provision_state', 32).notNullable();
    t.string('target_provision_state', 32);
    t.timestamp('provision_updated_at', { useTz: true });
    t.string('power_state', 32);
    t.string('target_power_state', 32);
    t.boolean('maintenance').notNullable().defaultTo(false);
    t.text('maintenance_reason');
    t.string('fault', 255);
    t.text('last_error');
    t.string('reservation', 255);
    t.string('conductor_group', 255).notNullable().defaultTo('');
    t.string('owner', 255);
    t.string('lessee', 255);
    t.string('resource_class', 80);
    t.boolean('console_enabled').notNullable().defaultTo(false);
    t.boolean('automated_clean');
    t.boolean('protected').notNullable().defaultTo(false);
    t.text('protected_reason');
    t.boolean('retired').notNullable().defaultTo(false);
    t.text('retired_reason');
    t.string('chassis_uuid', 36);
    t.string('shard', 255);
    t.string('parent_node', 255);
    t.timestamp('inspection_started_at', { useTz: true });
    t.timestamp('inspection_finished_at', { useTz: true });
    t.bigInteger('version').notNullable().defaultTo(1);
    t.bigInteger('access_epoch').notNullable().defaultTo(1);
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true });
    t.index(['provision_state']);
    t.index(['driver']);
    t.index(['conductor_group']);
    t.index(['reservation']);
  });

  await knex.schema.createTable('ports', (t) => {
    t.increments('id').primary();
    t.uuid('uuid').notNullable().unique();
    t.string('address', 18).notNullable().unique();
    t.integer('node_id').notNullable().references('nodes.id').onDelete('CASCADE');
    t.boolean('pxe_enabled').notNullable().defaultTo(true);
    t.jsonb('local_link_connection').notNullable().defaultTo('{}');
    t.string('physical_network', 64);
    t.jsonb('extra').notNullable().defaultTo('{}');
    t.boolean('is_smartnic').notNullable().defaultTo(false);
    t.string('name', 255).unique();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true });
    t.index(['node_id']);
  });

  // One row per action asked of a node. `seq` orders a node's intents; the runner
  // only starts an intent when every earlier one of the same node has ended.
  await knex.schema.createTable('intents', (t) => {
    t.bigIncrements('id').primary();
    t.uuid('uuid').notNullable().unique();
    t.integer('node_id').notNullable().references('nodes.id').onDelete('CASCADE');
    t.bigInteger('seq').notNullable();
    t.string('kind', 64).notNullable();
    t.jsonb('args').notNullable().defaultTo('{}');
    t.uuid('batch');
    t.integer('step_index');
    t.uuid('operation');
    t.string('state', 16).notNullable().defaultTo('queued');
    t.integer('attempts').notNullable().defaultTo(0);
    t.integer('max_attempts').notNullable().defaultTo(1);
    t.timestamp('not_before', { useTz: true });
    t.string('conductor', 255);
    t.text('error');
    t.jsonb('result');
    t.string('requester', 255);
    t.string('request_id', 255);
    t.string('idempotency_key', 255);
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('started_at', { useTz: true });
    t.timestamp('finished_at', { useTz: true });
    t.unique(['node_id', 'seq']);
    t.index(['operation']);
    t.index(['batch']);
  });
  // The runner's hot query: the first unfinished intent of each node.
  await knex.raw(
    "CREATE INDEX intents_open_idx ON intents (node_id, seq) WHERE state IN ('queued', 'running')",
  );
  // The claim scans queued intents in id order.
  await knex.raw("CREATE INDEX intents_queued_idx ON intents (id) WHERE state = 'queued'");
  await knex.raw(
    'CREATE UNIQUE INDEX intents_idempotency_idx ON intents (node_id, idempotency_key) WHERE idempotency_key IS NOT NULL',
  );

  await knex.schema.createTable('node_history', (t) => {
    t.increments('id').primary();
    t.uuid('uuid').notNullable().unique();
    t.integer('node_id').notNullable().references('nodes.id').onDelete('CASCADE');
    t.string('severity', 16).notNullable();
    t.string('event_type', 64).notNullable();
    t.text('event').notNullable();
    t.string('conductor', 255);
    t.string('user', 255);
    t.uuid('operation');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['node_id', 'id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('node_history');
  await knex.schema.dropTable('intents');
  await knex.schema.dropTable('ports');
  await knex.schema.dropTable('nodes');
  await knex.schema.dropTable('conductors');
}
