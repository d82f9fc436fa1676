/**
 * Finding a node's vendor passthru method, as Ironic's conductor does before it calls one:
 * the method among its vendor interface's, then the HTTP verb among the method's. The API
 * checks with it before queuing, the conductor again when it runs the call.
 */
import { InvalidParameterValue, UnsupportedDriverExtension } from '../common/errors.js';
import type { VendorMethod } from './interfaces.js';
import type { DriverRegistry } from './registry.js';

/** What a node's vendor passthru needs of it. */
export interface VendorNode {
  driver: string;
  vendorInterface: string | null;
}

/** The methods of the node's vendor interface (none for `no-vendor`). */
export function vendorMethods(registry: DriverRegistry, node: VendorNode): Readonly<Record<string, VendorMethod>> {
  const vendor = registry.impl('vendor', node.vendorInterface);
  if (!vendor) throw new UnsupportedDriverExtension(`Driver ${node.driver} does not support vendor (disabled or not implemented).`);
  return vendor.methods ?? {};
}

/** The method `name` called with `httpMethod`. @throws InvalidParameterValue with Ironic's messages */
export function vendorMethod(registry: DriverRegistry, node: VendorNode, name: string, httpMethod: string): VendorMethod {
  const methods = vendorMethods(registry, node);
  const method = Object.hasOwn(methods, name) ? methods[name] : undefined;
  if (!method) throw new InvalidParameterValue(`No handler for method ${name}`);
  const verb = httpMethod.toUpperCase();
  if (!method.httpMethods.includes(verb)) throw new InvalidParameterValue(`The method ${name} does not support HTTP ${verb}`);
  return method;
}

/** Ironic's get_vendor_passthru_metadata: each method's description, without its function. */
export function vendorMetadata(methods: Readonly<Record<string, VendorMethod>>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(methods).map(([name, m]) => [name, {
    http_methods: [...m.httpMethods], async: m.async, description: m.description, attach: m.attach, require_exclusive_lock: m.requireExclusiveLock,
  }]));
}
