/**
 * What a simulated host learns from the ISO it boots, as a real one learns it from the kernel
 * command line: whether it is an agent ISO (`ipa-api-url`, or the inspection callback) and the
 * API the agent calls. The boot loader's configuration (isolinux.cfg, grub.cfg) is read out of
 * the ISO 9660 image with byte-range requests, as a BMC reads virtual media: a few sectors, not
 * the image. Results are kept by the image's validator (ETag and length), which the nodes that
 * share one built ISO share too.
 */

const SECTOR = 2048;
const CONFIG_NAMES = new Set(['isolinux.cfg', 'grub.cfg', 'syslinux.cfg']);
/** Directory reads allowed per image: enough for /isolinux, /boot/grub, /EFI/BOOT. */
const MAX_DIRECTORY_READS = 24;
const TIMEOUT_MS = 5000;

/** An agent's parameters found on an ISO's kernel command line. */
export interface IsoAgentParams {
  /** The API the agent calls: ipa-api-url, else the inspection callback's base. */
  apiUrl: string;
  cmdline: string;
}

interface DirRecord {
  name: string;
  lba: number;
  size: number;
  dir: boolean;
}

async function readRange(url: string, offset: number, length: number): Promise<Buffer> {
  const res = await fetch(url, { headers: { range: `bytes=${offset}-${offset + length - 1}` }, signal: AbortSignal.timeout(TIMEOUT_MS) });
  if (res.status !== 206 && res.status !== 200) {
    await res.body?.cancel();
    throw new Error(`${url} answered ${res.status}`);
  }
  const buf = Buffer.from(await res.arrayBuffer());
  // A server without ranges sends the whole image: the part asked for is cut from it.
  return res.status === 200 ? buf.subarray(offset, offset + length) : buf;
}

function parseDirectory(data: Buffer): DirRecord[] {
  const out: DirRecord[] = [];
  let i = 0;
  while (i < data.length) {
    const len = data[i]!;
    if (len === 0) {
      // Records do not cross sectors: the rest of this one is padding.
      i = (Math.floor(i / SECTOR) + 1) * SECTOR;
      continue;
    }
    const nameLen = data[i + 32]!;
    const raw = data.subarray(i + 33, i + 33 + nameLen);
    if (!(nameLen === 1 && (raw[0] === 0 || raw[0] === 1))) {
      out.push({
        name: raw.toString('latin1').replace(/;\d+$/, '').replace(/\.$/, '').toLowerCase(),
        lba: data.readUInt32LE(i + 2), size: data.readUInt32LE(i + 10), dir: (data[i + 25]! & 2) !== 0,
      });
    }
    i += len;
  }
  return out;
}

/** The boot loader configurations of an ISO 9660 image at `url`, joined. @throws when it is none */
async function bootConfigs(url: string): Promise<string> {
  const pvd = await readRange(url, 16 * SECTOR, SECTOR);
  if (pvd[0] !== 1 || pvd.toString('latin1', 1, 6) !== 'CD001') throw new Error(`${url} is not an ISO 9660 image`);
  const queue: Array<{ rec: DirRecord; depth: number }> = [{ rec: { name: '', lba: pvd.readUInt32LE(156 + 2), size: pvd.readUInt32LE(156 + 10), dir: true }, depth: 0 }];
  const configs: string[] = [];
  let reads = 0;
  while (queue.length && reads < MAX_DIRECTORY_READS) {
    const { rec, depth } = queue.shift()!;
    reads++;
    for (const entry of parseDirectory(await readRange(url, rec.lba * SECTOR, Math.min(rec.size, 16 * SECTOR)))) {
      if (entry.dir && depth < 3) queue.push({ rec: entry, depth: depth + 1 });
      else if (!entry.dir && CONFIG_NAMES.has(entry.name) && entry.size < 64 * 1024) {
        configs.push((await readRange(url, entry.lba * SECTOR, entry.size)).toString('utf8'));
      }
    }
  }
  return configs.join('\n');
}

/** The agent's parameters in boot loader configurations, or null when no line boots an agent. */
export function agentParamsOf(config: string): IsoAgentParams | null {
  for (const line of config.split('\n')) {
    const api = /(?:^|\s)ipa-api-url=(\S+)/.exec(line)?.[1];
    const callback = /(?:^|\s)ipa-inspection-callback-url=(\S+)/.exec(line)?.[1];
    const url = api ?? callback?.replace(/\/v1\/continue_inspection$/, '');
    if (url) return { apiUrl: url.replace(/\/+$/, ''), cmdline: line.trim() };
  }
  return null;
}

/** Reads the agent's parameters of the ISOs hosts boot, once per distinct image. */
export class IsoCmdlineReader {
  private readonly known = new Map<string, Promise<IsoAgentParams | null>>();

  /** The agent's parameters of the ISO at `url`; null for an ISO that boots no agent, or none that can be read. */
  async read(url: string): Promise<IsoAgentParams | null> {
    if (!/^https?:\/\//i.test(url)) return null;
    let key: string;
    try {
      const head = await fetch(url, { method: 'HEAD', signal: AbortSignal.timeout(TIMEOUT_MS) });
      if (!head.ok) return null;
      const etag = head.headers.get('etag');
      key = etag ? `${etag} ${head.headers.get('content-length') ?? ''}` : url;
    } catch {
      return null;
    }
    let p = this.known.get(key);
    if (!p) {
      // A failed read is not kept: the next boot reads again.
      p = bootConfigs(url).then(agentParamsOf, () => {
        this.known.delete(key);
        return null;
      });
      this.known.set(key, p);
      if (this.known.size > 1000) this.known.delete(this.known.keys().next().value!);
    }
    return p;
  }
}
