/**
 * The config drive as IPA's partition_utils.get_configdrive takes it for write_image (and the
 * legacy prepare_image): a URL, downloaded, or the content itself, base64 of a gzipped image.
 * Anything else fails as IPA fails on it: a dict (the JSON form a conductor forgot to build)
 * fails in `_is_http_url` with Python's "'dict' object has no attribute 'lower'".
 */
import { createHash } from 'node:crypto';
import { gunzipSync } from 'node:zlib';
import { request, type Dispatcher } from 'undici';
import { deploymentError, executionError } from './ipa.js';

/** IPA's MAX_CONFIG_DRIVE_SIZE_MB. */
const MAX_CONFIG_DRIVE_MB = 64;
const MIB = 1024 * 1024;
const TIMEOUT_MS = 60_000;

/** A config drive the agent took: where from, and the image it wrote to the config drive partition. */
export interface TakenConfigdrive {
  source: 'inline' | 'url';
  url?: string;
  image: Buffer;
}

/** Python's type name of a JSON value, as an AttributeError names it. */
function pythonType(v: unknown): string {
  if (Array.isArray(v)) return 'list';
  if (typeof v === 'boolean') return 'bool';
  if (typeof v === 'number') return Number.isInteger(v) ? 'int' : 'float';
  return 'dict';
}

/**
 * Python's lenient base64.b64decode: characters outside the alphabet are dropped; what is left
 * must come in whole groups of four.
 * @returns the bytes, or the error Python raises (class and message)
 */
function pythonB64decode(data: string | Buffer): Buffer | { cls: string; message: string } {
  // A str with characters beyond ASCII is refused before any decoding; bytes are not.
  if (typeof data === 'string' && /[^\p{ASCII}]/u.test(data)) return { cls: 'ValueError', message: 'string argument should contain only ASCII characters' };
  const clean = (typeof data === 'string' ? data : data.toString('latin1')).replace(/[^A-Za-z0-9+/=]/g, '');
  const chars = clean.replace(/=+$/, '').length;
  if (chars % 4 === 1) return { cls: 'Error', message: `Invalid base64-encoded string: number of data characters (${chars}) cannot be 1 more than a multiple of 4` };
  if (clean.length % 4 !== 0) return { cls: 'Error', message: 'Incorrect padding' };
  return Buffer.from(clean, 'base64');
}

/** Python's repr of bytes: b'...' with printable ASCII as is, the rest escaped. */
function pythonBytes(b: Buffer): string {
  const named: Record<number, string> = { 9: '\\t', 10: '\\n', 13: '\\r', 39: "\\'", 92: '\\\\' };
  return `b'${[...b].map((c) => named[c] ?? (c >= 32 && c < 127 ? String.fromCharCode(c) : `\\x${c.toString(16).padStart(2, '0')}`)).join('')}'`;
}

async function download(url: string, nodeUuid: string, dispatcher: Dispatcher, signal: AbortSignal): Promise<Buffer> {
  let res: Dispatcher.ResponseData;
  try {
    res = await request(url, { method: 'GET', dispatcher, signal, headersTimeout: TIMEOUT_MS, bodyTimeout: TIMEOUT_MS });
  } catch (err) {
    if (signal.aborted) throw err;
    throw deploymentError(`Can't download the configdrive content for node ${nodeUuid} from '${url}'. Reason: ${(err as Error).message}`);
  }
  const body = Buffer.from(await res.body.arrayBuffer());
  if (res.statusCode >= 400) {
    throw deploymentError(`Can't download the configdrive content for node ${nodeUuid} from '${url}'. Got status code ${res.statusCode}, response body ${body.toString('utf8').slice(0, 200)}`);
  }
  return body;
}

/**
 * `get_configdrive`: the image the agent writes, from what the conductor handed it; null for none.
 * @throws IpaError CommandExecutionError (not a string) | DeploymentError (download, base64, gzip, size)
 */
export async function takeConfigdrive(configdrive: unknown, nodeUuid: string, dispatcher: Dispatcher, signal: AbortSignal): Promise<TakenConfigdrive | null> {
  if (configdrive === undefined || configdrive === null || configdrive === '') return null;
  if (typeof configdrive !== 'string') throw executionError(`'${pythonType(configdrive)}' object has no attribute 'lower'`);
  const isUrl = /^https?:\/\//i.test(configdrive);
  const data = isUrl ? await download(configdrive, nodeUuid, dispatcher, signal) : configdrive;
  const decoded = pythonB64decode(data);
  let image: Buffer;
  if (!Buffer.isBuffer(decoded)) {
    // Downloaded bytes that are not base64 are taken for the image itself.
    if (typeof data !== 'string') return checkSize({ source: 'url', url: configdrive, image: data }, nodeUuid);
    let msg = `Config drive for node ${nodeUuid} is not base64 encoded or the content is malformed. ${decoded.cls}: ${decoded.message}.`;
    if (isUrl) msg += ` Downloaded from "${configdrive}".`;
    throw deploymentError(msg);
  }
  try {
    if (decoded[0] !== 0x1f || decoded[1] !== 0x8b) throw new Error(`Not a gzipped file (${pythonBytes(decoded.subarray(0, 2))})`);
    image = gunzipSync(decoded);
  } catch (err) {
    throw deploymentError(`Encountered error while decompressing and writing config drive for node ${nodeUuid}. Error: ${(err as Error).message}`);
  }
  return checkSize(isUrl ? { source: 'url', url: configdrive, image } : { source: 'inline', image }, nodeUuid);
}

function checkSize(taken: TakenConfigdrive, nodeUuid: string): TakenConfigdrive {
  const mb = Math.ceil(taken.image.length / MIB);
  if (mb > MAX_CONFIG_DRIVE_MB) {
    throw deploymentError(`Config drive size exceeds maximum limit of 64MiB. Size of the given config drive is ${mb} MiB for node ${nodeUuid}.`);
  }
  return taken;
}

/** What the witness shows of a config drive on the disk (the image itself is served apart). */
export function configdriveRecord(taken: TakenConfigdrive): { source: 'inline' | 'url'; url?: string; bytes: number; sha256: string } {
  return { source: taken.source, ...(taken.url ? { url: taken.url } : {}), bytes: taken.image.length, sha256: createHash('sha256').update(taken.image).digest('hex') };
}
