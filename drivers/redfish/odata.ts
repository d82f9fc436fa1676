/**
 * Small, forgiving readers of Redfish JSON. Real BMCs differ in what they leave out, how they
 * spell links (lower case, trailing slashes, absolute URLs, fragments) and whether an error is
 * a status or a 200 with an `error` member; see ../shared/redfish-mockups/README.md.
 */

export type Json = Record<string, unknown>;

export function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** A property by name, case-insensitively when the exact spelling is absent. */
export function prop(obj: Json, name: string): unknown {
  if (name in obj) return obj[name];
  const lower = name.toLowerCase();
  for (const k of Object.keys(obj)) if (k.toLowerCase() === lower) return obj[k];
  return undefined;
}

export function str(v: unknown): string | null {
  return typeof v === 'string' ? v : null;
}

/** A finite number, or null (numbers sent as strings are accepted). */
export function num(v: unknown): number | null {
  if (typeof v === 'number') return Number.isFinite(v) ? v : null;
  if (typeof v === 'string' && v.trim() !== '') {
    const n = Number(v);
    return Number.isFinite(n) ? n : null;
  }
  return null;
}

export function int(v: unknown): number | null {
  const n = num(v);
  return n === null ? null : Math.trunc(n);
}

/**
 * The request path of a link: `{"@odata.id": …}` or a bare string; absolute URLs lose their
 * origin, fragments are dropped. HPE's SchemaStore has ids that are bare names: not links.
 */
export function linkPath(v: unknown): string | null {
  let id = isObject(v) ? prop(v, '@odata.id') : v;
  if (typeof id !== 'string' || id === '') return null;
  if (/^https?:\/\//i.test(id)) {
    try {
      id = new URL(id).pathname;
    } catch {
      return null;
    }
  }
  const s = id as string;
  const hash = s.indexOf('#');
  const p = hash >= 0 ? s.slice(0, hash) : s;
  if (!p.startsWith('/')) return null;
  return p.length > 1 ? p.replace(/\/+$/, '') : p;
}

/** The links of an array such as `Members` or `Links.Chassis` (a single object is accepted too). */
export function linkPaths(v: unknown): string[] {
  const items = Array.isArray(v) ? v : v === undefined || v === null ? [] : [v];
  const out: string[] = [];
  for (const item of items) {
    const p = linkPath(item);
    if (p) out.push(p);
  }
  return out;
}

/** Links compare case-insensitively and without a trailing slash (iLO spells them both ways). */
export function samePath(a: string, b: string): boolean {
  return a.replace(/\/+$/, '').toLowerCase() === b.replace(/\/+$/, '').toLowerCase();
}

/** The last segment of a path: a fallback Id when a resource has none. */
export function lastSegment(p: string): string {
  const parts = p.replace(/\/+$/, '').split('/');
  return decodeURIComponentSafe(parts[parts.length - 1] ?? p);
}

function decodeURIComponentSafe(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

/** A body that is a Redfish error object (some BMCs and static servers send them with 200). */
export function isErrorBody(body: Json): boolean {
  return isObject(body.error) && !('@odata.id' in body) && !('Id' in body);
}

/** A readable message from a Redfish error body: `code: message (extended messages)`. */
export function errorMessage(body: unknown): string | null {
  if (!isObject(body) || !isObject(body.error)) return null;
  const e = body.error;
  const parts: string[] = [];
  const code = str(e.code);
  const message = str(e.message);
  if (message) parts.push(message);
  const ext = e['@Message.ExtendedInfo'];
  if (Array.isArray(ext)) {
    for (const m of ext) {
      const text = isObject(m) ? str(m.Message) : null;
      if (text && text !== message) parts.push(text);
    }
  }
  if (!parts.length && !code) return null;
  return `${code ? `${code}: ` : ''}${parts.join(' ')}`.trim();
}

/** The MessageIds of a Redfish error body (to recognise e.g. SessionLimitExceeded). */
export function messageIds(body: unknown): string[] {
  if (!isObject(body) || !isObject(body.error)) return [];
  const ids: string[] = [];
  const code = str(body.error.code);
  if (code) ids.push(code);
  const ext = body.error['@Message.ExtendedInfo'];
  if (Array.isArray(ext)) for (const m of ext) if (isObject(m) && typeof m.MessageId === 'string') ids.push(m.MessageId);
  return ids;
}
