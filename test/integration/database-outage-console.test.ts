/**
 * Console sessions after a Postgres restart: a viewer connected through an API server to a
 * conductor's console is closed within 1 s of an access change made after the database came
 * back, whether the change is a PATCH of the node's owner (the access epoch moves at once) or
 * the console being disabled (an intent the conductor must wake up for). Real processes on a
 * private Postgres the test restarts.
 */
import { expect } from 'chai';
import { CloseCode } from '../../common/console-protocol.js';
import { startConductor, startGalvanic, type RunningConductor, type RunningGalvanic } from '../helpers/app.js';
import { connectViewer, type Viewer } from '../helpers/console.js';
import { until } from '../helpers/until.js';
import { startPrivatePostgres, type PrivatePostgres } from '../helpers/private-postgres.js';

const HEADERS = { 'content-type': 'application/json', 'x-openstack-ironic-api-version': 'latest' };
const CLOSE_WITHIN_MS = 1000;

function note(msg: string): void {
  if (process.env.TEST_VERBOSE === '1') process.stderr.write(`      [database-outage-console] ${msg}\n`);
}

describe('console sessions across a database restart (real processes, a private Postgres the test restarts)', function () {
  this.timeout(180_000);
  let pg: PrivatePostgres | undefined;
  let api: RunningGalvanic | undefined;
  let conductor: RunningConductor | undefined;
  const viewers: Viewer[] = [];

  /** A request as Ironic's clients make it: a 503 (the database still away) is retried. Returns when it was sent. */
  const call = async (method: string, path: string, body?: unknown): Promise<{ status: number; body: unknown; sentAt: number }> => {
    const deadline = Date.now() + 30_000;
    for (;;) {
      const sentAt = Date.now();
      const res = await fetch(`${api!.url}${path}`, { method, headers: HEADERS, body: body === undefined ? undefined : JSON.stringify(body) });
      const text = await res.text();
      if (res.status !== 503 || Date.now() > deadline) return { status: res.status, body: text ? JSON.parse(text) : undefined, sentAt };
      await new Promise((r) => setTimeout(r, 200));
    }
  };

  /** A node with a running fake console and a viewer attached to it through the API server. */
  const nodeWithViewer = async (): Promise<{ uuid: string; viewer: Viewer }> => {
    const created = await call('POST', '/v1/nodes', { driver: 'fake-hardware', console_interface: 'fake', driver_info: { fake_console_interval_ms: 100 } });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    const uuid = (created.body as { uuid: string }).uuid;
    const enabled = await call('PUT', `/v1/nodes/${uuid}/states/console?wait=30`, { enabled: true });
    expect(enabled.status, JSON.stringify(enabled.body)).to.equal(202);
    const info = (await call('GET', `/v1/nodes/${uuid}/states/console`)).body as { console_info: { url: string } | null };
    expect(info.console_info, 'console_info').to.not.equal(null);
    const viewer = connectViewer(info.console_info!.url);
    viewers.push(viewer);
    expect(await viewer.opened, 'viewer connected').to.equal(true);
    await viewer.waitFor(/line \d+/);
    return { uuid, viewer };
  };

  /** How long after `sentAt` the viewer was closed, and with which code. */
  const closedAfter = async (viewer: Viewer, sentAt: number): Promise<{ ms: number; code: number; reason: string }> => {
    const closed = await Promise.race([viewer.closed, new Promise<undefined>((r) => setTimeout(() => r(undefined), 10_000))]);
    if (!closed) return { ms: Infinity, code: 0, reason: 'still open after 10 s' };
    return { ms: closed.at - sentAt, code: closed.code, reason: closed.reason };
  };

  before(async () => {
    pg = await startPrivatePostgres();
    api = await startGalvanic({ databaseUrl: pg.url, command: 'api', env: { GALVANIC_DEFAULT__LOG_LEVEL: 'warn' } });
    // Polls for intents far slower than the bound: a disable seen within it woke the conductor over LISTEN.
    conductor = await startConductor({ databaseUrl: pg.url, host: 'console-outage-c1', env: { GALVANIC_CONDUCTOR__POLL_INTERVAL: '10' } });
  });

  afterEach(() => {
    for (const v of viewers.splice(0)) v.ws.terminate();
  });

  after(async () => {
    await Promise.all([api?.stop(), conductor?.stop()]);
    await pg?.close();
  });

  it('closes a session within 1 s when the node\'s owner changes, or its console is disabled, after a fast restart', async () => {
    const owned = await nodeWithViewer();
    const disabled = await nodeWithViewer();

    await pg!.restart();
    // The restart ends the connections, not the sessions: output still flows to the viewers.
    for (const { viewer } of [owned, disabled]) {
      const seen = viewer.text().length;
      await until('console output after the restart', () => viewer.text().length > seen, 10_000);
    }

    const patched = await call('PATCH', `/v1/nodes/${owned.uuid}`, [{ op: 'add', path: '/owner', value: 'someone-else' }]);
    expect(patched.status, JSON.stringify(patched.body)).to.equal(200);
    const byOwner = await closedAfter(owned.viewer, patched.sentAt);
    note(`owner change: ${JSON.stringify(byOwner)}`);
    expect(byOwner.code, `owner change: ${JSON.stringify(byOwner)}`).to.equal(CloseCode.ACCESS_CHANGED);
    expect(byOwner.ms, `owner change: ${JSON.stringify(byOwner)}`).to.be.at.most(CLOSE_WITHIN_MS);

    const off = await call('PUT', `/v1/nodes/${disabled.uuid}/states/console`, { enabled: false });
    expect(off.status, JSON.stringify(off.body)).to.equal(202);
    const byDisable = await closedAfter(disabled.viewer, off.sentAt);
    note(`console disabled: ${JSON.stringify(byDisable)}`);
    expect(byDisable.code, `console disabled: ${JSON.stringify(byDisable)}`).to.equal(CloseCode.CONSOLE_DISABLED);
    expect(byDisable.ms, `console disabled: ${JSON.stringify(byDisable)}`).to.be.at.most(CLOSE_WITHIN_MS);
  });
});
