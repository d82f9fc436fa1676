/** Helpers for the Redfish driver and simulator tests: the control API and a driver per test. */
import { pino, type Logger } from 'pino';
import { RedfishDriver, type RedfishOptions } from '../../drivers/redfish/index.js';
import type { DriverContext } from '../../drivers/interfaces.js';
import { startRedfishSim, type BmcCounters, type LogEntry, type RedfishSim, type RedfishSimOptions, type SimFaults } from '../../sim/redfish/index.js';

export const quietLog: Logger = pino({ level: process.env.GALVANIC_TEST_LOG ?? 'silent' });

export type SimStats = BmcCounters & { index: number; port: number; log: LogEntry[] };

export async function simStats(url: string): Promise<SimStats> {
  return (await fetch(`${url}/_sim/stats`)).json() as Promise<SimStats>;
}

export async function simControl(url: string, what: 'reset' | 'expire-sessions' | 'faults' | 'state', body: object = {}): Promise<unknown> {
  const res = await fetch(`${url}/_sim/${what}`, { method: 'POST', body: JSON.stringify(body) });
  if (!res.ok) throw new Error(`/_sim/${what}: ${res.status} ${await res.text()}`);
  return res.json();
}

export function setFaults(url: string, faults: Partial<SimFaults>): Promise<unknown> {
  return simControl(url, 'faults', faults);
}

/** Requests of the log other than logins and logouts, as "METHOD path". */
export function resourceRequests(stats: SimStats): string[] {
  return stats.log.filter((e) => !/\/SessionService\/Sessions/i.test(e[1])).map((e) => `${e[0]} ${e[1]}`);
}

export const FAST_OPTIONS: RedfishOptions = {
  connectionAttempts: 4,
  retryIntervalMs: 100,
  cacheSize: 100,
  maxConcurrentPerBmc: 4,
  authType: 'auto',
  timeoutMs: 20_000,
  powerStateChangeTimeoutMs: 20_000,
};

export function makeDriver(options: Partial<RedfishOptions> = {}): RedfishDriver {
  return new RedfishDriver({ ...FAST_OPTIONS, ...options }, quietLog);
}

export function ctxFor(url: string, info: Record<string, unknown> = {}, signal?: AbortSignal): DriverContext {
  return {
    nodeUuid: '1be26c0b-03f2-4d2e-ae87-c02d7f33c123',
    driverInfo: { redfish_address: url, redfish_username: 'admin', redfish_password: 'password', ...info },
    log: quietLog,
    signal,
  };
}

/** Rejects with what `p` rejects with, or fails the test when it resolves. */
export async function rejection(p: Promise<unknown>): Promise<Error> {
  try {
    await p;
  } catch (err) {
    return err as Error;
  }
  throw new Error('expected a rejection');
}

/**
 * A simulator for the suite and a new driver (makeDriver with `driverOptions`) for each test;
 * `url` is the first BMC's. Call it inside `describe`; read it from hooks and tests only.
 */
export function simWithDriver(options: RedfishSimOptions, driverOptions: Partial<RedfishOptions> = {}): { sim: RedfishSim; driver: RedfishDriver; readonly url: string } {
  const f = {
    get url() { return f.sim.bmcs[0].url; },
  } as { sim: RedfishSim; driver: RedfishDriver; readonly url: string };
  before(async () => {
    f.sim = await startRedfishSim(options);
  });
  beforeEach(() => {
    f.driver = makeDriver(driverOptions);
  });
  afterEach(async () => {
    await f.driver?.close();
  });
  after(async () => {
    await f.sim?.stop();
  });
  return f;
}
