/** The ironic-python-agent simulator, run by the Redfish simulator's fleet (`startRedfishSim({agent})`). */
export { AgentFleet } from './fleet.js';
export type { AgentHost, AgentUrls, HostLink } from './agent.js';
export type { HostFacts, InventoryDisk } from './inventory.js';
export { DEFAULT_ISO_PATTERN, FAULT_KEYS, type AgentFaults, type AgentSimOptions, type AgentWitness, type CommandError, type CommandResult, type CommandStatus, type DiskState } from './types.js';
export { AGENT_VERSION, CLEAN_STEPS, DEPLOY_STEPS, HARDWARE_MANAGER, HARDWARE_MANAGER_VERSION } from './ipa.js';
export { agentUrls, kernelParams } from './kernel-params.js';
