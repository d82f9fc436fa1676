/** HTTP client for benchmarks: node:http with a keep-alive agent, one socket per concurrent client. */
import http from 'node:http';
import { performance } from 'node:perf_hooks';

export const API_VERSION = '1.78';

export interface Response {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
  /** Request start to last body byte. */
  ms: number;
}

export class Client {
  readonly agent: http.Agent;

  constructor(readonly port: number, sockets: number, private readonly apiVersion = API_VERSION) {
    this.agent = new http.Agent({ keepAlive: true, maxSockets: sockets });
  }

  request(method: string, urlPath: string, body?: string): Promise<Response> {
    return new Promise((resolve, reject) => {
      const headers: Record<string, string | number> = {
        'X-OpenStack-Ironic-API-Version': this.apiVersion,
        Accept: 'application/json',
      };
      if (body !== undefined) {
        headers['Content-Type'] = 'application/json';
        headers['Content-Length'] = Buffer.byteLength(body);
      }
      const t0 = performance.now();
      const req = http.request({ host: '127.0.0.1', port: this.port, method, path: urlPath, agent: this.agent, headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => resolve({
          status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8'), ms: performance.now() - t0,
        }));
      });
      req.setTimeout(120_000, () => req.destroy(new Error(`${method} ${urlPath}: no response within 120 s`)));
      req.on('error', reject);
      req.end(body);
    });
  }

  close(): void {
    this.agent.destroy();
  }
}

/** Polls GET / until it answers 200; throws after `timeoutMs` or when `exited()` says so. */
export async function waitForApi(port: number, timeoutMs: number, exited: () => string | undefined): Promise<void> {
  const probe = new Client(port, 1);
  try {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const why = exited();
      if (why !== undefined) throw new Error(why);
      try {
        const res = await probe.request('GET', '/');
        if (res.status === 200) return;
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline) throw new Error(`the API on port ${port} did not answer within ${timeoutMs / 1000} s`);
      await new Promise((r) => setTimeout(r, 100));
    }
  } finally {
    probe.close();
  }
}

/** Runs `total` jobs on `concurrency` workers; job i gets index i, in order of start. */
export async function runConcurrently(total: number, concurrency: number, job: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    for (;;) {
      const i = next++;
      if (i >= total) return;
      await job(i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, total) }, worker));
}

/** An error count with the first few messages kept as samples. */
export class Errors {
  count = 0;
  readonly samples: string[] = [];
  add(what: string): void {
    this.count += 1;
    if (this.samples.length < 5) this.samples.push(what.slice(0, 300));
  }
}
