/** IPA's `extensions/poll.py`: the hardware inventory, on request. */
import type { Extension, ExtensionAgent } from './base.js';

export function pollExtension(agent: ExtensionAgent): Extension {
  return {
    get_hardware_info: { async: false, required: [], run: () => agent.facts.inventory },
  };
}
