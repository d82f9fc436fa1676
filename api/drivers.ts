import type { FastifyInstance, FastifyRequest } from 'fastify';
import { DriverNotFound, InvalidParameterValue, NotAcceptable } from '../common/errors.js';
import { listConductors } from '../db/conductors.js';
import { INTERFACE_KINDS, type HardwareType } from '../drivers/interfaces.js';
import type { ApiDeps } from './deps.js';
import { baseUrl, resourceLinks } from './links.js';
import { boolParam, param, type Query } from './query.js';

/** Ironic's error for a node whose hardware type no conductor serves. */
export function noValidHost(driver: string, conductorGroup: string): InvalidParameterValue {
  return new InvalidParameterValue(`No valid host was found. Reason: No conductor service registered which supports driver ${driver} for conductor group "${conductorGroup}".`);
}

/** Interface kinds Ironic lists for a hardware type. */
const ALL_KINDS = ['bios', 'boot', 'console', 'deploy', 'firmware', 'inspect', 'management', 'network', 'power', 'raid', 'rescue', 'storage', 'vendor'];
/** Kinds Ironic hides below the version that introduced them (hide_fields_in_newer_versions). */
const KIND_SINCE: Readonly<Record<string, number>> = { storage: 33, rescue: 38, bios: 40, firmware: 86 };

export function registerDriverRoutes(app: FastifyInstance, deps: ApiDeps): void {
  const { db, config, registry } = deps;

  async function hostsByDriver(): Promise<Map<string, string[]>> {
    const out = new Map<string, string[]>();
    for (const c of await listConductors(db, config.conductor.heartbeat_timeout)) {
      if (!c.alive) continue;
      for (const d of c.drivers) out.set(d, [...(out.get(d) ?? []), c.hostname]);
    }
    return out;
  }

  function driverView(req: FastifyRequest, hw: HardwareType, hosts: string[], detail: boolean) {
    const base = baseUrl(req, config.api.public_endpoint);
    const out: Record<string, unknown> = {
      hosts,
      name: hw.name,
      links: resourceLinks(base, 'drivers', hw.name),
    };
    if (req.apiVersion.atLeast(14)) out.properties = resourceLinks(base, 'drivers', hw.name, 'properties');
    if (req.apiVersion.atLeast(30)) out.type = 'dynamic';
    if (detail && req.apiVersion.atLeast(30)) {
      for (const kind of ALL_KINDS) {
        if (!req.apiVersion.atLeast(KIND_SINCE[kind] ?? 1)) continue;
        const driven = (INTERFACE_KINDS as readonly string[]).includes(kind);
        if (!driven) {
          out[`default_${kind}_interface`] = null;
          out[`enabled_${kind}_interfaces`] = null;
          continue;
        }
        const k = kind as (typeof INTERFACE_KINDS)[number];
        // Supported by the type and enabled in the config; no default when none is (a node create says why).
        out[`default_${kind}_interface`] = registry.defaultInterface(hw.name, k);
        out[`enabled_${kind}_interfaces`] = registry.enabledInterfaces(hw.name, k);
      }
    }
    return out;
  }

  app.get('/v1/drivers', async (req) => {
    const q = req.query as Query;
    const type = param(q, 'type');
    // Ironic's check_allow_filter_driver_type and check_allow_driver_detail: any value, even false, is gated.
    const tooOld = new NotAcceptable('Request not acceptable. The minimal required API version should be 1.30');
    if (param(q, 'detail') !== undefined && !req.apiVersion.atLeast(30)) throw tooOld;
    if (type !== undefined && !req.apiVersion.atLeast(30)) throw tooOld;
    if (type !== undefined && type !== 'classic' && type !== 'dynamic') {
      throw new InvalidParameterValue('"type" filter must be one of "classic" or "dynamic", if specified.');
    }
    const detail = boolParam(q, 'detail') ?? false;
    if (type === 'classic') return { drivers: [] };
    const hosts = await hostsByDriver();
    return { drivers: registry.hardwareTypes().map((hw) => driverView(req, hw, hosts.get(hw.name) ?? [], detail)) };
  });

  function find(name: string): HardwareType {
    const hw = registry.hardwareTypes().find((t) => t.name === name);
    if (!hw) throw new DriverNotFound(name);
    return hw;
  }

  app.get('/v1/drivers/:name', async (req) => {
    const hw = find((req.params as { name: string }).name);
    const hosts = await hostsByDriver();
    return driverView(req, hw, hosts.get(hw.name) ?? [], true);
  });

  app.get('/v1/drivers/:name/properties', async (req) => {
    return { ...find((req.params as { name: string }).name).properties };
  });
}
