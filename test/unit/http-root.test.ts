/** The conductor's HTTP root: Ironic's file names, atomic publishing, withdrawal, and the embedded server's ranges. */
import { expect } from 'chai';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pino } from 'pino';
import { HttpRoot } from '../../drivers/http-root.js';
import { startHttpRootServer, type HttpRootServer } from '../../conductor/http-root-server.js';
import { ImagePublishFailed } from '../../common/errors.js';

const NODE = '1be26c0b-03f2-4d2e-ae87-c02d7f33c123';
const OTHER = '2be26c0b-03f2-4d2e-ae87-c02d7f33c124';

describe('HttpRoot', () => {
  let dir: string;
  let root: HttpRoot;
  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'galvanic-httproot-'));
    root = new HttpRoot({ root: dir, baseUrl: 'http://192.0.2.1:6180/' });
  });
  afterEach(async () => {
    await fs.rm(dir, { recursive: true, force: true });
  });

  it("names files as Ironic's image_utils does and hands out their URL", async () => {
    expect(root.objectName(NODE, 'boot.iso')).to.equal(`boot-${NODE}.iso`);
    expect(root.objectName(NODE, 'configdrive')).to.equal(`configdrive-${NODE}`);
    expect(root.objectName(NODE, '')).to.equal(NODE);
    const url = await root.publish(NODE, 'boot.iso', { data: 'iso bytes' });
    expect(url).to.equal(`http://192.0.2.1:6180/redfish/boot-${NODE}.iso`);
    expect(await fs.readFile(path.join(dir, 'redfish', `boot-${NODE}.iso`), 'utf8')).to.equal('iso bytes');
    expect(await root.publish(NODE, 'configdrive', { data: 'x' }, { baseUrl: 'http://198.51.100.7/' })).to.equal(`http://198.51.100.7/redfish/configdrive-${NODE}`);
  });

  it('refuses a name or a node that would leave the directory', async () => {
    for (const name of ['../x', 'a/b', 'a b', 'x./..']) expect(() => root.objectName(NODE, name), name).to.throw(/Not a name/);
    expect(() => root.objectName('../../etc', 'boot.iso')).to.throw(/Not a node UUID/);
  });

  it('links a source file (one inode for every node), replaces, lists and withdraws per node', async () => {
    const source = path.join(dir, 'master.iso');
    await fs.writeFile(source, 'shared');
    await root.publish(NODE, 'boot.iso', { path: source });
    await root.publish(OTHER, 'boot.iso', { path: source });
    expect((await fs.stat(source)).nlink).to.equal(3);
    await root.publish(NODE, 'configdrive', { stream: Readable.from([Buffer.from('cd')]) });
    await root.publish(NODE, 'configdrive', { data: 'cd2' });
    expect(await fs.readFile(root.path(NODE, 'configdrive'), 'utf8')).to.equal('cd2');
    const listed = (await root.list()).map((f) => `${f.nodeUuid} ${f.name}`).sort();
    expect(listed).to.deep.equal([`${NODE} boot.iso`, `${NODE} configdrive`, `${OTHER} boot.iso`]);
    await root.remove(NODE, 'configdrive');
    expect((await root.list()).length).to.equal(2);
    await root.remove(NODE);
    expect((await root.list()).map((f) => f.nodeUuid)).to.deep.equal([OTHER]);
    expect((await fs.stat(source)).nlink).to.equal(2);
    await root.remove(NODE);
    expect(await root.temporaries()).to.deep.equal([]);
  });

  it('fails with ImagePublishFailed and leaves nothing when the source cannot be read', async () => {
    const failing = new Readable({
      read() {
        this.push('part');
        this.destroy(new Error('source went away'));
      },
    });
    let err: unknown;
    await root.publish(NODE, 'boot.iso', { stream: failing }).catch((e: unknown) => { err = e; });
    expect(err).to.be.instanceOf(ImagePublishFailed);
    expect((err as Error).message).to.include('source went away');
    expect(await fs.readdir(root.dir)).to.deep.equal([]);
  });

  it('says the root is not writable when it cannot be made', async () => {
    const file = path.join(dir, 'not-a-dir');
    await fs.writeFile(file, '');
    const bad = new HttpRoot({ root: file, baseUrl: 'http://x' });
    let err: unknown;
    await bad.publish(NODE, 'boot.iso', { data: 'x' }).catch((e: unknown) => { err = e; });
    expect(err).to.be.instanceOf(ImagePublishFailed);
    expect((err as Error).message).to.match(/^Publishing boot\.iso for node .* in the HTTP root failed: /);
  });

  describe('embedded server', () => {
    let server: HttpRootServer;
    beforeEach(async () => {
      server = await startHttpRootServer({ root: dir, host: '127.0.0.1', port: 0, log: pino({ level: 'silent' }) });
    });
    afterEach(() => server.close());

    it('serves GET, HEAD and byte ranges, and neither temporaries nor other methods', async () => {
      const data = Buffer.alloc(10_000, 7);
      data.write('START', 0);
      const url = (await root.publish(NODE, 'boot.iso', { data })).replace('http://192.0.2.1:6180', server.url);
      const head = await fetch(url, { method: 'HEAD' });
      expect(head.status).to.equal(200);
      expect(head.headers.get('content-length')).to.equal('10000');
      expect(head.headers.get('accept-ranges')).to.equal('bytes');
      const part = await fetch(url, { headers: { range: 'bytes=0-4' } });
      expect(part.status).to.equal(206);
      expect(part.headers.get('content-range')).to.equal('bytes 0-4/10000');
      expect(await part.text()).to.equal('START');
      expect((await fetch(url)).status).to.equal(200);
      await fs.writeFile(path.join(root.dir, '.tmp-half'), 'x');
      expect((await fetch(`${server.url}/redfish/.tmp-half`)).status).to.equal(404);
      expect((await fetch(`${server.url}/redfish/`)).status).to.equal(404);
      expect((await fetch(`${server.url}/redfish/boot-${OTHER}.iso`)).status).to.equal(404);
      expect((await fetch(`${server.url}/../../etc/passwd`)).status).to.equal(404);
      const post = await fetch(url, { method: 'POST' });
      expect(post.status).to.equal(405);
      expect(post.headers.get('allow')).to.equal('GET, HEAD');
    });
  });
});
