/**
 * Where a deploy's config drive is built and kept (Ironic's do_node_deploy, _store_configdrive
 * and get_configdrive_image, conductor side): the JSON form the API took (1.56) is built when
 * the deploy starts, never by the API, to check it and measure it. One whose image is within
 * `[deploy] configdrive_max_inline_size` stays in instance_info as the user gave it (JSON, which
 * a custom deploy step such as OpenShift's install_coreos reads) and is built again where it is
 * consumed; a bigger one (or every one, with `configdrive_use_object_store`) is published in
 * the conductor's HTTP root and instance_info keeps only its URL, as Ironic keeps a Swift
 * temporary URL. A URL or a built image the user gave goes on as it is.
 */
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
      // What an earlier deploy published is not this config drive. The JSON form stays: it is
      // built again where it is consumed (configdriveImage).
      await root?.remove(node.uuid, CONFIGDRIVE_FILE);
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
 * agent's write_image, a BMC's virtual USB stick), the JSON form built now into gzip + base64;
 * a URL or a built image as it is; undefined when it has none.
 * @throws ImageCreationFailed
 */
export async function configdriveImage(ctx: Pick<ActionContext, 'node'>, services: ConfigdriveServices | undefined): Promise<string | undefined> {
  const given = ctx.node.instanceInfo.configdrive;
  if (isConfigdriveContent(given)) return build(services ?? {}, { uuid: ctx.node.uuid, name: ctx.node.name }, given);
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

/** Withdraws what storeConfigdrive published for the node (its tear-down). */
export async function withdrawConfigdrive(ctx: ActionContext, services: ConfigdriveServices | undefined): Promise<void> {
  await services?.httpRoot?.remove(ctx.node.uuid, CONFIGDRIVE_FILE);
}
