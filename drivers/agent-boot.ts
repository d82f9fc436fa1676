/**
 * The agent (ironic-python-agent) ramdisk a node boots over virtual media for in-band work
 * (inspection, the direct deploy, cleaning): Ironic's driver_utils.get_agent_iso as the
 * `redfish-virtual-media` boot interface reads it. Galvanic hands the URL to the BMC as it
 * is and builds no ISO, so `deploy_kernel` + `deploy_ramdisk` alone are refused.
 */
import { InvalidParameterValue, MissingParameterValue } from '../common/errors.js';

const IMAGE_URL = /^(https?|nfs|cifs):\/\/[^\s/]+\S*$/i;

/**
 * The agent ISO of a node: driver_info `deploy_iso` (or the deprecated `redfish_deploy_iso`).
 * @throws MissingParameterValue (Ironic's message for a node with neither ISO nor kernel and ramdisk) | InvalidParameterValue
 */
export function agentIso(driverInfo: Readonly<Record<string, unknown>>): string {
  const iso = driverInfo.deploy_iso ?? driverInfo.redfish_deploy_iso;
  if (iso === undefined || iso === null || iso === '') {
    const missing = ['deploy_kernel', 'deploy_ramdisk'].filter((k) => !driverInfo[k]);
    if (missing.length === 0) {
      throw new InvalidParameterValue('Building the agent ISO from driver_info deploy_kernel and deploy_ramdisk is not supported; set driver_info deploy_iso to the URL of a bootable agent ISO.');
    }
    throw new MissingParameterValue(`Error validating Redfish virtual media. Some parameters were missing in node's driver_info. Missing are: [${missing.map((k) => `'${k}'`).join(', ')}]`);
  }
  if (typeof iso !== 'string' || !IMAGE_URL.test(iso)) {
    throw new InvalidParameterValue(`driver_info deploy_iso must be an http, https, nfs or cifs URL, got ${JSON.stringify(iso)}.`);
  }
  return iso;
}
