/**
 * Config drives as Ironic builds them from the JSON form of the API (1.56): its
 * configdrive_utils.build_configdrive fills in the node's uuid and name, and openstacksdk's
 * baremetal/configdrive.py `build` writes `openstack/<version>/` for versions 2012-08-10 and
 * latest, packs them into an ISO 9660 image labelled `config-2` (the label cloud-init and
 * Ignition look for) with the distribution's xorriso, then gzips and base64-encodes it, the
 * form instance_info and the agent take. Knows nothing of the database.
 */
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import { ImageCreationFailed } from '../../common/errors.js';
import { DEFAULT_TOOL_TIMEOUT_MS, resolveIsoTools, runTool, tempRoot, type IsoToolPaths } from './iso-tools.js';

const IMAGE_TYPE = 'config drive';

/** The name of a node's config drive in the HTTP root (Ironic's `configdrive-<node uuid>`). */
export const CONFIGDRIVE_FILE = 'configdrive';

/** The JSON form of a config drive (the API's checks have passed: the parts are objects, user_data also a string or list). */
export interface ConfigdriveContent {
  meta_data?: Record<string, unknown>;
  network_data?: Record<string, unknown>;
  user_data?: string | Record<string, unknown> | unknown[];
  vendor_data?: Record<string, unknown>;
}

/** openstacksdk's default metadata versions: each gets the same files. */
const VERSIONS = ['2012-08-10', 'latest'];

/** Whether instance_info's configdrive is the JSON form, to be built (a string is a URL or a built image). */
export function isConfigdriveContent(value: unknown): value is ConfigdriveContent {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Python's json.dumps with its defaults (", " and ": " separators, ensure_ascii), so that the
 * files read as openstacksdk writes them.
 */
export function pythonJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(pythonJson).join(', ')}]`;
  if (typeof value === 'object' && value !== null) {
    return `{${Object.entries(value).map(([k, v]) => `${pythonJson(k)}: ${pythonJson(v)}`).join(', ')}}`;
  }
  if (typeof value === 'string') return JSON.stringify(value).replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  return JSON.stringify(value ?? null);
}

/**
 * Ironic's build_configdrive defaults: meta_data gets the node's uuid and, when the node has a
 * name, its name, unless given; user_data given as an object or list is its JSON.
 */
export function configdriveFiles(node: { uuid: string; name: string | null }, content: ConfigdriveContent): Map<string, string> {
  // Python's setdefault: the given keys first, the defaults after them where absent.
  const metaData: Record<string, unknown> = { ...(content.meta_data ?? {}) };
  if (!('uuid' in metaData)) metaData.uuid = node.uuid;
  if (node.name && !('name' in metaData)) metaData.name = node.name;
  const userData = typeof content.user_data === 'object' && content.user_data !== null ? pythonJson(content.user_data) : content.user_data;
  const files = new Map<string, string>();
  for (const version of VERSIONS) {
    const dir = `openstack/${version}`;
    files.set(`${dir}/meta_data.json`, pythonJson(metaData));
    // Empty parts are left out, as openstacksdk's truthiness tests leave them.
    if (content.network_data && Object.keys(content.network_data).length) files.set(`${dir}/network_data.json`, pythonJson(content.network_data));
    if (content.vendor_data && Object.keys(content.vendor_data).length) files.set(`${dir}/vendor_data2.json`, pythonJson(content.vendor_data));
    if (userData) files.set(`${dir}/user_data`, userData);
  }
  return files;
}

/**
 * openstacksdk's `pack`: the ISO 9660 image (Joliet and Rock Ridge, label `config-2`) of the
 * directory, made with genisoimage's arguments, which xorriso understands as mkisofs (Debian's
 * xorrisofs is `xorriso -as mkisofs`).
 * @throws ImageCreationFailed | ImageToolMissing
 */
async function packIso(dir: string, out: string, tools: IsoToolPaths): Promise<Buffer> {
  const { xorriso } = await resolveIsoTools(tools, { remaster: true });
  await runTool(xorriso, [
    '-as', 'mkisofs', '-o', out, '-ldots', '-allow-lowercase', '-allow-multidot', '-l', '-publisher', 'metalsmith', '-quiet', '-J', '-r', '-V', 'config-2', dir,
  ], IMAGE_TYPE, { timeoutMs: tools.timeoutMs ?? DEFAULT_TOOL_TIMEOUT_MS });
  return readFile(out);
}

/**
 * The config drive image (raw ISO 9660) of the JSON form, for the node.
 * @throws ImageCreationFailed
 */
export async function buildConfigdriveImage(node: { uuid: string; name: string | null }, content: ConfigdriveContent, tools: IsoToolPaths = {}): Promise<Buffer> {
  const work = await mkdtemp(path.join(tempRoot(tools), 'configdrive-'));
  try {
    const tree = path.join(work, 'tree');
    for (const [name, data] of configdriveFiles(node, content)) {
      await mkdir(path.join(tree, path.dirname(name)), { recursive: true });
      await writeFile(path.join(tree, name), data);
    }
    return await packIso(tree, path.join(work, 'configdrive.iso'), tools);
  } catch (err) {
    if (err instanceof ImageCreationFailed) throw err;
    throw new ImageCreationFailed(IMAGE_TYPE, (err as Error).message);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

/** An image in the form instance_info and the agent take: gzip, then base64. */
export function encodeConfigdrive(image: Buffer): string {
  return gzipSync(image).toString('base64');
}

/**
 * Ironic's build_configdrive: the JSON form built into a gzipped, base64-encoded ISO image.
 * @throws ImageCreationFailed
 */
export async function buildConfigdrive(node: { uuid: string; name: string | null }, content: ConfigdriveContent, tools: IsoToolPaths = {}): Promise<string> {
  return encodeConfigdrive(await buildConfigdriveImage(node, content, tools));
}

/**
 * The raw image of a gzipped, base64-encoded config drive, as Ironic's
 * image_utils.prepare_configdrive_image decodes it for a virtual USB stick.
 * @throws ImageCreationFailed when it is not base64 of gzip
 */
export function decodeConfigdrive(encoded: string): Buffer {
  try {
    return gunzipSync(Buffer.from(encoded, 'base64'));
  } catch (err) {
    throw new ImageCreationFailed(IMAGE_TYPE, `the config drive is not a gzipped and base64-encoded image: ${(err as Error).message}`);
  }
}
