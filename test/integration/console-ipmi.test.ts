import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import { chromium } from 'playwright-core';
import { freshDatabase, type TestDatabase } from '../helpers/database.js';
import { startGalvanic, type RunningGalvanic } from '../helpers/app.js';
import { requireIpmiSim, SimBmc } from '../helpers/ipmi-sim.js';
import { CHROMIUM, connectViewer, processesMatching, requireChromium, type Viewer } from '../helpers/console.js';
import { until } from '../helpers/until.js';

const HEADERS = { 'X-OpenStack-Ironic-API-Version': '1.78', 'Content-Type': 'application/json' };

/**
 * Serial-over-LAN end to end: ipmi_sim with a serial port, a Galvanic process running
 * `ipmitool sol activate`, and viewers on the API's websocket (and in a browser).
 */
describe('serial console over ipmitool-sol against ipmi_sim', function () {
  this.timeout(120_000);
  let bmc: SimBmc;
  let tdb: TestDatabase;
  let g: RunningGalvanic;
  let uuid: string;
  const viewers: Viewer[] = [];

  const call = async (method: string, url: string, body?: unknown) => {
    const res = await fetch(`${g.url}${url}`, { method, headers: HEADERS, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  };
  const consoleInfo = async (mode: 'ro' | 'rw') => (await call('GET', `/v1/nodes/${uuid}/states/console?mode=${mode}`)).body.console_info as { url: string; view_url: string };
  const view = async (mode: 'ro' | 'rw') => {
    const v = connectViewer((await consoleInfo(mode)).url);
    viewers.push(v);
    expect(await v.opened).to.equal(true);
    return v;
  };
  /** Prints `text` on the serial line until `seen` says it arrived (SOL may still be activating). */
  const printUntilSeen = async (text: string, seen: () => boolean | Promise<boolean>, ms = 20_000) => {
    const deadline = Date.now() + ms;
    while (!(await seen())) {
      if (Date.now() > deadline) throw new Error(`"${text}" printed on the serial port never arrived`);
      bmc.serial!.write(`${text}\r\n`);
      await sleep(300);
    }
  };
  /** Types through a rw viewer until the serial side got it (ipmi_sim may drop a session's first packet). */
  const typeUntilReceived = async (v: Viewer, text: string) => {
    await until(`"${text}" typed through the console reaching the serial port`, () => {
      v.send(`${text}\r`);
      return bmc.serial!.received().includes(text);
    }, 20_000, 50);
  };
  const solProcesses = () => processesMatching(new RegExp(`^ipmitool .*-p ${bmc.port} .*sol activate`));

  before(async function () {
    requireIpmiSim(this);
    bmc = await SimBmc.start(0, { sol: true, password: 'sol-secret-pw' });
    await until('ipmi_sim connecting to the serial port', () => bmc.serial!.connected, 15_000);
    tdb = await freshDatabase();
    g = await startGalvanic({ databaseUrl: tdb.url, env: { GALVANIC_CONSOLE__RESTART_INITIAL_DELAY: '0.2' } });
    const r = await call('POST', '/v1/nodes', { driver: 'ipmi', console_interface: 'ipmitool-sol', driver_info: bmc.driverInfo() });
    expect(r.status, JSON.stringify(r.body)).to.equal(201);
    uuid = r.body.uuid;
    expect((await call('PUT', `/v1/nodes/${uuid}/states/console?wait=30`, { enabled: true })).status).to.equal(202);
    await until('ipmitool sol activate running', () => solProcesses().size === 1, 10_000);
  });
  afterEach(() => {
    for (const v of viewers.splice(0)) v.ws.terminate();
  });
  after(async () => {
    await g?.stop();
    await tdb?.drop();
    await bmc?.stop();
  });

  it('runs one `ipmitool sol activate`, with the password in its environment, never on argv', () => {
    const procs = solProcesses();
    expect(procs.size).to.equal(1);
    const [cmd] = procs.values();
    expect(cmd).to.contain('-E');
    expect(cmd).to.not.contain('sol-secret-pw');
  });

  it('text written to the serial port reaches a websocket viewer', async () => {
    const v = await view('ro');
    await printUntilSeen('hello from the serial port', () => v.text().includes('hello from the serial port'));
    // A viewer connecting later gets it from the backlog.
    const late = await view('ro');
    await late.waitFor('hello from the serial port', 5000);
  });

  it('what a rw viewer types reaches the serial port; what a ro viewer types does not', async () => {
    const ro = await view('ro');
    const rw = await view('rw');
    await printUntilSeen('ready for input', () => ro.text().includes('ready for input') && rw.text().includes('ready for input'));
    ro.send('typed-by-ro-viewer\r');
    await typeUntilReceived(rw, 'typed-by-rw-viewer');
    expect(bmc.serial!.received()).to.not.contain('typed-by-ro-viewer');
  });

  it('restarts ipmitool after it dies, clearing the stale SOL payload with `sol deactivate`', async () => {
    const v = await view('ro');
    const [old] = solProcesses().keys();
    process.kill(old, 'SIGKILL');
    // ipmi_sim would keep the payload "already active" for ~30 s; the reset frees it at once.
    await until('a new ipmitool sol activate', () => [...solProcesses().keys()].some((p) => p !== old), 15_000);
    await printUntilSeen('after the restart', () => v.text().includes('after the restart'), 20_000);
    expect(solProcesses().size).to.equal(1);
  });

  it('a headless chromium on the terminal page shows text written to the serial port', async function () {
    requireChromium(this);
    const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--headless', '--no-sandbox', '--disable-gpu'] });
    try {
      const page = await browser.newPage();
      await page.goto((await consoleInfo('ro')).view_url);
      // Locators, not evaluated strings: the page's CSP forbids eval, and Playwright's
      // waitForFunction evals its predicate in the page.
      await page.locator('#status', { hasText: /^Connected$/ }).waitFor({ timeout: 15_000 });
      const onScreen = async () => (await page.locator('.xterm-rows').textContent()) ?? '';
      await printUntilSeen('shown in the browser', async () => (await onScreen()).includes('shown in the browser'));
      expect(await page.title()).to.contain(uuid);
    } finally {
      await browser.close();
    }
  });
});
