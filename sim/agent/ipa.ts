/**
 * IPA's wire shapes, as `ironic_python_agent` serialises them: errors (`errors.RESTError`
 * subclasses and the WSME-style fault body of `api/app.py`), the GenericHardwareManager's
 * steps and version, and a tiny `collect_system_logs` archive.
 */
import { gzipSync } from 'node:zlib';
import type { CommandError } from './types.js';

/** An IPA `RESTError`: what a failed command carries in `command_error`. */
export class IpaError extends Error {
  constructor(
    readonly type: string,
    readonly code: number,
    readonly ipaMessage: string,
    readonly details: string,
  ) {
    super(`${ipaMessage}: ${details}`);
  }

  serialize(): CommandError {
    return { type: this.type, code: this.code, message: this.ipaMessage, details: this.details };
  }
}

export const invalidCommand = (details: string) => new IpaError('InvalidCommandError', 400, 'Invalid command', details);
export const invalidParams = (details: string) => new IpaError('InvalidCommandParamsError', 400, 'Invalid command parameters', details);
export const notFound = (what: string, id: string) => new IpaError('RequestedObjectNotFoundError', 404, 'Not found', `${what} with id ${id} not found.`);
export const agentIsBusy = (command: string) => new IpaError('AgentIsBusy', 409, 'Agent is busy', `executing command ${command}`);
export const executionError = (details: string) => new IpaError('CommandExecutionError', 500, 'Command execution failed', details);
export const cleaningError = (details: string) => new IpaError('CleaningError', 500, 'Clean step failed', details);
export const deploymentError = (details: string) => new IpaError('DeploymentError', 500, 'Deploy step failed', details);
export const servicingError = (details: string) => new IpaError('ServicingError', 500, 'Service step failed', details);
export const methodNotFound = (method: string) => new IpaError('HardwareManagerMethodNotFound', 500, 'No HardwareManager found to handle method', `Could not find method: ${method}`);
export const versionMismatch = (agent: Record<string, string>, node: unknown) =>
  new IpaError('VersionMismatch', 409, 'Hardware managers version mismatch, reload agent with correct version', `Current versions: ${pyRepr(agent)}, versions used by ironic: ${pyRepr(node)}`);
export const downloadError = (imageId: string, msg: string) => new IpaError('ImageDownloadError', 500, 'Error downloading image', `Download of image ${imageId} failed: ${msg}`);
export const downloadFatalError = (imageId: string, msg: string) => new IpaError('ImageDownloadFatalError', 500, 'Error downloading image', `Download of image ${imageId} failed: ${msg}`);
export const checksumError = (location: string, imageId: string, expected: string, actual: string) =>
  new IpaError('ImageChecksumError', 500, 'Error verifying image checksum', `Image failed to verify against checksum. location: ${location}; image ID: ${imageId}; image checksum: ${expected}; verification checksum: ${actual}`);
export const restError = (details: string) => new IpaError('RESTError', 500, 'An error occurred', details);

/**
 * The body IPA's API answers an error with (`format_exception`), plus the RESTError's own
 * fields, which the conductor's agent client may read.
 */
export function faultBody(status: number, faultstring: string, err?: IpaError): string {
  return JSON.stringify({ faultcode: status >= 500 ? 'Server' : 'Client', faultstring, ...(err ? err.serialize() : {}) });
}

/** Python's repr of a JSON value, as IPA's messages print dicts. */
export function pyRepr(v: unknown): string {
  if (v === null || v === undefined) return 'None';
  if (v === true) return 'True';
  if (v === false) return 'False';
  if (typeof v === 'string') return `'${v.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
  if (typeof v === 'number') return String(v);
  if (Array.isArray(v)) return `[${v.map(pyRepr).join(', ')}]`;
  return `{${Object.entries(v as Record<string, unknown>).map(([k, x]) => `${pyRepr(k)}: ${pyRepr(x)}`).join(', ')}}`;
}

export const HARDWARE_MANAGER = 'GenericHardwareManager';
export const HARDWARE_MANAGER_VERSION = '1.2';
/** A vendor's hardware manager beside the generic one, with the steps a host's agent is given (`extraCleanSteps`). */
export const EXTRA_HARDWARE_MANAGER = 'SimulatedHardwareManager';
export const EXTRA_HARDWARE_MANAGER_VERSION = '1.0';
export const AGENT_VERSION = '10.1.0';

export interface Step {
  step: string;
  priority: number;
  interface: string;
  reboot_requested: boolean;
  abortable?: boolean;
  argsinfo?: Record<string, unknown>;
}

const cleanStep = (step: string, priority: number, iface = 'deploy'): Step => ({ step, priority, interface: iface, reboot_requested: false, abortable: true });

/** GenericHardwareManager.get_clean_steps. */
export const CLEAN_STEPS: readonly Step[] = [
  cleanStep('erase_devices', 10),
  cleanStep('erase_devices_metadata', 99),
  cleanStep('erase_devices_express', 0),
  cleanStep('erase_pstore', 0),
  { ...cleanStep('clean_uefi_nvram', 0), argsinfo: { match_patterns: { description: 'Json blob contains a list of regex patterns where any UEFI NVRAM entry matching that pattern will be deleted.', required: false } } },
  cleanStep('delete_configuration', 0, 'raid'),
  cleanStep('create_configuration', 0, 'raid'),
  cleanStep('burnin_cpu', 0),
  cleanStep('burnin_gpu', 0),
  cleanStep('burnin_disk', 0),
  cleanStep('burnin_memory', 0),
  cleanStep('burnin_network', 0),
];

/** GenericHardwareManager.get_service_steps (none of the destructive erase steps: the node holds its instance). */
export const SERVICE_STEPS: readonly Step[] = [
  cleanStep('delete_configuration', 0, 'raid'),
  { ...cleanStep('apply_configuration', 0, 'raid'), abortable: undefined, argsinfo: { raid_config: { description: 'The RAID configuration to apply.', required: true }, delete_existing: { description: "Setting this to 'True' indicates to delete existing RAID configuration prior to creating the new configuration. Default value is 'True'.", required: false } } },
  cleanStep('create_configuration', 0, 'raid'),
  cleanStep('burnin_cpu', 0),
  cleanStep('burnin_gpu', 0),
  cleanStep('burnin_memory', 0),
  cleanStep('burnin_network', 0),
];

const deployStep = (step: string, iface = 'deploy', argsinfo?: Record<string, unknown>): Step => ({ step, priority: 0, interface: iface, reboot_requested: false, ...(argsinfo ? { argsinfo } : {}) });

/** GenericHardwareManager.get_deploy_steps (every priority 0: write_image is proxied by the conductor's own step). */
export const DEPLOY_STEPS: readonly Step[] = [
  deployStep('erase_devices_metadata'),
  deployStep('apply_configuration', 'raid', { raid_config: { description: 'The RAID configuration to apply.', required: true }, delete_existing: { description: "Setting this to 'True' indicates to delete existing RAID configuration prior to creating the new configuration. Default value is 'True'.", required: false } }),
  deployStep('clean_uefi_nvram', 'deploy', { match_patterns: { description: 'Json blob contains a list of regex patterns where any UEFI NVRAM entry matching that pattern will be deleted.', required: false } }),
  deployStep('write_image'),
  deployStep('inject_files', 'deploy', { files: { description: 'Files to inject, a list of file structures.', required: false }, verify_ca: { description: 'Whether to verify TLS certificates.', required: false } }),
  deployStep('execute_bootc_install'),
];

function tarHeader(name: string, size: number, mtime: number): Buffer {
  const h = Buffer.alloc(512, 0);
  const put = (s: string, off: number, len: number) => h.write(s.slice(0, len), off, 'ascii');
  const octal = (n: number, len: number) => n.toString(8).padStart(len - 1, '0') + '\0';
  put(name, 0, 100);
  put(octal(0o644, 8), 100, 8);
  put(octal(0, 8), 108, 8);
  put(octal(0, 8), 116, 8);
  put(octal(size, 12), 124, 12);
  put(octal(mtime, 12), 136, 12);
  h.fill(' ', 148, 156);
  put('0', 156, 1);
  put('ustar\0', 257, 6);
  put('00', 263, 2);
  let sum = 0;
  for (const b of h) sum += b;
  put(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 8);
  return h;
}

/** `log.collect_system_logs`: a base64 gzipped tar with one small journal file. */
export function systemLogs(lines: readonly string[]): string {
  const text = Buffer.from(`${lines.join('\n')}\n`, 'utf8');
  const pad = Buffer.alloc((512 - (text.length % 512)) % 512, 0);
  const tar = Buffer.concat([tarHeader('journal', text.length, Math.floor(Date.now() / 1000)), text, pad, Buffer.alloc(1024, 0)]);
  return gzipSync(tar).toString('base64');
}
