import type { Knex } from 'knex';

/**
 * Each node's place on the conductors' hash ring (common/hash-ring.ts, ringHash of its UUID),
 * stored: a claim with a ring filter computed the md5 twice for every open intent it walked
 * past, and with K conductors it walks past about K times its own share. A UUID never changes,
 * so the column is written once, with the row.
 */
export async function up(knex: Knex): Promise<void> {
  // ringHash (common/hash-ring.ts) as Postgres computes it.
  await knex.raw(`ALTER TABLE nodes ADD COLUMN ring_hash integer GENERATED ALWAYS AS ((('x' || substr(md5(uuid::text), 1, 8))::bit(32)::int)) STORED`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE nodes DROP COLUMN ring_hash');
}
