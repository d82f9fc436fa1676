/**
 * Validation of a node's interfaces against its driver_info and instance_info: what
 * `GET /v1/nodes/{n}/validate` reports, what the API checks before it accepts a deploy, and
 * what the conductor checks again before it starts one. No I/O.
 */
import { GalvanicError, InvalidParameterValue, MissingParameterValue, UnsupportedDriverExtension } from '../common/errors.js';
import { INTERFACE_KINDS, type InterfaceKind } from './interfaces.js';
import type { DriverRegistry } from './registry.js';
import { agentIso } from './agent-boot.js';

/** The parts of a node that validation reads. */
export interface NodeDescription {
  uuid: string;
  driver: string;
  interfaces: Record<InterfaceKind, string | null>;
  driverInfo: Readonly<Record<string, unknown>>;
  instanceInfo: Readonly<Record<string, unknown>>;
}

/** A node's fields as validation needs them; a node from db/ fits as it is. */
export type NodeLike = {
  uuid: string;
  driver: string;
  driverInfo: Readonly<Record<string, unknown>>;
  instanceInfo: Readonly<Record<string, unknown>>;
} & { [K in `${InterfaceKind}Interface`]?: string | null };

/** The description of a node that validation reads. */
export function describeNode(node: NodeLike): NodeDescription {
  const interfaces = {} as Record<InterfaceKind, string | null>;
  for (const kind of INTERFACE_KINDS) interfaces[kind] = node[`${kind}Interface`] ?? null;
  return { uuid: node.uuid, driver: node.driver, driverInfo: node.driverInfo, instanceInfo: node.instanceInfo, interfaces };
}

export interface ValidationResult {
  result: boolean;
  reason?: string;
}

/** The interfaces `validate` reports on (Ironic's non-vendor interfaces, in its order). */
export const VALIDATED_INTERFACES: readonly InterfaceKind[] = [
  'bios', 'boot', 'console', 'deploy', 'firmware', 'inspect', 'management', 'network', 'power', 'raid', 'rescue', 'storage',
];

function unsupported(node: NodeDescription, kind: InterfaceKind): UnsupportedDriverExtension {
  return new UnsupportedDriverExtension(`Driver ${node.driver} does not support ${kind} (disabled or not implemented).`);
}

/** Checks one interface. @throws InvalidParameterValue | MissingParameterValue | UnsupportedDriverExtension | InvalidDriverInfo */
export function validateInterface(registry: DriverRegistry, node: NodeDescription, kind: InterfaceKind): void {
  const name = node.interfaces[kind];
  const impl = registry.impl(kind, name);
  if (!impl) throw new UnsupportedDriverExtension(`The ${kind} interface ${name ?? '(none)'} of node ${node.uuid} is not enabled.`);
  if ('supported' in impl && !impl.supported) throw unsupported(node, kind);
  impl.validate(node.driverInfo);
  if (kind === 'deploy' && name === 'ramdisk') validateRamdiskDeploy(registry, node);
  if (kind === 'deploy' && name === 'direct') validateDirectDeploy(registry, node);
  if (kind === 'inspect' && 'inBand' in impl && impl.inBand) validateInspectionBoot(registry, node);
}

/**
 * Ironic's boot.validate_inspection, required for in-band inspection ([inspector]
 * require_managed_boot): a boot interface that boots the agent ISO over virtual media, and the ISO.
 */
export function validateInspectionBoot(registry: DriverRegistry, node: NodeDescription): void {
  const name = node.interfaces.boot;
  const boot = registry.impl('boot', name);
  if (!boot) throw new UnsupportedDriverExtension(`The boot interface ${name ?? '(none)'} of node ${node.uuid} is not enabled.`);
  boot.validate(node.driverInfo);
  if (name !== 'redfish-virtual-media') {
    throw new UnsupportedDriverExtension(`Driver ${node.driver} does not support validate_inspection (disabled or not implemented).`);
  }
  agentIso(node, registry.agentBoot);
}

/**
 * Ironic's AgentDeploy.validate: the boot interface can boot the agent, instance_info names the
 * image, and an image that is not Glance's or a file comes with its checksum.
 */
function validateDirectDeploy(registry: DriverRegistry, node: NodeDescription): void {
  const boot = registry.impl('boot', node.interfaces.boot);
  if (!boot || !boot.ramdiskBoot) {
    throw new InvalidParameterValue('Invalid configuration: the boot interface cannot boot the agent ISO; use a boot interface with virtual media (redfish-virtual-media).');
  }
  boot.validate(node.driverInfo);
  agentIso(node, registry.agentBoot);
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

/** Ironic's RamdiskDeploy.validate: a boot interface that can boot an ISO, and an ISO to boot. */
function validateRamdiskDeploy(registry: DriverRegistry, node: NodeDescription): void {
  const boot = registry.impl('boot', node.interfaces.boot);
  if (!boot || !boot.ramdiskBoot) {
    throw new InvalidParameterValue('Invalid configuration: The boot interface must have the `ramdisk_boot` capability. You are using an incompatible boot interface.');
  }
  boot.validate(node.driverInfo);
  ramdiskBootIso(node.instanceInfo);
}

/**
 * The ISO a ramdisk deploy boots. Ironic can also build one from `kernel` + `ramdisk`;
 * Galvanic hands URLs to the BMC as they are and builds no images, so it needs `boot_iso`.
 */
export function ramdiskBootIso(instanceInfo: Readonly<Record<string, unknown>>): string {
  const iso = instanceInfo.boot_iso;
  if (iso === undefined || iso === null || iso === '') {
    if (instanceInfo.kernel !== undefined && instanceInfo.ramdisk !== undefined) {
      throw new InvalidParameterValue("Building a boot ISO from instance_info kernel and ramdisk is not supported; set instance_info boot_iso to the URL of a bootable ISO.");
    }
    throw new MissingParameterValue("Some parameters were missing in node's instance_info. Missing are: ['boot_iso']");
  }
  if (typeof iso !== 'string' || !/^(https?|nfs|cifs):\/\/[^\s/]+\S*$/i.test(iso)) {
    throw new InvalidParameterValue(`instance_info boot_iso must be an http, https, nfs or cifs URL, got ${JSON.stringify(iso)}.`);
  }
  return iso;
}

/** Every interface's {result, reason}, as `GET /v1/nodes/{n}/validate` shows them. */
export function validateAll(registry: DriverRegistry, node: NodeDescription): Record<string, ValidationResult> {
  const out: Record<string, ValidationResult> = {};
  for (const kind of VALIDATED_INTERFACES) {
    try {
      validateInterface(registry, node, kind);
      out[kind] = { result: true };
    } catch (err) {
      if (!(err instanceof GalvanicError)) throw err;
      out[kind] = { result: false, reason: err.message };
    }
  }
  return out;
}

/** Ironic's check before a deploy or rebuild starts. @throws InvalidParameterValue naming the node */
export function validateForDeploy(registry: DriverRegistry, node: NodeDescription): void {
  try {
    validateInterface(registry, node, 'power');
    validateInterface(registry, node, 'deploy');
  } catch (err) {
    if (!(err instanceof GalvanicError) || err.httpStatus !== 400) throw err;
    throw new InvalidParameterValue(`Failed to validate deploy or power info for node ${node.uuid}: ${err.message}`);
  }
}
