/** The step framework's planning and the provision state machine's events, without a database. */
import { expect } from 'chai';
import { loadConfig } from '../../common/config.js';
import { eventChanges, nextState } from '../../common/states.js';
import { sortSteps } from '../../common/steps.js';
import type { Node } from '../../db/nodes.js';
import { buildRegistry } from '../../drivers/build-registry.js';
import type { DriverRegistry } from '../../drivers/registry.js';
import { deploySteps } from '../../drivers/step-plan.js';

function nodeWith(deployInterface: string): Node {
  return {
    uuid: 'n1', driver: 'redfish', deployInterface, bootInterface: 'redfish-virtual-media', powerInterface: 'redfish',
    managementInterface: 'redfish', biosInterface: 'no-bios', raidInterface: 'no-raid', firmwareInterface: 'no-firmware', vendorInterface: 'no-vendor',
  } as unknown as Node;
}

describe('steps: planning a run from the interfaces\' declarations', () => {
  let registry: DriverRegistry;
  before(() => {
    registry = buildRegistry(loadConfig({ env: {} }));
  });
  after(() => registry.close());

  const ids = (steps: Array<{ interface: string; step: string; priority: number }>) => steps.map((s) => `${s.interface}.${s.step}:${s.priority}`);

  it('orders steps of one priority by Ironic\'s interface ranking, and keeps the given order otherwise', () => {
    const sorted = sortSteps([
      { interface: 'raid', step: 'a', priority: 10 }, { interface: 'deploy', step: 'b', priority: 10 },
      { interface: 'power', step: 'c', priority: 10 }, { interface: 'deploy', step: 'd', priority: 99 },
      { interface: 'bios', step: 'e', priority: 5 }, { interface: 'bios', step: 'f', priority: 5 },
    ]);
    expect(sorted.map((s) => s.step)).to.deep.equal(['d', 'c', 'b', 'a', 'e', 'f']);
  });

  it('plans the direct deploy\'s steps from its declarations, highest priority first', () => {
    expect(ids(deploySteps(nodeWith('direct'), registry, undefined))).to.deep.equal([
      'deploy.deploy:100', 'deploy.write_image:80', 'deploy.prepare_instance_boot:60', 'deploy.tear_down_agent:40',
      'deploy.switch_to_tenant_network:30', 'deploy.boot_instance:20',
    ]);
    expect(ids(deploySteps(nodeWith('ramdisk'), registry, undefined))).to.deep.equal(['deploy.deploy:100']);
  });

  it('applies the user\'s deploy steps: a new priority and args, priority 0 leaves a step out, an unknown one is the agent\'s', () => {
    const steps = deploySteps(nodeWith('direct'), registry, [
      { interface: 'deploy', step: 'prepare_instance_boot', priority: 0 },
      { interface: 'deploy', step: 'write_image', priority: 85, args: { x: 1 } },
      { interface: 'deploy', step: 'install_coreos', priority: 70, args: { ignition: 'u' } },
    ]);
    expect(ids(steps)).to.deep.equal([
      'deploy.deploy:100', 'deploy.write_image:85', 'deploy.install_coreos:70', 'deploy.tear_down_agent:40',
      'deploy.switch_to_tenant_network:30', 'deploy.boot_instance:20',
    ]);
    expect(steps[1].args).to.deep.equal({ x: 1 });
    expect(steps[2]).to.include({ inband: true });
    expect(steps[0]).to.include({ inband: false });
  });

  it('refuses a deploy step no interface declares when no agent could offer it', () => {
    expect(() => deploySteps(nodeWith('ramdisk'), registry, [{ interface: 'deploy', step: 'install_coreos', priority: 70 }]))
      .to.throw('Node n1 has no deploy step deploy.install_coreos: its deploy interface ramdisk runs no agent that could offer it.');
  });
});

describe('provision states: the conductor\'s events', () => {
  it('leads each event where Ironic\'s state machine does', () => {
    expect(nextState('deploying', 'wait')).to.equal('wait call-back');
    expect(nextState('wait call-back', 'resume')).to.equal('deploying');
    expect(nextState('wait call-back', 'timeout')).to.equal('deploy failed');
    expect(nextState('clean wait', 'abort')).to.equal('clean failed');
    expect(nextState('inspect wait', 'timeout')).to.equal('inspect failed');
    expect(nextState('deleting', 'clean')).to.equal('cleaning');
    expect(nextState('verifying', 'fail')).to.equal('enroll');
    expect(nextState('adopting', 'done')).to.equal('active');
    expect(nextState('adopting', 'fail')).to.equal('adopt failed');
  });

  it('ends cleaning in its target: manageable after a manual cleaning, else available', () => {
    expect(nextState('cleaning', 'done', 'manageable')).to.equal('manageable');
    expect(nextState('clean wait', 'done', 'available')).to.equal('available');
    expect(nextState('cleaning', 'done', null)).to.equal('available');
  });

  it('keeps the target while the node still works or waits, and clears it once the work has ended', () => {
    expect(eventChanges({ provisionState: 'deploying', targetProvisionState: 'active' }, 'wait')).to.include({ provisionState: 'wait call-back', targetProvisionState: 'active' });
    expect(eventChanges({ provisionState: 'wait call-back', targetProvisionState: 'active' }, 'done')).to.include({ provisionState: 'active', targetProvisionState: null });
    expect(eventChanges({ provisionState: 'deleting', targetProvisionState: 'available' }, 'clean')).to.include({ provisionState: 'cleaning', targetProvisionState: 'available' });
  });

  it('refuses an event the state does not have: a conductor bug, named', () => {
    expect(() => nextState('active', 'done')).to.throw('No "done" event from provision state "active".');
    expect(() => nextState('deploying', 'resume')).to.throw(/No "resume" event/);
  });
});
