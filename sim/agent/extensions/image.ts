/** IPA's `extensions/image.py`: the boot loader, installed where the image's root partition is. */
import { DEFAULT_STEP_MS } from '../hardware.js';
import { executionError, pyRepr } from '../ipa.js';
import { sleep } from '../life.js';
import type { Extension, ExtensionAgent } from './base.js';

export function imageExtension(agent: ExtensionAgent): Extension {
  return {
    install_bootloader: {
      async: true,
      required: ['root_uuid'],
      run: async (p, life) => {
        await sleep(life, 4 * DEFAULT_STEP_MS);
        // GRUB goes where the image's root partition is; IPA fails on a partition it cannot find.
        if (!agent.disk || p.root_uuid !== life.partitionUuids?.['root uuid']) {
          throw executionError(`Installing GRUB2 boot loader to device /dev/sda failed: no partition with UUID ${pyRepr(p.root_uuid)}`);
        }
        agent.disk = {
          ...agent.disk,
          bootloader: { rootUuid: String(p.root_uuid), efiSystemPartUuid: (p.efi_system_part_uuid as string | null | undefined) ?? null, targetBootMode: (p.target_boot_mode as string | undefined) ?? 'bios' },
        };
        return null;
      },
    },
  };
}
