/** A plain HTTP server for `GET /metrics` of a prom-client registry (conductor, exporter), and the process metrics every registry has. */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { collectDefaultMetrics, type Registry } from 'prom-client';

/**
 * How often the event-loop lag is sampled, in ms. prom-client's 10 ms default is a timer that
 * wakes the process 100 times a second, loaded or idle (about 1 % of a core per process on a
 * slow CPU); ten samples a second still show every stall of 100 ms or more, and a scrape every
 * 15 s still gets 150 of them.
 */
const EVENT_LOOP_SAMPLE_MS = 100;

/** Node's default process metrics (event-loop lag, memory, CPU, handles) in `registry`. */
export function collectProcessMetrics(registry: Registry): void {
  collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS });
}

export interface MetricsServer {
  url: string;
  close(): Promise<void>;
}

export async function serveMetrics(registry: Registry, host: string, port: number, log: Logger): Promise<MetricsServer> {
  const server = http.createServer((req, res) => {
    if (req.method !== 'GET' || (req.url ?? '').split('?')[0] !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
      return;
    }
    registry.metrics().then(
      (body) => res.writeHead(200, { 'content-type': registry.contentType }).end(body),
      (err: unknown) => {
        log.error({ err }, 'rendering /metrics failed');
        res.writeHead(500, { 'content-type': 'text/plain' }).end('error\n');
      },
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const addr = server.address() as AddressInfo;
  return {
    url: `http://${host}:${addr.port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
