/**
 * The deploy interfaces this build of Galvanic has, by name (Ironic's `ironic.hardware.interfaces.deploy`
 * entry points). A new one is its own file and a line here; `[DEFAULT] enabled_deploy_interfaces`
 * lists the names an operator may enable.
 */
import type { Config } from '../../common/config.js';
import type { DeployInterface } from '../interfaces.js';
import type { AgentDeployOptions } from './agent-base.js';
import { CustomAgentDeploy } from './custom-agent.js';
import { DirectDeploy } from './direct.js';
import { FakeDeploy } from './fake.js';
import { RamdiskDeploy } from './ramdisk.js';

/**
 * The deploy interfaces a hardware type with virtual media supports (Ironic's
 * GenericHardware.supported_deploy_interfaces), in Galvanic's order of preference.
 */
export const GENERIC_DEPLOY_INTERFACES: readonly string[] = ['ramdisk', 'direct', 'custom-agent'];

export function deployInterfaces(config: Pick<Readonly<Config>, 'agent'>): Record<string, DeployInterface> {
  const agent: AgentDeployOptions = {
    powerOffRetries: config.agent.post_deploy_get_power_state_retries,
    powerOffRetryIntervalMs: config.agent.post_deploy_get_power_state_retry_interval * 1000,
  };
  return {
    fake: new FakeDeploy(),
    ramdisk: new RamdiskDeploy(),
    direct: new DirectDeploy(agent),
    'custom-agent': new CustomAgentDeploy(agent),
  };
}
