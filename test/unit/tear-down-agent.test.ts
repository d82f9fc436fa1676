/**
 * tear_down_agent as Ironic's AgentDeployMixin runs it: the agent is asked to power the node
 * off, and the power state is read whether or not its answer came back (the power off may have
 * come through without it); only a node still on when the reads run out is forced off. The
 * agent and the power interface are stand-ins: this is the step's own logic, not a driver's.
 */
import { expect } from 'chai';
import { pino } from 'pino';
import { agentOobSteps } from '../../drivers/deploy/agent-base.js';
import type { StepContext } from '../../drivers/steps.js';

interface Seen {
  commands: string[];
  reads: number;
  setTo: string[];
}

function contextFor(opts: { agentFails: boolean; offAfterReads: number }): { ctx: StepContext; seen: Seen } {
  const seen: Seen = { commands: [], reads: 0, setTo: [] };
  const agent = {
    async sendOnce(_resume: boolean, name: string) {
      seen.commands.push(name);
      if (opts.agentFails) throw new Error('Connection reset by peer');
      return { id: '1', command_name: 'power_off', command_status: 'SUCCEEDED', command_error: null, command_result: null };
    },
    async wipeToken() {},
  };
  const power = {
    async getPowerState() {
      seen.reads++;
      return seen.reads >= opts.offAfterReads ? 'power off' : 'power on';
    },
    async setPowerState(_d: unknown, state: string) {
      seen.setTo.push(state);
    },
  };
  const ctx = {
    node: { uuid: '11111111-2222-4333-8444-555555555555', disablePowerOff: false },
    driver: {}, log: pino({ level: 'silent' }), power, agent: () => agent, resume: false,
  } as unknown as StepContext;
  return { ctx, seen };
}

const tearDown = agentOobSteps({ powerOffRetries: 4, powerOffRetryIntervalMs: 20 }).find((s) => s.step === 'tear_down_agent')!;

describe('tear_down_agent', () => {
  it('reads the power state after a soft power off whose answer was lost, and forces nothing when the node went off', async () => {
    const { ctx, seen } = contextFor({ agentFails: true, offAfterReads: 2 });
    await tearDown.run(ctx, {});
    expect(seen.commands).to.deep.equal(['standby.power_off']);
    expect(seen.reads).to.equal(2);
    expect(seen.setTo).to.deep.equal([]);
  });

  it('forces the node off when it is still on after the reads', async () => {
    const { ctx, seen } = contextFor({ agentFails: false, offAfterReads: Infinity });
    await tearDown.run(ctx, {});
    expect(seen.reads).to.equal(4);
    expect(seen.setTo).to.deep.equal(['power off']);
  });
});
