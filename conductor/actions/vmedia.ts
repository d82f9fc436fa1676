/**
 * Virtual media attach, detach and read (API 1.89 and 1.93), through the node's boot interface.
 * As Ironic runs them: an attach or detach that fails is recorded in the node's history and
 * `last_error` after the API answered 204; a read fails the request and leaves `last_error` alone.
 */
import { UnsupportedDriverExtension } from '../../common/errors.js';
import type { BootInterface } from '../../drivers/interfaces.js';
import { argsOf } from '../../common/intent-kinds.js';
import type { Action, ActionContext } from './types.js';

/** The boot interface's method, or Ironic's UnsupportedDriverExtension naming the call. */
function media<K extends 'attachMedia' | 'detachMedia' | 'getMedia'>(ctx: ActionContext, method: K, extension: string): NonNullable<BootInterface[K]> {
  const boot = ctx.registry.impl('boot', ctx.node.bootInterface);
  const fn = boot?.[method];
  if (!boot || !fn) throw new UnsupportedDriverExtension(`Driver ${ctx.node.driver} does not support ${extension} (disabled or not implemented).`);
  ctx.registry.management(ctx.node.managementInterface ?? '')?.validate(ctx.node.driverInfo);
  return fn.bind(boot) as NonNullable<BootInterface[K]>;
}

/** Python's repr of the device list, as Ironic's message shows it. */
const pyList = (devices: readonly string[] | null) => (devices === null ? 'None' : `[${devices.map((d) => `'${d}'`).join(', ')}]`);

export const attachVirtualMediaAction: Action = {
  async run(ctx) {
    const args = argsOf(ctx.intent, 'attach_virtual_media');
    const attach = media(ctx, 'attachMedia', 'attach_virtual_media');
    // Ironic's "swift" re-publishes the image through an object store a standalone deployment lacks.
    if (args.image_download_source === 'swift') throw new UnsupportedDriverExtension('image_download_source "swift" needs the Object Storage service, which this deployment does not have.');
    // "local" (Ironic's default) has the conductor serve a copy; Galvanic hands the BMC the URL itself.
    await attach(ctx.driver, args.device_type, args.image_url);
    return { history: { severity: 'INFO', eventType: 'vmedia', event: `Device ${args.device_type} attached to node ${ctx.node.uuid}` } };
  },
  onFailure(ctx, error, final) {
    if (!final) return {};
    const args = argsOf(ctx.intent, 'attach_virtual_media');
    return { lastError: `Could not attach device ${args.device_type} to node ${ctx.node.uuid}: ${error.message}` };
  },
};

export const detachVirtualMediaAction: Action = {
  async run(ctx) {
    const args = argsOf(ctx.intent, 'detach_virtual_media');
    const detach = media(ctx, 'detachMedia', 'detach_virtual_media');
    await detach(ctx.driver, args.device_types ?? undefined);
    return { history: { severity: 'INFO', eventType: 'vmedia', event: `Device(s) ${pyList(args.device_types)} detached from node ${ctx.node.uuid}` } };
  },
  onFailure(ctx, error, final) {
    if (!final) return {};
    const args = argsOf(ctx.intent, 'detach_virtual_media');
    return { lastError: `Could not detach device(s) ${pyList(args.device_types)} from node ${ctx.node.uuid}: ${error.message}` };
  },
};

export const getVirtualMediaAction: Action = {
  async run(ctx) {
    return { result: await media(ctx, 'getMedia', 'get_virtual_media')(ctx.driver) };
  },
  // Ironic's read is synchronous: it fails the request, not the node.
  onFailure(ctx) {
    return { lastError: ctx.node.lastError };
  },
};
