/**
 * Wake-ups travel packed, many payloads to a notification: every listener (each conductor,
 * each API server) parses every notification, so one per payload cost each of them the whole
 * fleet's wake-ups. Through a real LISTEN connection, every payload arrives once, in order.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import pg from 'pg';
import { pino } from 'pino';
import { PgListener } from '../../db/listener.js';
import { PgNotifyBatcher, packPayloads, unpackPayloads } from '../../db/notify.js';
import { suiteDatabase } from '../helpers/database.js';
import { until } from '../helpers/until.js';

describe('NOTIFY batching: packed payloads', function () {
  this.timeout(30_000);
  const tdb = suiteDatabase();

  it('packs payloads up to the size Postgres takes and unpacks them in order', () => {
    const payloads = Array.from({ length: 1000 }, (_, i) => `${'0'.repeat(8)}-0000-4000-8000-${String(i).padStart(12, '0')}:${i + 1}`);
    const packed = packPayloads(payloads);
    expect(packed.length, 'notifications for 1,000 payloads of 43 bytes').to.be.within(6, 7);
    for (const p of packed) expect(Buffer.byteLength(p), 'packed payload bytes').to.be.below(8000);
    expect(packed.flatMap((p) => unpackPayloads(p))).to.deep.equal(payloads);
    expect(packPayloads(['only']), 'one payload').to.deep.equal(['only']);
    expect(packPayloads([]), 'none').to.deep.equal([]);
    expect(unpackPayloads(undefined)).to.deep.equal([undefined]);
    expect(unpackPayloads('')).to.deep.equal(['']);
  });

  it('delivers each of 2,000 payloads sent in one batch once, in few notifications', async () => {
    const channel = 'galvanic_test_packed';
    const got: Array<string | undefined> = [];
    const listener = new PgListener({
      connectionString: tdb.url, applicationName: 'galvanic-test-listen', channels: [channel], log: pino({ level: 'silent' }),
      onNotification: (_c, payload) => got.push(payload),
    });
    // A plain LISTEN beside it counts the notifications as Postgres sends them.
    const raw = new pg.Client({ connectionString: tdb.url });
    let notifications = 0;
    raw.on('notification', () => notifications++);
    await raw.connect();
    await raw.query(`LISTEN ${channel}`);
    await listener.start();
    const batcher = new PgNotifyBatcher(tdb.knex, pino({ level: 'silent' }));
    try {
      const sent = Array.from({ length: 2000 }, (_, i) => `node-${i}:${i + 1}`);
      for (const p of sent) batcher.notify(channel, p);
      await batcher.close();
      await until('every payload delivered', () => got.length >= sent.length);
      await sleep(100);
      expect(got).to.deep.equal(sent);
      expect(notifications, 'notifications Postgres sent for 2,000 payloads').to.be.within(1, 5);
    } finally {
      await listener.stop();
      await raw.end();
    }
  });

  it('gathers a fast stream for longer, and sends a slow one at once', async () => {
    const channel = 'galvanic_test_stream';
    const raw = new pg.Client({ connectionString: tdb.url });
    const got: string[] = [];
    raw.on('notification', (m) => got.push(m.payload ?? ''));
    await raw.connect();
    await raw.query(`LISTEN ${channel}`);
    const batcher = new PgNotifyBatcher(tdb.knex, pino({ level: 'silent' }));
    try {
      // 400 payloads in ~200 ms, two a millisecond: a batch every 2 ms would make ~70 notifications.
      for (let i = 0; i < 100; i++) {
        for (let j = 0; j < 4; j++) batcher.notify(channel, `fast-${i}-${j}`);
        await sleep(2);
      }
      await batcher.close();
      await until('the fast stream delivered', () => got.flatMap((p) => unpackPayloads(p)).length >= 400);
      const fast = got.length;
      expect(fast, 'notifications for 400 payloads in ~200 ms').to.be.at.most(20);
      // The next payloads come 20 ms apart: each goes out alone, before the next is queued.
      await sleep(100);
      got.length = 0;
      for (let i = 0; i < 10; i++) {
        batcher.notify(channel, `slow-${i}`);
        await sleep(20);
      }
      await batcher.close();
      await until('the slow stream delivered', () => got.length > 0 && got.flatMap((p) => unpackPayloads(p)).length >= 10);
      expect(got.length, `notifications for 10 payloads 20 ms apart (fast stream: ${fast})`).to.be.at.least(9);
    } finally {
      await raw.end();
    }
  });
});
