/**
 * Where a deploy's config drive is built and kept (Ironic's do_node_deploy, _store_configdrive
 * and get_configdrive_image, conductor side): the JSON form the API took (1.56) is built when
 * the deploy starts, never by the API, to check it and measure it. One whose image is within
 * `[deploy] configdrive_max_inline_size` stays in instance_info as the user gave it (JSON, which
 * a custom deploy step such as OpenShift's install_coreos reads), and its image, kept by the
 * conductor, goes to where it is consumed (built again there when this conductor has not kept
 * it: another conductor carries the deploy on, or this one restarted); a bigger one (or every
 * one, with `configdrive_use_object_store`) is published in the conductor's HTTP root and
 * instance_info keeps only its URL, as Ironic keeps a Swift temporary URL. A URL or a built
 * image the user gave goes on as it is.
 */
import { createHash } from 'node:crypto';
import { InvalidParameterValue } from '../common/errors.js';
import { CONFIGDRIVE_FILE, buildConfigdrive, decodeConfigdrive, isConfigdriveContent, type ConfigdriveContent } from '../drivers/image/configdrive.js';
import type { Semaphore } from '../drivers/redfish/semaphore.js';
import type { IsoToolPaths } from '../drivers/image/iso-tools.js';
import type { ActionContext } from './actions/types.js';
import { deployOf } from './steps.js';

const URL = /^(https?|nfs|cifs):\/\//i;

/** The part of the conductor's HTTP root a config drive needs. */
export interface ConfigdrivePublisher {
  /** Publishes a node's file, replacing the one it had; returns its URL (under `baseUrl` when given). */
  publish(nodeUuid: string, name: string, source: { data: Buffer | string }, opts?: { baseUrl?: string }): Promise<string>;
  /** Withdraws a node's file; a missing one is no error. */
  remove(nodeUuid: string, name?: string): Promise<void>;
}

/** Room for a thousand config drives at the default configdrive_max_inline_size (64 KiB): a group deploy's. */
const KEPT_BYTES = 64 * 1024 * 1024;

/**
 * The images of the JSON config drives this conductor built when deploys started and kept
 * inline, one per node, until the deploy's consumer (the agent's write_image, the ramdisk's
 * virtual USB stick) takes it: building it again there would cost another xorriso run (0.1 to
 * 0.3 s) for the same files. An image is handed out only for the JSON, uuid and name it was
 * built from, so it holds the files a build now would. Held in memory, oldest dropped first
 * past `maxBytes`: each is at most configdrive_max_inline_size, and a dropped one is built again.
 */
export class KeptConfigdrives {
  private readonly byNode = new Map<string, { key: string; encoded: string }>();
  private bytes = 0;

  constructor(private readonly maxBytes = KEPT_BYTES) {}

  static key(node: { uuid: string; name: string | null }, content: ConfigdriveContent): string {
    return createHash('sha256').update(JSON.stringify([node.uuid, node.name, content])).digest('hex');
  }

  keep(nodeUuid: string, key: string, encoded: string): void {
    this.drop(nodeUuid);
    this.byNode.set(nodeUuid, { key, encoded });
    this.bytes += encoded.length;
    for (const [uuid, kept] of this.byNode) {
      if (this.bytes <= this.maxBytes) break;
      this.byNode.delete(uuid);
      this.bytes -= kept.encoded.length;
    }
  }

  /** The node's image if it was built from `key`'s input; it is no longer kept either way. */
  take(nodeUuid: string, key: string): string | undefined {
    const kept = this.byNode.get(nodeUuid);
    this.drop(nodeUuid);
    return kept?.key === key ? kept.encoded : undefined;
  }

  drop(nodeUuid: string): void {
    const kept = this.byNode.get(nodeUuid);
    if (!kept) return;
    this.byNode.delete(nodeUuid);
    this.bytes -= kept.encoded.length;
  }
}

/** What the conductor gives a deploy for its config drive. */
export interface ConfigdriveServices {
  /** `[deploy] configdrive_use_object_store`. */
  useObjectStore: boolean;
  /** `[deploy] configdrive_max_inline_size`, in bytes of gzip + base64. */
  maxInlineSize: number;
  /** The conductor's HTTP root; null where it has none. */
  httpRoot: ConfigdrivePublisher | null;
  /** The root's URL as agents reach it (`[deploy] http_url`); the root's own (BMCs') when absent. */
  agentBaseUrl?: string;
  /** Where xorriso and the temporary directory are (`[DEFAULT]` options). */
  tools?: IsoToolPaths;
  /** Builds at once (each a xorriso process): a group deploy of a thousand nodes queues here. */
  builds?: Semaphore;
  /** The images built at the start of deploys, for their consumers. */
  kept?: KeptConfigdrives;
}

/**
 * Checks and keeps the config drive of the node being deployed, before its deploy steps run:
 * a JSON one that cannot be built fails the deploy before the node is touched. Only one that
 * must be published is replaced by its URL: for a deploy that boots the instance from media
 * (ramdisk), the raw image the BMC attaches; for the agent, the gzip + base64 it takes from a
 * URL. On failure the row keeps no config drive and the root no file (as Ironic, which
 * persisted none).
 * @throws ImageCreationFailed | ImagePublishFailed | InvalidParameterValue (too big, no HTTP root)
 */
export async function storeConfigdrive(ctx: ActionContext, services: ConfigdriveServices): Promise<void> {
  const node = ctx.node;
  // What an earlier deploy kept is not for this one.
  services.kept?.drop(node.uuid);
  const given = node.instanceInfo.configdrive;
  const json = isConfigdriveContent(given);
  if (!json && (typeof given !== 'string' || given === '' || URL.test(given))) return;
  const root = services.httpRoot;
  try {
    const encoded = json ? await build(services, { uuid: node.uuid, name: node.name }, given) : (given as string);
    const size = Buffer.byteLength(encoded);
    // What a BMC attaches (ramdisk) is decoded now: a bad one fails before the node is touched.
    const image = deployOf(ctx).bootOption === 'ramdisk' ? decodeConfigdrive(encoded) : undefined;
    if (!services.useObjectStore && size <= services.maxInlineSize) {
      // What an earlier deploy published is not this config drive. The JSON form stays; its
      // image waits for its consumer (configdriveImage).
      await root?.remove(node.uuid, CONFIGDRIVE_FILE);
      if (json) services.kept?.keep(node.uuid, KeptConfigdrives.key(node, given), encoded);
      return;
    }
    if (!root) {
      const why = services.useObjectStore ? '[deploy] configdrive_use_object_store is set' : `it is ${size} bytes gzipped and base64-encoded, above [deploy] configdrive_max_inline_size (${services.maxInlineSize})`;
      throw new InvalidParameterValue(`The config drive of node ${node.uuid} must be published in the conductor's HTTP root (${why}), and this conductor has none ([deploy] http_root).`);
    }
    const external = node.driverInfo.external_http_url;
    const url = image
      ? await root.publish(node.uuid, CONFIGDRIVE_FILE, { data: image }, typeof external === 'string' && external ? { baseUrl: external } : {})
      : await root.publish(node.uuid, CONFIGDRIVE_FILE, { data: encoded }, services.agentBaseUrl ? { baseUrl: services.agentBaseUrl } : {});
    await ctx.task.progress({ instanceInfo: { ...ctx.node.instanceInfo, configdrive: url } });
    ctx.log.info({ node: node.uuid, bytes: size, url }, 'config drive published in the HTTP root');
  } catch (err) {
    const { configdrive: _dropped, ...rest } = ctx.node.instanceInfo;
    await ctx.task.progress({ instanceInfo: rest });
    await root?.remove(node.uuid, CONFIGDRIVE_FILE).catch((e: Error) => ctx.log.warn({ node: node.uuid, err: e.message }, 'config drive not withdrawn'));
    throw err;
  }
}

/**
 * Ironic's get_configdrive_image: the node's config drive as its consumers take it (the
 * agent's write_image, a BMC's virtual USB stick), the JSON form as gzip + base64 (the image
 * storeConfigdrive built from it, else built now); a URL or a built image as it is; undefined
 * when it has none.
 * @throws ImageCreationFailed
 */
export async function configdriveImage(ctx: Pick<ActionContext, 'node'>, services: ConfigdriveServices | undefined): Promise<string | undefined> {
  const given = ctx.node.instanceInfo.configdrive;
  if (isConfigdriveContent(given)) {
    const node = { uuid: ctx.node.uuid, name: ctx.node.name };
    return services?.kept?.take(node.uuid, KeptConfigdrives.key(node, given)) ?? build(services ?? {}, node, given);
  }
  return typeof given === 'string' && given !== '' ? given : undefined;
}

async function build(services: Pick<ConfigdriveServices, 'builds' | 'tools'>, node: { uuid: string; name: string | null }, content: ConfigdriveContent): Promise<string> {
  const release = await services.builds?.acquire();
  try {
    return await buildConfigdrive(node, content, services.tools);
  } finally {
    release?.();
  }
}

/** Withdraws what storeConfigdrive published or kept for the node (its tear-down). */
export async function withdrawConfigdrive(ctx: ActionContext, services: ConfigdriveServices | undefined): Promise<void> {
  services?.kept?.drop(ctx.node.uuid);
  await services?.httpRoot?.remove(ctx.node.uuid, CONFIGDRIVE_FILE);
}
