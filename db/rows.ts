/**
 * Row <-> domain object conversion. Columns are snake_case; everything outside db/ sees
 * camelCase. The maps are computed once per table, not per row, since list endpoints
 * convert thousands of rows per request.
 */

function toCamel(column: string): string {
  return column.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

function toSnake(field: string): string {
  return field.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

/** A two-way mapping between one table's columns and its domain object's fields. */
export class RowMapper<T extends object> {
  private readonly toField: Map<string, string>;
  private readonly toColumn: Map<string, string>;

  private readonly json: Set<string>;

  /**
   * A row's domain object: the fields of the columns the row has. Generated once per table
   * from the (fixed, code-defined) column list, so every object of a table gets its fields in
   * one order and V8 one shape; a loop over a Map cost the intent path a few % of its CPU.
   */
  readonly fromRow: (row: Record<string, unknown>) => T;

  /** `jsonColumns` are stringified on write: pg would turn a JS array into a Postgres array. */
  constructor(columns: readonly string[], jsonColumns: readonly string[] = []) {
    this.json = new Set(jsonColumns);
    this.toField = new Map(columns.map((c) => [c, toCamel(c)]));
    this.toColumn = new Map(columns.map((c) => [toCamel(c), c]));
    const body = [...this.toField].map(([column, field]) => {
      const c = JSON.stringify(column);
      return `if (${c} in row) out[${JSON.stringify(field)}] = row[${c}];`;
    });
    // Built from the column list above, never from input.
    this.fromRow = new Function('row', `const out = {};\n${body.join('\n')}\nreturn out;`) as (row: Record<string, unknown>) => T;
  }

  /** The domain object of the row a lookup found; `notFound()` is thrown when it found none. */
  fromFound(row: Record<string, unknown> | undefined, notFound: () => Error): T {
    if (!row) throw notFound();
    return this.fromRow(row);
  }

  /** Columns for a partial domain object; unknown fields are a programming error. */
  toRow(values: Partial<T>): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    for (const [field, value] of Object.entries(values)) {
      if (value === undefined) continue;
      const column = this.toColumn.get(field) ?? toSnake(field);
      if (!this.toField.has(column)) throw new Error(`unknown field ${field}`);
      out[column] = this.json.has(column) && value !== null ? JSON.stringify(value) : value;
    }
    return out;
  }

  column(field: string): string | undefined {
    return this.toColumn.get(field);
  }

  fieldOf(column: string): string {
    return this.toField.get(column) ?? toCamel(column);
  }
}
