import type { FastifyInstance, FastifyRequest } from 'fastify';
import { InvalidParameterValue, ResourceNotFound } from '../common/errors.js';
import { getConductor, listConductors, type ConductorWithLiveness } from '../db/conductors.js';
import type { ApiDeps } from './deps.js';
import { baseUrl, resourceLinks } from './links.js';
import { limitParam, param, type Query } from './query.js';
import { boolParam } from './query.js';

/** What `?fields=` may name (Ironic's conductor fields). */
const CONDUCTOR_FIELDS = ['hostname', 'conductor_group', 'alive', 'drivers', 'created_at', 'updated_at', 'links'];

function iso(d: Date | null): string | null {
  return d ? d.toISOString().replace('Z', '+00:00') : null;
}

export function registerConductorRoutes(app: FastifyInstance, deps: ApiDeps): void {
  const { db, config } = deps;
  const timeout = config.conductor.heartbeat_timeout;

  function requireVersion(req: FastifyRequest): void {
    // Ironic hides the resource entirely below 1.49.
    if (!req.apiVersion.atLeast(49)) throw new ResourceNotFound('The resource could not be found.');
  }

  function view(req: FastifyRequest, c: ConductorWithLiveness, detail: boolean) {
    const base = baseUrl(req, config.api.public_endpoint);
    const out: Record<string, unknown> = {
      hostname: c.hostname,
      conductor_group: c.conductorGroup,
      alive: c.alive,
      links: resourceLinks(base, 'conductors', c.hostname),
    };
    if (detail) Object.assign(out, { drivers: c.drivers, created_at: iso(c.createdAt), updated_at: iso(c.heartbeatAt) });
    return out;
  }

  app.get('/v1/conductors', async (req) => {
    requireVersion(req);
    const q = req.query as Query;
    const detail = boolParam(q, 'detail') ?? false;
    const fields = param(q, 'fields');
    if (fields !== undefined && detail) throw new InvalidParameterValue('Can not specify ?detail=True and fields in the same request.');
    const names = fields?.split(',').map((s) => s.trim()).filter(Boolean);
    if (names !== undefined) {
      const bad = names.filter((n) => !CONDUCTOR_FIELDS.includes(n));
      if (names.length === 0 || bad.length) throw new InvalidParameterValue(`Field(s) "${bad.join(', ')}" are not valid`);
    }
    const limit = limitParam(q, config.api.max_limit);
    const all = await listConductors(db, timeout);
    const pick = (c: Record<string, unknown>) => (names ? Object.fromEntries(names.map((n) => [n, c[n]])) : c);
    return { conductors: all.slice(0, limit).map((c) => pick(view(req, c, detail || names !== undefined))) };
  });

  app.get('/v1/conductors/:hostname', async (req) => {
    requireVersion(req);
    return view(req, await getConductor(db, (req.params as { hostname: string }).hostname, timeout), true);
  });
}
