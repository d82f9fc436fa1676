import type { DeployInterface } from '../interfaces.js';
import type { StepDeclaration } from '../steps.js';

/** Ironic's fake deploy: its deploy step and its tear-down do nothing. */
export class FakeDeploy implements DeployInterface {
  readonly supported = true;
  readonly bootOption = 'local';
  readonly usesAgent = false;
  readonly steps: readonly StepDeclaration[] = [{ step: 'deploy', priority: { deploy: 100 }, run: async () => 'done' }];
  validate(): void {}
  validateDeploy(): void {}
  async tearDown(): Promise<{ poweredOff: boolean }> {
    return { poweredOff: false };
  }
}
