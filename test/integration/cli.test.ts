import { expect } from 'chai';
import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { freshDatabase, suiteDatabase } from '../helpers/database.js';
import { freePort } from '../helpers/net.js';
import { ROOT, startGalvanic } from '../helpers/app.js';

const run = promisify(execFile);
const MAIN = path.join(ROOT, 'dist/cli/main.js');

async function galvanic(args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [MAIN, ...args], { env: { ...process.env, ...env }, timeout: 60_000 });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

describe('galvanic command', function () {
  this.timeout(120_000);
  let tmp: string;

  before(async () => {
    tmp = await fs.mkdtemp(path.join(os.tmpdir(), 'galvanic-cli-'));
    await fs.chmod(tmp, 0o711);
  });
  after(async () => {
    await fs.rm(tmp, { recursive: true, force: true });
  });

  it('prints the sample configuration, identical to etc/galvanic.conf.sample', async () => {
    const { code, stdout } = await galvanic(['config', 'sample']);
    expect(code).to.equal(0);
    expect(stdout).to.equal(await fs.readFile(path.join(ROOT, 'etc/galvanic.conf.sample'), 'utf8'));
  });

  it('refuses a bad configuration file, naming file, line, section and option', async () => {
    const file = path.join(tmp, 'bad.conf');
    await fs.writeFile(file, '[api]\nport = 70000\nprot = 1\n[nope]\nx = 1\n');
    const { code, stderr } = await galvanic(['api', '--config', file]);
    expect(code).to.not.equal(0);
    expect(stderr).to.contain(`${file}:2: [api] port:`);
    expect(stderr).to.contain(`${file}:3: [api] prot: unknown option`);
    expect(stderr).to.contain(`${file}:4: [nope]: unknown section`);
  });

  it('answers an unknown option with the usage and exit status 2, not a stack trace', async () => {
    const { code, stdout, stderr } = await galvanic(['api', '--bogus']);
    expect(code).to.equal(2);
    expect(stdout).to.equal('');
    expect(stderr).to.contain("Unknown option '--bogus'").and.contain('Usage: galvanic api').and.not.contain('    at ');
    const top = await galvanic(['--bogus']);
    expect(top.code).to.equal(2);
    expect(top.stderr).to.contain('Usage: galvanic <command>').and.not.contain('    at ');
  });

  it("prints each command's help, the subcommands of db and config, and the version", async () => {
    for (const [args, first] of [[['api', '--help'], 'Usage: galvanic api'], [['conductor', '-h'], 'Usage: galvanic conductor'], [['db', '--help'], 'Usage: galvanic db upgrade'], [['exporter', '--help'], 'Usage: galvanic exporter']] as const) {
      const { code, stdout } = await galvanic([...args]);
      expect(code, args.join(' ')).to.equal(0);
      expect(stdout.startsWith(first), stdout).to.equal(true);
      expect(stdout).to.match(/Sections read:|Subcommands:/);
    }
    const db = await galvanic(['db']);
    expect(db.code).to.equal(2);
    expect(db.stderr).to.contain('upgrade');
    const pkg = JSON.parse(await fs.readFile(path.join(ROOT, 'package.json'), 'utf8')) as { version: string };
    expect((await galvanic(['--version'])).stdout).to.equal(`galvanic ${pkg.version}\n`);
  });

  it('refuses an unknown command', async () => {
    const { code, stderr } = await galvanic(['frobnicate']);
    expect(code).to.equal(2);
    expect(stderr).to.contain('unknown command');
  });

  describe('against a database', () => {
    const tdb = suiteDatabase({ empty: true, each: true });

    it('api and conductor refuse a schema that is behind; db upgrade brings it current, twice harmlessly', async () => {
      const env = { GALVANIC_DATABASE__CONNECTION: tdb.url, GALVANIC_API__PORT: String(await freePort()) };
      for (const cmd of [['api'], ['conductor']]) {
        const res = await galvanic(cmd, env);
        expect(res.code, cmd.join(' ')).to.equal(1);
        expect(res.stderr).to.match(/galvanic db upgrade/);
      }
      expect((await galvanic(['db', 'upgrade'], env)).code).to.equal(0);
      expect((await galvanic(['db', 'upgrade'], env)).code).to.equal(0);
      const { rows } = await tdb.knex.raw('select count(*)::int as n from knex_migrations');
      expect(rows[0].n).to.be.greaterThan(0);
    });
  });

  it('api alone needs a shared database', async () => {
    const res = await galvanic(['api'], { GALVANIC_DATABASE__CONNECTION: '' });
    expect(res.code).to.equal(1);
    expect(res.stderr).to.contain('[database] connection');
  });

  it('shuts down cleanly on SIGTERM: exit 0, conductor offline', async () => {
    const tdb = await freshDatabase();
    try {
      const g = await startGalvanic({ databaseUrl: tdb.url, env: { GALVANIC_DEFAULT__HOST: 'sigterm-host' } });
      const before = await tdb.knex('conductors').where('hostname', 'sigterm-host').first();
      expect(before.online).to.equal(true);
      expect(await g.stop()).to.equal(0);
      const after = await tdb.knex('conductors').where('hostname', 'sigterm-host').first();
      expect(after.online).to.equal(false);
    } finally {
      await tdb.drop();
    }
  });

  it('all-in-one starts its own embedded Postgres when no connection is configured, and stops it on exit', async () => {
    const dataDir = path.join(tmp, 'pgdata');
    const port = await freePort();
    const pgPort = await freePort();
    const proc = spawn(process.execPath, [MAIN, 'all-in-one', '--config', path.join(ROOT, 'etc/galvanic.conf.sample')], {
      env: {
        ...process.env,
        GALVANIC_DATABASE__CONNECTION: '',
        GALVANIC_DATABASE__EMBEDDED_DATA_DIR: dataDir,
        GALVANIC_DATABASE__EMBEDDED_PORT: String(pgPort),
        GALVANIC_API__PORT: String(port),
        GALVANIC_DEPLOY__HTTP_SERVER_PORT: '0',
        GALVANIC_DEPLOY__HTTP_ROOT: path.join(tmp, 'httpboot'),
        GALVANIC_DEPLOY__ISO_MASTER_PATH: path.join(tmp, 'cache'),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    proc.stdout.on('data', (d: Buffer) => { out += d.toString(); });
    proc.stderr.on('data', (d: Buffer) => { out += d.toString(); });
    const exited = new Promise<number | null>((resolve) => proc.once('exit', resolve));
    try {
      const deadline = Date.now() + 60_000;
      let body: { nodes?: unknown[] } | undefined;
      while (Date.now() < deadline && proc.exitCode === null) {
        try {
          const res = await fetch(`http://127.0.0.1:${port}/v1/nodes`);
          if (res.ok) {
            body = (await res.json()) as { nodes: unknown[] };
            break;
          }
        } catch {
          // not up yet
        }
        await sleep(200);
      }
      expect(body, out).to.deep.equal({ nodes: [] });
      await fs.access(path.join(dataDir, 'PG_VERSION'));
    } finally {
      proc.kill('SIGTERM');
    }
    expect(await exited, out).to.equal(0);
    // The server is gone: its pid file is removed on a clean stop.
    const pidFile = await fs.access(path.join(dataDir, 'postmaster.pid')).then(() => 'present', () => 'absent');
    expect(pidFile).to.equal('absent');
  });
});
