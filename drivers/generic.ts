/**
 * Interfaces that need no BMC of their own: Ironic's `no-*` interfaces, the no-op network and
 * storage interfaces of a standalone deployment, `pxe` (named so that ipmi nodes resolve as in
 * Ironic, but Galvanic serves no DHCP/TFTP, so it cannot boot anything), and the deploy
 * interfaces, whose steps the conductor runs from the node's power and boot interfaces.
 */
import { UnsupportedDriverExtension } from '../common/errors.js';
import type { BootInterface, DriverContext, GenericInterface, InspectInterface } from './interfaces.js';

/** An interface that accepts any driver_info; `supported: false` for the no-* ones. */
export class GenericImpl implements GenericInterface {
  constructor(readonly supported: boolean) {}
  validate(): void {}
}

/** The fake and no-* implementations of one kind: `{fake, 'no-<kind>'}`. */
export function fakeAndNone(kind: string): Record<string, GenericInterface> {
  return { fake: new GenericImpl(true), [`no-${kind}`]: new GenericImpl(false) };
}

/** Network boot, which needs a DHCP/TFTP/HTTP boot service that Galvanic does not run. */
export class PxeBoot implements BootInterface {
  readonly ramdiskBoot = false;
  validate(): void {
    throw new UnsupportedDriverExtension('PXE boot needs a DHCP and TFTP/HTTP boot service, which Galvanic does not provide; use a boot interface that boots from virtual media (redfish-virtual-media).');
  }
  prepareInstance(_ctx: DriverContext): Promise<void> {
    return Promise.reject(new UnsupportedDriverExtension('PXE boot is not available in Galvanic.'));
  }
  async cleanUpInstance(): Promise<void> {}
}

/** Ironic's no-inspect: validation reports inspection as unsupported, as for every no-* interface. */
export class NoInspect implements InspectInterface {
  readonly supported = false;
  validate(): void {}
  inspectHardware(): Promise<null> {
    return Promise.reject(new UnsupportedDriverExtension('Inspection is not supported by the no-inspect interface.'));
  }
}
