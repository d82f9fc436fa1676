/**
 * Validation of a node's interfaces against its driver_info and instance_info: what
 * `GET /v1/nodes/{n}/validate` reports, what the API checks before it accepts a deploy, and
 * what the conductor checks again before it starts one. No I/O.
 */
import { GalvanicError, InvalidParameterValue, UnsupportedDriverExtension } from '../common/errors.js';
import { INTERFACE_KINDS, type BootInterface, type BootPort, type BootValidation, type DeployInterface, type InterfaceKind } from './interfaces.js';
import type { DriverRegistry } from './registry.js';

/** The parts of a node that validation reads. */
export interface NodeDescription {
  uuid: string;
  driver: string;
  interfaces: Record<InterfaceKind, string | null>;
  driverInfo: Readonly<Record<string, unknown>>;
  instanceInfo: Readonly<Record<string, unknown>>;
  properties: Readonly<Record<string, unknown>>;
  /** The node's ports, where the caller read them (network boot needs one to boot from). */
  ports?: readonly BootPort[];
}

/** A node's fields as validation needs them; a node from db/ fits as it is. */
export type NodeLike = {
  uuid: string;
  driver: string;
  driverInfo: Readonly<Record<string, unknown>>;
  instanceInfo: Readonly<Record<string, unknown>>;
  properties?: Readonly<Record<string, unknown>>;
} & { [K in `${InterfaceKind}Interface`]?: string | null };

/** The description of a node that validation reads; `ports` when the caller has them. */
export function describeNode(node: NodeLike, ports?: readonly BootPort[]): NodeDescription {
  const interfaces = {} as Record<InterfaceKind, string | null>;
  for (const kind of INTERFACE_KINDS) interfaces[kind] = node[`${kind}Interface`] ?? null;
  return {
    uuid: node.uuid, driver: node.driver, driverInfo: node.driverInfo, instanceInfo: node.instanceInfo, properties: node.properties ?? {}, interfaces,
    ...(ports ? { ports } : {}),
  };
}

/** Whether validating the node's boot interface reads its ports (callers read them only then). */
export function bootNeedsPorts(registry: DriverRegistry, node: NodeLike): boolean {
  return registry.impl('boot', node.bootInterface)?.validateNode !== undefined;
}

/** A boot interface's checks: its driver_info, then the node beyond it. @throws InvalidParameterValue | MissingParameterValue | InvalidDriverInfo */
export function validateBoot(boot: BootInterface, node: BootValidation): void {
  boot.validate(node.driverInfo);
  boot.validateNode?.(node);
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
  if (kind === 'boot') validateBoot(impl as BootInterface, node);
  else impl.validate(node.driverInfo);
  if (kind === 'deploy') {
    (impl as DeployInterface).validateDeploy({
      uuid: node.uuid, driverInfo: node.driverInfo, instanceInfo: node.instanceInfo, properties: node.properties,
      ...(node.ports ? { ports: node.ports } : {}), boot: registry.impl('boot', node.interfaces.boot),
    });
  }
  if (kind === 'inspect' && 'inBand' in impl && impl.inBand) validateInspectionBoot(registry, node);
}

/**
 * Ironic's boot.validate_inspection, required for in-band inspection ([inspector]
 * require_managed_boot): a boot interface that can boot the agent, and the agent's image.
 */
export function validateInspectionBoot(registry: DriverRegistry, node: NodeDescription): void {
  const name = node.interfaces.boot;
  const boot = registry.impl('boot', name);
  if (!boot) throw new UnsupportedDriverExtension(`The boot interface ${name ?? '(none)'} of node ${node.uuid} is not enabled.`);
  validateBoot(boot, node);
  if (!boot.validateRamdisk || !boot.prepareRamdisk) {
    throw new UnsupportedDriverExtension(`Driver ${node.driver} does not support validate_inspection (disabled or not implemented).`);
  }
  boot.validateRamdisk(node.uuid, node.driverInfo);
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
