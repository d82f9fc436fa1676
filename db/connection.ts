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
 * Server settings of every Galvanic session, sent as startup options so that they hold from a
 * connection's first statement at no extra round trip.
 *
 * jit=off: Galvanic's statements are short OLTP statements (a few ms at most), and JIT
 * compilation costs 50-2,000 ms per statement on the servers that ship LLVM (Debian's and most
 * distributions' packages; the embedded server has none). Postgres decides on JIT from the
 * plan's estimated cost alone (jit_above_cost, 100,000 by default), and a hot table's stale
 * statistics, or one planner switch that leaves a disabled node in the plan (its cost is
 * 1e10), lift a 5 ms claim over that line: with JIT on, each claim of a woken node took 1-2 s.
 */
export const SESSION_OPTIONS = '-c jit=off';

/**
 * The connection string with SESSION_OPTIONS added to its own `options` parameter, if any:
 * node-postgres lets a URL's parameters override the config object's, so options given beside
 * a URL that has its own would be lost.
 */
export function withSessionOptions(connectionString: string): string {
  let url: URL;
  try {
    url = new URL(connectionString);
  } catch {
    return connectionString;
  }
  const own = url.searchParams.get('options');
  url.searchParams.set('options', own ? `${own} ${SESSION_OPTIONS}` : SESSION_OPTIONS);
  return url.toString();
}

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
      connectionString: withSessionOptions(connectionString),
      // Used only when the string is no URL (withSessionOptions left it as it was).
      options: SESSION_OPTIONS,
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

/**
 * What in the server's configuration works against Galvanic, one sentence each, for the
 * services to log at start.
 */
export async function serverConfigWarnings(db: Knex): Promise<string[]> {
  const out: string[] = [];
  const { rows } = await db.raw('SHOW autovacuum') as { rows: Array<{ autovacuum: string }> };
  if (rows[0]?.autovacuum === 'off') {
    // Measured on a server so configured: a 1,000-node direct undeploy took 1.63-1.68 x its floor
    // against 1.21 with autovacuum on, the dead rows of intents and nodes piling up.
    out.push('autovacuum is off on this Postgres server: the intents, nodes and node_history tables, updated several times per action, '
      + 'keep their dead rows and their statistics go stale; turn it on (postgresql.conf: autovacuum = on) or vacuum and analyze them on a schedule');
  }
  return out;
}
