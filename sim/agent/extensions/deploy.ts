/** IPA's `extensions/deploy.py`: the deploy steps, listed and run by the hardware managers. */
import { executeStep, listSteps } from '../hardware.js';
import type { Extension, ExtensionAgent } from './base.js';

export function deployExtension(agent: ExtensionAgent): Extension {
  return {
    get_deploy_steps: { async: false, required: ['node', 'ports'], run: () => listSteps(agent, 'deploy') },
    execute_deploy_step: { async: true, required: ['step', 'node', 'ports'], run: (p, life) => executeStep(agent, 'deploy', p, life) },
  };
}
