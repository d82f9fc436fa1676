import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import bcrypt from 'bcryptjs';
import { ConfigError, NotAuthorized } from '../common/errors.js';

/**
 * HTTP basic auth against an htpasswd file with bcrypt entries, as standalone Ironic does.
 * bcrypt costs tens of milliseconds by design; a verified (user, password) pair is remembered
 * by its SHA-256 so that a busy client does not pay it on every request. The cache is
 * bounded and keyed by the entry's hash too, so changing the file invalidates it.
 */
export class BasicAuth {
  private readonly users: Map<string, string>;
  private readonly verified = new Map<string, true>();
  private static readonly CACHE_MAX = 1024;

  constructor(file: string) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (err) {
      throw new ConfigError([`[api] http_basic_auth_user_file: cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`]);
    }
    this.users = new Map();
    for (const [i, raw] of text.split('\n').entries()) {
      const line = raw.trim();
      if (!line || line.startsWith('#')) continue;
      const sep = line.indexOf(':');
      const hash = line.slice(sep + 1);
      if (sep <= 0 || !/^\$2[aby]\$/.test(hash)) {
        throw new ConfigError([`${file}:${i + 1}: [api] http_basic_auth_user_file: only bcrypt entries (user:$2y$...) are supported`]);
      }
      this.users.set(line.slice(0, sep), hash);
    }
  }

  /** Returns the user name or throws NotAuthorized. */
  async check(header: string | undefined): Promise<string> {
    if (!header || !header.toLowerCase().startsWith('basic ')) throw new NotAuthorized('Authorization required');
    const decoded = Buffer.from(header.slice(6).trim(), 'base64').toString('utf8');
    const sep = decoded.indexOf(':');
    if (sep < 0) throw new NotAuthorized('Invalid authorization header');
    const user = decoded.slice(0, sep);
    const password = decoded.slice(sep + 1);
    const hash = this.users.get(user);
    if (!hash) throw new NotAuthorized('Only basic authentication is supported; the credentials were not accepted.');
    const key = createHash('sha256').update(`${user}\0${password}\0${hash}`).digest('hex');
    if (this.verified.has(key)) return user;
    if (!(await bcrypt.compare(password, hash))) throw new NotAuthorized('Only basic authentication is supported; the credentials were not accepted.');
    if (this.verified.size >= BasicAuth.CACHE_MAX) this.verified.delete(this.verified.keys().next().value as string);
    this.verified.set(key, true);
    return user;
  }
}
