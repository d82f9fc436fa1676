import type { FastifyInstance, FastifyRequest } from 'fastify';
import { MethodNotAllowed } from '../common/errors.js';
import type { ApiDeps } from './deps.js';
import { baseUrl } from './links.js';
import { MAX_VERSION_STRING, MIN_VERSION_STRING } from './versioning.js';

function versionObject(base: string) {
  return {
    id: 'v1',
    links: [{ href: `${base}/v1/`, rel: 'self' }],
    status: 'CURRENT',
    min_version: MIN_VERSION_STRING,
    version: MAX_VERSION_STRING,
  };
}

function link(base: string, name: string) {
  return [
    { href: `${base}/v1/${name}/`, rel: 'self' },
    { href: `${base}/${name}/`, rel: 'bookmark' },
  ];
}

/** Version discovery: `GET /` and `GET /v1` (gophercloud reads `version` from the latter). */
export function registerRootRoutes(app: FastifyInstance, deps: ApiDeps): void {
  const base = (req: FastifyRequest) => baseUrl(req, deps.config.api.public_endpoint);

  app.get('/', async (req) => {
    const v = versionObject(base(req));
    return {
      name: 'OpenStack Ironic API',
      description: 'Ironic is an OpenStack project which enables the provision and management of baremetal machines. This API is served by Galvanic.',
      default_version: v,
      versions: [v],
    };
  });

  const v1 = async (req: FastifyRequest) => {
    const b = base(req);
    const out: Record<string, unknown> = {
      id: 'v1',
      links: [
        { href: `${b}/v1/`, rel: 'self' },
        { href: 'https://docs.openstack.org//ironic/latest/contributor//webapi.html', rel: 'describedby', type: 'text/html' },
      ],
      media_types: { base: 'application/json', type: 'application/vnd.openstack.ironic.v1+json' },
      chassis: link(b, 'chassis'),
      nodes: link(b, 'nodes'),
      ports: link(b, 'ports'),
      drivers: link(b, 'drivers'),
      version: versionObject(b),
    };
    if (req.apiVersion.atLeast(32)) out.volume = link(b, 'volume');
    if (req.apiVersion.atLeast(23)) out.portgroups = link(b, 'portgroups');
    if (req.apiVersion.atLeast(49)) out.conductors = link(b, 'conductors');
    if (req.apiVersion.atLeast(52)) out.allocations = link(b, 'allocations');
    if (req.apiVersion.atLeast(55)) out.deploy_templates = link(b, 'deploy_templates');
    if (req.apiVersion.atLeast(82)) out.shards = link(b, 'shards');
    if (req.apiVersion.atLeast(84)) out.continue_inspection = link(b, 'continue_inspection');
    if (req.apiVersion.atLeast(92)) out.runbooks = link(b, 'runbooks');
    return out;
  };
  app.get('/v1', v1);
  for (const method of ['POST', 'PUT', 'PATCH', 'DELETE'] as const) {
    app.route({ method, url: '/v1', handler: async () => { throw new MethodNotAllowed('Method not allowed on /v1.'); } });
  }
}
