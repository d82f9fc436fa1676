/**
 * A conductor's boot media, built from its `[deploy]` options: the HTTP root, the image cache,
 * the agent ISOs made of them, and the embedded HTTP server when `http_server` is on. The
 * process that runs a conductor starts them before its drivers, and closes them after.
 */
import type { Logger } from 'pino';
import type { Config } from '../common/config.js';
import { HttpRoot } from '../drivers/http-root.js';
import { BootImages } from '../drivers/image/boot-images.js';
import { ImageCache } from '../drivers/image/image-cache.js';
import { isoToolPathsFromConfig } from '../drivers/image/iso-tools.js';
import { startHttpRootServer, type HttpRootServer } from './http-root-server.js';

export interface BootMedia {
  httpRoot: HttpRoot;
  cache: ImageCache;
  bootImages: BootImages;
  /** The embedded server, when this conductor serves its root itself. */
  server: HttpRootServer | null;
  close(): Promise<void>;
}

/** @throws the embedded server's listen error (its port taken) */
export async function startBootMedia(config: Readonly<Config>, log: Logger): Promise<BootMedia> {
  const d = config.deploy;
  const server = d.http_server ? await startHttpRootServer({ root: d.http_root, host: d.http_server_host, port: d.http_server_port, log }) : null;
  // The URL handed out: what BMCs reach (external_http_url), else http_url, else the embedded server's own.
  const baseUrl = d.external_http_url || d.http_url || server!.url;
  const httpRoot = new HttpRoot({ root: d.http_root, baseUrl });
  const cache = new ImageCache({
    dir: d.iso_master_path, sizeBytes: d.iso_cache_size * 1024 * 1024, ttlMs: d.iso_cache_ttl * 60_000, log: log.child({ component: 'image-cache' }),
  });
  await cache.start();
  const bootImages = new BootImages({ cache, httpRoot, tools: isoToolPathsFromConfig(config), log: log.child({ component: 'boot-images' }) });
  log.info({ root: httpRoot.root, url: baseUrl, cache: d.iso_master_path }, 'HTTP root ready');
  return {
    httpRoot, cache, bootImages, server,
    close: async () => {
      await server?.close();
      await cache.close();
    },
  };
}
