/**
 * The conductor's image cache (Ironic's master image cache, `[deploy] iso_master_path`,
 * `iso_cache_size`, `iso_cache_ttl`): the deploy kernels and ramdisks it downloads, and what it
 * builds from them (the agent ISOs), each once, whatever the number of nodes that want it.
 *
 * - Downloads (`fetch`) are keyed by URL and checksum: a second request for the same image, or
 *   a thousand at once, reads the cached file. As Ironic's cache does, an image given without a
 *   checksum is checked for staleness (HEAD: a Last-Modified after the download fetches it
 *   again; a file:// source modified since); one given with a checksum is pinned by it.
 * - Builds (`derive`) are keyed by the caller (a digest of everything that goes into one).
 * - Concurrent requests for one key share one download or build.
 * - A file is written under a temporary name and renamed into place when whole: a failed
 *   download, a checksum mismatch or a full disk leaves nothing behind.
 * - Eviction (Ironic's clean_up): files published in an HTTP root (hard links, nlink > 1) or in
 *   use are never removed; others unused for `ttlMs` go, then the least recently used until
 *   the cache is within `sizeBytes`.
 */
import { createHash, randomBytes, type Hash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import type { Logger } from 'pino';
import { ImageChecksumError, ImageDownloadFailed, InvalidParameterValue } from '../../common/errors.js';
import { HttpGetter, type HttpGetResponse } from './http-get.js';

/** An image to download: its URL (http, https, file) and, when known, the checksum it must match. */
export interface ImageRef {
  url: string;
  /** `<algorithm>:<hex>` or bare hex (md5, sha256 or sha512 by its length). */
  checksum?: string;
}

/** A file of the cache. Valid until `release` is called: eviction leaves it alone meanwhile. */
export interface CachedFile {
  path: string;
  /** sha256 of its content, whatever checksum it was asked with. */
  sha256: string;
}

export interface ImageCacheOptions {
  dir: string;
  sizeBytes: number;
  ttlMs: number;
  log: Logger;
  /** How long an image server may stay silent, before the headers or within the body. */
  downloadTimeoutMs?: number;
}

const ALGORITHMS: Readonly<Record<number, string>> = { 32: 'md5', 64: 'sha256', 128: 'sha512' };
const URL_SCHEME = /^(https?|file):\/\//i;

/** A checksum as `algorithm` and lower-case hex. @throws InvalidParameterValue */
export function parseChecksum(checksum: string): { algorithm: string; hex: string } {
  const m = /^(?:([a-z0-9]+):)?([0-9a-f]+)$/i.exec(checksum.trim());
  const algorithm = m ? (m[1]?.toLowerCase() ?? ALGORITHMS[m[2]!.length]) : undefined;
  if (!m || !algorithm || !['md5', 'sha256', 'sha512'].includes(algorithm)) {
    throw new InvalidParameterValue(`The image checksum ${JSON.stringify(checksum)} is not <algorithm>:<hex> or a bare md5, sha256 or sha512 hex digest.`);
  }
  return { algorithm, hex: m[2]!.toLowerCase() };
}

/** Checks that an image reference can be fetched by the cache. @throws InvalidParameterValue */
export function validateImageRef(ref: ImageRef, what: string): void {
  if (!URL_SCHEME.test(ref.url)) throw new InvalidParameterValue(`${what} must be an http://, https:// or file:// URL, got ${JSON.stringify(ref.url)}.`);
  if (ref.checksum) parseChecksum(ref.checksum);
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** Hashes what flows through it, with sha256 and the algorithm asked for. */
function hashing(hashes: Hash[]): Transform {
  return new Transform({
    transform(chunk: Buffer, _enc, done) {
      for (const h of hashes) h.update(chunk);
      done(null, chunk);
    },
  });
}

export class ImageCache {
  private readonly masterDir: string;
  private readonly derivedDir: string;
  private readonly tmpDir: string;
  /** One download or build per key at a time; later callers wait for it. */
  private readonly inFlight = new Map<string, Promise<CachedFile>>();
  /** The sha256 of files already read, by path and ctime. */
  private readonly digests = new Map<string, { ctimeMs: number; sha256: string }>();
  /** When each file was last handed out, by this process (eviction's age, beside the file's times). */
  private readonly lastUsed = new Map<string, number>();
  /** Files callers hold (between fetch/derive and release): eviction skips them. */
  private readonly held = new Map<string, number>();
  private cleaning: Promise<void> | null = null;
  private readonly timeoutMs: number;
  private readonly http = new HttpGetter();

  constructor(private readonly opts: ImageCacheOptions) {
    const dir = path.resolve(opts.dir);
    this.masterDir = path.join(dir, 'master');
    this.derivedDir = path.join(dir, 'built');
    this.tmpDir = path.join(dir, 'tmp');
    this.timeoutMs = opts.downloadTimeoutMs ?? 600_000;
  }

  /** Closes the connections to image servers. */
  close(): Promise<void> {
    this.http.close();
    return Promise.resolve();
  }

  /** Removes what a previous run left half-written. */
  async start(): Promise<void> {
    await fs.rm(this.tmpDir, { recursive: true, force: true });
  }

  /**
   * The image, downloaded once. Call `release(file)` when done with it.
   * @throws ImageDownloadFailed (unreachable, an HTTP error, the cache's disk full) | ImageChecksumError | InvalidParameterValue
   */
  fetch(ref: ImageRef): Promise<CachedFile> {
    validateImageRef(ref, 'The image');
    const key = sha256(`${ref.url}\n${ref.checksum ?? ''}`);
    return this.once(`m:${key}`, () => this.fetchMaster(ref, path.join(this.masterDir, key)));
  }

  /**
   * A file built from others (`build` writes it at the path it is given), once per `key`.
   * Call `release(file)` when done with it.
   * @throws whatever `build` throws; nothing is left of a failed build
   */
  derive(key: string, suffix: string, build: (output: string) => Promise<void>): Promise<CachedFile> {
    if (!/^[0-9a-f]{16,128}$/.test(key) || !/^(\.[a-z0-9]+)?$/.test(suffix)) throw new InvalidParameterValue(`Not a cache key: ${key}${suffix}`);
    const dest = path.join(this.derivedDir, `${key}${suffix}`);
    return this.once(`d:${key}${suffix}`, async () => {
      const cached = await this.holdIfPresent(dest);
      if (cached) return cached;
      await this.produce(dest, async (tmp) => {
        await build(tmp);
        await fs.access(tmp);
      });
      void this.cleanUp();
      return this.hold(dest);
    });
  }

  /** Lets eviction take the file again. */
  release(file: CachedFile): void {
    const n = (this.held.get(file.path) ?? 1) - 1;
    if (n <= 0) this.held.delete(file.path);
    else this.held.set(file.path, n);
  }

  private async once(key: string, make: () => Promise<CachedFile>): Promise<CachedFile> {
    let p = this.inFlight.get(key);
    if (!p) {
      p = make().finally(() => this.inFlight.delete(key));
      this.inFlight.set(key, p);
      return p;
    }
    // A waiter holds the file too.
    const file = await p;
    this.held.set(file.path, (this.held.get(file.path) ?? 0) + 1);
    return file;
  }

  private async hold(file: string): Promise<CachedFile> {
    this.held.set(file, (this.held.get(file) ?? 0) + 1);
    return { path: file, sha256: await this.digest(file) };
  }

  /**
   * Holds a cached file and marks it used now (its age for the TTL), or null when it is not
   * there. Held first: an eviction running meanwhile passes it by. The file's own times are
   * left alone: a download's mtime is when it was fetched, which staleness is judged by.
   */
  private async holdIfPresent(file: string): Promise<CachedFile | null> {
    this.held.set(file, (this.held.get(file) ?? 0) + 1);
    try {
      const found = { path: file, sha256: await this.digest(file) };
      this.lastUsed.set(file, Date.now());
      return found;
    } catch {
      this.release({ path: file, sha256: '' });
      return null;
    }
  }

  private async digest(file: string): Promise<string> {
    const stat = await fs.stat(file);
    const known = this.digests.get(file);
    if (known && known.ctimeMs === stat.ctimeMs) return known.sha256;
    const h = createHash('sha256');
    for await (const chunk of createReadStream(file)) h.update(chunk as Buffer);
    const value = h.digest('hex');
    this.digests.set(file, { ctimeMs: (await fs.stat(file)).ctimeMs, sha256: value });
    return value;
  }

  private async fetchMaster(ref: ImageRef, master: string): Promise<CachedFile> {
    const stat = await fs.stat(master).catch(() => null);
    if (stat && (ref.checksum || !(await this.stale(ref.url, stat.mtimeMs)))) {
      const cached = await this.holdIfPresent(master);
      if (cached) return cached;
    }
    this.opts.log.info({ image: ref.url }, stat ? 'image changed at its source; downloading it again' : 'image not cached; downloading it');
    const started = Date.now();
    let sha = '';
    await this.produce(master, async (tmp) => {
      sha = await this.download(ref, tmp);
    });
    this.digests.set(master, { ctimeMs: (await fs.stat(master)).ctimeMs, sha256: sha });
    this.opts.log.info({ image: ref.url, ms: Date.now() - started }, 'image downloaded into the cache');
    void this.cleanUp();
    return this.hold(master);
  }

  /**
   * Ironic's _delete_master_path_if_stale: an http(s) image whose Last-Modified is after the
   * cached copy, or a file:// one modified since. @throws ImageDownloadFailed (the source is gone)
   */
  private async stale(url: string, cachedAtMs: number): Promise<boolean> {
    if (/^file:/i.test(url)) {
      const s = await fs.stat(fileURLToPath(url)).catch((err: Error) => {
        throw new ImageDownloadFailed(url, err.message);
      });
      return s.mtimeMs > cachedAtMs;
    }
    const res = await this.get(url, 'HEAD');
    res.body.resume();
    const modified = Date.parse(String(res.headers['last-modified'] ?? ''));
    return Number.isFinite(modified) && modified > cachedAtMs;
  }

  /** @throws ImageDownloadFailed for a refused connection or a status other than 2xx */
  private async get(url: string, method: 'GET' | 'HEAD'): Promise<HttpGetResponse> {
    let res: HttpGetResponse;
    try {
      // Image servers redirect (mirrors, object stores), as the requests library follows for Ironic.
      res = await this.http.request(url, method, { idleTimeoutMs: this.timeoutMs, maxRedirections: 5 });
    } catch (err) {
      throw new ImageDownloadFailed(url, (err as Error).message);
    }
    if (res.statusCode < 200 || res.statusCode >= 300) {
      res.body.resume();
      throw new ImageDownloadFailed(url, `Got HTTP code ${res.statusCode} instead of 200 in response to ${method} request.`);
    }
    return res;
  }

  /** Writes `dest` through a temporary file renamed into place; removes the temporary on failure. */
  private async produce(dest: string, write: (tmp: string) => Promise<void>): Promise<void> {
    await fs.mkdir(path.dirname(dest), { recursive: true });
    await fs.mkdir(this.tmpDir, { recursive: true });
    const tmp = path.join(this.tmpDir, `${path.basename(dest)}-${randomBytes(6).toString('hex')}`);
    try {
      await write(tmp);
      await fs.rename(tmp, dest);
    } finally {
      await fs.rm(tmp, { force: true, recursive: true });
    }
  }

  /** Downloads into `tmp`; the sha256 of what it wrote. @throws ImageDownloadFailed | ImageChecksumError */
  private async download(ref: ImageRef, tmp: string): Promise<string> {
    const want = ref.checksum ? parseChecksum(ref.checksum) : null;
    const hash = want ? createHash(want.algorithm) : null;
    const content = createHash('sha256');
    const source = /^file:/i.test(ref.url)
      ? createReadStream(fileURLToPath(ref.url))
      : (await this.get(ref.url, 'GET')).body;
    try {
      await pipeline(source, hashing(hash ? [content, hash] : [content]), createWriteStream(tmp, { flags: 'wx', mode: 0o644 }));
    } catch (err) {
      const e = err as NodeJS.ErrnoException;
      const reason = e.code === 'ENOSPC' ? `the image cache ${path.dirname(this.masterDir)} is full (no space left on its device)` : e.message;
      throw new ImageDownloadFailed(ref.url, reason);
    }
    if (want && hash) {
      const got = hash.digest('hex');
      if (got !== want.hex) {
        throw new ImageChecksumError(`The supplied image checksum is invalid or does not match: image ${ref.url} has ${want.algorithm} ${got}, expected ${want.hex}.`);
      }
    }
    return content.digest('hex');
  }

  /** Ironic's clean_up: expired files first, then the least recently used beyond the size. */
  cleanUp(): Promise<void> {
    this.cleaning ??= this.evict()
      .catch((err: Error) => this.opts.log.warn({ err: err.message }, 'image cache clean-up failed'))
      .finally(() => { this.cleaning = null; });
    return this.cleaning;
  }

  private async evict(): Promise<void> {
    const files: Array<{ file: string; size: number; usedMs: number; removable: boolean }> = [];
    for (const dir of [this.masterDir, this.derivedDir]) {
      for (const name of await fs.readdir(dir).catch(() => [] as string[])) {
        const file = path.join(dir, name);
        const s = await fs.stat(file).catch(() => null);
        if (!s?.isFile()) continue;
        files.push({ file, size: s.size, usedMs: Math.max(s.mtimeMs, s.ctimeMs, this.lastUsed.get(file) ?? 0), removable: s.nlink === 1 && !this.held.has(file) });
      }
    }
    let total = files.reduce((n, f) => n + f.size, 0);
    const threshold = Date.now() - this.opts.ttlMs;
    const candidates = files.filter((f) => f.removable).sort((a, b) => a.usedMs - b.usedMs);
    let removed = 0;
    for (const f of candidates) {
      if (f.usedMs >= threshold && total <= this.opts.sizeBytes) break;
      await fs.rm(f.file, { force: true });
      this.digests.delete(f.file);
      this.lastUsed.delete(f.file);
      total -= f.size;
      removed++;
    }
    if (removed) this.opts.log.info({ removed, bytes: total }, 'image cache cleaned up');
    if (total > this.opts.sizeBytes) this.opts.log.warn({ bytes: total, limit: this.opts.sizeBytes }, 'image cache still over its size: its files are in use');
  }
}
