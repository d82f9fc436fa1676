/**
 * The embedded HTTP server of a conductor's HTTP root (`[deploy] http_server`): static files
 * only, GET and HEAD, with byte ranges and conditional requests, as BMCs fetch virtual media
 * (many read an ISO in ranges as they boot). `send` does the HTTP; files whose name starts
 * with a dot (a publish in progress) are not served.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import send from 'send';

export interface HttpRootServer {
  /** `http://<host>:<port>` as it listens (the port it got when 0 was asked). */
  readonly url: string;
  readonly port: number;
  close(): Promise<void>;
}

function hostForUrl(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}

/**
 * Listens on `host:port` and serves `root`.
 * @throws the listen error (address in use, not permitted)
 */
export async function startHttpRootServer(opts: { root: string; host: string; port: number; log: Logger }): Promise<HttpRootServer> {
  const log = opts.log.child({ component: 'http-root' });
  const server = http.createServer((req, res) => {
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD' }).end();
      return;
    }
    let pathname: string;
    try {
      pathname = decodeURIComponent(new URL(req.url ?? '/', 'http://root').pathname);
    } catch {
      res.writeHead(400).end();
      return;
    }
    const started = Date.now();
    send(req, pathname, { root: opts.root, dotfiles: 'ignore', index: false, cacheControl: false })
      // A directory is no file to serve, and no listing is given.
      .on('directory', () => res.writeHead(404).end())
      .on('error', (err: Error & { status?: number }) => {
        res.writeHead(err.status ?? 500).end();
        if ((err.status ?? 500) >= 500) log.warn({ path: pathname, err: err.message }, 'HTTP root request failed');
      })
      .on('end', () => log.debug({ method: req.method, path: pathname, range: req.headers.range, ms: Date.now() - started }, 'HTTP root file served'))
      .pipe(res);
  });
  // BMCs hold their connection for a whole ISO read; an idle one is closed after a while.
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const url = `http://${hostForUrl(opts.host)}:${port}`;
  log.info({ url, root: opts.root }, 'HTTP root served');
  return {
    url, port,
    close: () => new Promise((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}
