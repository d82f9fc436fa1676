/** The sensor task's pieces that need no BMC: the keyed limiter, the message, the type filter. */
import { setTimeout as tick } from 'node:timers/promises';
import { expect } from 'chai';
import { runKeyedBounded } from '../../conductor/sensors/keyed-limiter.js';
import { filterDataTypes, sensorMessage } from '../../conductor/sensors/message.js';
import { bmcAddressOf } from '../../conductor/periodics/sensor-data.js';

describe('sensor data parts', () => {
  it('runs every item, never more than the limit at once nor more than perKey of one key', async () => {
    const items = Array.from({ length: 60 }, (_, i) => ({ i, key: i < 30 ? 'shared' : `own-${i}` }));
    let running = 0;
    let peak = 0;
    const perKey = new Map<string, number>();
    let peakShared = 0;
    const done: number[] = [];
    await runKeyedBounded(items, { limit: 10, perKey: 2, keyOf: (x) => x.key }, async (x) => {
      running++;
      perKey.set(x.key, (perKey.get(x.key) ?? 0) + 1);
      peak = Math.max(peak, running);
      peakShared = Math.max(peakShared, perKey.get('shared') ?? 0);
      await tick(2);
      perKey.set(x.key, perKey.get(x.key)! - 1);
      running--;
      done.push(x.i);
    });
    expect(done.sort((a, b) => a - b)).to.deep.equal(items.map((x) => x.i));
    expect(peak).to.equal(10);
    expect(peakShared).to.equal(2);
  });

  it('starts each item once, with several of one key and every slot taken', async () => {
    // Key a's two jobs end while the token the first handed back still waits behind b's and c's.
    const items = ['a1', 'a2', 'a3', 'b1', 'c1', 'b2', 'c2'].map((id) => ({ id, key: id[0] }));
    const started: Array<string | undefined> = [];
    const delay: Record<string, number> = { a1: 5, a2: 6, b1: 30, c1: 30, b2: 1, c2: 1, a3: 1 };
    await runKeyedBounded(items, { limit: 3, perKey: 2, keyOf: (x) => x.key }, async (x) => {
      started.push(x?.id);
      await tick(delay[x.id]);
    });
    expect(started.sort()).to.deep.equal(items.map((x) => x.id).sort());
  });

  it('counts each job by its weight, and always runs one', async () => {
    const items = [{ id: 'heavy', w: 3 }, { id: 'huge', w: 10 }, ...Array.from({ length: 8 }, (_, i) => ({ id: `n${i}`, w: 1 }))];
    let taken = 0;
    let peak = 0;
    /** What ran beside the 10, which must run alone as the limit's one job (the limiter swallows a job's own throw). */
    let besideHuge = -1;
    const done: string[] = [];
    await runKeyedBounded(items, { limit: 4, perKey: 1, keyOf: (x) => x.id, weightOf: (x) => x.w }, async (x) => {
      taken += x.w;
      if (x.w <= 4) peak = Math.max(peak, taken);
      else besideHuge = taken - x.w;
      await tick(2);
      taken -= x.w;
      done.push(x.id);
    });
    expect(done).to.have.length(items.length);
    expect(peak).to.equal(4);
    expect(besideHuge, 'slots taken beside the 10').to.equal(0);
  });

  it('keeps going after a job fails, and stops starting jobs once aborted', async () => {
    const abort = new AbortController();
    const started: number[] = [];
    await runKeyedBounded(Array.from({ length: 20 }, (_, i) => i), { limit: 2, perKey: 1, keyOf: String, signal: abort.signal }, async (i) => {
      started.push(i);
      if (i === 1) throw new Error('boom');
      if (i === 5) abort.abort();
      await tick(1);
    });
    expect(started).to.include.members([0, 1, 2, 3, 4, 5]);
    expect(started.length).to.be.below(20);
  });

  it('builds Ironic\'s sensor message and filters sensor types as Ironic does', () => {
    const data = { Temperature: { a: { reading_celsius: 1 } }, Fan: { b: {} }, Power: {} };
    expect(Object.keys(filterDataTypes(data, ['ALL']))).to.deep.equal(['Temperature', 'Fan', 'Power']);
    expect(Object.keys(filterDataTypes(data, ['temperature', 'Power']))).to.deep.equal(['Temperature', 'Power']);
    const m = sensorMessage({ uuid: 'u', name: null, driver: 'ipmi', instanceUuid: 'i' }, data, new Date(Date.UTC(2024, 0, 2, 3, 4, 5, 678)));
    expect(m).to.include({ node_uuid: 'u', node_name: null, instance_uuid: 'i', event_type: 'hardware.ipmi.metrics.update', timestamp: '2024-01-02T03:04:05.678000' });
    expect(m.message_id).to.match(/^[0-9a-f-]{36}$/);
  });

  it('groups nodes by BMC address', () => {
    expect(bmcAddressOf({ uuid: 'x', driverInfo: { redfish_address: 'https://10.0.0.1:8443/redfish' } })).to.equal('10.0.0.1:8443');
    expect(bmcAddressOf({ uuid: 'x', driverInfo: { redfish_address: '10.0.0.1' } })).to.equal('10.0.0.1');
    expect(bmcAddressOf({ uuid: 'x', driverInfo: { ipmi_address: '10.0.0.2' } })).to.equal('10.0.0.2:623');
    expect(bmcAddressOf({ uuid: 'x', driverInfo: {} })).to.equal('x');
  });
});
