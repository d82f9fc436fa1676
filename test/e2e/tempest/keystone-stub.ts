/**
 * A Keystone v3 stand-in, just enough for tempest's auth provider: tempest insists on an
 * identity service even against a noauth baremetal API. Any password (or token) gets a
 * token scoped as asked, with roles admin, member and reader, and a catalog whose
 * `baremetal` endpoint is the target. Anything else is answered 404 and remembered in
 * `unhandled`, so a run can say what tempest wanted that the stub lacks.
 */
import { createHash, randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

type Json = Record<string, unknown>;

const ROLES = ['admin', 'member', 'reader'];
const DOMAIN = { id: 'default', name: 'Default' };

const idOf = (name: string): string => createHash('md5').update(name).digest('hex');
const isoIn = (seconds: number): string => new Date(Date.now() + seconds * 1000).toISOString().replace(/Z$/, '000Z');

export interface KeystoneStub {
  /** The v3 endpoint, e.g. http://127.0.0.1:PORT/v3. */
  url: string;
  /** Requests it answered 404 because it does not know them ("GET /v3/…"). */
  unhandled: string[];
  close(): Promise<void>;
}

/** Starts the stub on an ephemeral port of 127.0.0.1, its catalog pointing at `target`. */
export async function startKeystoneStub(target: string): Promise<KeystoneStub> {
  const tokens = new Map<string, Json>();
  const unhandled: string[] = [];
  let base = '';

  const version = () => ({
    id: 'v3.14', status: 'stable', updated: '2020-04-07T00:00:00Z',
    links: [{ rel: 'self', href: `${base}/v3/` }],
    'media-types': [{ base: 'application/json', type: 'application/vnd.openstack.identity-v3+json' }],
  });
  const service = (type: string, name: string, url: string) => ({
    id: idOf(type), type, name,
    endpoints: ['public', 'admin', 'internal'].map((iface) => ({ id: idOf(type + iface), interface: iface, region: 'RegionOne', region_id: 'RegionOne', url })),
  });
  const catalog = () => [service('baremetal', 'ironic', target), service('identity', 'keystone', `${base}/v3`)];

  function issue(req: Json): Json {
    const auth = (req.auth ?? {}) as Json;
    const identity = (auth.identity ?? {}) as Json;
    const scope = auth.scope as Json | undefined;
    let user: Json = { id: idOf('user-anonymous'), name: 'anonymous', domain: DOMAIN, password_expires_at: null };
    const password = identity.password as { user?: Json } | undefined;
    if (password) {
      const u = password.user ?? {};
      const name = String(u.name ?? u.id ?? 'anonymous');
      const domain = (u.domain ?? {}) as Json;
      user = { id: u.id ?? idOf(`user-${name}`), name, domain: { id: domain.id ?? 'default', name: domain.name ?? 'Default' }, password_expires_at: null };
    } else if (identity.token) {
      user = (tokens.get(String((identity.token as Json).id)) as Json | undefined)?.user as Json ?? user;
    }
    const token: Json = {
      methods: identity.methods ?? ['password'], user, audit_ids: [randomUUID().replace(/-/g, '').slice(0, 22)],
      issued_at: isoIn(0), expires_at: isoIn(24 * 3600),
    };
    if (scope && Object.keys(scope).length > 0) {
      token.roles = ROLES.map((r) => ({ id: idOf(`role-${r}`), name: r }));
      token.catalog = catalog();
      if (scope.project) {
        const p = scope.project as Json;
        const name = String(p.name ?? p.id);
        const domain = (p.domain ?? DOMAIN) as Json;
        token.project = { id: p.id ?? idOf(`project-${name}`), name, domain: { id: domain.id ?? 'default', name: domain.name ?? 'Default' } };
        token.is_domain = false;
      } else if (scope.system) {
        token.system = { all: true };
      } else if (scope.domain) {
        const d = scope.domain as Json;
        token.domain = { id: d.id ?? idOf(`domain-${String(d.name)}`), name: d.name ?? d.id };
      }
    }
    return token;
  }

  /** GET bodies of the few identity resources tempest's credential helpers read. */
  function lookup(parts: string[]): Json | undefined {
    const one: Record<string, (id: string) => Json> = {
      users: (id) => ({ id, name: id, domain_id: 'default', enabled: true }),
      projects: (id) => ({ id, name: id, domain_id: 'default', enabled: true, is_domain: false }),
      domains: (id) => ({ id, name: id === 'default' ? 'Default' : id, enabled: true }),
    };
    const [kind, id] = parts;
    if (parts.length === 2 && one[kind]) return { [kind.slice(0, -1)]: one[kind](id) };
    if (parts.length === 1 && one[kind]) return { [kind]: [], links: {} };
    if (kind === 'roles' && parts.length === 1) return { roles: ROLES.map((r) => ({ id: idOf(`role-${r}`), name: r })), links: {} };
    if (kind === 'role_assignments' && parts.length === 1) return { role_assignments: [], links: {} };
    return undefined;
  }

  function handle(method: string, path: string, headers: http.IncomingHttpHeaders, body: string): { status: number; body?: Json; headers?: Record<string, string> } {
    const subject = String(headers['x-subject-token'] ?? '');
    if (path === '' && (method === 'GET' || method === 'HEAD')) return { status: 300, body: { versions: { values: [version()] } } };
    if (path === '/v3' && (method === 'GET' || method === 'HEAD')) return { status: 200, body: { version: version() } };
    if (path === '/v3/auth/tokens') {
      if (method === 'POST') {
        let req: unknown;
        try {
          req = JSON.parse(body || '{}');
        } catch {
          return { status: 400, body: { error: { code: 400, title: 'Bad Request', message: 'malformed JSON' } } };
        }
        const id = `stub${randomUUID().replace(/-/g, '')}`;
        const token = issue(req as Json);
        tokens.set(id, token);
        return { status: 201, body: { token }, headers: { 'X-Subject-Token': id } };
      }
      if (method === 'DELETE') {
        tokens.delete(subject);
        return { status: 204 };
      }
      const token = tokens.get(subject);
      if (!token) return { status: 404, body: { error: { code: 404, title: 'Not Found', message: 'token not found' } } };
      return { status: 200, body: { token }, headers: { 'X-Subject-Token': subject } };
    }
    if (path === '/v3/auth/catalog' && method === 'GET') return { status: 200, body: { catalog: catalog() } };
    const found = method === 'GET' && path.startsWith('/v3/') ? lookup(path.split('/').slice(2)) : undefined;
    if (found) return { status: 200, body: found };
    unhandled.push(`${method} ${path}`);
    return { status: 404, body: { error: { code: 404, title: 'Not Found', message: `stub: ${method} ${path} not implemented` } } };
  }

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const path = (req.url ?? '/').split('?')[0].replace(/\/+$/, '');
      const out = handle(req.method ?? 'GET', path, req.headers, Buffer.concat(chunks).toString());
      const data = out.body === undefined ? '' : JSON.stringify(out.body);
      res.writeHead(out.status, {
        ...(out.body === undefined ? {} : { 'Content-Type': 'application/json' }),
        'Content-Length': Buffer.byteLength(data), ...out.headers,
      });
      res.end(req.method === 'HEAD' ? undefined : data);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url: `${base}/v3`,
    unhandled,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}
