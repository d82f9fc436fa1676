/**
 * How network boot gets the images a node boots (the agent's kernel and ramdisk, a ramdisk
 * deploy's kernel, ramdisk or ISO) into the node's directory of the TFTP or HTTP root: Ironic's
 * cache_ramdisk_kernel. Each appears whole or not at all.
 */
import { createWriteStream } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import { request, type Dispatcher } from 'undici';
import { BootFilesFailed } from '../../common/errors.js';

/** An image to place: its URL (http, https, file) and, when known, its checksum. */
export interface BootImageRef {
  url: string;
  checksum?: string;
}

export interface BootImageSource {
  /** Puts the image at `dest`. @throws BootFilesFailed (unreachable, an HTTP error, a disk that refuses) */
  place(ref: BootImageRef, dest: string, signal?: AbortSignal): Promise<void>;
}

/** Downloads each image for each node (the conductor's image cache, where it has one, shares them). */
export class DownloadImageSource implements BootImageSource {
  constructor(private readonly dispatcher?: Dispatcher) {}

  async place(ref: BootImageRef, dest: string, signal?: AbortSignal): Promise<void> {
    const tmp = path.join(path.dirname(dest), `.${path.basename(dest)}.${randomBytes(6).toString('hex')}.tmp`);
    try {
      if (/^file:\/\//i.test(ref.url)) {
        await fs.copyFile(fileURLToPath(ref.url), tmp);
      } else {
        const res = await request(ref.url, { signal, ...(this.dispatcher ? { dispatcher: this.dispatcher } : {}) });
        if (res.statusCode !== 200) {
          await res.body.dump();
          throw new Error(`HTTP ${res.statusCode}`);
        }
        await pipeline(res.body, createWriteStream(tmp, { mode: 0o644, flags: 'wx' }));
      }
      await fs.chmod(tmp, 0o644);
      await fs.rename(tmp, dest);
    } catch (err) {
      await fs.rm(tmp, { force: true });
      throw new BootFilesFailed(`Failed to download image ${ref.url} to ${dest}: ${(err as Error).message}`);
    }
  }
}
