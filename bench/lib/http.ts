/**
 * HTTP client for benchmarks: an undici pool with one keep-alive connection per concurrent
 * client. The client shares the machine with the server it measures, so it should cost as
 * little CPU as it can: undici needs about half of what node:http does per request.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { Pool } from 'undici';

export const API_VERSION = '1.78';

export interface Response {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
  /** Request start to last body byte. */
  ms: number;
}

export class Client {
  private readonly pool: Pool;

  constructor(readonly port: number, sockets: number, private readonly apiVersion = API_VERSION) {
    this.pool = new Pool(`http://127.0.0.1:${port}`, { connections: sockets, pipelining: 1, headersTimeout: 120_000, bodyTimeout: 120_000 });
  }

  async request(method: string, urlPath: string, body?: string): Promise<Response> {
    const headers: Record<string, string> = {
      'X-OpenStack-Ironic-API-Version': this.apiVersion,
      Accept: 'application/json',
    };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const t0 = performance.now();
    const res = await this.pool.request({ method: method as 'GET', path: urlPath, headers, body });
    const text = await res.body.text();
    return { status: res.statusCode, headers: res.headers as IncomingHttpHeaders, body: text, ms: performance.now() - t0 };
  }

  close(): void {
    void this.pool.destroy();
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

/** What followOperation reads of a group operation. */
export interface OperationProgress {
  counts: Record<string, number>;
  finished_at: string | null;
}

/**
 * Polls `GET /v1/operations/<opId>?limit=1`, `pauseMs` apart, until the operation has
 * finished: its last body, the most nodes running at one poll and each poll's time. Throws
 * when `died()` names a process that exited; `progress` sees each unfinished body.
 */
export async function followOperation<T extends OperationProgress>(
  client: Client, opId: string, opts: { pauseMs: number; died: () => string | undefined; progress?: (op: T) => void },
): Promise<{ op: T & { finished_at: string }; mostRunning: number; getMs: number[] }> {
  let mostRunning = 0;
  const getMs: number[] = [];
  for (;;) {
    const res = await client.request('GET', `/v1/operations/${opId}?limit=1`);
    getMs.push(res.ms);
    const op = JSON.parse(res.body) as T;
    mostRunning = Math.max(mostRunning, op.counts.running);
    if (op.finished_at !== null) return { op: op as T & { finished_at: string }, mostRunning, getMs };
    const why = opts.died();
    if (why) throw new Error(why);
    opts.progress?.(op);
    await sleep(opts.pauseMs);
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
