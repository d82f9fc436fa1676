/**
 * Starts an embedded Postgres and waits to be killed, standing in for a Galvanic process that
 * dies by SIGKILL with its server still running. Usage: embedded-child.js <dataDir> <port>.
 * Prints "ready <pid>" once the server accepts connections.
 */
import { startEmbeddedPostgres } from '../../db/embedded.js';

const [dataDir, port] = process.argv.slice(2);
await startEmbeddedPostgres({ dataDir, port: Number(port), log: () => undefined });
process.stdout.write(`ready ${process.pid}\n`);
setInterval(() => undefined, 60_000);
