import type { Logger } from 'pino';
import type { Config } from '../../common/config.js';
import type { BmcBudget } from '../bmc-budget.js';
import type { HardwareType } from '../interfaces.js';
import { IPMI_PROPERTIES } from './driver-info.js';
import { GENERIC_DEPLOY_INTERFACES } from '../deploy/index.js';
import { IpmitoolManagement } from './management.js';
import { IpmitoolPower } from './power.js';
import { IpmitoolRunner, type IpmitoolRunnerOptions } from './runner.js';

/**
 * Ironic's `ipmi` hardware type; no-console first so that a console is asked for, as in Ironic.
 * It boots from the network (ipxe, pxe: drivers/netboot/).
 */
export const ipmiHardware: HardwareType = {
  name: 'ipmi',
  supported: {
    bios: ['no-bios'], boot: ['ipxe', 'pxe'], console: ['no-console', 'ipmitool-sol'], deploy: GENERIC_DEPLOY_INTERFACES, firmware: ['no-firmware'],
    inspect: ['agent', 'no-inspect'], management: ['ipmitool'], network: ['noop'], power: ['ipmitool'], raid: ['no-raid', 'agent'],
    rescue: ['no-rescue'], storage: ['noop'], vendor: ['no-vendor'],
  },
  properties: IPMI_PROPERTIES,
};

/** Runner options from `[ipmi]` (seconds in the file, milliseconds here). */
export function ipmiRunnerOptions(config: Readonly<Config>, log?: Logger, budget?: BmcBudget): IpmitoolRunnerOptions {
  const c = config.ipmi;
  return {
    workers: c.workers,
    commandTimeoutMs: c.command_timeout * 1000,
    minCommandIntervalMs: c.min_command_interval * 1000,
    commandRetryTimeoutMs: c.command_retry_timeout * 1000,
    useIpmitoolRetries: c.use_ipmitool_retries,
    log,
    budget,
  };
}

/** The ipmitool interfaces sharing one runner; `close` kills running ipmitools and stops the pool. */
export function createIpmiInterfaces(opts: IpmitoolRunnerOptions): { power: IpmitoolPower; management: IpmitoolManagement; close: () => Promise<void> } {
  const runner = new IpmitoolRunner(opts);
  return { power: new IpmitoolPower(runner), management: new IpmitoolManagement(runner), close: () => runner.close() };
}
