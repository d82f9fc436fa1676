import { pino, type Logger } from 'pino';
import type { Config } from '../common/config.js';
import { DriverRegistry } from './registry.js';
import { FakeBmcs, FakeConsole, FakeManagement, FakePower, NoConsole, fakeHardware } from './fake/fake.js';
import { IpmitoolSolConsole } from './ipmi/console.js';
import type { HardwareType, InterfaceImplementations } from './interfaces.js';
import { createIpmiInterfaces, ipmiHardware, ipmiRunnerOptions } from './ipmi/hardware.js';
import { RedfishDriver, redfishHardware, redfishOptions } from './redfish/index.js';

/** Every hardware type this build of Galvanic knows; the config enables a subset. */
export const KNOWN_HARDWARE_TYPES: readonly HardwareType[] = [fakeHardware, redfishHardware, ipmiHardware];

/**
 * Builds the registry for one process from its config. Drivers whose hardware type is not
 * enabled are still constructed cheaply (no pools or workers start until first use).
 */
export function buildRegistry(config: Readonly<Config>, log?: Logger): DriverRegistry {
  void log;
  const bmcs = new FakeBmcs(config.fake.record_file);
  const ipmi = createIpmiInterfaces(ipmiRunnerOptions(config, log));
  // No pool or session exists until the first call to a Redfish BMC.
  const redfish = new RedfishDriver(redfishOptions(config), log ?? pino({ level: 'silent' }));
  const impls: InterfaceImplementations = {
    power: { fake: new FakePower(bmcs), redfish: redfish.power, ipmitool: ipmi.power },
    management: { fake: new FakeManagement(bmcs), redfish: redfish.management, ipmitool: ipmi.management },
    console: { fake: new FakeConsole(), 'no-console': new NoConsole(), 'ipmitool-sol': new IpmitoolSolConsole() },
  };
  const d = config.DEFAULT;
  const registry = new DriverRegistry(KNOWN_HARDWARE_TYPES, impls, {
    enabledHardwareTypes: d.enabled_hardware_types,
    enabled: {
      power: d.enabled_power_interfaces,
      management: d.enabled_management_interfaces,
      console: d.enabled_console_interfaces,
    },
    defaults: {
      power: d.default_power_interface,
      management: d.default_management_interface,
      console: d.default_console_interface,
    },
  });
  // The pool itself starts on the first IPMI command; closing kills running ipmitools first.
  registry.onClose(ipmi.close);
  registry.onClose(() => redfish.close());
  return registry;
}
