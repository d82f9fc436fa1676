/**
 * `galvanic op` against a real all-in-one process, over HTTP: create with --wait (plain
 * progress lines when stdout is not a terminal), show, list, cancel and retry, and the exit
 * status that says how the operation ended.
 */
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { ROOT, startGalvanic, type RunningGalvanic } from '../helpers/app.js';
import { freshDatabase, type TestDatabase } from '../helpers/database.js';

const execFileAsync = promisify(execFile);

interface Result {
  code: number;
  stdout: string;
  stderr: string;
}

describe('galvanic op (CLI over HTTP)', function () {
  this.timeout(120_000);
  let tdb: TestDatabase;
  let g: RunningGalvanic;
  const nodes: string[] = [];

  before(async () => {
    tdb = await freshDatabase();
    g = await startGalvanic({ databaseUrl: tdb.url, env: { GALVANIC_CONDUCTOR__SYNC_POWER_STATE_INTERVAL: '0', GALVANIC_DEFAULT__LOG_LEVEL: 'warn' } });
    for (let i = 0; i < 5; i++) {
      const res = await fetch(`${g.url}/v1/nodes`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-openstack-ironic-api-version': 'latest' },
        body: JSON.stringify({ name: `cli-op-${i}`, driver: 'fake-hardware', driver_info: i === 4 ? { fake_fail: 'permanent' } : { fake_delay_ms: 50 } }),
      });
      expect(res.status).to.equal(201);
      nodes.push(((await res.json()) as { uuid: string }).uuid);
    }
  });

  after(async () => {
    await g?.stop();
    await tdb?.drop();
  });

  async function op(...args: string[]): Promise<Result> {
    try {
      const { stdout, stderr } = await execFileAsync(process.execPath, [path.join(ROOT, 'dist/cli/main.js'), 'op', ...args], { env: { ...process.env, GALVANIC_URL: g.url } });
      return { code: 0, stdout, stderr };
    } catch (err) {
      const e = err as { code: number; stdout: string; stderr: string };
      return { code: e.code, stdout: e.stdout, stderr: e.stderr };
    }
  }

  let opId: string;

  it('create --wait follows the operation with plain lines, shows the failed node and exits 1 when some failed', async () => {
    const res = await op('create', '--nodes', ['cli-op-0', 'cli-op-1', 'cli-op-2', 'cli-op-3', 'cli-op-4'].join(','), '--boot-device', 'pxe', '--power', 'power on',
      '--max-parallel', '2', '--max-attempts', '2', '--initial-delay', '0.1', '--description', 'from the cli', '--wait');
    expect(res.code, res.stderr).to.equal(1);
    const lines = res.stdout.trim().split('\n');
    const m = /^operation ([0-9a-f-]{36}) \(from the cli\), round 1$/m.exec(res.stdout);
    expect(m, res.stdout).to.not.equal(null);
    opId = m![1];
    // Progress lines, each with a timestamp, then the summary.
    expect(lines.filter((l) => new RegExp(`^\\d{4}-\\d\\d-\\d\\dT\\S+ ${opId} `).test(l)).length).to.be.at.least(1);
    expect(res.stdout).to.include('partially_failed: 5/5 done (100%), 4 succeeded, 1 failed');
    expect(res.stdout, res.stdout).to.match(/cli-op-4 {2}failed {2}attempts=1 {2}.*refused the request/);
  });

  it('show, list and a refused cancel', async () => {
    const show = await op('show', opId);
    expect(show.code).to.equal(0);
    expect(show.stdout).to.include('4 succeeded, 1 failed').and.include('cli-op-4');
    const list = await op('list', '--state', 'partially_failed');
    expect(list.code).to.equal(0);
    expect(list.stdout).to.include(opId);
    const json = await op('show', opId, '--json', '--all-nodes');
    expect((JSON.parse(json.stdout) as { nodes: unknown[] }).nodes).to.have.length(5);
    const cancel = await op('cancel', opId);
    expect(cancel.code).to.equal(1);
    expect(cancel.stderr).to.include('409').and.include('already ended');
  });

  it('retry --wait runs the failed node again and exits 0 once all succeeded', async () => {
    const patch = await fetch(`${g.url}/v1/nodes/cli-op-4`, {
      method: 'PATCH',
      headers: { 'content-type': 'application/json', 'x-openstack-ironic-api-version': 'latest' },
      body: JSON.stringify([{ op: 'remove', path: '/driver_info/fake_fail' }]),
    });
    expect(patch.status).to.equal(200);
    const res = await op('retry', opId, '--wait');
    expect(res.code, res.stdout + res.stderr).to.equal(0);
    expect(res.stdout).to.include('round 2').and.include('succeeded: 5/5 done (100%), 5 succeeded, 0 failed');
  });

  it('refuses bad usage with status 2 and API errors with status 1', async () => {
    expect((await op('create', '--nodes', 'cli-op-0')).code).to.equal(2);
    expect((await op('frobnicate')).code).to.equal(2);
    expect((await op('show')).code).to.equal(2);
    const missing = await op('show', '1d2c3b4a-0000-4000-8000-00000000beef');
    expect(missing.code).to.equal(1);
    expect(missing.stderr).to.include('404').and.include('could not be found');
  });
});
