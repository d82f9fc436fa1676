import { expect } from 'chai';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { RingBuffer } from '../../conductor/console/ring-buffer.js';
import { RotatingLog } from '../../conductor/console/rotating-log.js';

describe('console ring buffer', () => {
  it('keeps the last capacity bytes, oldest first, across wrap-arounds', () => {
    const ring = new RingBuffer(10);
    let all = '';
    for (let i = 0; i < 50; i++) {
      const chunk = `${i % 10}`.repeat((i % 4) + 1);
      ring.push(Buffer.from(chunk));
      all += chunk;
      expect(ring.contents().toString()).to.equal(all.slice(-10));
    }
    ring.push(Buffer.from('0123456789abcdef'));
    expect(ring.contents().toString()).to.equal('6789abcdef');
  });

  it('is empty at first', () => {
    expect(new RingBuffer(8).contents().length).to.equal(0);
  });
});

describe('rotating console log', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'galvanic-rotlog-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('never lets a file pass max bytes, keeps `backups` old files, and loses no byte of those it keeps', () => {
    const file = path.join(dir, 'n.log');
    const log = new RotatingLog(file, 100, 2);
    let written = '';
    for (let i = 0; i < 40; i++) {
      const line = `line ${i} ${'x'.repeat(i % 13)}\n`;
      log.write(Buffer.from(line));
      written += line;
    }
    log.close();
    const files = fs.readdirSync(dir).sort();
    expect(files).to.deep.equal(['n.log', 'n.log.1', 'n.log.2']);
    for (const f of files) expect(fs.statSync(path.join(dir, f)).size).to.be.at.most(100);
    const kept = ['n.log.2', 'n.log.1', 'n.log'].map((f) => fs.readFileSync(path.join(dir, f), 'utf8')).join('');
    expect(written.endsWith(kept)).to.equal(true);
    // A file is rotated only once full: the backups hold exactly max bytes each.
    for (const f of ['n.log.1', 'n.log.2']) expect(fs.statSync(path.join(dir, f)).size).to.equal(100);
  });

  it('appends to an existing file after a restart, counting its size', () => {
    const file = path.join(dir, 'n.log');
    fs.writeFileSync(file, 'a'.repeat(90));
    const log = new RotatingLog(file, 100, 1);
    log.write(Buffer.from('b'.repeat(20)));
    log.close();
    expect(fs.readFileSync(`${file}.1`, 'utf8')).to.equal(`${'a'.repeat(90)}${'b'.repeat(10)}`);
    expect(fs.readFileSync(file, 'utf8')).to.equal('b'.repeat(10));
  });
});
