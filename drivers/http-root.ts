/**
 * The conductor's HTTP root (Ironic's `[deploy] http_root` and `http_url`): the files a node's
 * BMC fetches (the agent ISO, a config drive), published per node under Ironic's names
 * (image_utils._get_name: `<http_root>/redfish/boot-<node uuid>.iso`, `configdrive-<node uuid>`)
 * and withdrawn when the node's boot is torn down. Each conductor has its own root; the URL
 * handed out is that of the conductor that wrote the file. This module knows no database: the
 * conductor's sweep (conductor/periodics/http-root-sweep.ts) says which nodes still boot.
 *
 * Every file appears whole or not at all: it is written (or hard-linked) under a dot-name the
 * server does not serve, then renamed into place; a failure removes what was written.
 */
import { randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { ImagePublishFailed, InvalidParameterValue } from '../common/errors.js';

/** Where the bytes of a published file come from. */
export type PublishSource =
  /** A file of the conductor's: hard-linked when it is on http_root's file system, else copied. */
  | { path: string }
  | { data: Buffer | string }
  | { stream: Readable };

/** A file of the root that belongs to a node, as listed for the sweep. */
export interface PublishedFile {
  nodeUuid: string;
  /** The name it was published under (`boot.iso`, `configdrive`). */
  name: string;
  /** Its path under the root. */
  path: string;
  /** When it was last linked or renamed into place (ctime: a hard link shares its source's mtime). */
  changedMs: number;
}

/** A temporary file a publish left behind (a conductor that died while writing). */
export interface TemporaryFile {
  path: string;
  changedMs: number;
}

export interface HttpRootOptions {
  /** The directory served (absolute, or relative to the working directory). */
  root: string;
  /**
   * The URL BMCs fetch the root at (`external_http_url`, else `http_url`), or a function that
   * gives it once known (the embedded server's port after it listens).
   */
  baseUrl: string | (() => string);
  /** Subdirectory of the files (Ironic's image_subdir for Redfish). */
  subdir?: string;
  /** Mode of published files. */
  fileMode?: number;
}

const UUID = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';
/** `<prefix>-<uuid><suffix>` or `<uuid><suffix>`, Ironic's _get_name. */
const OBJECT_NAME = new RegExp(`^(?:([A-Za-z0-9_]+)-)?(${UUID})(\\.[A-Za-z0-9_.]+)?$`);
const NAME = /^[A-Za-z0-9_]*(\.[A-Za-z0-9_.]+)?$/;
const NODE_UUID = new RegExp(`^${UUID}$`);
const TEMP_PREFIX = '.tmp-';

/**
 * Removes a file of the root; a missing one is no error. The root holds files only: unlink
 * alone, where fs.rm first reads what the path is (and runs its directory walk's code), at
 * every withdraw of every node.
 */
async function unlinkIfPresent(p: string): Promise<void> {
  try {
    await fs.unlink(p);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
}

/** Why the file system refused, in words an operator acts on. */
function describeFsError(err: NodeJS.ErrnoException, root: string): string {
  switch (err.code) {
    case 'ENOSPC': return `the HTTP root ${root} is full (no space left on its device)`;
    case 'EDQUOT': return `the HTTP root ${root} is over its disk quota`;
    case 'EACCES': case 'EPERM': return `the HTTP root ${root} is not writable by the conductor (${err.code})`;
    case 'EROFS': return `the HTTP root ${root} is on a read-only file system`;
    default: return err.message;
  }
}

export class HttpRoot {
  /** The directory the files go in (the root's subdirectory). */
  readonly dir: string;
  readonly root: string;
  private readonly fileMode: number;
  private readonly subdir: string;

  constructor(private readonly opts: HttpRootOptions) {
    this.root = path.resolve(opts.root);
    this.subdir = opts.subdir ?? 'redfish';
    this.dir = path.join(this.root, this.subdir);
    this.fileMode = opts.fileMode ?? 0o644;
  }

  /** The base URL files are handed out under, without a trailing slash. */
  baseUrl(): string {
    const base = typeof this.opts.baseUrl === 'function' ? this.opts.baseUrl() : this.opts.baseUrl;
    return base.replace(/\/+$/, '');
  }

  /**
   * Ironic's object name of a node's file: `boot.iso` → `boot-<uuid>.iso`, `configdrive` →
   * `configdrive-<uuid>`, `` → `<uuid>`.
   * @throws InvalidParameterValue for a name that is not a plain word with an extension
   */
  objectName(nodeUuid: string, name: string): string {
    if (!NODE_UUID.test(nodeUuid)) throw new InvalidParameterValue(`Not a node UUID: ${JSON.stringify(nodeUuid)}.`);
    if (!NAME.test(name)) throw new InvalidParameterValue(`Not a name to publish a file under: ${JSON.stringify(name)}.`);
    const dot = name.indexOf('.');
    const prefix = dot < 0 ? name : name.slice(0, dot);
    const suffix = dot < 0 ? '' : name.slice(dot);
    return `${prefix ? `${prefix}-` : ''}${nodeUuid}${suffix}`;
  }

  /** The URL of a node's file, under `baseUrl` (a node's driver_info external_http_url) when given. */
  url(nodeUuid: string, name: string, baseUrl?: string): string {
    const base = baseUrl ? baseUrl.replace(/\/+$/, '') : this.baseUrl();
    return `${base}/${this.subdir}/${this.objectName(nodeUuid, name)}`;
  }

  /** The path of a node's file. */
  path(nodeUuid: string, name: string): string {
    return path.join(this.dir, this.objectName(nodeUuid, name));
  }

  /**
   * Publishes a node's file under `name`, replacing the one it had, and returns its URL.
   * Atomic: a reader sees the old file or the new one, never a part.
   * @throws ImagePublishFailed (root not writable, full, source unreadable) | InvalidParameterValue
   */
  async publish(nodeUuid: string, name: string, source: PublishSource, opts: { baseUrl?: string } = {}): Promise<string> {
    const dest = this.path(nodeUuid, name);
    const tmp = path.join(this.dir, `${TEMP_PREFIX}${path.basename(dest)}-${randomBytes(6).toString('hex')}`);
    try {
      await fs.mkdir(this.dir, { recursive: true, mode: 0o755 });
      await this.write(tmp, source);
      await fs.rename(tmp, dest);
    } catch (err) {
      await fs.rm(tmp, { force: true }).catch(() => undefined);
      const e = err as NodeJS.ErrnoException;
      throw new ImagePublishFailed(`Publishing ${name} for node ${nodeUuid} in the HTTP root failed: ${e.code ? describeFsError(e, this.root) : e.message}.`);
    }
    return this.url(nodeUuid, name, opts.baseUrl);
  }

  private async write(tmp: string, source: PublishSource): Promise<void> {
    if ('path' in source) {
      try {
        // Several nodes share one built image: a link costs no space and no copy.
        await fs.link(source.path, tmp);
        return;
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code !== 'EXDEV' && code !== 'EPERM' && code !== 'EMLINK') throw err;
      }
      await fs.copyFile(source.path, tmp);
      await fs.chmod(tmp, this.fileMode);
      return;
    }
    if ('data' in source) {
      await fs.writeFile(tmp, source.data, { mode: this.fileMode, flag: 'wx' });
      return;
    }
    await pipeline(source.stream, createWriteStream(tmp, { mode: this.fileMode, flags: 'wx' }));
  }

  /** Withdraws a node's file `name`, or all of the node's files when no name is given. Missing files are no error. */
  async remove(nodeUuid: string, name?: string): Promise<void> {
    if (name !== undefined) {
      await unlinkIfPresent(this.path(nodeUuid, name));
      return;
    }
    for (const file of await this.list()) {
      if (file.nodeUuid === nodeUuid) await unlinkIfPresent(path.join(this.dir, file.path));
    }
  }

  /** Every node file of the root (files of other names are not the conductor's and are left alone). */
  async list(): Promise<PublishedFile[]> {
    const out: PublishedFile[] = [];
    for (const entry of await this.entries()) {
      const m = OBJECT_NAME.exec(entry);
      if (!m) continue;
      const stat = await fs.lstat(path.join(this.dir, entry)).catch(() => null);
      if (!stat?.isFile()) continue;
      out.push({ nodeUuid: m[2]!, name: `${m[1] ?? ''}${m[3] ?? ''}`, path: entry, changedMs: stat.ctimeMs });
    }
    return out;
  }

  /** The temporary files of publishes in progress, or of ones a dead conductor left. */
  async temporaries(): Promise<TemporaryFile[]> {
    const out: TemporaryFile[] = [];
    for (const entry of await this.entries()) {
      if (!entry.startsWith(TEMP_PREFIX)) continue;
      const stat = await fs.lstat(path.join(this.dir, entry)).catch(() => null);
      if (stat) out.push({ path: entry, changedMs: stat.ctimeMs });
    }
    return out;
  }

  /**
   * Removes a file `list` or `temporaries` returned, unless it changed since (published again):
   * whether it was removed.
   */
  async removeFile(file: { path: string; changedMs: number }): Promise<boolean> {
    const p = path.join(this.dir, path.basename(file.path));
    const stat = await fs.lstat(p).catch(() => null);
    if (!stat || stat.ctimeMs !== file.changedMs) return false;
    await unlinkIfPresent(p);
    return true;
  }

  private async entries(): Promise<string[]> {
    try {
      return await fs.readdir(this.dir);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw err;
    }
  }
}
