/**
 * What an operator's log collector reads: the raw text of the API's and a conductor's log, each
 * line one JSON object with no key written twice. Checked on the text itself: JSON.parse keeps
 * the last of two equal keys and so would hide exactly this defect.
 */
import { expect } from 'chai';
import { freshDatabase, type TestDatabase } from '../helpers/database.js';
import { startConductor, startGalvanic, type RunningConductor, type RunningGalvanic } from '../helpers/app.js';
import { until } from '../helpers/until.js';

const V = { 'X-OpenStack-Ironic-API-Version': '1.78', 'Content-Type': 'application/json' };

/**
 * The keys that appear twice in one object of `text` (any depth), as `path.key`.
 * A scanner over the JSON grammar, for text pino wrote: it assumes the text is valid JSON.
 */
function repeatedKeys(text: string): string[] {
  const repeated: string[] = [];
  // One frame per open container: the keys seen, or null for an array.
  const stack: Array<Set<string> | null> = [];
  let expectKey = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '"') {
      let j = i + 1;
      while (text[j] !== '"') j += text[j] === '\\' ? 2 : 1;
      if (expectKey) {
        const key = JSON.parse(text.slice(i, j + 1)) as string;
        const keys = stack[stack.length - 1]!;
        if (keys.has(key)) repeated.push(key);
        keys.add(key);
        expectKey = false;
      }
      i = j;
    } else if (c === '{') {
      stack.push(new Set());
      expectKey = true;
    } else if (c === '[') {
      stack.push(null);
    } else if (c === '}' || c === ']') {
      stack.pop();
    } else if (c === ',') {
      expectKey = stack[stack.length - 1] instanceof Set;
    }
  }
  return repeated;
}

describe('log lines of the API and a conductor', function () {
  this.timeout(120_000);
  let tdb: TestDatabase;
  let api: RunningGalvanic | undefined;
  let conductor: RunningConductor | undefined;

  before(async () => {
    tdb = await freshDatabase();
  });
  after(async () => {
    await api?.stop();
    await conductor?.stop();
    await tdb.drop();
  });

  it('the scanner finds a repeated key, nested or not, and nothing in strings', () => {
    expect(repeatedKeys('{"a":1,"msg":"x","b":{"c":[{"d":1,"d":2}]},"msg":"y"}')).to.deep.equal(['d', 'msg']);
    expect(repeatedKeys('{"a":"{\\"a\\":1,\\"a\\":2}","b":[1,"a",{"a":1}],"c":{"a":2}}')).to.deep.equal([]);
  });

  it('writes no line with a key twice: requests refused, consoles, intents', async () => {
    const env = { GALVANIC_DEFAULT__LOG_LEVEL: 'debug', GALVANIC_CONDUCTOR__SYNC_POWER_STATE_INTERVAL: '0' };
    conductor = await startConductor({ databaseUrl: tdb.url, host: 'log-c1', env });
    api = await startGalvanic({ databaseUrl: tdb.url, command: 'api', env });
    const call = async (method: string, url: string, body?: unknown) => {
      const res = await fetch(`${api!.url}${url}`, { method, headers: V, body: body === undefined ? undefined : JSON.stringify(body) });
      return { status: res.status, text: await res.text() };
    };
    expect((await call('GET', '/v1/nodes/no-such-node')).status).to.equal(404);
    expect((await call('POST', '/v1/nodes', { driver: 'no-such-driver' })).status).to.equal(400);
    const created = await call('POST', '/v1/nodes', { driver: 'fake-hardware', console_interface: 'fake', driver_info: { fake_console_interval_ms: 100 } });
    expect(created.status, created.text).to.equal(201);
    const { uuid } = JSON.parse(created.text) as { uuid: string };
    expect((await call('PUT', `/v1/nodes/${uuid}/states/power?wait=30`, { target: 'power on' })).status).to.equal(200);
    expect((await call('PUT', `/v1/nodes/${uuid}/states/console?wait=30`, { enabled: true })).status).to.equal(202);
    expect((await call('PUT', `/v1/nodes/${uuid}/states/console?wait=30`, { enabled: false })).status).to.equal(202);
    await until('the console stopped', () => conductor!.output().includes('"msg":"console stopped"'), 20_000);
    await api.stop();
    await conductor.stop();

    const lines = [...api.output().split('\n'), ...conductor.output().split('\n')].filter((l) => l.startsWith('{'));
    const bad = lines.map((l) => ({ l, keys: repeatedKeys(l) })).filter((x) => x.keys.length);
    expect(bad.map((x) => `${x.keys.join(',')}: ${x.l}`)).to.deep.equal([]);
    // The lines that had two keys before: a refusal keeps its reason, a console line one component.
    const refused = lines.filter((l) => l.includes('"msg":"request refused"'));
    expect(refused.length).to.be.at.least(2);
    expect(refused.join('\n')).to.include('"reason":"Node no-such-node could not be found."');
    expect(lines.some((l) => l.includes('"msg":"console stopped"') && l.includes('"component":"conductor"'))).to.equal(true);
    // ISO times and level names, not epoch milliseconds and pino's numbers.
    expect(lines[0]).to.match(/^\{"level":"(info|debug)","time":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"/);
  });
});
