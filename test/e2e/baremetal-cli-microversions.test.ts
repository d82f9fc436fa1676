/**
 * End to end at microversion 1.95 with the real `baremetal` CLI. python-ironicclient 5.0.1
 * negotiates at most 1.78 but sends an explicit `--os-baremetal-api-version 1.95` as asked;
 * it has no options for shards, port names or disable_power_off and no inventory command,
 * so those are written (or read) over HTTP here and the CLI shows and acts on the result.
 */
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { storeInventory } from '../../db/inventory.js';
import { startGalvanic, type RunningGalvanic } from '../helpers/app.js';
import { CLI, requireCli } from '../helpers/baremetal.js';
import { freshDatabase, type TestDatabase } from '../helpers/database.js';

type Row = Record<string, unknown>;

describe('e2e: the baremetal CLI at microversion 1.95', function () {
  this.timeout(120_000);
  let cacheDir: string | undefined;
  let tdb: TestDatabase | undefined;
  let galvanic: RunningGalvanic | undefined;
  let env: NodeJS.ProcessEnv;

  before(async function () {
    requireCli(this, 'baremetal CLI microversion tests');
    this.timeout(60_000);
    cacheDir = await fs.mkdtemp(path.join(os.tmpdir(), 'galvanic-cli-cache-'));
    env = { XDG_CACHE_HOME: cacheDir };
    for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('OS_') && k !== 'XDG_CACHE_HOME') env[k] = v;
    tdb = await freshDatabase();
    galvanic = await startGalvanic({ databaseUrl: tdb.url });
  });

  after(async function () {
    this.timeout(30_000);
    await galvanic?.stop();
    await tdb?.drop();
    if (cacheDir) await fs.rm(cacheDir, { recursive: true, force: true });
  });

  function cli(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
    const all = ['--os-auth-type', 'none', '--os-endpoint', galvanic!.url, '--os-baremetal-api-version', '1.95', ...args];
    return new Promise((resolve) => {
      execFile(CLI, all, { env, timeout: 100_000 }, (err, stdout, stderr) => {
        const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : -1) : 0;
        resolve({ code, stdout: String(stdout), stderr: String(stderr) });
      });
    });
  }

  async function cliJson(...args: string[]): Promise<Row> {
    const r = await cli(...args, '-f', 'json');
    expect(r.code, `baremetal ${args.join(' ')}: ${r.stderr}`).to.equal(0);
    return JSON.parse(r.stdout) as Row;
  }

  async function api(method: string, urlPath: string, body?: unknown): Promise<{ status: number; json: () => Row }> {
    const res = await fetch(`${galvanic!.url}${urlPath}`, {
      method,
      headers: { 'X-OpenStack-Ironic-API-Version': '1.95', ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    return { status: res.status, json: () => JSON.parse(text) as Row };
  }

  it('shows a node created at 1.95 with its shard and disable_power_off, and refuses to power it off', async () => {
    const node = await cliJson('node', 'create', '--driver', 'fake-hardware', '--name', 'mv-node');
    expect(node).to.include({ shard: null, disable_power_off: false, parent_node: null });
    const patched = await api('PATCH', '/v1/nodes/mv-node', [
      { op: 'add', path: '/shard', value: 'rack-1' }, { op: 'replace', path: '/disable_power_off', value: true },
    ]);
    expect(patched.status).to.equal(200);
    const shown = await cliJson('node', 'show', 'mv-node', '-c', 'shard', '-c', 'disable_power_off');
    expect(shown).to.deep.equal({ shard: 'rack-1', disable_power_off: true });
    const shards = await api('GET', '/v1/shards');
    expect(shards.json().shards).to.deep.include({ name: 'rack-1', count: 1 });
    // The CLI retries the 409 as it does for Ironic, then prints Ironic's message.
    const off = await cli('node', 'power', 'off', 'mv-node');
    expect(off.code).to.not.equal(0);
    expect(off.stderr).to.include('Failed to set node power state to power off. (HTTP 409)');
  });

  it('shows a port name set at 1.95, and finds the port by it', async () => {
    const node = await cliJson('node', 'show', 'mv-node', '-c', 'uuid');
    const port = await cliJson('port', 'create', '52:54:00:95:00:01', '--node', String(node.uuid));
    // `port create` prints only the fields 5.0.1 knows; `port show` prints what the server sends.
    expect((await api('PATCH', `/v1/ports/${String(port.uuid)}`, [{ op: 'add', path: '/name', value: 'mv-port' }])).status).to.equal(200);
    const byName = await cliJson('port', 'show', 'mv-port', '-c', 'uuid', '-c', 'name');
    expect(byName).to.deep.equal({ uuid: port.uuid, name: 'mv-port' });
  });

  it('serves the inventory inspection stored (read over HTTP: the CLI has no command for it)', async () => {
    const node = await cliJson('node', 'show', 'mv-node', '-c', 'uuid');
    expect((await api('GET', '/v1/nodes/mv-node/inventory')).status).to.equal(404);
    const row = await tdb!.knex('nodes').where('uuid', String(node.uuid)).first('id');
    await storeInventory(tdb!.knex, (row as { id: number }).id, { inventory: { cpu: { count: 4 } }, pluginData: { source: 'e2e' } });
    const inv = await api('GET', '/v1/nodes/mv-node/inventory');
    expect(inv.status).to.equal(200);
    expect(inv.json()).to.deep.equal({ inventory: { cpu: { count: 4 } }, plugin_data: { source: 'e2e' } });
  });
});
