/**
 * The agent (ironic-python-agent) ramdisk a node boots over virtual media for in-band work
 * (inspection, the direct deploy, cleaning), found as Ironic's `redfish-virtual-media` boot
 * interface finds it (redfish/boot.py _parse_driver_info): driver_info `deploy_iso`, else a
 * kernel and ramdisk, from driver_info or else from `[conductor] deploy_kernel/deploy_ramdisk`
 * (Ironic has no `[conductor]` ISO). Galvanic hands an ISO's URL to the BMC as it is and builds
 * no ISO, so a kernel and ramdisk, wherever they come from, are refused.
 */
import { InvalidParameterValue, MissingParameterValue } from '../common/errors.js';

const IMAGE_URL = /^(https?|nfs|cifs):\/\/[^\s/]+\S*$/i;

/** The `[conductor]` options that supply a node's agent kernel and ramdisk when its driver_info has none. */
export interface AgentBootDefaults {
  deployKernel: string;
  deployRamdisk: string;
  /** `[conductor] error_on_ramdisk_config_inconsistency`. */
  errorOnRamdiskConfigInconsistency: boolean;
}

export const NO_AGENT_BOOT_DEFAULTS: AgentBootDefaults = { deployKernel: '', deployRamdisk: '', errorOnRamdiskConfigInconsistency: false };

/** The node fields the agent's boot is found from. */
export interface AgentBootNode {
  uuid: string;
  driverInfo: Readonly<Record<string, unknown>>;
}

/** Ironic reads driver_info fields by truthiness: an empty string is no value. */
function field(info: Readonly<Record<string, unknown>>, name: string): unknown {
  const v = info[name];
  return v === undefined || v === null || v === '' ? undefined : v;
}

/**
 * Ironic's get_agent_kernel_ramdisk: driver_info's pair when it names both; one of them alone
 * is ambiguous (refused with `error_on_ramdisk_config_inconsistency`, else ignored); then the
 * `[conductor]` pair.
 * @throws MissingParameterValue for an ambiguous driver_info that the config says to refuse
 */
function kernelAndRamdisk(node: AgentBootNode, defaults: AgentBootDefaults): { pair: Record<string, unknown>; from: string } {
  const kernel = field(node.driverInfo, 'deploy_kernel');
  const ramdisk = field(node.driverInfo, 'deploy_ramdisk');
  if (kernel && ramdisk) return { pair: { deploy_kernel: kernel, deploy_ramdisk: ramdisk }, from: 'driver_info' };
  if ((kernel || ramdisk) && defaults.errorOnRamdiskConfigInconsistency) {
    const [solo, missing] = kernel ? ['deploy_kernel', 'deploy_ramdisk'] : ['deploy_ramdisk', 'deploy_kernel'];
    throw new MissingParameterValue(`Node ${node.uuid} driver_info has an override for ${solo}, but not for ${missing}. This configuration is ambiguous. Node ${node.uuid} cannot boot a ramdisk.`);
  }
  return { pair: { deploy_kernel: defaults.deployKernel, deploy_ramdisk: defaults.deployRamdisk }, from: '[conductor]' };
}

/**
 * The agent ISO of a node: driver_info `deploy_iso` (or the deprecated `redfish_deploy_iso`).
 * @throws MissingParameterValue (Ironic's message when no ISO, nor kernel and ramdisk, is set
 *   in driver_info or the config) | InvalidParameterValue (a kernel and ramdisk, or a bad URL)
 */
export function agentIso(node: AgentBootNode, defaults: AgentBootDefaults): string {
  const iso = field(node.driverInfo, 'deploy_iso') ?? field(node.driverInfo, 'redfish_deploy_iso');
  if (iso === undefined) {
    const { pair, from } = kernelAndRamdisk(node, defaults);
    const missing = Object.keys(pair).filter((k) => !pair[k]);
    if (missing.length) {
      throw new MissingParameterValue(`Error validating Redfish virtual media. Some parameters were missing in node's driver_info. Missing are: [${missing.map((k) => `'${k}'`).join(', ')}]`);
    }
    throw new InvalidParameterValue(`Building the agent ISO from ${from} deploy_kernel and deploy_ramdisk is not supported; set driver_info deploy_iso to the URL of a bootable agent ISO.`);
  }
  if (typeof iso !== 'string' || !IMAGE_URL.test(iso)) {
    throw new InvalidParameterValue(`driver_info deploy_iso must be an http, https, nfs or cifs URL, got ${JSON.stringify(iso)}.`);
  }
  return iso;
}

/** The agent boot defaults of a config's `[conductor]` section. */
export function agentBootDefaults(conductor: { deploy_kernel: string; deploy_ramdisk: string; error_on_ramdisk_config_inconsistency: boolean }): AgentBootDefaults {
  return {
    deployKernel: conductor.deploy_kernel, deployRamdisk: conductor.deploy_ramdisk,
    errorOnRamdiskConfigInconsistency: conductor.error_on_ramdisk_config_inconsistency,
  };
}
