/**
 * The HTTP root's sweep against a real database: files of nodes that are gone or rest go,
 * files of nodes whose boot may still read them stay (whoever owns the node), a file published
 * again since it was listed stays, and temporaries a dead publish left go once old.
 */
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { sweepHttpRoot } from '../../conductor/periodics/http-root-sweep.js';
import { createNode } from '../../db/nodes.js';
import { HttpRoot } from '../../drivers/http-root.js';
import { suiteDatabase } from '../helpers/database.js';

describe('the HTTP root sweep', () => {
  const tdb = suiteDatabase();
  let dir: string;
  let root: HttpRoot;
  const log = pino({ level: 'silent' });
  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'galvanic-sweep-'));
    root = new HttpRoot({ root: dir, baseUrl: 'http://127.0.0.1:6180' });
  });
  afterEach(() => fs.rm(dir, { recursive: true, force: true }));

  async function nodeIn(state: string): Promise<string> {
    return (await createNode(tdb.knex, { driver: 'fake-hardware', provisionState: state })).uuid;
  }

  it('removes the files of deleted and resting nodes, keeps those of booting ones, and the young', async () => {
    const booting = await Promise.all(['deploying', 'wait call-back', 'clean wait', 'inspect wait', 'active', 'service wait'].map(nodeIn));
    const resting = await Promise.all(['available', 'manageable', 'enroll', 'deploy failed', 'clean failed'].map(nodeIn));
    const deleted = randomUUID();
    for (const uuid of [...booting, ...resting, deleted]) await root.publish(uuid, 'boot.iso', { data: 'iso' });
    await root.publish(resting[0]!, 'configdrive', { data: 'cd' });
    // Young files (just published) are left alone, whatever their node.
    expect((await sweepHttpRoot({ db: tdb.knex, httpRoot: root, log })).removed).to.equal(0);
    const later = Date.now() + 120_000;
    const swept = await sweepHttpRoot({ db: tdb.knex, httpRoot: root, log }, later);
    expect(swept.removed).to.equal(resting.length + 2);
    expect((await root.list()).map((f) => f.nodeUuid).sort()).to.deep.equal([...booting].sort());
  });

  it('leaves a file published again after it was listed, and removes old temporaries', async () => {
    const uuid = await nodeIn('available');
    await root.publish(uuid, 'boot.iso', { data: 'old' });
    const [listed] = await root.list();
    await new Promise((r) => setTimeout(r, 20));
    await root.publish(uuid, 'boot.iso', { data: 'new' });
    expect(await root.removeFile(listed!)).to.equal(false);
    expect(await fs.readFile(root.path(uuid, 'boot.iso'), 'utf8')).to.equal('new');
    await fs.writeFile(path.join(root.dir, '.tmp-boot-x.iso-abc'), 'half');
    const swept = await sweepHttpRoot({ db: tdb.knex, httpRoot: root, log }, Date.now() + 2 * 3_600_000);
    expect(swept.removed).to.equal(2);
    expect(await fs.readdir(root.dir)).to.deep.equal([]);
  });
});
