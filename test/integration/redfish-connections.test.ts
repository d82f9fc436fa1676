/**
 * The Redfish driver's connections to a BMC, counted by a TCP proxy in front of the simulator
 * (whose keep-alive, 65 s, outlasts the test): a burst opens up to the per-BMC limit, one
 * connection stays for the next request until the driver's own keep-alive ends it, and one the
 * BMC closes is replaced.
 */
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import type { RedfishDriver } from '../../drivers/redfish/index.js';
import { startRedfishSim, type RedfishSim } from '../../sim/redfish/index.js';
import { ctxFor, makeDriver, setFaults } from '../helpers/redfish.js';

/** Forwards 127.0.0.1:<port> to `target` and counts the connections. */
async function countingProxy(target: number): Promise<{ url: string; opened: () => number; open: () => number; dropAll: () => void; close: () => Promise<void> }> {
  const sockets = new Set<net.Socket>();
  let opened = 0;
  const server = net.createServer((client) => {
    opened++;
    sockets.add(client);
    const upstream = net.connect(target, '127.0.0.1');
    client.pipe(upstream).pipe(client);
    const end = () => {
      sockets.delete(client);
      client.destroy();
      upstream.destroy();
    };
    client.on('close', end).on('error', end);
    upstream.on('close', end).on('error', end);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    opened: () => opened,
    open: () => sockets.size,
    dropAll: () => {
      for (const s of sockets) s.destroy();
    },
    close: () => new Promise<void>((resolve) => {
      for (const s of sockets) s.destroy();
      server.close(() => resolve());
    }),
  };
}

/** Waits until `check` holds (sockets close asynchronously), at most `ms`. */
async function eventually(check: () => boolean, ms = 2000): Promise<void> {
  const until = Date.now() + ms;
  while (!check() && Date.now() < until) await sleep(10);
}

describe('redfish connections', function () {
  this.timeout(30_000);
  let sim: RedfishSim;
  let proxy: Awaited<ReturnType<typeof countingProxy>>;
  let driver: RedfishDriver;

  before(async () => {
    sim = await startRedfishSim({ count: 1 });
  });
  after(async () => {
    await sim.stop();
  });
  beforeEach(async () => {
    proxy = await countingProxy(Number(new URL(sim.bmcs[0].url).port));
    driver = makeDriver({ maxConcurrentPerBmc: 4 });
  });
  afterEach(async () => {
    await driver.close();
    await proxy.close();
  });

  it('opens up to the per-BMC limit for a burst, then keeps one connection, which later requests reuse', async () => {
    await setFaults(sim.bmcs[0].url, { latencyMs: [20, 40] });
    const ctx = ctxFor(proxy.url);
    let most = 0;
    const watch = setInterval(() => {
      most = Math.max(most, proxy.open());
    }, 2);
    try {
      await Promise.all(Array.from({ length: 20 }, () => driver.management.getSensorDataAsync!(ctx)));
    } finally {
      clearInterval(watch);
    }
    expect(most).to.be.within(2, 4);
    await eventually(() => proxy.open() === 1);
    expect(proxy.open()).to.equal(1);
    const opened = proxy.opened();
    for (let i = 0; i < 5; i++) expect(await driver.power.getPowerState(ctx)).to.equal('power on');
    expect(proxy.opened()).to.equal(opened);
    expect(proxy.open()).to.equal(1);
  });

  it('closes an idle connection after its own keep-alive, not the longer one the BMC advertises', async () => {
    await driver.close();
    driver = makeDriver({ maxConcurrentPerBmc: 4, connectionKeepAliveMs: 300 });
    await setFaults(sim.bmcs[0].url, { latencyMs: [0, 0] });
    const ctx = ctxFor(proxy.url);
    expect(await driver.power.getPowerState(ctx)).to.equal('power on');
    expect(proxy.open()).to.equal(1);
    // The simulator advertises 65 s: the connection is still open well past 300 ms only if that wins.
    await eventually(() => proxy.open() === 0, 3000);
    expect(proxy.open()).to.equal(0);
    expect(await driver.power.getPowerState(ctx)).to.equal('power on');
    expect(proxy.opened()).to.equal(2);
  });

  it('replaces a connection the BMC closed while it was idle', async () => {
    await setFaults(sim.bmcs[0].url, { latencyMs: [0, 0] });
    const ctx = ctxFor(proxy.url);
    expect(await driver.power.getPowerState(ctx)).to.equal('power on');
    expect(proxy.opened()).to.equal(1);
    proxy.dropAll();
    await eventually(() => proxy.open() === 0);
    await sleep(50);
    expect(await driver.power.getPowerState(ctx)).to.equal('power on');
    expect(proxy.opened()).to.equal(2);
    expect(proxy.open()).to.equal(1);
  });
});
