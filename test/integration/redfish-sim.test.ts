/**
 * The Redfish BMC simulator on its own: what it serves, how it authenticates, its faults and
 * its control API, in-process (startRedfishSim) and through `galvanic sim redfish`.
 */
import { expect } from 'chai';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { startRedfishSim, type RedfishSim } from '../../sim/redfish/index.js';
import { freePort } from '../helpers/net.js';
import { setFaults, simControl, simStats } from '../helpers/redfish.js';
import { MOCKUPS } from '../helpers/mockups.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const BASIC = { authorization: `Basic ${Buffer.from('admin:password').toString('base64')}` };
const SYSTEM = '/redfish/v1/Systems/System.Embedded.1';

async function get(url: string, headers: Record<string, string> = BASIC): Promise<{ status: number; headers: Headers; body: Record<string, unknown> }> {
  const res = await fetch(url, { headers });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
}

async function login(url: string): Promise<Response> {
  return fetch(`${url}/redfish/v1/SessionService/Sessions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ UserName: 'admin', Password: 'password' }),
  });
}

describe('Redfish simulator', function () {
  this.timeout(60_000);
  let sim: RedfishSim;
  let url: string;

  before(async () => {
    sim = await startRedfishSim({ count: 3 });
    url = sim.bmcs[0].url;
  });
  after(async () => {
    await sim.stop();
  });
  beforeEach(async () => {
    for (const b of sim.bmcs) {
      await simControl(b.url, 'expire-sessions');
      await setFaults(b.url, { hang: false, garbageRate: 0, failRate: 0, resetRate: 0, requireIfMatch: false, sessionLimit: 4, sessionLimitStatus: 503, unavailable: { count: 0, retryAfter: 1 }, latencyMs: [0, 0] });
      await simControl(b.url, 'state', { power: 'On', boot: { BootSourceOverrideTarget: 'None', BootSourceOverrideEnabled: 'Disabled' } });
      await simControl(b.url, 'reset');
    }
  });

  it('serves one listener per BMC on distinct ports', () => {
    expect(new Set(sim.bmcs.map((b) => b.port)).size).to.equal(3);
    expect(sim.bmcs[1].url).to.match(/^http:\/\/127\.0\.0\.1:\d+$/);
  });

  it('answers the service root without credentials and everything else only with them', async () => {
    const root = await get(`${url}/redfish/v1/`, {});
    expect(root.status).to.equal(200);
    expect(root.body).to.have.nested.property('Links.Sessions.@odata\\.id', '/redfish/v1/SessionService/Sessions');
    const anonymous = await get(`${url}${SYSTEM}`, {});
    expect(anonymous.status).to.equal(401);
    expect(anonymous.body).to.have.nested.property('error.code');
    const wrong = await get(`${url}${SYSTEM}`, { authorization: `Basic ${Buffer.from('admin:nope').toString('base64')}` });
    expect(wrong.status).to.equal(401);
    const basic = await get(`${url}${SYSTEM}`);
    expect(basic.status).to.equal(200);
    expect(basic.body.PowerState).to.equal('On');
    expect((await simStats(url)).unauthorized).to.equal(2);
  });

  it('opens sessions with a token and a Location, ends them with DELETE, and refuses beyond the limit', async () => {
    await setFaults(url, { sessionLimit: 2 });
    const first = await login(url);
    expect(first.status).to.equal(201);
    const token = first.headers.get('x-auth-token') ?? '';
    const location = first.headers.get('location') ?? '';
    expect(token).to.have.length.above(10);
    expect(location).to.match(/^\/redfish\/v1\/SessionService\/Sessions\/\d+$/);
    expect((await get(`${url}${SYSTEM}`, { 'x-auth-token': token })).status).to.equal(200);
    expect((await login(url)).status).to.equal(201);

    const refused = await login(url);
    expect(refused.status).to.equal(503);
    expect(refused.headers.get('retry-after')).to.equal('1');
    expect(JSON.stringify(await refused.json())).to.contain('SessionLimitExceeded');
    await setFaults(url, { sessionLimitStatus: 400 });
    expect((await login(url)).status).to.equal(400);

    const del = await fetch(`${url}${location}`, { method: 'DELETE', headers: { 'x-auth-token': token } });
    expect(del.status).to.equal(204);
    expect((await get(`${url}${SYSTEM}`, { 'x-auth-token': token })).status).to.equal(401);
    expect((await login(url)).status).to.equal(201);
    const stats = await simStats(url);
    expect(stats).to.include({ sessionsOpen: 2, sessionsCreated: 3, logins: 5 });
  });

  it('expires sessions on request, so that their tokens get 401', async () => {
    const token = (await login(url)).headers.get('x-auth-token') ?? '';
    expect(await simControl(url, 'expire-sessions')).to.deep.equal({ expired: 1 });
    expect((await get(`${url}${SYSTEM}`, { 'x-auth-token': token })).status).to.equal(401);
  });

  it('changes PowerState with the advertised reset types only', async () => {
    const sys = (await get(`${url}${SYSTEM}`)).body as { Actions: Record<string, { target: string; 'ResetType@Redfish.AllowableValues': string[] }> };
    const action = sys.Actions['#ComputerSystem.Reset'];
    expect(action['ResetType@Redfish.AllowableValues']).to.include.members(['On', 'ForceOff', 'GracefulShutdown', 'ForceRestart']);
    const reset = (type: string) => fetch(`${url}${action.target}`, { method: 'POST', headers: { ...BASIC, 'content-type': 'application/json' }, body: JSON.stringify({ ResetType: type }) });
    expect((await reset('ForceOff')).status).to.equal(204);
    expect((await get(`${url}${SYSTEM}`)).body.PowerState).to.equal('Off');
    expect((await reset('PowerCycle')).status).to.equal(400);
    expect((await reset('On')).status).to.equal(204);
    expect((await get(`${url}${SYSTEM}`)).body.PowerState).to.equal('On');
  });

  it('goes through PoweringOff when a power delay is set', async () => {
    await setFaults(url, { powerDelayMs: 300 });
    await fetch(`${url}${SYSTEM}/Actions/ComputerSystem.Reset`, { method: 'POST', headers: BASIC, body: JSON.stringify({ ResetType: 'ForceOff' }) });
    expect((await get(`${url}${SYSTEM}`)).body.PowerState).to.equal('PoweringOff');
    await sleep(500);
    expect((await get(`${url}${SYSTEM}`)).body.PowerState).to.equal('Off');
    await setFaults(url, { powerDelayMs: 0 });
  });

  it('changes the boot override with PATCH, honouring If-Match and the allowed targets', async () => {
    const before = await get(`${url}${SYSTEM}`);
    const etag = before.headers.get('etag') ?? '';
    expect(etag).to.match(/^W\/"/);
    expect(before.body).to.have.nested.property('Boot.BootSourceOverrideTarget@Redfish\\.AllowableValues').that.includes('Pxe');
    const patch = (body: object, headers: Record<string, string> = {}) =>
      fetch(`${url}${SYSTEM}`, { method: 'PATCH', headers: { ...BASIC, 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
    expect((await patch({ Boot: { BootSourceOverrideTarget: 'Pxe', BootSourceOverrideEnabled: 'Once' } }, { 'if-match': etag })).status).to.equal(204);
    const after = await get(`${url}${SYSTEM}`);
    expect(after.body.Boot).to.include({ BootSourceOverrideTarget: 'Pxe', BootSourceOverrideEnabled: 'Once' });
    expect(after.headers.get('etag')).to.not.equal(etag);
    expect((await patch({ Boot: { BootSourceOverrideTarget: 'Hdd' } }, { 'if-match': etag })).status).to.equal(412);
    expect((await patch({ Boot: { BootSourceOverrideTarget: 'Floppy' } })).status).to.equal(400);
    await setFaults(url, { requireIfMatch: true });
    expect((await patch({ Boot: { BootSourceOverrideTarget: 'Hdd' } })).status).to.equal(428);
    expect((await patch({ Boot: { BootSourceOverrideTarget: 'Hdd' } }, { 'if-match': '*' })).status).to.equal(204);
  });

  it('serves chassis with Thermal, Power and Sensors, and expands the Sensors collection on request', async () => {
    const board = (await get(`${url}/redfish/v1/Chassis/Baseboard`)).body;
    expect(board).to.have.keys(['@odata.type', '@odata.id', 'Id', 'Name', 'ChassisType', 'Status', 'Links', 'Thermal', 'Power', 'Sensors']);
    expect((await get(`${url}/redfish/v1/Chassis/Baseboard/Thermal`)).body.Temperatures).to.have.length(4);
    const plain = (await get(`${url}/redfish/v1/Chassis/Baseboard/Sensors`)).body.Members as object[];
    expect(Object.keys(plain[0])).to.deep.equal(['@odata.id']);
    const expanded = (await get(`${url}/redfish/v1/Chassis/Baseboard/Sensors?$expand=.($levels=1)`)).body.Members as Array<Record<string, unknown>>;
    expect(expanded[0]).to.include({ ReadingType: 'Temperature', ReadingUnits: 'Cel' });
    expect((await get(`${url}/redfish/v1/Managers/BMC`)).body.ManagerType).to.equal('BMC');
    expect((await get(`${url}/redfish/v1/Nope`)).status).to.equal(404);
    // $expand=. on the chassis: its own Thermal, Power and Sensors inline, its Links as links.
    const wide = (await get(`${url}/redfish/v1/Chassis/Baseboard?$expand=.($levels=1)`)).body as Record<string, Record<string, unknown>>;
    expect(wide.Thermal.Temperatures).to.deep.equal((await get(`${url}/redfish/v1/Chassis/Baseboard/Thermal`)).body.Temperatures);
    expect(wide.Power.PowerSupplies).to.have.length(2);
    expect(wide.Sensors.Members).to.deep.equal(plain);
    expect(wide.Links).to.deep.equal(board.Links);
  });

  it('counts the latency it imposes on each BMC as its request chain, until the next mark', async () => {
    await simControl(url, 'reset');
    await fetch(`${url}/_sim/chains`, { method: 'POST' });
    await setFaults(url, { latencyMs: [100, 100] });
    for (let i = 0; i < 3; i++) await get(`${url}${SYSTEM}`);
    await setFaults(url, { latencyMs: [0, 0] });
    const chains = (await (await fetch(`${url}/_sim/chains`)).json()) as { bmcs: number; active: number; longest: Array<[number, number, number]> };
    expect(chains.bmcs).to.equal(3);
    expect(chains.longest[0]).to.deep.equal([0, 300, 3]);
    expect(chains.active).to.equal(1);
    const marked = (await (await fetch(`${url}/_sim/chains`, { method: 'POST' })).json()) as typeof chains;
    expect(marked.longest[0]).to.deep.equal([0, 300, 3]);
    const after = (await (await fetch(`${url}/_sim/chains`)).json()) as typeof chains;
    expect(after).to.include({ active: 0 });
  });

  it('keeps an ordered request log and concurrency counters', async () => {
    await setFaults(url, { latencyMs: [150, 150] });
    await Promise.all(Array.from({ length: 5 }, () => get(`${url}${SYSTEM}`)));
    await get(`${url}/redfish/v1/Chassis`);
    const stats = await simStats(url);
    expect(stats).to.include({ requests: 6, concurrent: 0, maxConcurrent: 5 });
    expect(stats.log.map((e) => `${e[0]} ${e[1]} ${e[2]}`)).to.deep.equal([...Array(5).fill(`GET ${SYSTEM} 200`), 'GET /redfish/v1/Chassis 200']);
    for (const [, , , start, end] of stats.log) expect(end - start).to.be.at.least(140);
    const totals = (await (await fetch(`${sim.bmcs[2].url}/_sim/totals`)).json()) as { bmcs: number; requests: number };
    expect(totals.bmcs).to.equal(3);
    expect(totals.requests).to.be.at.least(6);
  });

  it('injects faults: 503 with Retry-After, garbage, resets, and a BMC that never answers', async () => {
    await setFaults(url, { unavailable: { count: 1, retryAfter: 3 } });
    const busy = await fetch(`${url}${SYSTEM}`, { headers: BASIC });
    expect(busy.status).to.equal(503);
    expect(busy.headers.get('retry-after')).to.equal('3');
    expect((await fetch(`${url}${SYSTEM}`, { headers: BASIC })).status).to.equal(200);

    await setFaults(url, { garbageRate: 1 });
    const garbage = await fetch(`${url}${SYSTEM}`, { headers: BASIC });
    const text = await garbage.text();
    let parsedObject = false;
    try {
      const v: unknown = JSON.parse(text);
      parsedObject = typeof v === 'object' && v !== null && !Array.isArray(v);
    } catch {
      parsedObject = false;
    }
    expect(parsedObject).to.equal(false);
    await setFaults(url, { garbageRate: 0, resetRate: 1 });
    const reset = await fetch(`${url}${SYSTEM}`, { headers: BASIC }).then(
      () => 'answered',
      () => 'reset',
    );
    expect(reset).to.equal('reset');

    await setFaults(url, { resetRate: 0, hang: true });
    const started = Date.now();
    const hung = await fetch(`${url}${SYSTEM}`, { headers: BASIC, signal: AbortSignal.timeout(400) }).then(
      () => 'answered',
      () => 'timed out',
    );
    expect(hung).to.equal('timed out');
    expect(Date.now() - started).to.be.below(5000);
    // Other BMCs of the process are not affected.
    expect((await get(`${sim.bmcs[1].url}${SYSTEM}`)).status).to.equal(200);
    await setFaults(url, { hang: false });
    await sleep(50);
    const stats = await simStats(url);
    expect(stats.concurrent).to.equal(0);
    expect(stats.log.map((e) => e[2])).to.deep.equal([503, 200, 200, 0, 0]);
  });

  it('rejects unknown fault keys', async () => {
    const res = await fetch(`${url}/_sim/faults`, { method: 'POST', body: JSON.stringify({ nonsense: 1 }) });
    expect(res.status).to.equal(400);
  });

  it('starts and stops a few hundred BMCs quickly', async () => {
    const started = Date.now();
    const many = await startRedfishSim({ count: 300 });
    try {
      expect(many.bmcs).to.have.length(300);
      expect((await get(`${many.bmcs[299].url}${SYSTEM}`)).status).to.equal(200);
    } finally {
      await many.stop();
    }
    expect(Date.now() - started).to.be.below(20_000);
  });

  it('makes a fraction of the BMCs slow, every request of theirs, spread over the indexes', async () => {
    const slow = await startRedfishSim({ count: 4, slowBmcFraction: 0.5, slowMs: 400 });
    try {
      const took = await Promise.all(slow.bmcs.map(async (b) => {
        const t0 = Date.now();
        for (let i = 0; i < 2; i++) expect((await get(`${b.url}/redfish/v1`)).status).to.equal(200);
        return Date.now() - t0;
      }));
      // BMCs 1 and 3 are the slow half: two requests of 400 ms each; the others answer at once.
      expect(took.map((ms) => ms >= 800)).to.deep.equal([false, true, false, true]);
      expect(took[0] + took[2]).to.be.below(400);
    } finally {
      await slow.stop();
    }
  });

  describe('with --mockup', () => {
    let mock: RedfishSim | undefined;
    before(async function () {
      const dir = path.join(MOCKUPS, 'hpe-dl325-gen10plus-ilo5');
      try {
        mock = await startRedfishSim({ count: 1, mockup: dir });
      } catch (err) {
        if (process.env.CI === 'true') throw err;
        console.log(`      (skipped: ${dir} is not readable: ${(err as Error).message})`);
        this.skip();
      }
    });
    after(async () => {
      await mock?.stop();
    });

    it('looks paths up case-insensitively and without trailing slash, like iLO', async () => {
      const m = (mock as RedfishSim).bmcs[0].url;
      const sys = (await get(`${m}/redfish/v1/Systems/1/`)).body;
      expect(sys).to.have.nested.property('Bios.@odata\\.id', '/redfish/v1/systems/1/bios');
      expect((await get(`${m}/redfish/v1/systems/1/bios/`)).status).to.equal(200);
      expect((await get(`${m}/redfish/v1/Systems/2`)).status).to.equal(404);
    });

    it('expands one level as its recorded service root advertises', async () => {
      const m = (mock as RedfishSim).bmcs[0].url;
      const root = (await get(`${m}/redfish/v1`)).body as { ProtocolFeaturesSupported: { ExpandQuery: { NoLinks: boolean } } };
      expect(root.ProtocolFeaturesSupported.ExpandQuery.NoLinks).to.equal(true);
      const chassis = (await get(`${m}/redfish/v1/Chassis/1`)).body as { Thermal: Record<string, unknown> };
      expect(Object.keys(chassis.Thermal)).to.deep.equal(['@odata.id']);
      const wide = (await get(`${m}/redfish/v1/Chassis/1?$expand=.($levels=1)`)).body as { Thermal: Record<string, unknown>; Links: unknown };
      expect(wide.Thermal).to.deep.equal((await get(`${m}${chassis.Thermal['@odata.id'] as string}`)).body);
      expect(wide.Links).to.deep.equal((chassis as { Links?: unknown }).Links);
    });

    it('keeps power and boot of the recorded system in memory', async () => {
      const m = (mock as RedfishSim).bmcs[0].url;
      const off = await fetch(`${m}/redfish/v1/Systems/1/Actions/ComputerSystem.Reset`, { method: 'POST', headers: BASIC, body: JSON.stringify({ ResetType: 'ForceOff' }) });
      expect(off.status).to.equal(204);
      const patched = await fetch(`${m}/redfish/v1/Systems/1`, { method: 'PATCH', headers: BASIC, body: JSON.stringify({ Boot: { BootSourceOverrideTarget: 'UefiHttp', BootSourceOverrideEnabled: 'Continuous' } }) });
      expect(patched.status).to.equal(204);
      const sys = (await get(`${m}/redfish/v1/Systems/1`)).body as { PowerState: string; Boot: Record<string, unknown>; Oem: unknown };
      expect(sys.PowerState).to.equal('Off');
      expect(sys.Boot).to.include({ BootSourceOverrideTarget: 'UefiHttp', BootSourceOverrideEnabled: 'Continuous', BootSourceOverrideMode: 'UEFI' });
      expect(sys.Oem).to.be.an('object');
    });
  });

  it('runs as `galvanic sim redfish` and stops on SIGTERM', async () => {
    const port = await freePort();
    const proc = spawn(process.execPath, [path.join(ROOT, 'dist/cli/main.js'), 'sim', 'redfish', '--count', '1', '--base-port', String(port), '--latency', '10-20', '--session-limit', '2'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    try {
      const line = await new Promise<string>((resolve, reject) => {
        let out = '';
        proc.stdout.on('data', (c: Buffer) => {
          out += c.toString();
          if (out.includes('\n')) resolve(out.split('\n')[0]);
        });
        proc.once('exit', (code) => reject(new Error(`exited with ${code}`)));
      });
      expect(JSON.parse(line)).to.include({ listening: 1, firstPort: port });
      const bmc = `http://127.0.0.1:${port}`;
      expect((await get(`${bmc}${SYSTEM}`)).status).to.equal(200);
      const faults = (await (await fetch(`${bmc}/_sim/faults`)).json()) as { latencyMs: number[]; sessionLimit: number };
      expect(faults).to.deep.include({ latencyMs: [10, 20], sessionLimit: 2 });
    } finally {
      proc.kill('SIGTERM');
    }
    const code = await new Promise<number | null>((resolve) => (proc.exitCode !== null ? resolve(proc.exitCode) : proc.once('exit', resolve)));
    expect(code).to.equal(0);
  });

  it('refuses bad command-line options', async () => {
    const proc = spawn(process.execPath, [path.join(ROOT, 'dist/cli/main.js'), 'sim', 'redfish', '--latency', 'fast'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let err = '';
    proc.stderr.on('data', (c: Buffer) => (err += c.toString()));
    const code = await new Promise<number | null>((resolve) => proc.once('exit', resolve));
    expect(code).to.equal(2);
    expect(err).to.contain('--latency');
  });
});
