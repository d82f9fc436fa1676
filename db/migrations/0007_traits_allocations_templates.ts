import type { Knex } from 'knex';

/**
 * Node traits, allocations and deploy templates, as Ironic has them. `nodes.allocation_id`
 * has no foreign key: an allocation is deleted with its node (ON DELETE CASCADE on
 * `allocations.node_id`), and a second key the other way would make that cascade update the
 * row being deleted. Every other deletion of an allocation goes through db/allocations.ts,
 * which clears the node in the same transaction.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('node_traits', (t) => {
    t.integer('node_id').notNullable().references('nodes.id').onDelete('CASCADE');
    t.string('trait', 255).notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.primary(['node_id', 'trait']);
    t.index(['trait']);
  });

  await knex.schema.createTable('allocations', (t) => {
    t.increments('id').primary();
    t.uuid('uuid').notNullable().unique();
    t.string('name', 255).unique();
    t.integer('node_id').unique().references('nodes.id').onDelete('CASCADE');
    t.string('state', 15).notNullable().defaultTo('allocating');
    t.text('last_error');
    t.string('resource_class', 80);
    t.jsonb('traits').notNullable().defaultTo('[]');
    t.jsonb('candidate_nodes').notNullable().defaultTo('[]');
    t.jsonb('extra').notNullable().defaultTo('{}');
    t.string('owner', 255);
    // The conductor that processed it (for logs and operators; any conductor may pick one up).
    t.string('conductor', 255);
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true });
    t.index(['state']);
  });
  await knex.raw("ALTER TABLE allocations ADD CONSTRAINT allocations_state_check CHECK (state IN ('allocating', 'active', 'error'))");
  // Only pending allocations are ever claimed: keep that scan off the finished ones.
  await knex.raw("CREATE INDEX allocations_pending ON allocations (id) WHERE state = 'allocating'");

  await knex.schema.alterTable('nodes', (t) => {
    t.integer('allocation_id').unique();
  });

  // Allocations are rare next to intents, and a conductor must learn of one only once it is
  // committed: a trigger's NOTIFY is delivered at commit.
  await knex.raw(`
    CREATE FUNCTION galvanic_allocation_notify() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF NEW.state = 'allocating' THEN
        PERFORM pg_notify('galvanic_allocations', NEW.uuid::text);
      END IF;
      RETURN NEW;
    END $$`);
  await knex.raw(`CREATE TRIGGER allocations_notify AFTER INSERT ON allocations
    FOR EACH ROW EXECUTE FUNCTION galvanic_allocation_notify()`);

  await knex.schema.createTable('deploy_templates', (t) => {
    t.increments('id').primary();
    t.uuid('uuid').notNullable().unique();
    t.string('name', 255).notNullable().unique();
    // [{interface, step, args, priority}], in the order given.
    t.jsonb('steps').notNullable().defaultTo('[]');
    t.jsonb('extra').notNullable().defaultTo('{}');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true });
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('deploy_templates');
  await knex.raw('DROP TRIGGER IF EXISTS allocations_notify ON allocations');
  await knex.raw('DROP FUNCTION IF EXISTS galvanic_allocation_notify()');
  await knex.schema.alterTable('nodes', (t) => t.dropColumn('allocation_id'));
  await knex.schema.dropTable('allocations');
  await knex.schema.dropTable('node_traits');
}
