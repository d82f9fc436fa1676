/**
 * The config drive builder: the JSON form (API 1.56) built as Ironic's build_configdrive and
 * openstacksdk's configdrive.build do it, read back with xorriso as a machine would mount it,
 * and compared file for file with what openstacksdk itself builds from the same input.
 */
import { execFile, execFileSync } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { ImageCreationFailed, ImageToolMissing } from '../../common/errors.js';
import { buildConfigdrive, buildConfigdriveImage, decodeConfigdrive, pythonJson, type ConfigdriveContent } from '../../drivers/image/configdrive.js';
import { KeptConfigdrives, configdriveImage } from '../../conductor/configdrive.js';
import { readIso, requireXorriso } from '../helpers/iso.js';

const run = promisify(execFile);
const NODE = { uuid: '1be26c0b-03f2-4d2e-ae87-c02d7f33c123', name: 'cd-node' };

/** openstacksdk's build, given its input as Ironic's build_configdrive prepares it. */
const OPENSTACKSDK_BUILD = `
import json, sys
from openstack.baremetal import configdrive
node, cd = json.loads(sys.argv[1]), json.loads(sys.argv[2])
meta = cd.setdefault('meta_data', {})
meta.setdefault('uuid', node['uuid'])
if node['name']:
    meta.setdefault('name', node['name'])
ud = cd.get('user_data')
if isinstance(ud, (dict, list)):
    ud = json.dumps(ud).encode()
elif ud:
    ud = ud.encode('utf-8')
sys.stdout.write(configdrive.build(meta, user_data=ud, network_data=cd.get('network_data'), vendor_data=cd.get('vendor_data')))
`;

function hasOpenstacksdk(): boolean {
  try {
    execFileSync('/usr/bin/python3', ['-c', 'import openstack.baremetal.configdrive'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

const text = (files: Map<string, Buffer>, name: string) => files.get(name)?.toString('utf8');

describe('config drive builder (Ironic build_configdrive, openstacksdk configdrive.build)', function () {
  this.timeout(30_000);
  before(async function () {
    await requireXorriso(this);
  });

  it('builds a gzipped, base64-encoded ISO 9660 image labelled config-2 with the files under openstack/2012-08-10 and openstack/latest', async () => {
    const content: ConfigdriveContent = {
      meta_data: { hostname: 'cd-node.example', public_keys: { default: 'ssh-ed25519 AAAAC3Nz test' } },
      network_data: { links: [{ id: 'eth0', type: 'phy', ethernet_mac_address: '52:54:00:12:34:56', mtu: 1500 }], networks: [], services: [] },
      user_data: '#cloud-config\nhostname: cd-node\n',
      vendor_data: { tenant: 'x' },
    };
    const encoded = await buildConfigdrive(NODE, content);
    expect(encoded).to.match(/^H4sI[A-Za-z0-9+/]+=*$/);
    const iso = await readIso(decodeConfigdrive(encoded));
    expect(iso.volumeId).to.equal('config-2');
    const names = ['meta_data.json', 'network_data.json', 'user_data', 'vendor_data2.json'];
    expect([...iso.files.keys()]).to.deep.equal(['2012-08-10', 'latest'].flatMap((v) => names.map((n) => `openstack/${v}/${n}`)));
    // Ironic's defaults are added after the given keys.
    expect(JSON.parse(text(iso.files, 'openstack/latest/meta_data.json')!)).to.deep.equal({ ...content.meta_data, uuid: NODE.uuid, name: NODE.name });
    expect(text(iso.files, 'openstack/latest/user_data')).to.equal(content.user_data);
    expect(JSON.parse(text(iso.files, 'openstack/latest/network_data.json')!)).to.deep.equal(content.network_data);
    expect(JSON.parse(text(iso.files, 'openstack/latest/vendor_data2.json')!)).to.deep.equal(content.vendor_data);
  });

  it('keeps a given uuid and name, leaves empty parts out, and writes user_data given as an object as its JSON', async () => {
    const iso = await readIso(await buildConfigdriveImage({ uuid: NODE.uuid, name: null }, { meta_data: { uuid: 'given', name: 'mine' }, network_data: {}, user_data: { ignition: { version: '3.2.0' } } }));
    expect([...iso.files.keys()].filter((n) => n.startsWith('openstack/latest/'))).to.deep.equal(['openstack/latest/meta_data.json', 'openstack/latest/user_data']);
    expect(text(iso.files, 'openstack/latest/meta_data.json')).to.equal('{"uuid": "given", "name": "mine"}');
    expect(text(iso.files, 'openstack/latest/user_data')).to.equal('{"ignition": {"version": "3.2.0"}}');
    // A node without a name gets no name; an empty dict gets the uuid alone.
    const bare = await readIso(await buildConfigdriveImage({ uuid: NODE.uuid, name: null }, {}));
    expect([...bare.files.keys()]).to.deep.equal(['openstack/2012-08-10/meta_data.json', 'openstack/latest/meta_data.json']);
    expect(text(bare.files, 'openstack/latest/meta_data.json')).to.equal(`{"uuid": "${NODE.uuid}"}`);
  });

  it('holds the same files as openstacksdk builds from the same input', async function () {
    if (!hasOpenstacksdk()) {
      const msg = 'openstacksdk is not importable by /usr/bin/python3 (apt-get install python3-openstacksdk)';
      if (process.env.CI === 'true') throw new Error(`${msg}; CI=true, so this is a failure, not a skip`);
      process.stderr.write(`      skipped: ${msg}\n`);
      this.skip();
    }
    const content: ConfigdriveContent = {
      meta_data: { hostname: 'héllo', list: [1, 2.5, true, null], nested: { a: '"quoted"\n\ttab' } },
      network_data: { links: [{ id: 'eth0', mtu: 9000 }] },
      user_data: ['one', { two: 2 }],
      vendor_data: { k: 'v' },
    };
    const { stdout } = await run('/usr/bin/python3', ['-c', OPENSTACKSDK_BUILD, JSON.stringify(NODE), JSON.stringify(content)], { maxBuffer: 1 << 24 });
    const theirs = await readIso(decodeConfigdrive(stdout));
    const ours = await readIso(decodeConfigdrive(await buildConfigdrive(NODE, content)));
    expect(ours.volumeId).to.equal(theirs.volumeId);
    expect([...ours.files.keys()]).to.deep.equal([...theirs.files.keys()]);
    for (const [name, data] of theirs.files) expect(ours.files.get(name)?.toString('utf8'), name).to.equal(data.toString('utf8'));
  });

  it('writes JSON as Python json.dumps does', () => {
    expect(pythonJson({ a: [1, 'é', null, false], b: { c: '\u007f' } })).to.equal('{"a": [1, "\\u00e9", null, false], "b": {"c": "\\u007f"}}');
  });

  it('fails with ImageToolMissing when xorriso is missing, naming its Debian package, and on a config drive that is not gzip and base64', async () => {
    const err = await buildConfigdrive(NODE, {}, { xorriso: '/nonexistent/xorriso' }).catch((e: unknown) => e);
    expect(err).to.be.instanceOf(ImageToolMissing);
    expect((err as Error).message).to.match(/^Creating iso image failed: xorriso not found \(looked in \/nonexistent\/xorriso\): install the Debian package xorriso/);
    expect(() => decodeConfigdrive('not a config drive')).to.throw(ImageCreationFailed, /not a gzipped and base64-encoded image/);
  });

  it('gives the config drive as its consumers take it (get_configdrive_image): the JSON built now, a string as it is, none as undefined', async () => {
    const services = { useObjectStore: false, maxInlineSize: 65536, httpRoot: null };
    const node = (configdrive?: unknown) => ({ node: { ...NODE, instanceInfo: configdrive === undefined ? {} : { configdrive } } }) as Parameters<typeof configdriveImage>[0];
    const built = await configdriveImage(node({ meta_data: { hostname: 'h' }, user_data: 'u' }), services);
    const iso = await readIso(decodeConfigdrive(built!));
    expect(iso.volumeId).to.equal('config-2');
    expect(text(iso.files, 'openstack/latest/user_data')).to.equal('u');
    expect(JSON.parse(text(iso.files, 'openstack/latest/meta_data.json')!)).to.deep.equal({ hostname: 'h', uuid: NODE.uuid, name: NODE.name });
    expect(await configdriveImage(node('http://cd.example/cd'), services)).to.equal('http://cd.example/cd');
    expect(await configdriveImage(node('H4sIAAAA'), undefined)).to.equal('H4sIAAAA');
    expect(await configdriveImage(node(), services)).to.equal(undefined);
    expect(await configdriveImage(node(''), services)).to.equal(undefined);
    // A build that fails where it is consumed throws the builder's error, which the step reports.
    const err = await configdriveImage(node({ user_data: 'u' }), { ...services, tools: { xorriso: '/nonexistent/xorriso' } }).catch((e: unknown) => e);
    expect(err).to.be.instanceOf(ImageToolMissing);
  });

  it('hands a consumer the image kept at the deploy\'s start only when it was built from the same JSON, uuid and name, once', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'cd-count-'));
    try {
      // A xorriso that counts its runs.
      const log = path.join(dir, 'runs');
      const xorriso = path.join(dir, 'xorriso');
      await writeFile(xorriso, `#!/bin/sh\necho run >> '${log}'\nexec xorriso "$@"\n`, { mode: 0o755 });
      const builds = async () => (await readFile(log, 'utf8').catch(() => '')).split('\n').filter(Boolean).length;
      const content: ConfigdriveContent = { meta_data: { hostname: 'h' }, user_data: 'u' };
      const kept = new KeptConfigdrives();
      const services = { useObjectStore: false, maxInlineSize: 65536, httpRoot: null, kept, tools: { xorriso } };
      const node = (name: string | null, configdrive: unknown = content) => ({ node: { ...NODE, name, instanceInfo: { configdrive } } }) as unknown as Parameters<typeof configdriveImage>[0];
      const atStart = await buildConfigdrive(NODE, content, { xorriso });
      kept.keep(NODE.uuid, KeptConfigdrives.key(NODE, content), atStart);
      expect(await configdriveImage(node(NODE.name), services)).to.equal(atStart);
      expect(await builds()).to.equal(1);
      // Taken: a second consumer (a step run again) builds it.
      const again = await configdriveImage(node(NODE.name), services);
      expect(await builds()).to.equal(2);
      expect(JSON.parse(text((await readIso(decodeConfigdrive(again!))).files, 'openstack/latest/meta_data.json')!)).to.deep.equal({ hostname: 'h', uuid: NODE.uuid, name: NODE.name });
      // Renamed since, or other JSON: built from what the node holds now.
      kept.keep(NODE.uuid, KeptConfigdrives.key(NODE, content), atStart);
      const renamed = await configdriveImage(node('renamed'), services);
      expect(JSON.parse(text((await readIso(decodeConfigdrive(renamed!))).files, 'openstack/latest/meta_data.json')!).name).to.equal('renamed');
      kept.keep(NODE.uuid, KeptConfigdrives.key(NODE, content), atStart);
      const other = await configdriveImage(node(NODE.name, { ...content, user_data: 'v' }), services);
      expect(text((await readIso(decodeConfigdrive(other!))).files, 'openstack/latest/user_data')).to.equal('v');
      expect(await builds()).to.equal(4);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('keeps one image per node and drops the oldest past its bound', () => {
    const kept = new KeptConfigdrives(10);
    kept.keep('a', 'ka', '1234');
    kept.keep('a', 'ka2', '5678');
    expect(kept.take('a', 'ka')).to.equal(undefined);
    kept.keep('a', 'ka', '1234');
    kept.keep('b', 'kb', '1234');
    kept.keep('c', 'kc', '1234');
    expect(kept.take('a', 'ka')).to.equal(undefined);
    expect(kept.take('b', 'kb')).to.equal('1234');
    expect(kept.take('c', 'kc')).to.equal('1234');
    kept.keep('d', 'kd', '1234');
    kept.drop('d');
    expect(kept.take('d', 'kd')).to.equal(undefined);
  });
});
