/**
 * write_image as IPA's standby extension does it: validate `image_info`, pick the hash the
 * way `ImageDownload` does (os_hash_algo, else a checksum URL, else the legacy checksum by
 * its length), stream `urls` in turn, verify, and fail with IPA's errors. The bytes are not
 * kept: the simulated disk records the URL, size and SHA-256.
 */
import { createHash, getHashes, randomBytes, randomUUID, type Hash } from 'node:crypto';
import { request, type Dispatcher } from 'undici';
import { checksumError, downloadError, downloadFatalError, invalidParams, restError, type IpaError } from './ipa.js';
import { configdriveRecord, takeConfigdrive, type TakenConfigdrive } from './configdrive.js';
import type { DiskState } from './types.js';

export interface ImageInfo {
  id: string;
  urls: string[];
  checksum?: string;
  os_hash_algo?: string;
  os_hash_value?: string;
  disk_format?: string;
  stream_raw_images?: boolean;
  image_type?: string;
  [k: string]: unknown;
}

export interface Written {
  url: string;
  bytes: number;
  sha256: string;
  /** Where IPA put it: the temporary file, or the device for a streamed raw image. */
  location: string;
}

const HASHES = new Set(getHashes().map((h) => h.toLowerCase()));
const CONNECT_TIMEOUT_MS = 60_000;

/** `_validate_image_info`. @throws IpaError InvalidCommandParamsError */
export function validateImageInfo(raw: unknown): ImageInfo {
  const info = (typeof raw === 'object' && raw !== null ? raw : {}) as Record<string, unknown>;
  for (const field of ['id', 'urls']) {
    if (!(field in info)) throw invalidParams(`Image is missing '${field}' field.`);
  }
  if (!Array.isArray(info.urls) || !info.urls.length) throw invalidParams("Image 'urls' must be a list with at least one element.");
  let available = false;
  if (info.checksum !== undefined && info.checksum !== null) {
    if (typeof info.checksum !== 'string' || !info.checksum) throw invalidParams("Image 'checksum' must be a non-empty string.");
    available = true;
  }
  if (info.os_hash_algo || info.os_hash_value) {
    if (typeof info.os_hash_algo !== 'string' || !info.os_hash_algo) throw invalidParams("Image 'os_hash_algo' must be a non-empty string.");
    if (typeof info.os_hash_value !== 'string' || !info.os_hash_value) throw invalidParams("Image 'os_hash_value' must be a non-empty string.");
    available = true;
  }
  if (!available) {
    throw invalidParams("Image checksum is not available, either the 'checksum' field or the 'os_hash_algo' and 'os_hash_value' fields pair must be set for image verification.");
  }
  return info as unknown as ImageInfo;
}

function byLength(checksum: string): string {
  switch (checksum.length) {
    case 128:
      return 'sha512';
    case 64:
      return 'sha256';
    case 32:
      return 'md5';
    default:
      throw new Error('Unable to identify checksum algorithm used, and a value is not specified in the os_hash_algo setting.');
  }
}

const isUrl = (s: string) => s.startsWith('http://') || s.startsWith('https://');

async function get(url: string, dispatcher: Dispatcher, signal: AbortSignal): Promise<Dispatcher.ResponseData> {
  return request(url, { method: 'GET', dispatcher, signal, headersTimeout: CONNECT_TIMEOUT_MS, bodyTimeout: CONNECT_TIMEOUT_MS });
}

/** `_download_with_proxy`: a 4xx is fatal, a 5xx or a connection error is not. */
async function open(url: string, imageId: string, dispatcher: Dispatcher, signal: AbortSignal): Promise<Dispatcher.ResponseData> {
  let res: Dispatcher.ResponseData;
  try {
    res = await get(url, dispatcher, signal);
  } catch (err) {
    if (signal.aborted) throw err;
    throw downloadError(imageId, `Unable to connect to ${url}: ${(err as Error).message}`);
  }
  if (res.statusCode !== 200) {
    const text = (await res.body.text().catch(() => '')).slice(0, 200);
    const msg = `Received status code ${res.statusCode} from ${url}, expected 200. Response body: ${text} Response headers: ${JSON.stringify(res.headers)}`;
    throw res.statusCode < 500 ? downloadFatalError(imageId, msg) : downloadError(imageId, msg);
  }
  return res;
}

/** `_fetch_checksum`: the checksum itself, or the line of a checksum file naming the image. */
async function fetchChecksum(checksum: string, info: ImageInfo, dispatcher: Dispatcher, signal: AbortSignal): Promise<string> {
  if (!isUrl(checksum)) return checksum;
  const res = await open(checksum, checksum, dispatcher, signal);
  const lines = (await res.body.text()).split('\n').map((l) => l.trim()).filter(Boolean);
  if (!lines.length) throw downloadError(checksum, 'Empty checksum file');
  if (lines.length === 1 && !lines[0].includes(' ')) {
    if (/^([a-f\d]{32}|[a-f\d]{64}|[a-f\d]{128})$/i.test(lines[0])) return lines[0];
    throw downloadError(checksum, `Invalid checksum file (No valid checksum found) ${JSON.stringify(lines)}`);
  }
  const name = new URL(info.urls[0]).pathname.split('/').pop() ?? '';
  for (const line of lines) {
    if (line.startsWith('#')) continue;
    if (!line.endsWith(` ${name}`) && !line.endsWith(` *${name}`) && !line.includes(` (${name}) `)) continue;
    const m = /^([a-f\d]{128}|[a-f\d]{64}|[a-f\d]{32})\s/i.exec(line) ?? /\s([a-f\d]{128}|[a-f\d]{64}|[a-f\d]{32})$/i.exec(line);
    if (m) return m[1];
  }
  throw downloadError(checksum, `Checksum file does not contain name ${name}`);
}

/**
 * Downloads the image, verifying it as IPA does.
 * @throws IpaError ImageDownloadFatalError (4xx), ImageDownloadError, ImageChecksumError, RESTError (no usable hash)
 */
export async function downloadImage(info: ImageInfo, dispatcher: Dispatcher, signal: AbortSignal): Promise<Written> {
  let algo: string;
  let expected: string;
  const requested = info.os_hash_algo?.toLowerCase();
  let checksum = info.checksum;
  // Ironic's own form "algo:value" of image_checksum, when a conductor passes it through.
  if (!requested && checksum && !isUrl(checksum) && /^[a-z0-9-]+:[a-f0-9]+$/i.test(checksum)) {
    const [a, v] = checksum.split(':');
    if (HASHES.has(a.toLowerCase())) {
      info = { ...info, os_hash_algo: a.toLowerCase(), os_hash_value: v };
      checksum = undefined;
    }
  }
  const osAlgo = info.os_hash_algo?.toLowerCase();
  if (osAlgo && HASHES.has(osAlgo)) {
    algo = osAlgo;
    expected = await fetchChecksum(String(info.os_hash_value), info, dispatcher, signal);
  } else if (checksum) {
    expected = await fetchChecksum(checksum, info, dispatcher, signal);
    try {
      algo = byLength(expected);
    } catch (err) {
      throw restError(`Unable to proceed with image ${info.id} as the checksum indicator has been used but the algorithm could not be identified. Error: ${(err as Error).message}`);
    }
  } else {
    throw restError(`Unable to verify image ${info.id} with available checksums. Please make sure the specified 'os_hash_algo' (currently ${String(info.os_hash_algo)}) is supported by this ramdisk, or provide a md5 checksum via the 'checksum' field`);
  }
  const details: string[] = [];
  const started = Date.now();
  for (const url of info.urls) {
    let res: Dispatcher.ResponseData;
    try {
      res = await open(String(url), info.id, dispatcher, signal);
    } catch (err) {
      if ((err as IpaError).type === 'ImageDownloadFatalError') throw err;
      if (signal.aborted) throw err;
      details.push(`URL: ${String(url)}; time: ${((Date.now() - started) / 1000).toFixed(2)} seconds. Error: ${(err as Error).message}`);
      continue;
    }
    const hash: Hash = createHash(algo);
    // The disk's record wants the sha256: the checksum's own hash when it is one.
    const sha256 = algo === 'sha256' ? undefined : createHash('sha256');
    let bytes = 0;
    try {
      for await (const chunk of res.body) {
        hash.update(chunk as Buffer);
        sha256?.update(chunk as Buffer);
        bytes += (chunk as Buffer).length;
      }
    } catch (err) {
      if (signal.aborted) throw err;
      throw downloadError(info.id, `Unable to write image to /tmp/${info.id}. Error: ${(err as Error).message}`);
    }
    const actual = hash.digest('hex');
    const location = info.stream_raw_images && info.disk_format === 'raw' ? '/dev/sda' : `/tmp/${info.id}`;
    if (actual !== expected.toLowerCase()) throw checksumError(location, info.id, expected, actual);
    return { url: String(url), bytes, sha256: sha256 ? sha256.digest('hex') : actual, location };
  }
  throw downloadError(info.id, details.join('\n '));
}

/**
 * The partitions an image leaves on the disk, as get_partition_uuids reports them: a whole-disk
 * image its disk identifier; a partition image a root partition, and an EFI system partition
 * when deployed for UEFI (IPA's partition_utils.work_on_disk).
 */
export function partitionsOf(info: Record<string, unknown>): { imageType: 'whole-disk' | 'partition'; uuids: Record<string, string> } {
  const partition = info.image_type === 'partition' || (!info.image_type && (!!info.kernel || !!info.ramdisk));
  if (!partition) return { imageType: 'whole-disk', uuids: { 'root uuid': `0x${randomBytes(4).toString('hex')}` } };
  const uuids: Record<string, string> = { 'root uuid': randomUUID() };
  if (info.deploy_boot_mode === 'uefi') uuids['efi system partition uuid'] = randomUUID();
  return { imageType: 'partition', uuids };
}

/** What prepare_image leaves: the image written, its partitions, and the config drive beside it. */
export interface ImageWrite {
  written: Written;
  parts: ReturnType<typeof partitionsOf>;
  configdrive: TakenConfigdrive | null;
}

/**
 * prepare_image's work: a partition image's config drive is taken first (work_on_disk makes
 * its partition with the others), a whole-disk image's after the image is written
 * (create_config_drive_partition). `configdrive` is the command's, else image_info's (IPA's
 * backward compatibility). @throws IpaError
 */
export async function writeImage(info: ImageInfo, configdrive: unknown, dispatcher: Dispatcher, signal: AbortSignal): Promise<ImageWrite> {
  const given = configdrive ?? info.configdrive;
  const nodeUuid = typeof info.node_uuid === 'string' ? info.node_uuid : 'local';
  const parts = partitionsOf(info);
  let taken = parts.imageType === 'partition' ? await takeConfigdrive(given, nodeUuid, dispatcher, signal) : null;
  const written = await downloadImage(info, dispatcher, signal);
  if (parts.imageType === 'whole-disk') taken = await takeConfigdrive(given, nodeUuid, dispatcher, signal);
  return { written, parts, configdrive: taken };
}

/** The disk as a write leaves it. */
export function diskAfter(w: ImageWrite): DiskState {
  return {
    imageUrl: w.written.url, bytes: w.written.bytes, sha256: w.written.sha256, writtenAt: Date.now(), imageType: w.parts.imageType, bootloader: null,
    configdrive: w.configdrive ? configdriveRecord(w.configdrive) : null,
  };
}
