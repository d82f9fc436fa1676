import type { RouteOptions } from 'fastify';

/**
 * Paths Ironic's pecan object dispatch also serves with the node last: NodesController has
 * `states`, `management` and `maintenance` attributes, so `/v1/nodes/states/console/{n}` reaches
 * the console controller with `n` as its argument. ironic-tempest-plugin's client reads the
 * console that way.
 */
const LEGACY_NODE_PATHS: ReadonlyArray<[RegExp, string]> = [
  [/^\/v1\/nodes\/states\/(power|provision|console|raid)\/([^/]+)$/, '/v1/nodes/$2/states/$1'],
  [/^\/v1\/nodes\/management\/boot_device\/supported\/([^/]+)$/, '/v1/nodes/$1/management/boot_device/supported'],
  [/^\/v1\/nodes\/management\/boot_device\/([^/]+)$/, '/v1/nodes/$1/management/boot_device'],
  [/^\/v1\/nodes\/maintenance\/([^/]+)$/, '/v1/nodes/$1/maintenance'],
  [/^\/v1\/nodes\/states\/([^/]+)$/, '/v1/nodes/$1/states'],
];

/** Galvanic's own paths outside the versioned API. */
const UNVERSIONED = new Set(['/', '/metrics', '/healthz']);

/**
 * The path a request is routed by, as Ironic's root controller and pecan would route it:
 * repeated slashes count as one, a path without the `/v1` prefix is served by v1 (the
 * bookmark links Ironic and Galvanic hand out have none), and the legacy node-last forms
 * reach their node-first routes. The query string is kept as it is.
 */
export function routingUrl(url: string): string {
  const q = url.indexOf('?');
  let path = q === -1 ? url : url.slice(0, q);
  const query = q === -1 ? '' : url.slice(q);
  if (path.includes('//')) path = path.replace(/\/{2,}/g, '/');
  if (!UNVERSIONED.has(path) && path !== '/v1' && !path.startsWith('/v1/')) path = `/v1${path.startsWith('/') ? '' : '/'}${path}`;
  if (path.startsWith('/v1/nodes/') && path.length > 10) {
    const trimmed = path.endsWith('/') ? path.slice(0, -1) : path;
    for (const [re, to] of LEGACY_NODE_PATHS) {
      if (re.test(trimmed)) {
        path = trimmed.replace(re, to);
        break;
      }
    }
  }
  return path + query;
}

/**
 * The methods registered per route pattern, so that a request whose path exists but whose
 * method does not gets 405 with `Allow` instead of 404.
 */
export class RouteMethods {
  private readonly routes: Array<{ re: RegExp; methods: Set<string> }> = [];

  /** Records a route (fastify's onRoute hook). */
  add(route: RouteOptions): void {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    // Wildcard routes (websocket plumbing, static assets) would claim every path below them.
    if (route.url.includes('*')) return;
    const source = route.url
      .replace(/\/+$/, '')
      .split('/')
      .map((seg) => (seg.startsWith(':') ? '[^/]+' : seg.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
      .join('/');
    const re = new RegExp(`^${source}/?$`);
    const known = this.routes.find((r) => r.re.source === re.source);
    if (known) for (const m of methods) known.methods.add(m);
    else this.routes.push({ re, methods: new Set(methods) });
  }

  /** The methods some route serves at this concrete path; empty when none does. */
  allowed(path: string): string[] {
    const out = new Set<string>();
    for (const r of this.routes) if (r.re.test(path)) for (const m of r.methods) out.add(m);
    return [...out].sort();
  }
}

/**
 * The deepest nesting of arrays and objects in a JSON text, stopping early once past
 * `limit`. Scanning the text costs far less than walking a parsed value, and a value nested
 * thousands deep would overflow the stack of every recursive step after parsing (cloning,
 * patching, serialising).
 */
export function jsonDepthExceeds(text: string, limit: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) {
      inString = true;
    } else if (c === 0x7b || c === 0x5b) {
      if (++depth > limit) return true;
    } else if (c === 0x7d || c === 0x5d) {
      depth--;
    }
  }
  return false;
}
