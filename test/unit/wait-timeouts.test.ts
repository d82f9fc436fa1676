/**
 * What a wait that timed out writes (conductor/wait-timeouts.ts): Ironic's last_error and error
 * handler's changes in the check's transaction, the clean-up intent it queues, and the
 * last_error a failed clean-up leaves, which never overwrites what a verb accepted meanwhile wrote.
 */
import { expect } from 'chai';
import { BmcUnreachable } from '../../common/errors.js';
import type { Node } from '../../db/nodes.js';
import { cleanUpFailureChanges, timedOut } from '../../conductor/wait-timeouts.js';

const UUID = '1be26c0b-03f2-4d2e-ae87-c02d7f33c123';
const STEP = { interface: 'deploy', step: 'erase_devices', priority: 10, args: {}, abortable: true };

function node(provisionState: string, extra: Partial<Node> = {}): Node {
  return {
    uuid: UUID, provisionState, targetProvisionState: 'available', lastError: null, maintenance: false, maintenanceReason: null, fault: null,
    deployStep: {}, cleanStep: {}, serviceStep: {}, driverInternalInfo: { agent_url: 'http://10.0.0.9:9999', clean_steps: [STEP], clean_step_index: 0 },
    ...extra,
  } as unknown as Node;
}

describe('wait timeouts', () => {
  it('fails each wait with Ironic\'s last_error and queues its clean-up', () => {
    const deploy = timedOut(node('wait call-back', { targetProvisionState: 'active' }));
    expect(deploy.message).to.equal(`Timeout reached while waiting for callback for node ${UUID}`);
    expect(deploy.changes).to.include({ provisionState: 'deploy failed', lastError: deploy.message });
    expect(deploy.changes.maintenance).to.equal(undefined);
    expect(deploy.cleanUp).to.deep.equal({ verb: 'timeout', target: 'deploy failed', onFail: 'deploy failed', work: 'clean_up_after_timeout' });

    const clean = timedOut(node('clean wait'));
    expect(clean.message).to.equal('Timeout reached while cleaning the node. Please check if the ramdisk responsible for the cleaning is running on the node. Failed on step {}.');
    expect(clean.changes).to.include({ provisionState: 'clean failed' });
    expect(clean.changes.maintenance).to.equal(undefined);
    // The run's steps and the agent's traces are forgotten (Ironic's wipe_token_and_url, clean_step_index).
    expect(clean.changes.driverInternalInfo).to.deep.equal({});

    expect(timedOut(node('service wait', { targetProvisionState: 'active' })).message)
      .to.equal('Timeout reached while servicing the node. Please check if the ramdisk responsible for the servicing is running on the node. Failed on step {}.');
    expect(timedOut(node('inspect wait', { targetProvisionState: 'manageable' })).changes)
      .to.include({ provisionState: 'inspect failed', lastError: 'Timeout reached while inspecting the node. Please check if the ramdisk responsible for the inspection is running on the node.' });
  });

  it('puts a cleaning whose step was running into maintenance, its step in the message', () => {
    const t = timedOut(node('clean wait', { cleanStep: STEP }));
    const message = "Timeout reached while cleaning the node. Please check if the ramdisk responsible for the cleaning is running on the node. Failed on step {'interface': 'deploy', 'step': 'erase_devices', 'priority': 10, 'args': {}, 'abortable': True}.";
    expect(t.message).to.equal(message);
    expect(t.changes).to.include({ provisionState: 'clean failed', maintenance: true, fault: 'clean failure', maintenanceReason: message });
    expect(t.changes.cleanStep).to.deep.equal({});
  });

  it('adds a failed clean-up to the timeout\'s last_error in Ironic\'s words', () => {
    const err = new BmcUnreachable('BMC at https://10.0.0.1 unreachable');
    const deploy = `Timeout reached while waiting for callback for node ${UUID}`;
    expect(cleanUpFailureChanges(node('deploy failed', { lastError: deploy }), 'deploy failed', err).lastError)
      .to.equal(`${deploy}. Also failed to clean up due to: BMC at https://10.0.0.1 unreachable`);
    expect(cleanUpFailureChanges(node('deploy failed', { lastError: deploy }), 'deploy failed', new Error('boom')).lastError)
      .to.equal(`${deploy}. An unhandled exception was encountered while aborting. More information may be found in the log file.`);
    expect(cleanUpFailureChanges(node('clean failed', { lastError: 'T.' }), 'clean failed', err).lastError)
      .to.equal(`T.. Also Failed to tear down cleaning on node ${UUID}, reason: BMC at https://10.0.0.1 unreachable`);
    expect(cleanUpFailureChanges(node('service failed', { lastError: 'T.' }), 'service failed', err).lastError).to.equal('T.. Also failed to tear down servicing.');
  });

  it('keeps the last_error of a verb accepted since the timeout', () => {
    // `manage` from clean failed cleared last_error before the clean-up ran: it stays cleared.
    expect(cleanUpFailureChanges(node('manageable'), 'clean failed', new BmcUnreachable('gone'))).to.deep.equal({ lastError: null });
  });
});
