/**
 * OpenShift's CoreOSInstallHardwareManager (openshift/ironic-agent-image,
 * `hardware_manager/ironic_coreos_install.py`): a second hardware manager in the ramdisk whose
 * `install_coreos` deploy step runs coreos-installer onto the root disk, with the Ignition
 * config taken from the config drive Ironic passes, as JSON, in the node's instance_info.
 */
import { deploymentError, type Step } from './ipa.js';
import type { DiskState } from './types.js';

export const COREOS_MANAGER = 'CoreOSInstallHardwareManager';
export const COREOS_MANAGER_VERSION = '1';

export const COREOS_DEPLOY_STEPS: readonly Step[] = [
  { step: 'install_coreos', priority: 0, interface: 'deploy', reboot_requested: false, argsinfo: {} },
];

/**
 * install_coreos: what the disk holds afterwards. A pre-rendered config drive (a string: an
 * ISO or its URL) cannot give coreos-installer an Ignition file, so it fails the step as the
 * real manager does. @throws IpaError
 */
export function installCoreos(node: unknown): DiskState {
  const ii = ((node as { instance_info?: Record<string, unknown> } | null)?.instance_info ?? {});
  const configdrive = ii.configdrive ?? {};
  if (typeof configdrive === 'string') throw deploymentError('Cannot use a pre-rendered configdrive, please pass it as JSON data');
  const userData = (configdrive as Record<string, unknown>).user_data;
  const source = typeof ii.image_source === 'string' && ii.image_source ? ii.image_source : null;
  return {
    // Without an image URL coreos-installer installs the image the live ramdisk carries (--offline).
    imageUrl: source ?? 'coreos-installer:offline',
    bytes: 0,
    sha256: '',
    writtenAt: Date.now(),
    imageType: 'whole-disk',
    bootloader: null,
    configdrive: null,
    ignition: userData === undefined || userData === null ? null : typeof userData === 'string' ? userData : JSON.stringify(userData),
  };
}
