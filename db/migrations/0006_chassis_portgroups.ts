import type { Knex } from 'knex';

/**
 * Chassis and port groups, as Ironic has them.
 *
 * `nodes.chassis_uuid` becomes a foreign key to `chassis.uuid`, so that a node can never name
 * a chassis that does not exist and a chassis with nodes cannot be deleted, whatever races
 * between API servers. Nodes that already name a chassis get that chassis created (empty), so
 * no node loses what it was told.
 *
 * A port's portgroup must belong to the port's node: `ports (portgroup_id, node_id)` references
 * `portgroups (id, node_id)`. The reference is NO ACTION (checked at the end of the statement),
 * not RESTRICT, so deleting a node cascades to its ports and port groups in one statement.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('chassis', (t) => {
    t.increments('id').primary();
    t.uuid('uuid').notNullable().unique();
    t.string('description', 255);
    t.jsonb('extra').notNullable().defaultTo('{}');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true });
  });
  await knex.raw('ALTER TABLE nodes ALTER COLUMN chassis_uuid TYPE uuid USING chassis_uuid::uuid');
  await knex.raw('INSERT INTO chassis (uuid) SELECT DISTINCT chassis_uuid FROM nodes WHERE chassis_uuid IS NOT NULL');
  await knex.raw('ALTER TABLE nodes ADD CONSTRAINT nodes_chassis_uuid_foreign FOREIGN KEY (chassis_uuid) REFERENCES chassis (uuid)');
  await knex.raw('CREATE INDEX nodes_chassis_uuid_index ON nodes (chassis_uuid) WHERE chassis_uuid IS NOT NULL');

  await knex.schema.createTable('portgroups', (t) => {
    t.increments('id').primary();
    t.uuid('uuid').notNullable().unique();
    t.string('name', 255).unique();
    t.string('address', 18).unique();
    t.integer('node_id').notNullable().references('nodes.id').onDelete('CASCADE');
    t.boolean('standalone_ports_supported').notNullable().defaultTo(true);
    t.string('mode', 255);
    t.jsonb('properties').notNullable().defaultTo('{}');
    t.jsonb('internal_info').notNullable().defaultTo('{}');
    t.jsonb('extra').notNullable().defaultTo('{}');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true });
    t.index(['node_id']);
    t.unique(['id', 'node_id']);
  });
  await knex.schema.alterTable('ports', (t) => {
    t.integer('portgroup_id');
    t.index(['portgroup_id']);
  });
  await knex.raw(`ALTER TABLE ports ADD CONSTRAINT ports_portgroup_same_node_foreign
    FOREIGN KEY (portgroup_id, node_id) REFERENCES portgroups (id, node_id)`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE ports DROP CONSTRAINT ports_portgroup_same_node_foreign');
  await knex.schema.alterTable('ports', (t) => {
    t.dropColumn('portgroup_id');
  });
  await knex.schema.dropTable('portgroups');
  await knex.raw('ALTER TABLE nodes DROP CONSTRAINT nodes_chassis_uuid_foreign');
  await knex.raw('DROP INDEX nodes_chassis_uuid_index');
  await knex.raw('ALTER TABLE nodes ALTER COLUMN chassis_uuid TYPE varchar(36)');
  await knex.schema.dropTable('chassis');
}
