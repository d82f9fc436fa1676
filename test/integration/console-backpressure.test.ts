import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { WebSocket } from 'ws';
import { MAX_VIEWER_BUFFERED_BYTES } from '../../common/console-protocol.js';
import { startCluster, stopCluster, type Cluster } from '../helpers/cluster.js';
import { apiCall } from '../helpers/console.js';
import { until } from '../helpers/until.js';

const MiB = 1024 * 1024;
/** Output every reading viewer must receive while the stalled one is connected, and before it. */
const TOTAL = 32 * MiB;
const WARM_UP = 8 * MiB;
const LINE = 32768;
/** What the API server may grow by beyond the limit: buffers in flight for the readers, garbage not yet collected. */
const SLACK = 8 * MiB;

function rssBytes(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m![1]) * 1024;
}

/** A viewer that reads everything, keeping only counts: bytes, line numbers seen, and gaps between them. */
class CountingViewer {
  readonly ws: WebSocket;
  bytes = 0;
  first?: number;
  last?: number;
  gaps: string[] = [];
  closed?: { code: number; reason: string };
  private tail = Buffer.alloc(0);

  constructor(url: string) {
    this.ws = new WebSocket(url);
    this.ws.on('message', (data: Buffer) => this.take(data));
    this.ws.on('close', (code, reason) => { this.closed = { code, reason: reason.toString() }; });
    this.ws.on('error', () => undefined);
  }

  opened(): Promise<void> {
    return new Promise((resolve, reject) => {
      this.ws.once('open', () => resolve());
      this.ws.once('error', reject);
    });
  }

  private take(data: Buffer): void {
    this.bytes += data.length;
    let buf = this.tail.length ? Buffer.concat([this.tail, data]) : data;
    let nl: number;
    while ((nl = buf.indexOf(0x0a)) !== -1) {
      const m = /line (\d+)/.exec(buf.subarray(0, Math.min(nl, 120)).toString('latin1'));
      buf = buf.subarray(nl + 1);
      if (!m) continue;
      const n = Number(m[1]);
      if (this.last !== undefined && n !== this.last + 1 && this.gaps.length < 5) this.gaps.push(`${this.last} -> ${n}`);
      this.first ??= n;
      this.last = n;
    }
    this.tail = Buffer.from(buf);
  }
}

describe('serial console backpressure through the API relay (real processes)', function () {
  this.timeout(300_000);
  let cluster: Cluster | undefined;
  const sockets: WebSocket[] = [];

  afterEach(async () => {
    for (const ws of sockets) ws.terminate();
    await stopCluster(cluster);
    cluster = undefined;
  });

  it('one viewer that never reads and ten that do, on a console printing 32 MiB: the stalled one is closed past the limit, the others get every line, the API server stays small', async () => {
    // A small young generation: the relay's garbage buffers are freed as they go, so that RSS
    // follows what is held rather than when the collector last ran.
    cluster = await startCluster('backpressure', { conductors: 1, env: { GALVANIC_CONSOLE__RESTART_INITIAL_DELAY: '0.1', NODE_OPTIONS: '--max-semi-space-size=1' } });
    const api = cluster.api.url;
    // 32 KiB lines every 20 ms: 1.6 MiB/s, a console far busier than any serial line (the test
    // waits for 40 MiB of it, so the rate sets its length).
    const created = await apiCall(api, 'POST', '/v1/nodes', {
      driver: 'fake-hardware', console_interface: 'fake', driver_info: { fake_console_interval_ms: 20, fake_console_line_bytes: LINE },
    });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    const uuid: string = created.body.uuid;
    expect((await apiCall(api, 'PUT', `/v1/nodes/${uuid}/states/console?wait=30`, { enabled: true })).status).to.equal(202);
    const url = async () => (await apiCall(api, 'GET', `/v1/nodes/${uuid}/states/console`)).body.console_info.url as string;

    const apiPid = cluster.api.proc.pid!;
    let peak = rssBytes(apiPid);
    const sampler = setInterval(() => { peak = Math.max(peak, rssBytes(apiPid)); }, 100);
    try {
      const readers = await Promise.all(Array.from({ length: 10 }, async () => {
        const v = new CountingViewer(await url());
        sockets.push(v.ws);
        await v.opened();
        return v;
      }));
      // Relaying to the readers alone, until the API server's memory is at its steady state.
      await until('the readers warming up', () => readers.every((r) => r.bytes >= WARM_UP) || readers.some((r) => r.closed !== undefined), 120_000);
      const baseline = peak;
      const before = readers.map((r) => r.bytes);

      const stalled = new WebSocket(await url());
      sockets.push(stalled);
      let stalledClose: { code: number; reason: string } | undefined;
      stalled.on('close', (code, reason) => { stalledClose = { code, reason: reason.toString() }; });
      stalled.on('error', () => undefined);
      // Never read: the API server's socket to it fills, then what is queued for it.
      await new Promise<void>((resolve) => stalled.once('open', () => { stalled.pause(); resolve(); }));

      await until('every reader receiving 32 MiB more', () => readers.every((r, i) => r.bytes - before[i] >= TOTAL) || readers.some((r) => r.closed !== undefined), 240_000);
      clearInterval(sampler);
      const growth = peak - baseline;
      console.log(`      API RSS with the readers ${Math.round(baseline / MiB)} MiB, peak with the stalled viewer too ${Math.round(peak / MiB)} MiB (+${(growth / MiB).toFixed(1)} MiB); load ${loadavg()[0].toFixed(1)}`);

      for (const [i, r] of readers.entries()) {
        expect(r.closed, `reader ${i} was closed: ${JSON.stringify(r.closed)}`).to.equal(undefined);
        expect(r.gaps, `reader ${i}: lines missing`).to.deep.equal([]);
        expect(r.last! - r.first!, `reader ${i}: lines received`).to.be.at.least((WARM_UP + TOTAL) / LINE - 2);
      }
      // The stalled viewer is gone: once it reads again, it finds its connection closed.
      stalled.resume();
      await until('the stalled viewer seeing its connection closed', () => stalledClose !== undefined, 10_000);
      expect(growth, 'API RSS growth').to.be.at.most(MAX_VIEWER_BUFFERED_BYTES + SLACK);
    } finally {
      clearInterval(sampler);
    }
  });
});
