/** IPA's `extensions/clean.py`: the clean steps, listed and run by the hardware managers. */
import { executeStep, listSteps } from '../hardware.js';
import type { Extension, ExtensionAgent } from './base.js';

export function cleanExtension(agent: ExtensionAgent): Extension {
  return {
    get_clean_steps: { async: false, required: ['node', 'ports'], run: () => listSteps(agent, 'clean') },
    execute_clean_step: { async: true, required: ['step', 'node', 'ports'], run: (p, life) => executeStep(agent, 'clean', p, life) },
  };
}
