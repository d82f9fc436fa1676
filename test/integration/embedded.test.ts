import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createKnex } from '../../db/connection.js';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../db/embedded.js';
import { freePort } from '../helpers/net.js';

const childScript = path.join(path.dirname(fileURLToPath(import.meta.url)), '../helpers/embedded-child.js');

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return true;
  }
}

function postmasterPid(dataDir: string): number {
  return Number.parseInt(readFileSync(path.join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0], 10);
}

async function queryOne(server: EmbeddedPostgres, sql: string): Promise<Record<string, unknown>> {
  const knex = createKnex(server.connectionString, { poolMax: 1 });
  try {
    const result = (await knex.raw(sql)) as { rows: Array<Record<string, unknown>> };
    return result.rows[0];
  } finally {
    await knex.destroy();
  }
}

describe('embedded Postgres', function () {
  this.timeout(60_000);

  let tempDir: string;
  let dataDir: string;
  let port: number;
  let logs: string[];
  const servers: EmbeddedPostgres[] = [];
  const start = async (): Promise<EmbeddedPostgres> => {
    const server = await startEmbeddedPostgres({ dataDir, port, log: (m) => logs.push(m) });
    servers.push(server);
    return server;
  };

  before(async () => {
    tempDir = await fs.mkdtemp(path.join(os.tmpdir(), 'galvanic-embedded-'));
    // As the real program would find it: the deepest parents do not exist yet.
    dataDir = path.join(tempDir, 'var', 'pg');
    // mkdtemp makes it 0700; as root the server runs as 'postgres' and must pass through.
    await fs.chmod(tempDir, 0o711);
    port = await freePort();
  });
  beforeEach(() => {
    logs = [];
  });
  after(async () => {
    for (const server of servers) await server.stop();
    await fs.rm(tempDir, { recursive: true, force: true });
  });

  it('initialises a new cluster, serves queries on 127.0.0.1 only, and stops', async () => {
    const server = await start();
    expect(server.connectionString).to.contain(`127.0.0.1:${port}`);
    const row = await queryOne(
      server,
      "select 1 as one, current_setting('listen_addresses') as listen, " +
        "current_setting('unix_socket_directories') as sockets, " +
        "pg_encoding_to_char(encoding) as encoding from pg_database where datname = 'postgres'",
    );
    expect(row).to.deep.equal({ one: 1, listen: '127.0.0.1', sockets: '', encoding: 'UTF8' });
    const knex = createKnex(server.connectionString, { poolMax: 1 });
    await knex.raw('create table survives_restart (id int)');
    await knex.destroy();

    await server.stop();
    await server.stop();
    await fs.access(path.join(dataDir, 'postmaster.pid')).then(
      () => expect.fail('postmaster.pid left behind after a clean stop'),
      () => undefined,
    );
  });

  it('starts again on the same directory without re-initialising it', async () => {
    const server = await start();
    expect(logs.join('\n')).not.to.match(/initialising a new Postgres cluster|initdb/i);
    const row = await queryOne(server, "select to_regclass('survives_restart') is not null as kept");
    expect(row.kept).to.equal(true);
    await server.stop();
  });

  it('runs the server in a process group of its own, out of reach of a terminal Ctrl-C', async function () {
    if (process.platform !== 'linux') this.skip();
    const server = await start();
    const pgrp = (pid: number): string => {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2];
    };
    expect(pgrp(postmasterPid(dataDir))).not.to.equal(pgrp(process.pid));
    await server.stop();
  });

  it('takes over after an owner killed by SIGKILL left its server running', async () => {
    const child = spawn(process.execPath, [childScript, dataDir, String(port)], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    await new Promise<void>((resolve, reject) => {
      let out = '';
      child.stdout.on('data', (chunk: Buffer) => {
        out += chunk.toString();
        if (out.includes('ready')) resolve();
      });
      child.once('exit', (code) => reject(new Error(`child exited early with code ${code}`)));
    });
    const orphan = postmasterPid(dataDir);
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
    expect(alive(orphan), 'the orphaned server keeps running').to.equal(true);

    const server = await start();
    expect(alive(orphan)).to.equal(false);
    expect(postmasterPid(dataDir)).not.to.equal(orphan);
    expect((await queryOne(server, 'select 1 as one')).one).to.equal(1);
    expect(logs.join('\n')).to.contain('from a previous run');
    await server.stop();
  });
});
