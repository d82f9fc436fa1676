/**
 * The image cache: one download for any number of concurrent requests, checksums, staleness as
 * Ironic's master image cache judges it, nothing left of a failure, and eviction that spares
 * files in use or published (hard-linked).
 */
import { expect } from 'chai';
import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { pino } from 'pino';
import { ImageChecksumError, ImageDownloadFailed } from '../../common/errors.js';
import { ImageCache, parseChecksum } from '../../drivers/image/image-cache.js';

const sha = (algo: string, b: Buffer | string) => createHash(algo).update(b).digest('hex');

describe('ImageCache', () => {
  let dir: string;
  let server: http.Server;
  let base: string;
  const gets = new Map<string, number>();
  const bodies = new Map<string, { data: Buffer; modified?: Date }>();
  let cache: ImageCache;

  before(async () => {
    server = http.createServer((req, res) => {
      const f = bodies.get(req.url ?? '');
      if (req.method === 'GET') gets.set(req.url ?? '', (gets.get(req.url ?? '') ?? 0) + 1);
      if (!f) return void res.writeHead(404).end();
      const headers: Record<string, string> = { 'content-length': String(f.data.length) };
      if (f.modified) headers['last-modified'] = f.modified.toUTCString();
      // Slow enough that concurrent requests overlap.
      setTimeout(() => res.writeHead(200, headers).end(req.method === 'HEAD' ? undefined : f.data), 30);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }));
  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'galvanic-cache-'));
    gets.clear();
    bodies.clear();
    cache = new ImageCache({ dir, sizeBytes: 1 << 30, ttlMs: 3_600_000, log: pino({ level: 'silent' }) });
    await cache.start();
  });
  afterEach(async () => {
    await cache.close();
    await fs.rm(dir, { recursive: true, force: true });
  });

  it('reads checksums as Ironic writes them, the algorithm told by the length when bare', () => {
    expect(parseChecksum('a'.repeat(32))).to.deep.equal({ algorithm: 'md5', hex: 'a'.repeat(32) });
    expect(parseChecksum(`SHA256:${'B'.repeat(64)}`)).to.deep.equal({ algorithm: 'sha256', hex: 'b'.repeat(64) });
    expect(parseChecksum('c'.repeat(128)).algorithm).to.equal('sha512');
    for (const bad of ['xyz', `sha1:${'a'.repeat(40)}`, 'a'.repeat(40), 'sha256:']) expect(() => parseChecksum(bad), bad).to.throw(/is not <algorithm>:<hex>/);
  });

  it('downloads an image once for many concurrent requests, and gives its sha256', async () => {
    bodies.set('/k', { data: Buffer.from('kernel') });
    const files = await Promise.all(Array.from({ length: 20 }, () => cache.fetch({ url: `${base}/k`, checksum: `sha256:${sha('sha256', 'kernel')}` })));
    expect(gets.get('/k')).to.equal(1);
    expect(new Set(files.map((f) => f.path)).size).to.equal(1);
    expect(files[0]!.sha256).to.equal(sha('sha256', 'kernel'));
    expect(await fs.readFile(files[0]!.path, 'utf8')).to.equal('kernel');
    // Pinned by its checksum: no request at all the next time.
    const again = await cache.fetch({ url: `${base}/k`, checksum: `sha256:${sha('sha256', 'kernel')}` });
    expect(again.path).to.equal(files[0]!.path);
    expect(gets.get('/k')).to.equal(1);
  });

  it('downloads again an image without checksum whose Last-Modified is after the cached copy', async () => {
    bodies.set('/r', { data: Buffer.from('one'), modified: new Date(Date.now() - 60_000) });
    expect((await cache.fetch({ url: `${base}/r` })).sha256).to.equal(sha('sha256', 'one'));
    expect((await cache.fetch({ url: `${base}/r` })).sha256).to.equal(sha('sha256', 'one'));
    expect(gets.get('/r')).to.equal(1);
    bodies.set('/r', { data: Buffer.from('two'), modified: new Date(Date.now() + 60_000) });
    expect((await cache.fetch({ url: `${base}/r` })).sha256).to.equal(sha('sha256', 'two'));
    expect(gets.get('/r')).to.equal(2);
    // Gone at its source: an error, though a copy is cached (Ironic checks the image first).
    bodies.delete('/r');
    const err = await cache.fetch({ url: `${base}/r` }).catch((e: unknown) => e);
    expect(err).to.be.instanceOf(ImageDownloadFailed);
    expect((err as Error).message).to.equal(`Failed to download image ${base}/r, reason: Got HTTP code 404 instead of 200 in response to HEAD request.`);
  });

  it('takes file:// images, and leaves nothing of a download that fails or does not match', async () => {
    const local = path.join(dir, 'local.img');
    await fs.writeFile(local, 'local bytes');
    expect((await cache.fetch({ url: pathToFileURL(local).href, checksum: sha('md5', 'local bytes') })).sha256).to.equal(sha('sha256', 'local bytes'));
    bodies.set('/bad', { data: Buffer.from('not what was promised') });
    const err = await cache.fetch({ url: `${base}/bad`, checksum: sha('sha256', 'promised') }).catch((e: unknown) => e);
    expect(err).to.be.instanceOf(ImageChecksumError);
    expect((err as Error).message).to.include(`expected ${sha('sha256', 'promised')}`);
    const missing = await cache.fetch({ url: `${base}/missing` }).catch((e: unknown) => e);
    expect(missing).to.be.instanceOf(ImageDownloadFailed);
    const gone = await cache.fetch({ url: pathToFileURL(path.join(dir, 'none')).href }).catch((e: unknown) => e);
    expect(gone).to.be.instanceOf(ImageDownloadFailed);
    expect((await fs.readdir(path.join(dir, 'master'))).length).to.equal(1);
    expect(await fs.readdir(path.join(dir, 'tmp'))).to.deep.equal([]);
  });

  // undici 7 threw from the socket's 'end' handler when such a server closed while the body was
  // under backpressure (as a download to disk is), and the conductor died (nodejs/undici#5360).
  it('downloads from servers that close the connection after the body (HTTP/1.0), and fails a short body or an error answer', async () => {
    const size = 24 * 1024 * 1024;
    const chunk = Buffer.alloc(64 * 1024, 0x61);
    const old = net.createServer((sock) => {
      sock.once('data', (req) => void (async () => {
        const head = req.toString('latin1');
        const short = head.startsWith('GET /short') || head.startsWith('GET /gone');
        sock.write(`HTTP/1.0 ${head.startsWith('GET /gone') ? '404 Not Found' : '200 OK'}\r\nContent-Length: ${size}\r\n\r\n`);
        for (let sent = 0; sent < (short ? size / 2 : size); sent += chunk.length) {
          if (!sock.write(chunk)) await new Promise((r) => sock.once('drain', r));
        }
        sock.end();
      })());
    });
    await new Promise<void>((r) => old.listen(0, '127.0.0.1', r));
    const at = `http://127.0.0.1:${(old.address() as AddressInfo).port}`;
    try {
      const want = sha('sha256', Buffer.alloc(size, 0x61));
      const files = await Promise.all(['/a', '/b', '/c'].map((p) => cache.fetch({ url: `${at}${p}` })));
      for (const f of files) expect(f.sha256).to.equal(want);
      const short = await cache.fetch({ url: `${at}/short` }).catch((e: unknown) => e);
      expect(short).to.be.instanceOf(ImageDownloadFailed);
      // An error answer whose body is cut short: refused, and the cut body thrown away quietly.
      const gone = await cache.fetch({ url: `${at}/gone` }).catch((e: unknown) => e);
      expect(gone).to.be.instanceOf(ImageDownloadFailed);
      await new Promise((r) => setTimeout(r, 200));
      expect(await fs.readdir(path.join(dir, 'tmp'))).to.deep.equal([]);
    } finally {
      await new Promise((r) => old.close(r));
    }
  });

  it('builds a derived file once per key, and nothing of a build that fails', async () => {
    let builds = 0;
    const build = async (out: string) => {
      builds++;
      await new Promise((r) => setTimeout(r, 20));
      await fs.writeFile(out, 'iso');
    };
    const key = 'ab'.repeat(32);
    const files = await Promise.all(Array.from({ length: 10 }, () => cache.derive(key, '.iso', build)));
    expect(builds).to.equal(1);
    await cache.derive(key, '.iso', build);
    expect(builds).to.equal(1);
    for (const f of files) cache.release(f);
    const failed = await cache.derive('cd'.repeat(32), '.iso', async (out) => {
      await fs.writeFile(out, 'half');
      throw new Error('xorriso failed');
    }).catch((e: unknown) => e);
    expect((failed as Error).message).to.equal('xorriso failed');
    expect(await fs.readdir(path.join(dir, 'built'))).to.deep.equal([`${key}.iso`]);
    expect(await fs.readdir(path.join(dir, 'tmp'))).to.deep.equal([]);
  });

  it('evicts the least recently used files beyond its size, never one in use or published', async () => {
    cache = new ImageCache({ dir, sizeBytes: 25, ttlMs: 3_600_000, log: pino({ level: 'silent' }) });
    const make = (name: string) => cache.derive(name.repeat(32).slice(0, 32), '.iso', (out) => fs.writeFile(out, Buffer.alloc(10)));
    const a = await make('a');
    cache.release(a);
    const b = await make('b');
    cache.release(b);
    await fs.link(b.path, path.join(dir, 'published'));
    const c = await make('c'); // held
    const d = await make('d');
    cache.release(d);
    await cache.cleanUp();
    const left = (await fs.readdir(path.join(dir, 'built'))).map((f) => f[0]).sort();
    // 40 bytes for 25: a (oldest) and d go; b is published and c in use, so the cache stays over its size.
    expect(left).to.deep.equal(['b', 'c']);
    cache.release(c);
  });
});
