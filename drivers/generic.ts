/**
 * Interfaces that need no BMC of their own: Ironic's `no-*` interfaces, the no-op network and
 * storage interfaces of a standalone deployment, and the fake interfaces of kinds that have no
 * driver of their own.
 */
import { UnsupportedDriverExtension } from '../common/errors.js';
import type { GenericInterface, InspectInterface } from './interfaces.js';
import type { StepDeclaration } from './steps.js';

/** An interface that accepts any driver_info; `supported: false` for the no-* ones. */
export class GenericImpl implements GenericInterface {
  constructor(readonly supported: boolean, readonly steps?: readonly StepDeclaration[]) {}
  validate(): void {}
}

/** A step of a fake interface: manual cleaning only (priority 0), no ramdisk, does nothing. */
function fakeStep(step: string): StepDeclaration {
  return { step, priority: { clean: 0 }, abortable: false, requiresRamdisk: false, run: async () => 'done' };
}

/** Ironic's fake RAID and BIOS interfaces offer their configuration steps, which do nothing. */
const FAKE_STEPS: Readonly<Record<string, readonly StepDeclaration[]>> = {
  raid: [fakeStep('create_configuration'), fakeStep('delete_configuration')],
  bios: [fakeStep('apply_configuration'), fakeStep('factory_reset')],
};

/** The fake and no-* implementations of one kind: `{fake, 'no-<kind>'}`. */
export function fakeAndNone(kind: string): Record<string, GenericInterface> {
  const fake = new GenericImpl(true, Object.hasOwn(FAKE_STEPS, kind) ? FAKE_STEPS[kind] : undefined);
  return { fake, [`no-${kind}`]: new GenericImpl(false) };
}

/** Ironic's no-inspect: validation reports inspection as unsupported, as for every no-* interface. */
export class NoInspect implements InspectInterface {
  readonly supported = false;
  validate(): void {}
  inspectHardware(): Promise<null> {
    return Promise.reject(new UnsupportedDriverExtension('Inspection is not supported by the no-inspect interface.'));
  }
}
