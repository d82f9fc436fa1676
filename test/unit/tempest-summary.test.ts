/**
 * The tempest runner's reading of a subunit v2 stream and its count: what the tempest
 * end-to-end test asserts on, so a miscount there must be caught here. The streams are
 * written packet by packet as the subunit protocol lays them out (as tempest run --subunit
 * writes them: an `exists` enumeration first, attachments in their own packets).
 */
import { expect } from 'chai';
import { parseSubunit } from '../e2e/tempest/subunit.js';
import { summarize } from '../e2e/tempest/summary.js';

const STATUS = { exists: 1, inprogress: 2, success: 3, skip: 5, fail: 6 } as const;

function varint(n: number): Buffer {
  if (n < 0x40) return Buffer.from([n]);
  if (n < 0x4000) return Buffer.from([0x40 | (n >> 8), n & 0xff]);
  return Buffer.from([0x80 | (n >> 16), (n >> 8) & 0xff, n & 0xff]);
}

const str = (s: string): Buffer => Buffer.concat([varint(Buffer.byteLength(s)), Buffer.from(s)]);

/** One packet: a test id, optionally a status, optionally one attachment. */
function packet(id: string, status?: keyof typeof STATUS, file?: [string, string]): Buffer {
  let flags = 0x2000 | 0x0800 | (status ? STATUS[status] : 0);
  const parts = [str(id)];
  if (file) {
    flags |= 0x0020 | 0x0040;
    parts.push(str('text/plain;charset=utf8'), str(file[0]), str(file[1]));
  }
  const body = Buffer.concat(parts);
  // The length counts the whole packet, itself and the CRC included.
  let length = 1 + 2 + 1 + body.length + 4;
  if (length >= 0x40) length += 1;
  if (length >= 0x4000) length += 1;
  const head = Buffer.alloc(3);
  head[0] = 0xb3;
  head.writeUInt16BE(flags, 1);
  return Buffer.concat([head, varint(length), body, Buffer.alloc(4)]);
}

const NODES = 'ironic_tempest_plugin.tests.api.admin.test_nodes';
const PROTECTED = `${NODES}.TestNodeProtected.test_node_protected_from_deletion[id-04a21b51,negative]`;
const CREATE = `${NODES}.TestNodes.test_create_node[id-4e939eb2]`;
const RESET = [`${NODES}.TestResetInterfaces.test_reset_interfaces[id-1]`, `${NODES}.TestResetInterfaces.test_set_interfaces[id-2]`];
const PORTS = 'ironic_tempest_plugin.tests.api.admin.test_ports.TestPorts';

const TRACEBACK = `Traceback (most recent call last):
  File "/x/ironic_tempest_plugin/tests/api/admin/test_nodes.py", line 912, in test_node_protected_from_deletion
    self.client.update_node(self.node['uuid'], protected=True,
  File "/x/tempest/lib/common/rest_client.py", line 831, in _error_checker
    raise exceptions.BadRequest(resp_body, resp=resp)
    ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
tempest.lib.exceptions.BadRequest: Bad request
Details: {'error_message': '{"faultcode":"Client","faultstring":"\\'/maintenance\\' is an internal attribute and can not be updated","debuginfo":null}'}
`;
const LOG = [
  'INFO [tempest.lib.common.rest_client] Request (TestNodeProtected:test_node_protected_from_deletion): 200 GET http://127.0.0.1:1/v1/nodes/abc 0.003s',
  'INFO [tempest.lib.common.rest_client] Request (TestNodeProtected:test_node_protected_from_deletion): 400 PATCH http://127.0.0.1:1/v1/nodes/abc 0.004s',
  'INFO [tempest.lib.common.rest_client] Request (TestNodeProtected:tearDown): 500 PATCH http://127.0.0.1:1/v1/nodes/abc 0.004s',
].join('\n');

function stream(): Buffer {
  return Buffer.concat([
    // The enumeration, a stray line of output, then the run.
    ...[PROTECTED, CREATE, ...RESET].map((id) => packet(id, 'exists')),
    Buffer.from('some worker output\n'),
    packet(CREATE, 'inprogress'), packet(CREATE, 'success'),
    packet(PROTECTED, 'inprogress'),
    packet(PROTECTED, undefined, ['traceback', TRACEBACK.slice(0, 200)]),
    packet(PROTECTED, undefined, ['traceback', TRACEBACK.slice(200)]),
    packet(PROTECTED, undefined, ["pythonlogging:''", LOG]),
    packet(PROTECTED, 'fail'),
    packet(`setUpClass (${NODES}.TestResetInterfaces)`, 'skip', ['reason', 'These tests rely on ipmi enabled']),
    packet(`tearDownClass (${PORTS})`, 'fail', ['traceback', 'Traceback (most recent call last):\n  File "/x/base.py", line 1, in tearDownClass\n    x()\nConflict: An object with that identifier already exists\n']),
  ]);
}

describe('tempest runner: subunit v2 and the summary', () => {
  it('reads statuses and joins attachment chunks per test id', () => {
    const tests = parseSubunit(stream());
    expect(tests.get(CREATE)?.status).to.equal('success');
    expect(tests.get(PROTECTED)?.status).to.equal('fail');
    expect(tests.get(PROTECTED)?.files.get('traceback')).to.equal(TRACEBACK);
    expect(tests.get(RESET[0])?.status).to.equal('exists');
  });

  it('counts listed tests once each, spreads a skipped setUpClass over its class, and counts a failed teardown', () => {
    const listed = [PROTECTED, CREATE, ...RESET, `${NODES}.TestNodes.test_never_reported[id-9]`];
    const s = summarize(parseSubunit(stream()), listed);
    expect({ passed: s.passed, failed: s.failed, skipped: s.skipped }).to.deep.equal({ passed: 1, failed: 3, skipped: 2 });
    const byId = new Map(s.results.map((r) => [r.id, r]));
    expect(byId.get(`${NODES}.TestResetInterfaces.test_set_interfaces`)).to.deep.equal({
      id: `${NODES}.TestResetInterfaces.test_set_interfaces`, outcome: 'skipped', reason: '(setUpClass of TestResetInterfaces) These tests rely on ipmi enabled',
    });
    expect(byId.get(`${NODES}.TestNodes.test_never_reported`)?.reason).to.equal('never ran (not in the subunit stream)');
    expect(byId.get(`tearDownClass (${PORTS})`)?.reason).to.include('Conflict: An object with that identifier already exists');
    expect(s.text).to.match(/test_nodes\s+1\s+2\s+2\s*\n/);
    expect(s.text).to.match(/test_ports\s+0\s+0\s+0\s+1\n/);
    expect(s.text.trimEnd().split('\n').at(-1)).to.equal('1 passed, 3 failed, 2 skipped');
  });

  it("gives a failure's reason: Ironic's faultstring, the failing request (not the cleanup's), the test line", () => {
    const s = summarize(parseSubunit(stream()), [PROTECTED]);
    const reason = s.results.find((r) => r.id === PROTECTED.replace(/\[.*\]$/, ''))?.reason;
    expect(reason).to.equal(
      "BadRequest: '/maintenance' is an internal attribute and can not be updated [PATCH /v1/nodes/abc -> 400] "
      + "@ test_nodes.py:912 self.client.update_node(self.node['uuid'], protected=True,",
    );
  });
});
