/**
 * The part of iPXE's script language that boot scripts use (Ironic's boot.ipxe and node
 * configurations, and most hand-written ones): labels and `goto`, `set`, `inc`, `isset`,
 * `iseq`, `||` / `&&`, `${var}` with `:hexhyp` and nesting, `chain`, `kernel`, `initrd`,
 * `boot`, `sanboot`, `exit`, `poweroff`, `reboot`, and the harmless ones (`echo`, `prompt`,
 * `sleep`, `imgfree`). Downloads go through the caller, so a script that names a file the
 * server lacks fails where real iPXE fails. A command it does not know fails, as in iPXE.
 */

/** How a script run ended. */
export type IpxeOutcome =
  | { kind: 'kernel'; kernel: string; initrds: string[]; cmdline: string }
  | { kind: 'sanboot'; url: string }
  /** `sanboot --no-describe` or `exit`: back to the firmware, which boots the next device (the disk). */
  | { kind: 'local' }
  | { kind: 'poweroff' }
  | { kind: 'reboot' }
  | { kind: 'failed'; reason: string };

export interface IpxeMachine {
  /** The MAC iPXE booted from, then each NIC's (`net0/mac`, …), colon-separated lower case. */
  mac: string;
  nics: readonly string[];
  /** Fetches a script's text (HTTP 200), or null. */
  fetchText(url: string): Promise<string | null>;
  /** Fetches an image whole; false when it cannot be had. */
  fetchImage(url: string): Promise<boolean>;
  /** What the script printed and did, for the test's eyes. */
  log(line: string): void;
}

/** A result a command passes up through `chain`: an end of the whole run. */
class Ended {
  constructor(readonly outcome: IpxeOutcome) {}
}

const STEP_LIMIT = 20_000;

interface Images {
  kernel: string | null;
  cmdline: string;
  initrds: string[];
}

export class IpxeRunner {
  private readonly vars = new Map<string, string>();
  private steps = 0;
  private readonly images: Images = { kernel: null, cmdline: '', initrds: [] };

  constructor(private readonly m: IpxeMachine) {
    this.vars.set('mac', m.mac);
    m.nics.forEach((mac, i) => this.vars.set(`net${i}/mac`, mac));
  }

  /** Runs the script at `url` (as DHCP's boot file for iPXE): how the boot ends. */
  async run(url: string): Promise<IpxeOutcome> {
    try {
      const ok = await this.chain(url);
      return ok ? { kind: 'local' } : { kind: 'failed', reason: `chain ${url} failed` };
    } catch (err) {
      if (err instanceof Ended) return err.outcome;
      throw err;
    }
  }

  /** `${name}` and `${name:hexhyp}`, innermost first. */
  private expand(text: string): string {
    let s = text;
    for (let guard = 0; guard < 100; guard++) {
      const m = /\$\{([^${}]*)\}/.exec(s);
      if (!m) break;
      const [name, format] = m[1].split(':');
      let v = this.vars.get(name) ?? '';
      if (format === 'hexhyp') v = v.replace(/:/g, '-');
      s = s.slice(0, m.index) + v + s.slice(m.index + m[0].length);
    }
    return s;
  }

  private async chain(url: string): Promise<boolean> {
    const text = await this.m.fetchText(url);
    this.m.log(`chain ${url}: ${text === null ? 'not found' : 'fetched'}`);
    if (text === null) return false;
    if (!text.startsWith('#!ipxe')) return false;
    return this.script(text, url);
  }

  /** Runs a script; its `exit` status, or true at its end. */
  private async script(text: string, base: string): Promise<boolean> {
    const lines = text.split('\n').map((l) => l.trim());
    const labels = new Map<string, number>();
    lines.forEach((l, i) => { if (l.startsWith(':')) labels.set(l.slice(1), i); });
    let pc = 0;
    while (pc < lines.length) {
      if (++this.steps > STEP_LIMIT) throw new Ended({ kind: 'failed', reason: 'the script loops' });
      const line = lines[pc++];
      if (!line || line.startsWith('#') || line.startsWith(':')) continue;
      const r = await this.statement(line, base);
      if (r.goto !== undefined) {
        const at = labels.get(r.goto);
        if (at === undefined) throw new Ended({ kind: 'failed', reason: `goto ${r.goto}: no such label` });
        pc = at + 1;
      } else if (r.exit !== undefined) {
        return r.exit;
      }
    }
    return true;
  }

  /** A line of commands joined by `||` and `&&`, left to right. */
  private async statement(line: string, base: string): Promise<{ goto?: string; exit?: boolean }> {
    const parts = line.split(/\s+(\|\||&&)\s*/);
    let ok = true;
    for (let i = 0; i < parts.length; i += 2) {
      const joiner = i === 0 ? null : parts[i - 1];
      if ((joiner === '||' && ok) || (joiner === '&&' && !ok)) continue;
      const cmd = parts[i].trim();
      if (!cmd) { ok = true; continue; }
      const r = await this.command(cmd, base);
      if (typeof r === 'object') return r;
      ok = r;
    }
    return {};
  }

  private async command(raw: string, base: string): Promise<boolean | { goto?: string; exit?: boolean }> {
    const words = this.expand(raw).split(/\s+/);
    const [name, ...args] = words;
    const opts = args.filter((a) => a.startsWith('--'));
    const rest = args.filter((a, i) => !a.startsWith('--') && !(i > 0 && args[i - 1] === '--timeout'));
    const resolve = (u: string) => new URL(u, base).href;
    switch (name) {
      case 'goto': return { goto: rest[0] };
      case 'exit': return { exit: (rest[0] ?? '0') === '0' };
      case 'set': {
        const [key, ...value] = rest;
        this.vars.set(key.split(':')[0], value.join(' '));
        return true;
      }
      case 'inc': {
        const key = rest[0];
        this.vars.set(key, String(Number(this.vars.get(key) ?? '0') + Number(rest[1] ?? 1)));
        return true;
      }
      case 'isset': return (rest[0] ?? '') !== '';
      case 'iseq': return rest[0] === rest[1];
      case 'echo': case 'prompt': this.m.log(raw); return true;
      case 'sleep': case 'imgfree': return true;
      case 'chain': return this.chain(resolve(rest[0]));
      case 'kernel': {
        const url = resolve(rest[0]);
        if (!(await this.m.fetchImage(url))) { this.m.log(`kernel ${url}: not found`); return false; }
        this.images.kernel = url;
        this.images.cmdline = rest.slice(1).join(' ');
        this.images.initrds = [];
        this.m.log(`kernel ${url} ${this.images.cmdline}`);
        return true;
      }
      case 'initrd': {
        const url = resolve(rest[0]);
        if (!(await this.m.fetchImage(url))) { this.m.log(`initrd ${url}: not found`); return false; }
        this.images.initrds.push(url);
        return true;
      }
      case 'boot': {
        if (!this.images.kernel) return false;
        throw new Ended({ kind: 'kernel', kernel: this.images.kernel, initrds: [...this.images.initrds], cmdline: this.images.cmdline });
      }
      case 'sanboot': {
        if (opts.includes('--no-describe') && rest.length === 0) throw new Ended({ kind: 'local' });
        const url = resolve(rest[0]);
        if (!(await this.m.fetchImage(url))) { this.m.log(`sanboot ${url}: not found`); return false; }
        throw new Ended({ kind: 'sanboot', url });
      }
      case 'poweroff': throw new Ended({ kind: 'poweroff' });
      case 'reboot': throw new Ended({ kind: 'reboot' });
      default:
        this.m.log(`${name}: not supported`);
        return false;
    }
  }
}
