/** The simulated agent reads its kernel command line as IPA does (inspector.inspect, agent.run). */
import { expect } from 'chai';
import { agentUrls, kernelParams } from '../../sim/agent/kernel-params.js';

describe('agent simulator: kernel parameters', () => {
  it('posts no inventory when booted with only ipa-api-url (a deploy or a cleaning), as IPA', () => {
    expect(agentUrls(kernelParams('nofb ipa-api-url=http://10.0.0.1:6385/ boot_method=vmedia'))).to.deep.equal({ apiUrl: 'http://10.0.0.1:6385', inspectionUrl: null });
  });

  it('inspects to the callback URL, or with ipa-inspection-collectors to the API (IPA 10)', () => {
    expect(agentUrls(kernelParams('ipa-inspection-callback-url=http://10.0.0.1:6385/v1/continue_inspection'))).to.deep.equal({
      apiUrl: null, inspectionUrl: 'http://10.0.0.1:6385/v1/continue_inspection',
    });
    expect(agentUrls(kernelParams('ipa-api-url=http://10.0.0.1:6385 ipa-inspection-collectors=default,logs')).inspectionUrl).to.equal('http://10.0.0.1:6385/v1/continue_inspection');
  });
});
