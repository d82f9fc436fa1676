/**
 * How network boot gets the images a node boots (the agent's kernel and ramdisk, a ramdisk
 * deploy's kernel, ramdisk or ISO) into the node's directory of the TFTP or HTTP root: Ironic's
 * cache_ramdisk_kernel. Each is downloaded once into the conductor's image cache and linked
 * from there (a link keeps the cache from evicting it while a node boots it); each appears
 * whole or not at all.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { BootFilesFailed } from '../../common/errors.js';
import type { ImageCache, ImageRef } from '../image/image-cache.js';

export interface BootImageSource {
  /** Puts the image at `dest`. @throws ImageDownloadFailed | ImageChecksumError | InvalidParameterValue | BootFilesFailed */
  place(ref: ImageRef, dest: string): Promise<void>;
}

/** Through the conductor's image cache (`[deploy] iso_master_path`). */
export class CachedImageSource implements BootImageSource {
  constructor(private readonly cache: ImageCache) {}

  async place(ref: ImageRef, dest: string): Promise<void> {
    const file = await this.cache.fetch(ref);
    const tmp = path.join(path.dirname(dest), `.${path.basename(dest)}.${randomBytes(6).toString('hex')}.tmp`);
    try {
      try {
        await fs.link(file.path, tmp);
      } catch (err) {
        // Another file system than the cache's: a copy.
        if (!['EXDEV', 'EPERM', 'EMLINK'].includes((err as NodeJS.ErrnoException).code ?? '')) throw err;
        await fs.copyFile(file.path, tmp);
        await fs.chmod(tmp, 0o644);
      }
      await fs.rename(tmp, dest);
    } catch (err) {
      await fs.rm(tmp, { force: true });
      throw new BootFilesFailed(`Failed to place image ${ref.url} at ${dest}: ${(err as Error).message}`);
    } finally {
      this.cache.release(file);
    }
  }
}
