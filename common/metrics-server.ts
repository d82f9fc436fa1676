/** A plain HTTP server for `GET /metrics` of a prom-client registry (conductor, exporter). */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';

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
