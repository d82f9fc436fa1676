import { timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { Gauge, Registry } from 'prom-client';
import { WebSocketServer, type WebSocket } from 'ws';
import { AUTH_HEADER, TOKEN_HEADER, relayAuth } from '../../common/console-protocol.js';

/** Live figures of a conductor's consoles. */
export interface ConsoleStats {
  processes: number;
  sessions: number;
  writers: number;
  /** Stray console processes found (and killed) since start. */
  strays: number;
}

/**
 * A conductor's internal console endpoint: the websocket API servers relay viewers to, open
 * only to requests carrying the HMAC of their token under the shared secret, and `/metrics`.
 */
export class ConsoleEndpoint {
  private server?: http.Server;
  private readonly wss = new WebSocketServer({ noServer: true });
  private readonly metrics = new Registry();

  constructor(
    private readonly opts: {
      hostname: string;
      secret: () => string;
      stats: () => ConsoleStats;
      /** A relayed viewer whose request proved its origin. */
      onViewer(ws: WebSocket, nodeId: number, token: string): void;
    },
  ) {
    this.metrics.setDefaultLabels({ conductor: opts.hostname });
    const gauge = (name: string, help: string, read: (s: ConsoleStats) => number) => new Gauge({
      name, help, registers: [this.metrics],
      collect() {
        this.set(read(opts.stats()));
      },
    });
    gauge('galvanic_console_processes', 'Console processes running on this conductor.', (s) => s.processes);
    gauge('galvanic_console_sessions', 'Live console viewer sessions on this conductor.', (s) => s.sessions);
    gauge('galvanic_console_writers', 'Console sessions holding write access.', (s) => s.writers);
    gauge('galvanic_console_strays', 'Console processes found running without a record (or with a dead holder) and killed, since start.', (s) => s.strays);
  }

  /** Listens; returns host:port as API servers reach it. */
  async listen(host: string, port: number): Promise<string> {
    const server = http.createServer((req, res) => void this.serveHttp(req, res));
    this.server = server;
    server.on('upgrade', (req, socket, head) => this.upgrade(req, socket, head));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => resolve());
    });
    const bound = (server.address() as AddressInfo).port;
    return `${host.includes(':') ? `[${host}]` : host}:${bound}`;
  }

  async close(): Promise<void> {
    this.wss.close();
    if (this.server) {
      this.server.closeAllConnections();
      await new Promise((r) => this.server!.close(r));
    }
  }

  private async serveHttp(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    if (req.method === 'GET' && req.url === '/metrics') {
      const body = await this.metrics.metrics();
      res.writeHead(200, { 'content-type': this.metrics.contentType });
      res.end(body);
      return;
    }
    res.writeHead(404).end();
  }

  private upgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer): void {
    const refuse = (status: number, text: string) => {
      socket.end(`HTTP/1.1 ${status} ${text}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
    };
    const m = /^\/console\/(\d+)$/.exec(req.url ?? '');
    const token = req.headers[TOKEN_HEADER];
    const auth = req.headers[AUTH_HEADER];
    if (!m || typeof token !== 'string' || typeof auth !== 'string') return refuse(400, 'Bad Request');
    const expected = Buffer.from(relayAuth(this.opts.secret(), token));
    const given = Buffer.from(auth);
    if (expected.length !== given.length || !timingSafeEqual(expected, given)) return refuse(403, 'Forbidden');
    const nodeId = Number(m[1]);
    this.wss.handleUpgrade(req, socket, head, (ws) => this.opts.onViewer(ws, nodeId, token));
  }
}
