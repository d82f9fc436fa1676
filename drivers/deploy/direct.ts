/**
 * The `direct` deploy interface (Ironic's AgentDeploy): the agent writes the image itself
 * (write_image, in-band), installs a bootloader for a partition image (prepare_instance_boot),
 * and the node then boots from its disk.
 */
import { AgentStepFailed, InvalidParameterValue, MissingParameterValue } from '../../common/errors.js';
import { bootModeOf, parseCapabilities } from '../../common/capabilities.js';
import { commandError } from '../agent/client.js';
import type { DeployValidation } from '../interfaces.js';
import type { StepContext, StepNode } from '../steps.js';
import { bootFromDisk, validateAgentBoot, type AgentDeployOptions } from './agent-base.js';
import { CustomAgentDeploy } from './custom-agent.js';

/**
 * Ironic's images.is_whole_disk_image for an image that is not Glance's: `image_type` says so,
 * else a kernel or ramdisk in instance_info makes it a partition image.
 */
export function isWholeDiskImage(ii: Readonly<Record<string, unknown>>): boolean {
  if (typeof ii.image_type === 'string' && ii.image_type !== '') return ii.image_type !== 'partition';
  return !ii.kernel && !ii.ramdisk;
}


/** instance_info fields AgentDeploy.write_image hands the agent for a partition image (PARTITION_IMAGE_LABELS). */
const PARTITION_IMAGE_LABELS = ['kernel', 'ramdisk', 'root_gb', 'root_mb', 'swap_mb', 'ephemeral_mb', 'ephemeral_format', 'configdrive', 'preserve_ephemeral', 'image_type', 'deploy_boot_mode'];

/**
 * image_info for write_image, as AgentDeploy.write_image builds it for an http image, with the
 * config drive as get_configdrive_image gives it (a URL, or gzip + base64).
 */
function writeImageArgs(node: StepNode, configdrive: string | undefined): Record<string, unknown> {
  const ii = node.instanceInfo;
  const source = String(ii.image_source);
  const info: Record<string, unknown> = {
    id: source.split('/').pop() || source, urls: [source], disk_format: ii.image_disk_format ?? 'raw', container_format: 'bare',
    stream_raw_images: true, node_uuid: node.uuid,
  };
  if (ii.image_os_hash_algo && ii.image_os_hash_value) {
    info.os_hash_algo = ii.image_os_hash_algo;
    info.os_hash_value = ii.image_os_hash_value;
  } else if (ii.image_checksum) {
    info.checksum = ii.image_checksum;
  }
  if (!isWholeDiskImage(ii)) {
    for (const label of PARTITION_IMAGE_LABELS) info[label] = label === 'configdrive' ? configdrive ?? null : ii[label] ?? null;
    // Ironic's build_instance_info_for_deploy gives the agent the root partition's size in MiB.
    if (info.root_mb === null && ii.root_gb !== undefined && ii.root_gb !== null) info.root_mb = 1024 * Number(ii.root_gb);
    info.deploy_boot_mode = bootModeOf(node);
    info.boot_option = 'local';
    const label = parseCapabilities(ii.capabilities).disk_label ?? parseCapabilities(node.properties.capabilities).disk_label;
    if (label) info.disk_label = label;
  }
  // Ironic also puts it in image_info, where older agents look for it.
  if (configdrive) info.configdrive = configdrive;
  return { image_info: info, configdrive: configdrive ?? null };
}

/**
 * prepare_instance_boot: the agent reports the partitions (for a whole-disk image, the disk's
 * identifier as its root); it installs the bootloader (AgentDeploy.configure_local_boot,
 * polled) on the partitions of a partition image, and for a whole-disk image in UEFI mode,
 * where the agent registers the image's own EFI loader in the machine's boot entries; then the
 * node boots from disk.
 */
async function prepareInstanceBoot(ctx: StepContext): Promise<void> {
  const agent = ctx.agent();
  // An install a run cut short sent is waited for first: the agent takes no other command meanwhile.
  const earlier = await agent.sentAlready(ctx.resume, 'image.install_bootloader');
  const installed = earlier && (await agent.pollUntilEnded('image.install_bootloader', earlier));
  const cmd = await agent.execute('standby.get_partition_uuids', {}, true);
  if (cmd.command_status === 'FAILED') throw new AgentStepFailed(`Failed to get partition UUIDs: ${commandError(cmd)}`);
  const uuids = (cmd.command_result ?? {}) as Record<string, unknown>;
  const root = typeof uuids['root uuid'] === 'string' ? uuids['root uuid'] : undefined;
  if (root) ctx.info.root_uuid_or_disk_id = root;
  const wholeDisk = isWholeDiskImage(ctx.node.instanceInfo);
  const mode = bootModeOf(ctx.node);
  if ((root && !wholeDisk) || (wholeDisk && mode === 'uefi')) {
    const arch = ctx.node.properties.cpu_arch;
    const result = installed || await agent.executeAndPoll('image.install_bootloader', {
      root_uuid: root ?? null,
      efi_system_part_uuid: mode === 'uefi' && !wholeDisk ? uuids['efi system partition uuid'] ?? null : null,
      prep_boot_part_uuid: typeof arch === 'string' && arch.startsWith('ppc64') ? uuids['PReP Boot partition uuid'] ?? null : null,
      target_boot_mode: mode,
    });
    if (result.command_status === 'FAILED') {
      throw new AgentStepFailed(`Failed to install a bootloader when deploying node ${ctx.node.uuid}: ${commandError(result)}`);
    }
  }
  await bootFromDisk(ctx);
}

/**
 * Ironic's AgentDeploy.validate: the boot interface can boot the agent, instance_info names the
 * image, and an image that is not Glance's or a file comes with its checksum.
 */
function validateDirectDeploy(node: DeployValidation): void {
  validateAgentBoot(node, node.boot);
  const ii = node.instanceInfo;
  const source = ii.image_source;
  if (source === undefined || source === null || source === '') {
    throw new MissingParameterValue(`Node ${node.uuid} failed to validate deploy image info. Some parameters were missing. Missing are: ['instance_info.image_source']`);
  }
  if (typeof source !== 'string') throw new InvalidParameterValue(`instance_info image_source must be a string, got ${JSON.stringify(source)}.`);
  const imageType = ii.image_type;
  if (imageType !== undefined && imageType !== null && imageType !== '' && imageType !== 'partition' && imageType !== 'whole-disk') {
    throw new InvalidParameterValue(`Invalid image_type "${String(imageType)}", valid are partition, whole-disk`);
  }
  if (!/^(https?|file|oci):\/\//i.test(source)) {
    throw new InvalidParameterValue(`instance_info image_source must be an http or https URL (Galvanic has no image service), got ${JSON.stringify(source)}.`);
  }
  if (source.startsWith('file://') || source.startsWith('oci://')) return;
  const algo = ii.image_os_hash_algo;
  const value = ii.image_os_hash_value;
  if ((value && !algo) || (!value && algo) || (!value && !ii.image_checksum)) {
    throw new MissingParameterValue(`image_source's "image_checksum", or "image_os_hash_algo" and "image_os_hash_value" must be provided in instance_info for node ${node.uuid}`);
  }
}

/** Ironic's AgentDeploy: CustomAgentDeploy with the image written by the agent, and its validation. */
export class DirectDeploy extends CustomAgentDeploy {
  constructor(opts: AgentDeployOptions) {
    super(opts, [
      {
        step: 'write_image', priority: { deploy: 80 }, sendsAgentStep: true,
        run: async (ctx, args) => ctx.agent().executeStep('deploy', { ...ctx.step, args: { ...args, ...writeImageArgs(ctx.node, await ctx.configdrive()) } }, ctx.info.agent_deploy_version, ctx.resume),
      },
      {
        step: 'prepare_instance_boot', priority: { deploy: 60 }, powersOffOnFailure: true,
        async run(ctx) {
          await prepareInstanceBoot(ctx);
          return 'done';
        },
      },
    ]);
  }

  override validateDeploy(node: DeployValidation): void {
    validateDirectDeploy(node);
  }
}
