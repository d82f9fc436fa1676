/**
 * What PXELINUX (BIOS) and GRUB (UEFI) do with the configuration they fetch over TFTP, as far
 * as Ironic's configurations use them: the default entry's kernel, initrd and command line, or
 * a chain to the local disk.
 */

/** How a loader's configuration ends: a kernel to boot, or the disk. */
export type LoaderOutcome =
  | { kind: 'kernel'; kernel: string; initrds: string[]; cmdline: string }
  | { kind: 'local' }
  | { kind: 'failed'; reason: string };

/**
 * PXELINUX: `default <label>`, then that label's `kernel`, `append` (with `initrd=`) and
 * `ipappend 2` (BOOTIF=01-<mac>); `COM32 chain.c32` boots the disk.
 */
export function pxelinuxEntry(config: string, mac: string): LoaderOutcome {
  const lines = config.split('\n').map((l) => l.trim());
  const def = lines.find((l) => /^default\s/i.test(l))?.split(/\s+/)[1];
  if (!def) return { kind: 'failed', reason: 'no default label' };
  const start = lines.findIndex((l) => new RegExp(`^label\\s+${def}$`, 'i').test(l));
  if (start < 0) return { kind: 'failed', reason: `no label ${def}` };
  let kernel: string | null = null;
  let append = '';
  let ipappend = false;
  for (const l of lines.slice(start + 1)) {
    if (/^label\s/i.test(l)) break;
    const [word, ...rest] = l.split(/\s+/);
    const w = word.toLowerCase();
    if (w === 'kernel') kernel = rest[0];
    else if (w === 'append') append = rest.join(' ');
    else if (w === 'ipappend' && rest[0] === '2') ipappend = true;
    else if (w === 'com32' && /chain\.c32$/.test(rest[0] ?? '')) return { kind: 'local' };
  }
  if (!kernel) return { kind: 'failed', reason: `label ${def} has no kernel` };
  const args = append.split(/\s+/).filter(Boolean);
  const initrds = args.filter((a) => a.startsWith('initrd=')).flatMap((a) => a.slice(7).split(','));
  if (ipappend) args.push(`BOOTIF=01-${mac.replace(/:/g, '-')}`);
  return { kind: 'kernel', kernel, initrds, cmdline: args.join(' ') };
}

/** GRUB: `set default=<entry>`, that menuentry's `linux` and `initrd`; `linux chain.c32` boots the disk. */
export function grubEntry(config: string): LoaderOutcome {
  const def = /^\s*set\s+default=(\S+)/m.exec(config)?.[1]?.replace(/^"|"$/g, '');
  if (!def) return { kind: 'failed', reason: 'no default entry' };
  const m = new RegExp(`menuentry\\s+"${def}"[^{]*\\{([^}]*)\\}`).exec(config);
  if (!m) return { kind: 'failed', reason: `no menuentry ${def}` };
  let kernel: string | null = null;
  let cmdline = '';
  const initrds: string[] = [];
  for (const l of m[1].split('\n').map((x) => x.trim())) {
    const [word, ...rest] = l.split(/\s+/);
    if (word === 'linux' || word === 'linuxefi') {
      if (/chain\.c32$/.test(rest[0] ?? '')) return { kind: 'local' };
      kernel = rest[0];
      cmdline = rest.slice(1).join(' ');
    } else if (word === 'initrd' || word === 'initrdefi') {
      initrds.push(...rest);
    }
  }
  if (!kernel) return { kind: 'failed', reason: `entry ${def} has no linux line` };
  return { kind: 'kernel', kernel, initrds, cmdline };
}
