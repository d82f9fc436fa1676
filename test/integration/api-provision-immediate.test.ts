/**
 * A provision verb with no work (manage from available) ends when the API accepts it, as
 * Ironic's synchronous event does: no conductor runs here, so what the node shows is the API's
 * doing alone, and the next verb is taken at once.
 */
import { expect } from 'chai';
import { suiteApp } from '../helpers/app.js';

describe('provision verbs with no work end at once (API only, no conductor)', function () {
  const t = suiteApp({ conductor: false });
  const call = (method: 'GET' | 'POST' | 'PUT', url: string, version: string, payload?: object) =>
    t.app.inject({ method, url, headers: { 'x-openstack-ironic-api-version': version }, ...(payload ? { payload } : {}) });

  it('manage from available: manageable with no target, and provide is taken right after', async () => {
    // Before 1.11 a new node is available.
    const created = await call('POST', '/v1/nodes', '1.10', { driver: 'fake-hardware', name: 'now-available' });
    expect(created.statusCode, created.body).to.equal(201);
    expect(created.json<{ provision_state: string }>().provision_state).to.equal('available');

    expect((await call('PUT', '/v1/nodes/now-available/states/provision', 'latest', { target: 'manage' })).statusCode).to.equal(202);
    const node = (await call('GET', '/v1/nodes/now-available', 'latest')).json<{ provision_state: string; target_provision_state: string | null }>();
    expect(node).to.include({ provision_state: 'manageable', target_provision_state: null });

    expect((await call('PUT', '/v1/nodes/now-available/states/provision', 'latest', { target: 'provide' })).statusCode).to.equal(202);
    const next = (await call('GET', '/v1/nodes/now-available', 'latest')).json<{ provision_state: string; target_provision_state: string | null }>();
    expect(next).to.include({ provision_state: 'cleaning', target_provision_state: 'available' });
  });
});
