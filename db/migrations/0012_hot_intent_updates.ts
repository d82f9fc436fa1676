import type { Knex } from 'knex';

/**
 * Cheaper intent rows. An update is HOT (no index entry written) only when no indexed column
 * changes, and a column in an index's predicate counts: the two partial indexes on `state`
 * made both of an intent's updates (queued → running → final) write an entry in every index.
 * An open intent is now one whose `finished_at` is NULL (a check constraint keeps that equal
 * to a queued or running `state`), and the open-intent indexes are partial on it: starting an
 * intent (state, conductor, started_at, attempts) changes no indexed column and stays on its
 * page (fillfactor leaves room for the new version), and only the final update writes index
 * entries (in the three full indexes).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(
    "UPDATE intents SET finished_at = coalesce(started_at, created_at) WHERE finished_at IS NULL AND state NOT IN ('queued', 'running')",
  );
  await knex.raw("UPDATE intents SET finished_at = NULL WHERE finished_at IS NOT NULL AND state IN ('queued', 'running')");
  await knex.raw(
    "ALTER TABLE intents ADD CONSTRAINT intents_open_unfinished CHECK ((state IN ('queued', 'running')) = (finished_at IS NULL))",
  );
  await knex.raw('DROP INDEX intents_open_idx');
  await knex.raw('DROP INDEX intents_queued_idx');
  // The head of each node's queue, and whether a node has more queued behind it.
  await knex.raw('CREATE INDEX intents_unfinished_node_idx ON intents (node_id, seq) WHERE finished_at IS NULL');
  // The claim's walk in id order; running intents in it are few (one per busy node).
  await knex.raw('CREATE INDEX intents_unfinished_idx ON intents (id) WHERE finished_at IS NULL');
  await knex.raw('ALTER TABLE intents SET (fillfactor = 70)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE intents RESET (fillfactor)');
  await knex.raw('DROP INDEX intents_unfinished_idx');
  await knex.raw('DROP INDEX intents_unfinished_node_idx');
  await knex.raw("CREATE INDEX intents_queued_idx ON intents (id) WHERE state = 'queued'");
  await knex.raw("CREATE INDEX intents_open_idx ON intents (node_id, seq) WHERE state IN ('queued', 'running')");
  await knex.raw('ALTER TABLE intents DROP CONSTRAINT intents_open_unfinished');
}
