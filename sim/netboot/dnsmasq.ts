/**
 * What a dnsmasq configured as etc/dnsmasq.conf.sample (and Ironic's and Bifrost's docs) offers
 * a DHCP client, read from the files it reads: the host entries of its dhcp-hostsdir and the
 * options of its dhcp-optsdir. Its rules, as far as network boot meets them:
 *
 * - a MAC with no host entry is not `known` and is ignored (`dhcp-ignore=tag:!known`), as is a
 *   host entry that says `ignore`;
 * - a host entry's `set:<tag>` tags the client; iPXE's own requests carry option 175 and get the
 *   `ipxe` tag (`dhcp-match=set:ipxe,175`);
 * - an option line `[tag:<t>,…][tag:!<t>,…]<option>,<value>` applies when every tag condition
 *   holds; of several lines for one option the last that applies wins.
 *
 * Entries are read each time, as dnsmasq's inotify re-reads changed files: what Galvanic
 * wrote last is what the next DHCP request sees.
 */
import fs from 'node:fs/promises';
import path from 'node:path';

/** What a DHCPv4 request gets: the boot file (67) and the TFTP server (66, 150, or the server address 255). */
export interface DhcpOffer {
  bootFile: string | null;
  tftpServer: string | null;
  /** The tags the client ended with. */
  tags: string[];
}

export interface DnsmasqDirs {
  hostsDir: string;
  optsDir: string;
}

async function lines(dir: string): Promise<string[]> {
  const out: string[] = [];
  const names = await fs.readdir(dir).catch(() => [] as string[]);
  // dnsmasq skips dot-files and editor leftovers in these directories.
  for (const name of names.filter((n) => !n.startsWith('.') && !n.endsWith('~') && !/^#.*#$/.test(n)).sort()) {
    const text = await fs.readFile(path.join(dir, name), 'utf8').catch(() => '');
    out.push(...text.split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#')));
  }
  return out;
}

/**
 * The offer to `mac`, or null when dnsmasq would not answer. `clientTags` are the tags the
 * request itself sets (`ipxe` for iPXE).
 */
export async function dnsmasqOffer(dirs: DnsmasqDirs, mac: string, clientTags: readonly string[]): Promise<DhcpOffer | null> {
  const want = mac.toLowerCase();
  let entry: string[] | null = null;
  for (const line of await lines(dirs.hostsDir)) {
    const fields = line.split(',').map((f) => f.trim());
    if (fields.some((f) => f.toLowerCase() === want)) entry = fields;
  }
  if (!entry || entry.some((f) => f === 'ignore')) return null;
  const tags = new Set(['known', ...clientTags, ...entry.filter((f) => f.startsWith('set:')).map((f) => f.slice(4))]);
  const options = new Map<string, string>();
  for (const line of await lines(dirs.optsDir)) {
    const fields = line.split(',');
    let i = 0;
    let applies = true;
    for (; i < fields.length && fields[i].startsWith('tag:'); i++) {
      const t = fields[i].slice(4);
      applies &&= t.startsWith('!') ? !tags.has(t.slice(1)) : tags.has(t);
    }
    const option = fields[i];
    // An option that starts with `!` is ISC-style (Ironic's "!175,67" for providers without
    // tags); dnsmasq would refuse the line, so it never applies here.
    if (!applies || option === undefined || !/^\d+$/.test(option)) continue;
    options.set(option, fields.slice(i + 1).join(','));
  }
  return {
    bootFile: options.get('67') ?? null,
    tftpServer: options.get('66') ?? options.get('150') ?? options.get('255') ?? null,
    tags: [...tags],
  };
}
