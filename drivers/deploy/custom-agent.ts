/**
 * The `custom-agent` deploy interface (Ironic's CustomAgentDeploy): the agent is booted and
 * runs the deploy steps the user names (deploy_steps, deploy templates) or its hardware
 * managers offer, such as OpenShift's `install_coreos`; no image is written for it. The
 * deploy ends as an agent deploy does: the instance's boot prepared (prepare_instance_boot: the
 * agent's medium or network boot undone, the disk the boot device), the agent powers the node
 * off, and it boots from disk.
 */
import type { DeployInterface, DeployValidation } from '../interfaces.js';
import type { StepDeclaration } from '../steps.js';
import { BOOT_AGENT_STEP, PREPARE_INSTANCE_BOOT_STEP, agentOobSteps, tearDownInstance, validateAgentBoot, type AgentDeployOptions } from './agent-base.js';

export class CustomAgentDeploy implements DeployInterface {
  readonly supported = true;
  readonly bootOption = 'local';
  readonly usesAgent = true;
  readonly steps: readonly StepDeclaration[];

  /**
   * `own`: the steps a deploy interface built on this one adds or replaces (Ironic's AgentDeploy
   * adds write_image and its own prepare_instance_boot).
   */
  constructor(opts: AgentDeployOptions, own: readonly StepDeclaration[] = []) {
    const mine = own.some((s) => s.step === PREPARE_INSTANCE_BOOT_STEP.step) ? [] : [PREPARE_INSTANCE_BOOT_STEP];
    this.steps = [BOOT_AGENT_STEP, ...own, ...mine, ...agentOobSteps(opts)];
  }

  validate(): void {}

  /** Ironic's CustomAgentDeploy.validate: only that the boot interface can boot the agent, and finds it. */
  validateDeploy(node: DeployValidation): void {
    validateAgentBoot(node, node.boot);
  }

  tearDown = tearDownInstance;
}
