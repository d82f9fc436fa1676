/** Console test helpers: a websocket viewer that records what it sees, and /proc scans. */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { WebSocket } from 'ws';

const HEADERS = { 'X-OpenStack-Ironic-API-Version': '1.78', 'Content-Type': 'application/json' };

/** A JSON call to the API at `base`, at the console tests' microversion: its status and parsed body. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON bodies of several shapes
export async function apiCall(base: string, method: string, url: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(`${base}${url}`, { method, headers: HEADERS, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

export interface Viewer {
  ws: WebSocket;
  /** Everything received so far, as text. */
  text(): string;
  /** When each chunk arrived (ms since epoch). */
  chunks: Array<{ at: number; data: string }>;
  /** Resolves true on open, false when the connection was refused (HTTP error or early close). */
  opened: Promise<boolean>;
  /** HTTP status of a refused upgrade. */
  refusedStatus?: number;
  closed: Promise<{ code: number; reason: string; at: number }>;
  /** Waits until `text` has been received; rejects after `ms`. */
  waitFor(text: string | RegExp, ms?: number): Promise<void>;
  send(text: string): void;
  close(): void;
}

/** Connects a websocket viewer to a console URL. */
export function connectViewer(url: string): Viewer {
  return connectViewerWith(url, {});
}

/** connectViewer with extra request headers. */
export function connectViewerWith(url: string, headers: Record<string, string>): Viewer {
  const ws = new WebSocket(url, { headers });
  let all = '';
  const chunks: Viewer['chunks'] = [];
  const waiters = new Set<() => void>();
  const v: Viewer = {
    ws,
    text: () => all,
    chunks,
    opened: undefined as unknown as Promise<boolean>,
    closed: undefined as unknown as Promise<{ code: number; reason: string; at: number }>,
    waitFor: (text, ms = 10_000) => new Promise<void>((resolve, reject) => {
      const match = () => (typeof text === 'string' ? all.includes(text) : text.test(all));
      if (match()) return resolve();
      const check = () => {
        if (match()) {
          clearTimeout(timer);
          waiters.delete(check);
          resolve();
        }
      };
      const timer = setTimeout(() => {
        waiters.delete(check);
        reject(new Error(`did not receive ${String(text)} within ${ms} ms; got: ${JSON.stringify(all.slice(-500))}`));
      }, ms);
      waiters.add(check);
    }),
    send: (t) => ws.send(Buffer.from(t), { binary: true }),
    close: () => ws.close(1000),
  };
  v.opened = new Promise((resolve) => {
    ws.once('open', () => resolve(true));
    ws.once('unexpected-response', (_req, res) => {
      v.refusedStatus = res.statusCode;
      resolve(false);
      res.resume();
    });
    ws.once('error', () => resolve(false));
  });
  v.closed = new Promise((resolve) => {
    ws.once('close', (code, reason) => resolve({ code, reason: reason.toString(), at: Date.now() }));
    ws.once('unexpected-response', () => resolve({ code: 0, reason: `HTTP ${v.refusedStatus}`, at: Date.now() }));
  });
  ws.on('error', () => undefined);
  ws.on('message', (data: Buffer) => {
    const s = data.toString('utf8');
    all += s;
    chunks.push({ at: Date.now(), data: s });
    for (const w of [...waiters]) w();
  });
  return v;
}

/** Live processes (not zombies) whose command line matches, by pid. */
export function processesMatching(re: RegExp): Map<number, string> {
  const out = new Map<number, string>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmd = readFileSync(`/proc/${entry}/cmdline`).toString('utf8').replace(/\0/g, ' ');
      if (!re.test(cmd)) continue;
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) === 'Z') continue;
      out.set(Number(entry), cmd);
    } catch {
      // gone
    }
  }
  return out;
}

/**
 * Fake console processes per node UUID, counted from /proc: the node processes running the
 * script, not a shell that names it among its arguments.
 */
export function fakeConsoleProcesses(): Map<string, number[]> {
  const byNode = new Map<string, number[]>();
  for (const [pid, cmd] of processesMatching(/^\S+ \S*drivers\/fake\/console-child\.js /)) {
    const uuid = /console-child\.js (\S+)/.exec(cmd)![1];
    byNode.set(uuid, [...(byNode.get(uuid) ?? []), pid]);
  }
  return byNode;
}

/** Debian's chromium, driven by playwright-core in the browser test. */
export const CHROMIUM = '/usr/bin/chromium';

/** Skips the suite without chromium, or fails it under CI (where .ci/run installs it). */
export function requireChromium(ctx: Mocha.Context): void {
  if (existsSync(CHROMIUM)) return;
  const msg = `the browser console test needs ${CHROMIUM} (apt-get install chromium)`;
  if (process.env.CI === 'true') throw new Error(`${msg}; CI=true, so this is a failure, not a skip`);
  console.warn(`      skipped: ${msg}`);
  ctx.skip();
}
