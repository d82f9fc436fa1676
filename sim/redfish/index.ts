/** The Redfish BMC simulator: programmatic API (tests, benchmarks) and the CLI entry. */
export { startRedfishSim, type RedfishSim, type RedfishSimOptions, type SimBmcHandle } from './server.js';
export type { SimFaults, BmcCounters, LogEntry } from './state.js';
export { runRedfishSim } from './cli.js';
