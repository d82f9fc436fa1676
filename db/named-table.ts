/**
 * The statements of a table whose rows the API names by UUID or by a unique name (deploy
 * templates, runbooks): plainTable with the two unique constraints, `<table>_name_unique` and
 * `<table>_uuid_unique`, turned into the table's errors, and a lookup by either.
 */
import type { Knex } from 'knex';
import { isUuid } from './nodes.js';
import type { RowMapper } from './rows.js';
import { plainTable, uniqueViolations } from './table.js';

/** The errors of a named table. */
export interface NamedTableErrors {
  notFound: (ident: string) => Error;
  duplicateName: (name: string) => Error;
  uuidExists: (uuid: string) => Error;
}

export function namedTable<T extends { id: number }, C extends Partial<T> & { uuid?: string; name?: string }>(
  table: string,
  mapper: RowMapper<T>,
  errors: NamedTableErrors,
) {
  const translate = uniqueViolations<C>({
    [`${table}_name_unique`]: (values) => errors.duplicateName(String(values.name)),
    [`${table}_uuid_unique`]: (values) => errors.uuidExists(String(values.uuid)),
  });
  return {
    ...plainTable<T, C>(table, mapper, errors.notFound, translate),
    /** By UUID or name. */
    async get(db: Knex, ident: string): Promise<T> {
      return mapper.fromFound(await db(table).where(isUuid(ident) ? 'uuid' : 'name', ident).first(), () => errors.notFound(ident));
    },
  };
}
