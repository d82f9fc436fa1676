/**
 * BMC event subscriptions through node vendor passthru (Ironic's `redfish` vendor interface),
 * as BMO's gophercloud calls them, against the Redfish simulator through a real `galvanic`.
 */
import { expect } from 'chai';
import { request } from 'node:http';
import { galvanicAndSim } from '../helpers/agent-deploy.js';
import { createNode, redfishNodeBody } from '../helpers/provisioning.js';

const LATEST = { 'x-openstack-ironic-api-version': 'latest' };

/** A GET with a JSON body, as gophercloud's GetSubscription sends it (fetch refuses to). */
function getWithBody(base: string, path: string, body: unknown): Promise<{ status: number; body: string }> {
  const text = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(`${base}${path}`, { method: 'GET', headers: { ...LATEST, 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) } }, (res) => {
      let out = '';
      res.on('data', (c: Buffer) => (out += c.toString('utf8')));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: out }));
    });
    req.on('error', reject);
    req.end(text);
  });
}

const faultOf = (body: string) => (JSON.parse(JSON.parse(body).error_message as string) as { faultstring: string }).faultstring;

describe('redfish vendor passthru: BMC event subscriptions', function () {
  this.timeout(30_000);
  const g = galvanicAndSim({
    env: { GALVANIC_CONDUCTOR__SYNC_POWER_STATE_INTERVAL: '0', GALVANIC_CONDUCTOR__INTENT_MAX_ATTEMPTS: '1', GALVANIC_REDFISH__CONNECTION_ATTEMPTS: '1' },
    sim: () => ({ count: 1 }),
  });
  const { api } = g;
  let uuid = '';
  const call = (verb: string, method: string, body?: unknown) => api(verb, `/v1/nodes/${uuid}/vendor_passthru?method=${method}`, body);

  /** The BMC's subscriptions, read from the simulator itself. */
  async function onBmc(): Promise<Array<Record<string, unknown>>> {
    const auth = { authorization: `Basic ${Buffer.from('admin:password').toString('base64')}` };
    const base = g.sim.bmcs[0].url;
    const coll = (await (await fetch(`${base}/redfish/v1/EventService/Subscriptions`, { headers: auth })).json()) as { Members: Array<{ '@odata.id': string }> };
    return Promise.all(coll.Members.map(async (m) => (await (await fetch(`${base}${m['@odata.id']}`, { headers: auth })).json()) as Record<string, unknown>));
  }

  before(async () => {
    uuid = (await createNode(api, redfishNodeBody('vendor-0', g.sim.bmcs[0].url))).uuid;
  });

  it('resolves redfish nodes to the redfish vendor interface and lists its methods as Ironic does', async () => {
    const node = (await api('GET', `/v1/nodes/${uuid}`)).json<{ vendor_interface: string }>();
    expect(node.vendor_interface).to.equal('redfish');
    const res = await api('GET', `/v1/nodes/${uuid}/vendor_passthru/methods`);
    expect(res.status, res.body).to.equal(200);
    const methods = res.json<Record<string, { http_methods: string[]; async: boolean; attach: boolean; require_exclusive_lock: boolean; description: string }>>();
    expect(Object.keys(methods).sort()).to.deep.equal(['create_subscription', 'delete_subscription', 'get_all_subscriptions', 'get_subscription']);
    expect(methods.create_subscription).to.deep.include({ http_methods: ['POST'], async: false, attach: false, require_exclusive_lock: true });
    expect(methods.delete_subscription.http_methods).to.deep.equal(['DELETE']);
    expect(methods.get_all_subscriptions.http_methods).to.deep.equal(['GET']);
  });

  it('creates, lists, reads and deletes a subscription on the BMC, with BMO\'s bodies', async () => {
    expect(await onBmc()).to.deep.equal([]);
    const created = await call('POST', 'create_subscription', {
      Destination: 'https://events.example.com:8443/hook', Context: 'host-0', HttpHeaders: [{ Authorization: 'Bearer s3cret' }],
    });
    expect(created.status, created.body).to.equal(200);
    const sub = created.json<Record<string, unknown>>();
    expect(Object.keys(sub).sort()).to.deep.equal(['Context', 'Destination', 'EventTypes', 'Id', 'Protocol']);
    expect(sub).to.deep.include({ Destination: 'https://events.example.com:8443/hook', Context: 'host-0', Protocol: 'Redfish', EventTypes: ['Alert'] });
    expect(sub.Id).to.be.a('string');

    const bmc = await onBmc();
    expect(bmc).to.have.length(1);
    expect(bmc[0]).to.deep.include({ Id: sub.Id, Destination: 'https://events.example.com:8443/hook', Context: 'host-0', EventTypes: ['Alert'] });

    const all = await call('GET', 'get_all_subscriptions');
    expect(all.status, all.body).to.equal(200);
    const coll = all.json<{ Members: Array<{ '@odata.id': string }>; 'Members@odata.count': number }>();
    expect(coll['Members@odata.count']).to.equal(1);
    expect(coll.Members[0]['@odata.id']).to.equal(`/redfish/v1/EventService/Subscriptions/${String(sub.Id)}`);

    const one = await getWithBody(g.galvanic.url, `/v1/nodes/${uuid}/vendor_passthru?method=get_subscription`, { id: sub.Id });
    expect(one.status, one.body).to.equal(200);
    expect(JSON.parse(one.body)).to.deep.equal(sub);

    const deleted = await call('DELETE', 'delete_subscription', { id: sub.Id });
    expect(deleted.status, deleted.body).to.equal(200);
    expect(deleted.body).to.equal('');
    expect(await onBmc()).to.deep.equal([]);

    const again = await call('DELETE', 'delete_subscription', { id: sub.Id });
    expect(again.status, again.body).to.equal(404);
    expect(faultOf(again.body)).to.match(new RegExp(`^Redfish exception occurred\\. Error: Redfish delete_subscription failed for subscription ${String(sub.Id)} on node ${uuid}\\. Error: .*404`));
  });

  it('refuses bad input with Ironic\'s status and message, and nothing changes on the BMC or the node', async () => {
    const before = (await api('GET', `/v1/nodes/${uuid}`)).json<Record<string, unknown>>();
    const cases: Array<[string, string, unknown, number, string | RegExp]> = [
      ['POST', 'create_subscription', {}, 400, 'Destination None is not a valid URI'],
      ['POST', 'create_subscription', { Destination: 'not a url' }, 400, 'Destination not a url is not a valid URI'],
      ['POST', 'create_subscription', { Destination: 'https://' }, 400, 'Destination https:// is not a valid URI'],
      ['POST', 'create_subscription', { Destination: 'http://e.example', Context: 5 }, 400, 'Context 5 is not a valid string'],
      ['POST', 'create_subscription', { Destination: 'http://e.example', Protocol: ['Redfish'] }, 400, "Protocol ['Redfish'] is not a string"],
      ['POST', 'create_subscription', { Destination: 'http://e.example', HttpHeaders: { a: 'b' } }, 400, "HttpHeaders {'a': 'b'} is not a list of headers"],
      ['POST', 'create_subscription', { Destination: 'http://e.example', EventTypes: ['Nope'] }, 400, /^EventTypes \['Nope'\] is not a valid value, allowed values \{'StatusChange', .*'Alert'\}$/],
      ['POST', 'create_subscription', { Destination: 'http://e.example', EventTypes: 'Alert' }, 400, /^EventTypes Alert is not a valid value/],
      ['POST', 'no_such_method', {}, 400, 'No handler for method no_such_method'],
      ['GET', 'create_subscription', undefined, 400, 'The method create_subscription does not support HTTP GET'],
      ['POST', 'delete_subscription', { id: '1' }, 400, 'The method delete_subscription does not support HTTP POST'],
      ['DELETE', 'delete_subscription', {}, 400, "id can't be None"],
    ];
    for (const [verb, method, body, status, message] of cases) {
      const res = await call(verb, method, body);
      expect(res.status, `${verb} ${method} ${JSON.stringify(body)}: ${res.body}`).to.equal(status);
      if (typeof message === 'string') expect(faultOf(res.body)).to.equal(message);
      else expect(faultOf(res.body)).to.match(message);
    }
    const noMethod = await api('POST', `/v1/nodes/${uuid}/vendor_passthru`, { Destination: 'http://e.example' });
    expect(noMethod.status).to.equal(400);
    expect(faultOf(noMethod.body)).to.equal('Method not specified');

    // A scheme the BMC cannot send to passes Ironic's URI check; the BMC refuses it.
    const ftp = await call('POST', 'create_subscription', { Destination: 'ftp://e.example/x', HttpHeaders: [{ Authorization: 'Bearer s3cret' }] });
    expect(ftp.status, ftp.body).to.equal(500);
    expect(faultOf(ftp.body)).to.match(new RegExp(`^Redfish exception occurred\\. Error: Failed to create subscription on node ${uuid}\\. Subscription payload: .*Error: .*HTTP 400`));
    expect(faultOf(ftp.body), 'the headers are credentials').not.to.include('s3cret');

    expect(await onBmc()).to.deep.equal([]);
    // updated_at moves as in Ironic, whose exclusive lock writes the node's reservation.
    const after = (await api('GET', `/v1/nodes/${uuid}`)).json<Record<string, unknown>>();
    expect({ ...after, updated_at: null }).to.deep.equal({ ...before, updated_at: null });
  });

  it('offers no subscriptions on a fake node\'s vendor interface or with no-vendor', async () => {
    const fake = await createNode(api, { name: 'vendor-fake', driver: 'fake-hardware' });
    expect((await api('GET', `/v1/nodes/${fake.uuid}`)).json<{ vendor_interface: string }>().vendor_interface).to.equal('fake');
    const none = await createNode(api, redfishNodeBody('vendor-none', g.sim.bmcs[0].url, { vendor_interface: 'no-vendor' }));
    for (const node of [fake.uuid, none.uuid]) {
      const res = await api('POST', `/v1/nodes/${node}/vendor_passthru?method=create_subscription`, { Destination: 'http://e.example' });
      expect(res.status, res.body).to.equal(400);
      expect(faultOf(res.body)).to.equal('No handler for method create_subscription');
    }
    const methods = await api('GET', `/v1/nodes/${none.uuid}/vendor_passthru/methods`);
    expect(methods.json()).to.deep.equal({});
    expect(await onBmc()).to.deep.equal([]);
  });
});
