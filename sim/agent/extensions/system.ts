/** IPA's `extensions/system.py`: lockdown, after which the agent serves nothing and stops heartbeating. */
import type { Life } from '../life.js';
import type { Extension, ExtensionAgent } from './base.js';

export function systemExtension(): Extension {
  return {
    lockdown: { async: false, required: [], run: () => null },
  };
}

/** What a succeeded system.lockdown does, once its answer is sent. */
export function lockDown(agent: ExtensionAgent, life: Life): void {
  life.lockedDown = true;
  life.heartbeating = false;
  if (life.heartbeatTimer) clearTimeout(life.heartbeatTimer);
  agent.lockedDown = true;
}
