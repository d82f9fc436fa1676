/**
 * IPA's `extensions/standby.py`: the legacy image write (prepare_image), the partitions it left,
 * and the commands by which the host's OS goes down (power_off, run_image, reboot).
 */
import { DEFAULT_STEP_MS } from '../hardware.js';
import { diskAfter, validateImageInfo, writeImage } from '../image.js';
import { sleep, timer, type Life } from '../life.js';
import type { CommandSpec, Extension, ExtensionAgent } from './base.js';

const SHUTDOWN_MS = 200;

export function standbyExtension(agent: ExtensionAgent): Extension {
  const shutdown = (type: 'ForceOff' | 'ForceRestart'): CommandSpec => ({
    async: true,
    required: [],
    run: async (_p, life) => {
      await sleep(life, DEFAULT_STEP_MS);
      // The OS goes down shortly after the command reports success.
      timer(() => {
        if (agent.life === life) agent.power(type);
      }, SHUTDOWN_MS);
      return null;
    },
  });
  return {
    get_partition_uuids: { async: false, required: [], run: (_p, life) => life.partitionUuids ?? {} },
    prepare_image: { async: true, required: ['image_info'], validate: (p) => void validateImageInfo(p.image_info), run: async (p, life) => ({ result: `prepare_image: ${await prepareImage(agent, p, life)}` }) },
    power_off: shutdown('ForceOff'),
    run_image: shutdown('ForceRestart'),
    reboot: shutdown('ForceRestart'),
    sync: { async: false, required: [], run: () => null },
  };
}

/** standby.prepare_image, the legacy way in. */
async function prepareImage(agent: ExtensionAgent, params: Record<string, unknown>, life: Life): Promise<string> {
  const info = validateImageInfo(params.image_info);
  const w = await writeImage(info, params.configdrive, agent.env.dispatcher, life.signal);
  await sleep(life, w.written.bytes / agent.env.writeBytesPerMs);
  agent.disk = diskAfter(w);
  agent.configdriveImage = w.configdrive?.image ?? null;
  life.partitionUuids = w.parts.uuids;
  return `image (${info.id}) written to device /dev/sda root_uuid=${w.parts.uuids['root uuid']}`;
}
