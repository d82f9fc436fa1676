/** IPA's `extensions/log.py`: the system logs, as a small archive. */
import { AGENT_VERSION, systemLogs } from '../ipa.js';
import type { Extension, ExtensionAgent } from './base.js';

export function logExtension(agent: ExtensionAgent): Extension {
  return {
    collect_system_logs: { async: false, required: [], run: () => ({ system_logs: systemLogs([`ironic-python-agent ${AGENT_VERSION}`, `commands: ${agent.lastCommands.length}`]) }) },
  };
}
