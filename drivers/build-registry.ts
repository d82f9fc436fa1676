import { pino, type Logger } from 'pino';
import type { Config } from '../common/config.js';
import { BmcBudget } from './bmc-budget.js';
import { DriverRegistry } from './registry.js';
import { FakeBmcs, FakeBoot, FakeConsole, FakeInspect, FakeManagement, FakePower, NoConsole, fakeHardware } from './fake/fake.js';
import { IpmitoolSolConsole } from './ipmi/console.js';
import { INTERFACE_KINDS, type HardwareType, type InterfaceImplementations, type InterfaceKind } from './interfaces.js';
import { createIpmiInterfaces, ipmiHardware, ipmiRunnerOptions } from './ipmi/hardware.js';
import { RedfishDriver, redfishHardware, redfishOptions } from './redfish/index.js';
import { IdracDriver, idracHardware, IDRAC_REDFISH, IDRAC_VIRTUAL_MEDIA } from './idrac/index.js';
import { GenericImpl, NoInspect, fakeAndNone } from './generic.js';
import { netbootInterfaces } from './netboot/index.js';
import { CachedImageSource } from './netboot/images.js';
import type { ImageCache } from './image/image-cache.js';
import { AgentInspect } from './agent-inspect.js';
import { AgentRaid, agentRaidOptions } from './agent-raid.js';
import { deployInterfaces } from './deploy/index.js';
import type { BootImages } from './image/boot-images.js';
import { parseHooks, type AddPorts, type KeepPorts } from './inspection-hooks.js';

/** Every hardware type this build of Galvanic knows; the config enables a subset. */
export const KNOWN_HARDWARE_TYPES: readonly HardwareType[] = [fakeHardware, redfishHardware, ipmiHardware, idracHardware];

/**
 * Builds the registry for one process from its config. Drivers whose hardware type is not
 * enabled are still constructed cheaply (no pools or workers start until first use).
 * `bootImages`, `imageCache` and `httpUrl` are a conductor's: what it builds and publishes for its
 * nodes' BMCs, the images it downloads once, and where its HTTP root is served.
 */
export function buildRegistry(
  config: Readonly<Config>, log?: Logger, deps: { bootImages?: BootImages; imageCache?: ImageCache; httpUrl?: () => string } = {},
): DriverRegistry {
  const bmcs = new FakeBmcs(config.fake.record_file);
  // One budget per BMC for every driver and path of this process (bmc-budget.ts).
  const budget = new BmcBudget(config.conductor.per_bmc_concurrency);
  const ipmi = createIpmiInterfaces(ipmiRunnerOptions(config, log, budget));
  // No pool or session exists until the first call to a Redfish BMC.
  const redfish = new RedfishDriver(redfishOptions(config), log ?? pino({ level: 'silent' }), budget, deps.bootImages);
  const idrac = new IdracDriver(redfish);
  const inspector = config.inspector;
  const agentInspect = new AgentInspect({
    hooks: parseHooks(inspector.hooks, inspector.default_hooks),
    addPorts: inspector.add_ports as AddPorts,
    keepPorts: inspector.keep_ports as KeepPorts,
    updatePxeEnabled: inspector.update_pxe_enabled,
    diskPartitioningSpacing: inspector.disk_partitioning_spacing,
  });
  const impls: InterfaceImplementations = {
    bios: { ...fakeAndNone('bios'), redfish: redfish.bios, [IDRAC_REDFISH]: redfish.bios },
    boot: {
      fake: new FakeBoot(bmcs), 'redfish-virtual-media': redfish.boot, 'redfish-https': redfish.httpsBoot, [IDRAC_VIRTUAL_MEDIA]: idrac.boot,
      ...netbootInterfaces(config, { ...(deps.imageCache ? { images: new CachedImageSource(deps.imageCache) } : {}), ...(deps.httpUrl ? { httpUrl: deps.httpUrl } : {}) }),
    },
    console: { fake: new FakeConsole(), 'no-console': new NoConsole(), 'ipmitool-sol': new IpmitoolSolConsole() },
    deploy: deployInterfaces(config),
    firmware: { ...fakeAndNone('firmware'), redfish: redfish.firmware },
    inspect: { fake: new FakeInspect(), redfish: redfish.inspect, [IDRAC_REDFISH]: idrac.inspect, agent: agentInspect, 'no-inspect': new NoInspect() },
    management: { fake: new FakeManagement(bmcs), redfish: redfish.management, [IDRAC_REDFISH]: idrac.management, ipmitool: ipmi.management },
    network: { noop: new GenericImpl(true) },
    power: { fake: new FakePower(bmcs), redfish: redfish.power, [IDRAC_REDFISH]: redfish.power, ipmitool: ipmi.power },
    raid: { ...fakeAndNone('raid'), redfish: redfish.raid, [IDRAC_REDFISH]: idrac.raid, agent: new AgentRaid(agentRaidOptions(config)) },
    rescue: fakeAndNone('rescue'),
    storage: { noop: new GenericImpl(true) },
    vendor: { ...fakeAndNone('vendor'), redfish: redfish.vendor, [IDRAC_REDFISH]: redfish.vendor },
  };
  const d = config.DEFAULT as unknown as Record<string, unknown>;
  const enabled = {} as Record<InterfaceKind, readonly string[]>;
  const defaults = {} as Record<InterfaceKind, string>;
  for (const kind of INTERFACE_KINDS) {
    enabled[kind] = d[`enabled_${kind}_interfaces`] as string[];
    defaults[kind] = d[`default_${kind}_interface`] as string;
  }
  const registry = new DriverRegistry(KNOWN_HARDWARE_TYPES, impls, {
    enabledHardwareTypes: config.DEFAULT.enabled_hardware_types, enabled, defaults,
  }, budget);
  // The pool itself starts on the first IPMI command; closing kills running ipmitools first.
  registry.onClose(ipmi.close);
  registry.onClose(() => redfish.close());
  return registry;
}

