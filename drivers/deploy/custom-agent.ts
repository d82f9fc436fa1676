/**
 * The `custom-agent` deploy interface (Ironic's CustomAgentDeploy): the agent is booted and
 * runs the deploy steps the user names (deploy_steps, deploy templates) or its hardware
 * managers offer, such as OpenShift's `install_coreos`; no image is written for it. The
 * deploy ends as an agent deploy does: the agent powers the node off and it boots from disk.
 */
import type { DeployInterface, DeployValidation } from '../interfaces.js';
import type { StepDeclaration } from '../steps.js';
import { BOOT_AGENT_STEP, agentOobSteps, tearDownInstance, validateAgentBoot, type AgentDeployOptions } from './agent-base.js';

export class CustomAgentDeploy implements DeployInterface {
  readonly supported = true;
  readonly bootOption = 'local';
  readonly usesAgent = true;
  readonly steps: readonly StepDeclaration[];

  /** `own`: the steps a deploy interface built on this one adds (Ironic's AgentDeploy adds write_image and prepare_instance_boot). */
  constructor(opts: AgentDeployOptions, own: readonly StepDeclaration[] = []) {
    this.steps = [BOOT_AGENT_STEP, ...own, ...agentOobSteps(opts)];
  }

  validate(): void {}

  /** Ironic's CustomAgentDeploy.validate: only that the boot interface can boot the agent, and finds it. */
  validateDeploy(node: DeployValidation): void {
    validateAgentBoot(node, node.boot);
  }

  tearDown = tearDownInstance;
}
