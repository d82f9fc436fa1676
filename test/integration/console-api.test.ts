import { expect } from 'chai';
import bcrypt from 'bcryptjs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freshDatabase, type TestDatabase } from '../helpers/database.js';
import { startGalvanic, type RunningGalvanic } from '../helpers/app.js';
import { connectViewer, connectViewerWith, fakeConsoleProcesses, type Viewer } from '../helpers/console.js';
import { until } from '../helpers/until.js';

const V = { 'X-OpenStack-Ironic-API-Version': '1.78', 'Content-Type': 'application/json' };

interface ConsoleState {
  console_enabled: boolean;
  console_info: { type: string; url: string; view_url: string; mode: string } | null;
}

describe('serial console (fake console, one all-in-one process)', function () {
  this.timeout(120_000);
  let tdb: TestDatabase;
  let g: RunningGalvanic;
  let tmp: string;
  const viewers: Viewer[] = [];
  const auth = (user: string) => ({ Authorization: `Basic ${Buffer.from(`${user}:pw-${user}`).toString('base64')}` });

  const call = async (method: string, url: string, body?: unknown, user = 'admin') => {
    const res = await fetch(`${g.url}${url}`, { method, headers: { ...V, ...auth(user) }, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined, headers: res.headers };
  };
  const createNode = async (extra: Record<string, unknown> = {}) => {
    const r = await call('POST', '/v1/nodes', { driver: 'fake-hardware', console_interface: 'fake', driver_info: { fake_console_interval_ms: 100 }, ...extra });
    expect(r.status, JSON.stringify(r.body)).to.equal(201);
    return r.body as { uuid: string };
  };
  const setConsole = async (uuid: string, enabled: boolean) => {
    const r = await call('PUT', `/v1/nodes/${uuid}/states/console?wait=30`, { enabled });
    expect(r.status, JSON.stringify(r.body)).to.equal(202);
  };
  const issued: string[] = [];
  const consoleOf = async (uuid: string, mode = 'ro', user = 'admin') => {
    const r = await call('GET', `/v1/nodes/${uuid}/states/console?mode=${mode}`, undefined, user);
    const url = (r.body as ConsoleState | undefined)?.console_info?.url;
    if (url) issued.push(url.slice(url.lastIndexOf('/') + 1));
    return r;
  };
  const view = (url: string) => {
    const v = connectViewer(url);
    viewers.push(v);
    return v;
  };
  const enabledWithViewer = async (mode = 'ro', intervalMs = 100) => {
    const node = await createNode({ driver_info: { fake_console_interval_ms: intervalMs } });
    await setConsole(node.uuid, true);
    const info = (await consoleOf(node.uuid, mode)).body as ConsoleState;
    const v = view(info.console_info!.url);
    expect(await v.opened).to.equal(true);
    await v.waitFor(`Fake serial console of node ${node.uuid}`);
    return { node, info, v };
  };

  before(async () => {
    tmp = await fs.mkdtemp(path.join(os.tmpdir(), 'galvanic-console-'));
    const users = ['admin', 'alice', 'bob'].map((u) => `${u}:${bcrypt.hashSync(`pw-${u}`, 4)}`).join('\n');
    await fs.writeFile(path.join(tmp, 'htpasswd'), `${users}\n`);
    tdb = await freshDatabase();
    g = await startGalvanic({
      databaseUrl: tdb.url,
      env: {
        GALVANIC_API__AUTH_STRATEGY: 'http_basic',
        GALVANIC_API__HTTP_BASIC_AUTH_USER_FILE: path.join(tmp, 'htpasswd'),
        GALVANIC_CONSOLE__ADMIN_USERS: 'admin',
        GALVANIC_CONSOLE__LOG_DIR: path.join(tmp, 'logs'),
        GALVANIC_CONSOLE__LOG_MAX_BYTES: '4096',
        GALVANIC_CONSOLE__LOG_BACKUPS: '2',
        GALVANIC_CONSOLE__RESTART_INITIAL_DELAY: '0.1',
        GALVANIC_CONSOLE__IDLE_TIMEOUT: '4',
      },
    });
  });
  afterEach(() => {
    for (const v of viewers.splice(0)) v.ws.terminate();
  });
  after(async () => {
    await g?.stop();
    await tdb?.drop();
    await fs.rm(tmp, { recursive: true, force: true });
  });

  it('enables through an intent (202, Location) and GET returns a websocket console_info', async () => {
    const node = await createNode();
    const off = (await consoleOf(node.uuid)).body as ConsoleState;
    expect(off).to.deep.equal({ console_enabled: false, console_info: null });
    const r = await call('PUT', `/v1/nodes/${node.uuid}/states/console`, { enabled: true });
    expect(r.status).to.equal(202);
    expect(r.headers.get('location')).to.match(new RegExp(`/v1/nodes/${node.uuid}/states/console$`));
    await until('console enabled', async () => ((await consoleOf(node.uuid)).body as ConsoleState).console_enabled, 10_000);
    const on = (await consoleOf(node.uuid)).body as ConsoleState;
    expect(on.console_info!.type).to.equal('websocket');
    expect(on.console_info!.url).to.match(new RegExp(`^ws://127\\.0\\.0\\.1:${g.port}/v1/console/[A-Za-z0-9_-]{43}$`));
    expect(on.console_info!.mode).to.equal('ro');
    const node2 = (await call('GET', `/v1/nodes/${node.uuid}`)).body as { console_enabled: boolean };
    expect(node2.console_enabled).to.equal(true);
  });

  it('refuses bad input and a node without a console interface', async () => {
    const node = await createNode();
    expect((await call('PUT', `/v1/nodes/${node.uuid}/states/console`, { enabled: 'yes' })).status).to.equal(400);
    expect((await call('PUT', `/v1/nodes/${node.uuid}/states/console`, { enabled: true, x: 1 })).status).to.equal(400);
    expect((await consoleOf(node.uuid, 'rx')).status).to.equal(400);
    const none = await createNode({ console_interface: 'no-console' });
    const r = await call('PUT', `/v1/nodes/${none.uuid}/states/console`, { enabled: true });
    expect(r.status).to.equal(400);
    expect(r.body.error_message).to.contain('no console interface');
  });

  it('streams backlog then live output; many read-only viewers share one process', async () => {
    const { node, info, v } = await enabledWithViewer();
    await v.waitFor(/line \d+/);
    const second = view(((await consoleOf(node.uuid)).body as ConsoleState).console_info!.url);
    expect(await second.opened).to.equal(true);
    // The second viewer gets the banner from the ring buffer, printed before it connected.
    await second.waitFor(`Fake serial console of node ${node.uuid}`);
    const before = (v.text().match(/line (\d+)/g) ?? []).length;
    await v.waitFor(new RegExp(`line ${before + 3}\\b`));
    expect([...fakeConsoleProcesses().get(node.uuid) ?? []]).to.have.length(1);
    expect(info.console_info!.mode).to.equal('ro');
  });

  it('rw input reaches the console; ro input does not', async () => {
    const { node, v: ro } = await enabledWithViewer('ro');
    ro.send('from-ro-viewer\r');
    const rw = view(((await consoleOf(node.uuid, 'rw')).body as ConsoleState).console_info!.url);
    expect(await rw.opened).to.equal(true);
    rw.send('from-rw-viewer\r');
    await rw.waitFor('echo: from-rw-viewer');
    await ro.waitFor('echo: from-rw-viewer');
    expect(ro.text()).to.not.contain('from-ro-viewer');
  });

  it('refuses a second writer with a clear message, and rw to anyone but admins and the owner', async () => {
    const node = await createNode({ owner: 'alice' });
    await setConsole(node.uuid, true);
    expect((await consoleOf(node.uuid, 'rw', 'bob')).status).to.equal(403);
    expect((await consoleOf(node.uuid, 'ro', 'bob')).status).to.equal(200);
    const first = view(((await consoleOf(node.uuid, 'rw', 'alice')).body as ConsoleState).console_info!.url);
    expect(await first.opened).to.equal(true);
    await first.waitFor('Fake serial console');
    const second = view(((await consoleOf(node.uuid, 'rw', 'admin')).body as ConsoleState).console_info!.url);
    const closed = await second.closed;
    expect(closed.code).to.equal(4009);
    expect(closed.reason).to.contain('another read-write session');
  });

  it('an owner change closes live sessions within 1 s and voids older tokens; power changes do not', async () => {
    const { node, info, v } = await enabledWithViewer();
    const p = await call('PUT', `/v1/nodes/${node.uuid}/states/power?wait=30`, { target: 'power on' });
    expect(p.status).to.equal(200);
    const r = await call('PATCH', `/v1/nodes/${node.uuid}`, [{ op: 'add', path: '/extra/x', value: 1 }]);
    expect(r.status).to.equal(200);
    await sleep(1200);
    expect(v.ws.readyState).to.equal(v.ws.OPEN);

    const t0 = Date.now();
    const o = await call('PATCH', `/v1/nodes/${node.uuid}`, [{ op: 'add', path: '/owner', value: 'bob' }]);
    const patched = Date.now();
    expect(o.status).to.equal(200);
    const closed = await v.closed;
    expect(closed.code).to.equal(4001);
    expect(closed.reason).to.contain('access to the node changed');
    expect(closed.at - patched).to.be.below(1000);
    expect(closed.at).to.be.above(t0);

    const stale = view(info.console_info!.url);
    expect(await stale.opened).to.equal(false);
    expect(stale.refusedStatus).to.equal(403);
    const page = await fetch(info.console_info!.view_url);
    expect(page.status).to.equal(403);
    expect(await page.text()).to.contain('access to the node changed');
  });

  it('maintenance and disabling close sessions; disabling ends the process', async () => {
    const a = await enabledWithViewer();
    const m = await call('PUT', `/v1/nodes/${a.node.uuid}/maintenance`, { reason: 'x' });
    expect(m.status).to.equal(202);
    expect((await a.v.closed).code).to.equal(4001);

    const b = await enabledWithViewer();
    expect(fakeConsoleProcesses().get(b.node.uuid)).to.have.length(1);
    await setConsole(b.node.uuid, false);
    const closed = await b.v.closed;
    expect(closed.code, closed.reason).to.equal(4002);
    await until('console process gone', () => !fakeConsoleProcesses().has(b.node.uuid), 5000);
    expect(((await consoleOf(b.node.uuid)).body as ConsoleState).console_info).to.equal(null);
  });

  it('drops idle viewers after [console] idle_timeout', async () => {
    const { v } = await enabledWithViewer();
    const closed = await v.closed;
    expect(closed.code).to.equal(4008);
    expect(closed.reason).to.contain('idle');
  });

  it('restarts a console process that died, keeping one process', async () => {
    const { node, v } = await enabledWithViewer();
    const [pid] = fakeConsoleProcesses().get(node.uuid)!;
    // Counted before the kill: the new process may print its banner before it is seen in /proc.
    const count = (v.text().match(/Fake serial console/g) ?? []).length;
    process.kill(pid, 'SIGKILL');
    await until('a new console process', () => (fakeConsoleProcesses().get(node.uuid) ?? []).some((p) => p !== pid), 10_000);
    expect(fakeConsoleProcesses().get(node.uuid)).to.have.length(1);
    await v.waitFor(new RegExp(`(Fake serial console[^]*){${count + 1}}`));
  });

  it('writes a per-node log rotated by size', async () => {
    const { node } = await enabledWithViewer('ro', 5);
    const file = path.join(tmp, 'logs', `${node.uuid}.log`);
    await until('two rotations', async () => (await fs.stat(`${file}.2`).catch(() => null)) !== null, 30_000);
    for (const f of [file, `${file}.1`, `${file}.2`]) expect((await fs.stat(f)).size).to.be.at.most(4096);
    expect(await fs.stat(`${file}.3`).catch(() => null)).to.equal(null);
    expect(await fs.readFile(`${file}.1`, 'utf8')).to.contain(`fake console ${node.uuid} line`);
  });

  it('serves the terminal page and xterm.js without basic auth (the token is the credential)', async () => {
    const node = await createNode();
    await setConsole(node.uuid, true);
    const info = ((await consoleOf(node.uuid)).body as ConsoleState).console_info!;
    const page = await fetch(info.view_url);
    expect(page.status).to.equal(200);
    const html = await page.text();
    expect(html).to.contain('/v1/console/assets/xterm.js');
    const js = await fetch(`${g.url}/v1/console/assets/xterm.js`);
    expect(js.status).to.equal(200);
    expect((await js.text()).length).to.be.above(100_000);
    const plain = await fetch(info.url.replace(/^ws/, 'http'));
    expect(plain.status).to.equal(400);
  });

  it('deleting a node closes its sessions and ends its console process', async () => {
    const { node, v } = await enabledWithViewer();
    expect((await call('DELETE', `/v1/nodes/${node.uuid}`)).status).to.equal(204);
    expect((await v.closed).code).to.be.oneOf([4001, 4002]);
    await until('console process gone', () => !fakeConsoleProcesses().has(node.uuid), 5000);
  });

  it("refuses a direct connection to a conductor's internal endpoint without the API's proof", async () => {
    const { node, info } = await enabledWithViewer();
    const row = await tdb.knex('console_processes as p').join('nodes as n', 'n.id', 'p.node_id').where('n.uuid', node.uuid).first('p.endpoint', 'p.node_id');
    const token = info.console_info!.url.slice(info.console_info!.url.lastIndexOf('/') + 1);
    const direct = connectViewerWith(`ws://${row.endpoint}/console/${row.node_id}`, { 'x-galvanic-console-token': token, 'x-galvanic-console-auth': '0'.repeat(64) });
    expect(await direct.opened).to.equal(false);
    expect(direct.refusedStatus).to.equal(403);
    const metrics = await (await fetch(`http://${row.endpoint}/metrics`)).text();
    expect(metrics).to.match(/galvanic_console_sessions\{conductor="[^"]+"\} [1-9]/);
    expect(metrics).to.match(/galvanic_console_processes\{conductor="[^"]+"\} [1-9]/);
  });

  it('never logs a console token (the request log masks it)', () => {
    const out = g.output();
    expect(issued.length).to.be.above(10);
    expect(out).to.contain('/v1/console/***');
    for (const token of issued) expect(out).to.not.contain(token);
  });

  it('ends every console process on shutdown (SIGTERM), last', async () => {
    const { node } = await enabledWithViewer();
    const enabled = (await tdb.knex('nodes').where('console_enabled', true).select('uuid')).map((r: { uuid: string }) => r.uuid);
    expect(enabled).to.include(node.uuid);
    expect(enabled.filter((u) => fakeConsoleProcesses().has(u)).length).to.equal(enabled.length);
    expect(await g.stop()).to.equal(0);
    const left = [...fakeConsoleProcesses().keys()].filter((u) => enabled.includes(u));
    expect(left).to.deep.equal([]);
    expect(Number((await tdb.knex('console_processes').count('* as n').first())?.n)).to.equal(0);
  });
});

