import type { Knex } from 'knex';

/**
 * Each node's place on the conductors' hash ring (common/hash-ring.ts, ringHash of its UUID),
 * stored: a claim with a ring filter computed the md5 twice for every open intent it walked
 * past (1.8 µs a row against 0.2 for the stored value), and with K conductors a claim walks
 * past about K times its own share. Written by a trigger when the row is inserted (or its UUID
 * changes), not as a generated column: Postgres 18 computes a stored generated column again
 * on every update of the row, and nodes are updated three times per intent (95 ms against 26
 * for 10,000 rows).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE nodes ADD COLUMN ring_hash integer');
  // ringHash (common/hash-ring.ts) as Postgres computes it.
  await knex.raw(`CREATE FUNCTION galvanic_node_ring_hash() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      NEW.ring_hash := ('x' || substr(md5(NEW.uuid::text), 1, 8))::bit(32)::int;
      RETURN NEW;
    END $$`);
  await knex.raw('CREATE TRIGGER nodes_ring_hash BEFORE INSERT OR UPDATE OF uuid, ring_hash ON nodes FOR EACH ROW EXECUTE FUNCTION galvanic_node_ring_hash()');
  // The trigger writes the value for the rows there already.
  await knex.raw('UPDATE nodes SET ring_hash = NULL');
  await knex.raw('ALTER TABLE nodes ALTER COLUMN ring_hash SET NOT NULL');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TRIGGER nodes_ring_hash ON nodes');
  await knex.raw('DROP FUNCTION galvanic_node_ring_hash()');
  await knex.raw('ALTER TABLE nodes DROP COLUMN ring_hash');
}
