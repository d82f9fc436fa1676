/**
 * The `ramdisk` deploy interface (Ironic's RamdiskDeploy): the node boots an ISO the user
 * names and runs from it; there is no image to write and no call-back, so the node is active
 * once the ISO is booted.
 */
import { InvalidParameterValue, MissingParameterValue, PowerOffDisabled } from '../../common/errors.js';
import { parseCapabilities } from '../../common/capabilities.js';
import type { DeployInterface, DeployValidation, InstanceBootRequest } from '../interfaces.js';
import type { StepDeclaration } from '../steps.js';
import { tearDownInstance } from './agent-base.js';
import { validateBoot } from '../validate-node.js';

const URL = /^(https?|nfs|cifs):\/\/[^\s/]+\S*$/i;

/**
 * What a ramdisk deploy boots: `boot_iso`, or (for a boot interface that boots a kernel, the
 * network boot ones) `kernel` and `ramdisk`. Virtual media needs an ISO, and Galvanic builds
 * none from a kernel and ramdisk for it.
 */
export function ramdiskBootImages(instanceInfo: Readonly<Record<string, unknown>>, bootsKernel = false): Pick<InstanceBootRequest, 'bootIso' | 'kernel' | 'ramdisk'> {
  const iso = instanceInfo.boot_iso;
  if (iso === undefined || iso === null || iso === '') {
    const { kernel, ramdisk } = instanceInfo;
    if (kernel !== undefined && ramdisk !== undefined) {
      if (!bootsKernel) throw new InvalidParameterValue("Building a boot ISO from instance_info kernel and ramdisk is not supported; set instance_info boot_iso to the URL of a bootable ISO.");
      for (const [name, v] of [['kernel', kernel], ['ramdisk', ramdisk]] as const) {
        if (typeof v !== 'string' || !/^(https?|file):\/\/\S+$/i.test(v)) throw new InvalidParameterValue(`instance_info ${name} must be an http, https or file URL, got ${JSON.stringify(v)}.`);
      }
      return { kernel: kernel as string, ramdisk: ramdisk as string };
    }
    throw new MissingParameterValue("Some parameters were missing in node's instance_info. Missing are: ['boot_iso']");
  }
  if (typeof iso !== 'string' || !URL.test(iso)) {
    throw new InvalidParameterValue(`instance_info boot_iso must be an http, https, nfs or cifs URL, got ${JSON.stringify(iso)}.`);
  }
  return { bootIso: iso };
}

/**
 * RamdiskDeploy.deploy: power off, boot.prepare_instance (eject, insert the ISO, boot from it),
 * power on.
 */
const DEPLOY_STEP: StepDeclaration = {
  step: 'deploy', priority: { deploy: 100 },
  async run(ctx) {
    const node = ctx.node;
    // It powers off first, which a node with disable_power_off refuses.
    if (node.disablePowerOff) throw new PowerOffDisabled('power off');
    await ctx.power.setPowerState(ctx.driver, 'power off');
    const req: InstanceBootRequest = ramdiskBootImages(node.instanceInfo, ctx.boot.bootsKernel === true);
    const mode = parseCapabilities(node.properties.capabilities).boot_mode ?? parseCapabilities(node.instanceInfo.capabilities).boot_mode;
    if (mode === 'uefi' || mode === 'bios') req.bootMode = mode;
    const configdrive = await ctx.configdrive();
    if (configdrive) req.configdrive = configdrive;
    const force = node.driverInfo.force_persistent_boot_device;
    if (force === 'Default' || force === 'Always' || force === 'Never') req.forcePersistentBootDevice = force;
    await ctx.boot.prepareInstance(ctx.driver, req);
    await ctx.power.setPowerState(ctx.driver, 'power on');
    return 'done';
  },
};

export class RamdiskDeploy implements DeployInterface {
  readonly supported = true;
  readonly bootOption = 'ramdisk';
  readonly usesAgent = false;
  readonly steps: readonly StepDeclaration[] = [DEPLOY_STEP];

  validate(): void {}

  /** Ironic's RamdiskDeploy.validate: a boot interface that can boot an ISO, and an ISO to boot. */
  validateDeploy(node: DeployValidation): void {
    if (!node.boot || !node.boot.ramdiskBoot) {
      throw new InvalidParameterValue('Invalid configuration: The boot interface must have the `ramdisk_boot` capability. You are using an incompatible boot interface.');
    }
    validateBoot(node.boot, node);
    ramdiskBootImages(node.instanceInfo, node.boot.bootsKernel === true);
  }

  tearDown = tearDownInstance;
}
