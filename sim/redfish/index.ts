/** The Redfish BMC simulator: programmatic API (tests, benchmarks) and the CLI entry. */
export { startRedfishSim, type RedfishSim, type RedfishSimOptions, type SimBmcHandle } from './server.js';
export type { SimFaults, BmcCounters, LogEntry, SimEvent, Running } from './state.js';
export { parseQuirks, QUIRK_NAMES, type VmediaQuirks } from './quirks.js';
export type { ImageCheck } from './vmedia.js';
export type { QemuOptions } from '../qemu/hosts.js';
export { runRedfishSim } from './cli.js';
export type { AgentFaults, AgentSimOptions, AgentWitness, CommandResult } from '../agent/types.js';
