import knexFactory, { type Knex } from 'knex';
import pg from 'pg';

export interface KnexOptions {
  /** Upper bound of pooled connections; each process holds at most this many. */
  poolMax?: number;
  /** Shown in pg_stat_activity, so an operator can tell api, conductor and exporter apart. */
  applicationName?: string;
  /**
   * Where knex's own warnings go (pool acquire errors during a database outage, among them);
   * by default knex writes them, with stack traces, straight to the console.
   */
  log?: { warn(msg: string): void; error(msg: string): void; debug(msg: string): void };
}

const INT8_OID = 20;

/**
 * A knex instance on Postgres. json/jsonb come back parsed and timestamptz as Date (pg's
 * defaults); int8 comes back as a number rather than a string.
 */
export function createKnex(connectionString: string, opts: KnexOptions = {}): Knex {
  // pg's type parsers are process-global, so this also affects any other pg user in the
  // process. That is safe here: our int8 values are counts, counters and sequence numbers,
  // all far below 2^53, and a count(*) as a number is what every caller wants.
  pg.types.setTypeParser(INT8_OID, (value: string) => Number.parseInt(value, 10));

  return knexFactory({
    client: 'pg',
    connection: {
      connectionString,
      application_name: opts.applicationName ?? 'galvanic',
    },
    pool: {
      // min 0 so idle processes hold no connections: a mostly idle conductor fleet should not
      // exhaust max_connections, and a database can be dropped once its users go quiet.
      min: 0,
      max: opts.poolMax ?? 10,
      idleTimeoutMillis: 30_000,
    },
    // Fail fast instead of queueing forever when the pool is exhausted or the server is down.
    acquireConnectionTimeout: 30_000,
    ...(opts.log ? { log: { warn: opts.log.warn, error: opts.log.error, debug: opts.log.debug, deprecate: opts.log.warn } } : {}),
  });
}

/** True when the database answers a trivial query within `timeoutMs` (readiness probes). */
export async function pingDatabase(db: Knex, timeoutMs: number): Promise<boolean> {
  try {
    await db.raw('SELECT 1').timeout(timeoutMs);
    return true;
  } catch {
    return false;
  }
}
