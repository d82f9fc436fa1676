/**
 * What a virtual-media boot interface publishes for a node's BMC (Ironic's
 * image_utils.prepare_deploy_iso and prepare_remote_image): the agent ISO built from a deploy
 * kernel and ramdisk, or a given ISO served from the conductor. Built once per image, not per
 * node: nodes with the same kernel, ramdisk, command line and boot mode share one ISO of the
 * cache, published for each as a hard link under its own name, so that withdrawing one
 * node's file leaves the others'.
 */
import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import type { HttpRoot } from '../http-root.js';
import { Semaphore } from '../redfish/semaphore.js';
import type { CachedFile, ImageCache, ImageRef } from './image-cache.js';
import { buildAgentIso, type BuildAgentIsoOptions } from './iso-builder.js';
import type { IsoToolPaths } from './iso-tools.js';
import { CONFIGDRIVE_FILE } from './configdrive.js';

/** The ISO file name of a node in the HTTP root (Ironic's `boot-<uuid>.iso`). */
export const BOOT_ISO = 'boot.iso';

/** Bumped when what the builder writes changes, so that ISOs built before are not reused. */
const BUILD_FORMAT = 2;

/** What the agent ISO is made of: a kernel and ramdisk, or a given ISO to re-master. */
export type AgentIsoInputs = { kernel: ImageRef; ramdisk: ImageRef; baseIso?: undefined } | { baseIso: ImageRef; kernel?: undefined; ramdisk?: undefined };

export type AgentIsoRequest = AgentIsoInputs & {
  /** The whole kernel command line. */
  cmdline: string;
  /** Ironic's publisher_id: the ISO's publisher field (the command line's ir_pub_id). */
  publisherId: string;
  /** The node's boot mode; none: one ISO that boots both ways. */
  bootMode?: 'uefi' | 'bios';
  /** driver_info external_http_url: the URL base the BMC gets instead of the conductor's. */
  baseUrl?: string;
};

export interface BootImagesOptions {
  cache: ImageCache;
  httpRoot: HttpRoot;
  log: Logger;
  /** The ISO builder's tools (`[DEFAULT] isolinux_bin`, …). */
  tools?: IsoToolPaths;
  /** The ISO builder; the real one by default. */
  build?: (req: BuildAgentIsoOptions) => Promise<void>;
  /** ISO builds run at once (each is a xorriso process); more wait. */
  concurrentBuilds?: number;
}

export class BootImages {
  private readonly builds: Semaphore;
  private readonly build: (req: BuildAgentIsoOptions) => Promise<void>;

  constructor(private readonly opts: BootImagesOptions) {
    this.builds = new Semaphore(opts.concurrentBuilds ?? 2);
    this.build = opts.build ?? buildAgentIso;
  }

  /** The key of the ISO built from these inputs (digests of the files, the rest as given): the same for every node that boots the same. */
  static isoKey(...inputs: Array<string | undefined>): string {
    return createHash('sha256').update(JSON.stringify([BUILD_FORMAT, ...inputs])).digest('hex');
  }

  /**
   * The agent ISO of a node, built (or found in the cache) and published; its URL.
   * @throws ImageDownloadFailed | ImageChecksumError | ImagePublishFailed | the builder's error
   */
  async publishAgentIso(nodeUuid: string, req: AgentIsoRequest): Promise<string> {
    const held: CachedFile[] = [];
    try {
      // The downloads run at once; each one that ends is held, so that all are released.
      const refs = req.baseIso ? [req.baseIso] : [req.kernel, req.ramdisk];
      const fetched = await Promise.allSettled(refs.map((r) => this.opts.cache.fetch(r)));
      for (const r of fetched) if (r.status === 'fulfilled') held.push(r.value);
      for (const r of fetched) if (r.status === 'rejected') throw r.reason;
      const inputs = held.map((f) => f.sha256);
      const key = BootImages.isoKey(req.baseIso ? 'remaster' : 'build', ...inputs, req.cmdline, req.publisherId, req.bootMode ?? 'bios+uefi');
      const sources = req.baseIso ? { baseIso: held[0]!.path } : { kernel: held[0]!.path, ramdisk: held[1]!.path };
      const iso = await this.opts.cache.derive(key, '.iso', async (output) => {
        const release = await this.builds.acquire();
        const started = Date.now();
        try {
          await this.build({
            ...sources, cmdline: req.cmdline, output, publisherId: req.publisherId,
            ...(req.bootMode ? { bootMode: req.bootMode } : {}), ...(this.opts.tools ? { tools: this.opts.tools } : {}),
          });
        } finally {
          release();
        }
        this.opts.log.info({ node: nodeUuid, iso: key.slice(0, 12), remastered: Boolean(req.baseIso), bootMode: req.bootMode ?? 'bios+uefi', ms: Date.now() - started }, 'agent ISO built');
      });
      held.push(iso);
      return await this.opts.httpRoot.publish(nodeUuid, BOOT_ISO, { path: iso.path }, req.baseUrl ? { baseUrl: req.baseUrl } : {});
    } finally {
      for (const f of held) this.opts.cache.release(f);
    }
  }

  /**
   * A given ISO, downloaded once into the cache and published unchanged (Ironic's
   * ramdisk_image_download_source = local); its URL.
   * @throws ImageDownloadFailed | ImageChecksumError | ImagePublishFailed
   */
  async publishIso(nodeUuid: string, iso: ImageRef, baseUrl?: string): Promise<string> {
    const file = await this.opts.cache.fetch(iso);
    try {
      return await this.opts.httpRoot.publish(nodeUuid, BOOT_ISO, { path: file.path }, baseUrl ? { baseUrl } : {});
    } finally {
      this.opts.cache.release(file);
    }
  }

  /**
   * A node's config drive image (raw, as the BMC attaches it) published; its URL. It stays
   * until the instance is torn down (the conductor withdraws it): a rebuild boots it again.
   * @throws ImagePublishFailed
   */
  publishConfigdrive(nodeUuid: string, image: Buffer, baseUrl?: string): Promise<string> {
    return this.opts.httpRoot.publish(nodeUuid, CONFIGDRIVE_FILE, { data: image }, baseUrl ? { baseUrl } : {});
  }

  /** Withdraws the node's ISO (Ironic's cleanup_iso_image); a failure is only logged. */
  async withdraw(nodeUuid: string): Promise<void> {
    await this.opts.httpRoot.remove(nodeUuid, BOOT_ISO).catch((err: Error) => {
      this.opts.log.warn({ node: nodeUuid, err: err.message }, 'could not remove the node\'s ISO from the HTTP root');
    });
  }
}
