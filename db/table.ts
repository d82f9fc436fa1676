/**
 * The statements the API's resource tables share: a keyset page on a client's sort key, an
 * insert and an update whose constraint errors become the table's own, and filters that
 * apply only when given. Each table's module stays its own door and calls these.
 */
import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import type { RowMapper } from './rows.js';
import { isUniqueViolation, pgError, SQLSTATE } from './transaction.js';

/** A page a client asked for: `limit` rows after `marker` (the last row of the previous page). */
export interface PageRequest<T> {
  limit: number;
  marker?: T;
  sortKey: string;
  sortDir: 'asc' | 'desc';
}

/** Turns a constraint violation into the table's error; anything else is thrown as it is. */
export type TranslateWriteError = (err: unknown) => never;

/** TranslateWriteError given the values written, which the table's errors name. */
export type TranslateWrite<C> = (err: unknown, values: C) => never;

const rethrow: TranslateWriteError = (err) => {
  throw err;
};

/**
 * The marker's sort value for the keyset comparison. A timestamp is re-read from its row:
 * a JS Date keeps milliseconds, Postgres microseconds, and the truncated value would bring
 * the marker back on the next page (ascending) or skip rows (descending).
 */
export function markerValue(db: Knex, table: string, column: string, id: number, value: unknown): unknown {
  return value instanceof Date ? db.raw('(select ?? from ?? where id = ?)', [column, table, id]) : value;
}

/**
 * Keyset pagination on (sort column, id): stable under inserts, and an index scan rather
 * than an OFFSET. NULLs sort last in ascending order, as Postgres does by default.
 */
export function applyPage<T extends { id: number }>(
  q: Knex.QueryBuilder,
  page: PageRequest<T>,
  keyOf: (marker: T) => { id: number; value: unknown },
): void {
  const dir = page.sortDir;
  const cmp = dir === 'asc' ? '>' : '<';
  if (page.marker) {
    const { id, value } = keyOf(page.marker);
    if (page.sortKey === 'id') {
      q.where('id', cmp, id);
    } else if (value === null || value === undefined) {
      // Marker sits in the NULL block (last when asc, first when desc).
      if (dir === 'asc') q.whereNull(page.sortKey).andWhere('id', '>', id);
      else q.where((w) => w.whereNotNull(page.sortKey).orWhere((w2) => w2.whereNull(page.sortKey).andWhere('id', '<', id)));
    } else if (dir === 'asc') {
      q.where((w) => w.where(page.sortKey, '>', value as Knex.Value)
        .orWhere((w2) => w2.where(page.sortKey, value as Knex.Value).andWhere('id', '>', id))
        .orWhereNull(page.sortKey));
    } else {
      q.where((w) => w.where(page.sortKey, '<', value as Knex.Value)
        .orWhere((w2) => w2.where(page.sortKey, value as Knex.Value).andWhere('id', '<', id)));
    }
  }
  if (page.sortKey !== 'id') q.orderBy(page.sortKey, dir);
  q.orderBy('id', dir).limit(page.limit);
}

/** applyPage on `table`, the marker's sort value read from its field through `mapper`. */
export function applyMarkerPage<T extends { id: number }>(db: Knex, table: string, mapper: RowMapper<T>, q: Knex.QueryBuilder, page: PageRequest<T>): void {
  applyPage(q, page, (m) => ({
    id: m.id,
    value: markerValue(db, table, page.sortKey, m.id, (m as unknown as Record<string, unknown>)[mapper.fieldOf(page.sortKey)]),
  }));
}

/** `column = value` for each value given; an undefined value is no filter. */
export function whereDefined(q: Knex.QueryBuilder, equal: Record<string, Knex.Value | undefined>): Knex.QueryBuilder {
  for (const [column, value] of Object.entries(equal)) {
    if (value !== undefined) q.where(column, value);
  }
  return q;
}

/**
 * One page of `table`'s rows, with `where` as in whereDefined. `join` adds what other tables
 * say of a row (its node's UUID…) to the page, aliased `p`, once the page is cut: the sort keys
 * are unqualified columns of `table`, and joining first would make them ambiguous.
 */
export async function listPage<T extends { id: number }>(
  db: Knex,
  table: string,
  mapper: RowMapper<T>,
  page: PageRequest<T>,
  opts: { where?: Record<string, Knex.Value | undefined>; join?: (outer: Knex.QueryBuilder) => Knex.QueryBuilder } = {},
): Promise<T[]> {
  const q = whereDefined(db(table).select('*'), opts.where ?? {});
  applyMarkerPage(db, table, mapper, q, page);
  let rows: Array<Record<string, unknown>>;
  if (opts.join === undefined) {
    rows = await q;
  } else {
    const outer = opts.join(db.from(q.as('p')));
    if (page.sortKey !== 'id') outer.orderBy(`p.${page.sortKey}`, page.sortDir);
    rows = await outer.orderBy('p.id', page.sortDir);
  }
  return rows.map((r) => mapper.fromRow(r));
}

/** Inserts one row and returns its `returning` columns. */
export async function insertReturning(
  db: Knex,
  table: string,
  row: Record<string, unknown>,
  translate: TranslateWriteError,
  returning: '*' | 'id' = '*',
): Promise<Record<string, unknown>> {
  try {
    const [created] = await db(table).insert(row).returning(returning);
    return created as Record<string, unknown>;
  } catch (err) {
    return translate(err);
  }
}

/** Writes `row` and a new `updated_at` to the row `id` and returns it as stored; `notFound` when it is gone. */
export async function updateReturning(
  db: Knex,
  table: string,
  id: number,
  row: Record<string, unknown>,
  notFound: () => Error,
  translate: TranslateWriteError = rethrow,
): Promise<Record<string, unknown>> {
  let updated: Record<string, unknown> | undefined;
  try {
    [updated] = await db(table).where('id', id).update({ ...row, updated_at: db.fn.now() }).returning('*');
  } catch (err) {
    translate(err);
  }
  if (updated === undefined) throw notFound();
  return updated;
}

/** A listPage join: the UUID of the row's node (`node_id`), as `node_uuid`. */
export function withNodeUuid(outer: Knex.QueryBuilder): Knex.QueryBuilder {
  return outer.select('p.*', 'nodes.uuid as node_uuid').join('nodes', 'nodes.id', 'p.node_id');
}

/**
 * Create, list, update and delete for a table the API names its rows in by UUID (or name) and
 * joins nothing to: `translate` turns the table's constraint violations into its errors, and
 * `notFound` names a row that is gone. The table's module exports these under its own names.
 */
export function plainTable<T extends { id: number }, C extends Partial<T> & { uuid?: string }>(
  table: string,
  mapper: RowMapper<T>,
  notFound: (ident: string) => Error,
  translate: TranslateWrite<C> = rethrow,
) {
  return {
    async create(db: Knex, values: C): Promise<T> {
      const withUuid = { ...values, uuid: values.uuid ?? randomUUID() };
      return mapper.fromRow(await insertReturning(db, table, mapper.toRow(withUuid), (err) => translate(err, withUuid)));
    },
    list(db: Knex, page: PageRequest<T>): Promise<T[]> {
      return listPage(db, table, mapper, page);
    },
    async update(db: Knex, id: number, changes: C): Promise<T> {
      return mapper.fromRow(await updateReturning(db, table, id, mapper.toRow(changes), () => notFound(String(id)), (err) => translate(err, changes)));
    },
    async remove(db: Knex, id: number): Promise<void> {
      await db(table).where('id', id).delete();
    },
  };
}

/**
 * Deletes the row `id` unless another row still refers to it: the foreign key decides, in the
 * same statement, so a reference added concurrently cannot be left pointing at nothing; then
 * `referenced` is thrown.
 */
export async function deleteUnreferenced(db: Knex, table: string, id: number, referenced: () => Error): Promise<void> {
  try {
    await db(table).where('id', id).delete();
  } catch (err) {
    if (pgError(err)?.code === SQLSTATE.foreignKeyViolation) throw referenced();
    throw err;
  }
}

/**
 * A translation of unique violations, by constraint, into the table's errors made from the
 * values written; any other error is thrown as it is.
 */
export function uniqueViolations<C>(errors: Record<string, (values: C) => Error>): TranslateWrite<C> {
  return (err, values) => {
    for (const [constraint, make] of Object.entries(errors)) {
      if (isUniqueViolation(err, constraint)) throw make(values);
    }
    throw err;
  };
}

/**
 * The statements of a table of a node's things (volume connectors, volume targets): rows are
 * read with their node's UUID joined as `node_uuid`, looked up by UUID (the caller has checked
 * its form), listed by node, and changed given the row as it was, which `translate` may name.
 */
export function nodeChildTable<T extends { id: number; uuid: string }, C extends Partial<T> & { uuid?: string }>(
  table: string,
  mapper: RowMapper<T>,
  notFound: (ident: string) => Error,
  translate: (err: unknown, values: C, current?: T) => never,
) {
  const select = (db: Knex) => db(`${table} as x`).join('nodes', 'nodes.id', 'x.node_id').select('x.*', 'nodes.uuid as node_uuid');
  const byId = async (db: Knex, id: number): Promise<T> => mapper.fromFound(await select(db).where('x.id', id).first(), () => notFound(String(id)));
  return {
    async create(db: Knex, values: C): Promise<T> {
      const created = await insertReturning(db, table, mapper.toRow({ ...values, uuid: values.uuid ?? randomUUID() }), (err) => translate(err, values), 'id');
      return byId(db, created.id as number);
    },
    async get(db: Knex, uuid: string): Promise<T> {
      return mapper.fromFound(await select(db).where('x.uuid', uuid.toLowerCase()).first(), () => notFound(uuid));
    },
    list(db: Knex, filters: { nodeId?: number }, page: PageRequest<T>): Promise<T[]> {
      return listPage(db, table, mapper, page, { where: { node_id: filters.nodeId }, join: withNodeUuid });
    },
    async update(db: Knex, current: T, changes: C): Promise<T> {
      await updateReturning(db, table, current.id, mapper.toRow(changes), () => notFound(current.uuid), (err) => translate(err, changes, current));
      return byId(db, current.id);
    },
    async remove(db: Knex, id: number): Promise<void> {
      await db(table).where('id', id).delete();
    },
  };
}
