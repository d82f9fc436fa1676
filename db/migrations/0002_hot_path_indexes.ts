import type { Knex } from 'knex';

/**
 * Cheaper writes on the intent path. Every intent updates its node two or three times and
 * itself twice; an update that changes no indexed column and finds room on its page is HOT
 * (no index entries written). So: no index on `nodes.reservation` (set and cleared by every
 * task; recovery's scan for one conductor's reservations is rare and cheap), room left on
 * node pages, and the mostly-NULL `operation` and `batch` of intents indexed only where set.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX nodes_reservation_index');
  await knex.raw('ALTER TABLE nodes SET (fillfactor = 80)');
  await knex.raw('DROP INDEX intents_operation_index');
  await knex.raw('CREATE INDEX intents_operation_idx ON intents (operation) WHERE operation IS NOT NULL');
  await knex.raw('DROP INDEX intents_batch_index');
  await knex.raw('CREATE INDEX intents_batch_idx ON intents (batch) WHERE batch IS NOT NULL');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX intents_batch_idx');
  await knex.raw('CREATE INDEX intents_batch_index ON intents (batch)');
  await knex.raw('DROP INDEX intents_operation_idx');
  await knex.raw('CREATE INDEX intents_operation_index ON intents (operation)');
  await knex.raw('ALTER TABLE nodes RESET (fillfactor)');
  await knex.raw('CREATE INDEX nodes_reservation_index ON nodes (reservation)');
}
