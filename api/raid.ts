import type { FastifyInstance, FastifyRequest } from 'fastify';
import { DriverNotFound, InvalidParameterValue, NotAcceptable, RaidNotSupported } from '../common/errors.js';
import { LOGICAL_DISK_PROPERTIES, validateRaidConfig } from '../common/raid.js';
import { getNode, updateNode, type Node } from '../db/nodes.js';
import type { DriverRegistry } from '../drivers/registry.js';
import type { ApiDeps } from './deps.js';
import type { ApiVersion } from './versioning.js';

/** Ironic's `no-raid`: the one RAID interface that cannot take a RAID configuration. */
const NO_RAID = 'no-raid';

/** The node's RAID interface; a node without one (none was enabled when it was made) has no RAID. */
export function raidInterfaceOf(node: Node): string {
  return node.raidInterface ?? NO_RAID;
}

/** The RAID interface a node of `driver` gets by default. @throws DriverNotFound */
export function defaultRaidInterface(registry: DriverRegistry, driver: string): string | null {
  if (!registry.hardwareTypes().some((t) => t.name === driver)) throw new DriverNotFound(driver);
  return registry.defaultInterface(driver, 'raid');
}

function requireRaidVersion(version: ApiVersion): void {
  if (!version.atLeast(12)) {
    throw new NotAcceptable(`Request not acceptable. RAID configuration requires API version 1.12 or later; the request used ${version.toString()}.`);
  }
}

/** `PUT /v1/nodes/{n}/states/raid` and `GET /v1/drivers/{d}/raid/logical_disk_properties` (API 1.12). */
export function registerRaidRoutes(app: FastifyInstance, deps: ApiDeps): void {
  const { db, registry } = deps;

  app.put('/v1/nodes/:node/states/raid', async (req, reply) => {
    requireRaidVersion(req.apiVersion);
    const body = req.body;
    if (body === null || typeof body !== 'object' || Array.isArray(body)) {
      throw new InvalidParameterValue('Invalid input for field/attribute target_raid_config. Expected a JSON object.');
    }
    const config = body as Record<string, unknown>;
    const node = await getNode(db, (req.params as { node: string }).node);
    // As in Ironic, an empty configuration clears the target whatever the interface.
    if (Object.keys(config).length > 0) {
      if (raidInterfaceOf(node) === NO_RAID) throw new RaidNotSupported(node.driver);
      // Ironic's conductor asks the node's RAID interface (set_target_raid_config).
      const raid = registry.impl('raid', raidInterfaceOf(node));
      if (raid?.validateRaidConfig) raid.validateRaidConfig(config);
      else validateRaidConfig(config);
    }
    await updateNode(db, node.id, { targetRaidConfig: config });
    reply.code(204).send();
  });

  const logicalDiskProperties = async (req: FastifyRequest) => {
    requireRaidVersion(req.apiVersion);
    const driver = (req.params as { name: string }).name;
    const raid = defaultRaidInterface(registry, driver);
    if (raid === null || raid === NO_RAID) throw new RaidNotSupported(driver);
    return { ...LOGICAL_DISK_PROPERTIES };
  };
  // A path without the version (as ironic-tempest-plugin asks for this one) reaches it through routingUrl.
  app.get('/v1/drivers/:name/raid/logical_disk_properties', logicalDiskProperties);
}
