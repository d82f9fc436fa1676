/** IPA's `extensions/service.py`: the service steps, listed and run by the hardware managers as clean steps are. */
import { executeStep, listSteps } from '../hardware.js';
import type { Extension, ExtensionAgent } from './base.js';

export function serviceExtension(agent: ExtensionAgent): Extension {
  return {
    get_service_steps: { async: false, required: ['node', 'ports'], run: () => listSteps(agent, 'service') },
    execute_service_step: { async: true, required: ['step', 'node', 'ports'], run: (p, life) => executeStep(agent, 'service', p, life) },
  };
}
