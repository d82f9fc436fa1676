/**
 * The agent (ironic-python-agent) ramdisk a node boots over virtual media for in-band work
 * (inspection, the direct deploy, cleaning), found as Ironic's `redfish-virtual-media` boot
 * interface finds it (redfish/boot.py _parse_driver_info): driver_info `deploy_iso`, else a
 * kernel and ramdisk, from driver_info or else from `[conductor] deploy_kernel/deploy_ramdisk`
 * (Ironic has no `[conductor]` ISO). A kernel and ramdisk are built into an ISO whose kernel
 * command line carries what the agent needs (Ironic's image_utils.prepare_deploy_iso).
 */
import type { Config } from '../common/config.js';
import { InvalidParameterValue, MissingParameterValue } from '../common/errors.js';
import { validateImageRef, type ImageRef } from './image/image-cache.js';

const IMAGE_URL = /^(https?|nfs|cifs):\/\/[^\s/]+\S*$/i;
const WILDCARD = /^(0\.0\.0\.0|::|\[::\])$/;

/** The configuration that finds and boots a node's agent when its driver_info does not say. */
export interface AgentBootDefaults {
  deployKernel: string;
  deployRamdisk: string;
  /** `[conductor] deploy_kernel_checksum` / `deploy_ramdisk_checksum`; empty: not checked. */
  deployKernelChecksum: string;
  deployRamdiskChecksum: string;
  /** `[conductor] error_on_ramdisk_config_inconsistency`. */
  errorOnRamdiskConfigInconsistency: boolean;
  /** `[redfish] kernel_append_params`. */
  kernelAppendParams: string;
  /** The bare metal API's URL (Ironic's get_ironic_api_url); empty when the configuration does not tell it. */
  apiUrl: string;
  /** `[deploy] external_callback_url`. */
  externalCallbackUrl: string;
  /** `[DEFAULT] debug`: the agent logs at debug level too (ipa-debug). */
  debug: boolean;
  /** `[deploy] ramdisk_image_download_source`. */
  downloadSource: 'http' | 'local';
  /** `[deploy] remaster_deploy_iso`. */
  remasterDeployIso: boolean;
}

export const NO_AGENT_BOOT_DEFAULTS: AgentBootDefaults = {
  deployKernel: '', deployRamdisk: '', deployKernelChecksum: '', deployRamdiskChecksum: '', errorOnRamdiskConfigInconsistency: false,
  kernelAppendParams: 'nofb nomodeset vga=normal', apiUrl: '', externalCallbackUrl: '', debug: false, downloadSource: 'http', remasterDeployIso: false,
};

/** The driver_info keys of the agent's boot over virtual media (Ironic's redfish boot properties, and Galvanic's checksums). */
export const AGENT_BOOT_PROPERTIES: Readonly<Record<string, string>> = {
  deploy_kernel: 'URL (http, https or file) of the deployment kernel. Required if deploy_iso is not set.',
  deploy_ramdisk: 'URL (http, https or file) of the ramdisk that is mounted at boot time. Required if deploy_iso is not set.',
  deploy_iso: 'URL of the deployment ISO to use. Required if deploy_kernel/deploy_ramdisk are not set.',
  deploy_kernel_checksum: 'Checksum the downloaded deploy_kernel must match: <algorithm>:<hex> or bare md5, sha256 or sha512 hex. Optional.',
  deploy_ramdisk_checksum: 'Checksum the downloaded deploy_ramdisk must match, as deploy_kernel_checksum. Optional.',
  kernel_append_params: 'Additional kernel parameters to pass down to the agent kernel. Mind severe cmdline size limit. Overrides [redfish]/kernel_append_params ("%default%" stands for it). Optional.',
  external_http_url: 'External URL that is used when the image could be served outside of the provisioning network. If set it will have priority over [deploy] external_http_url and [deploy] http_url. Optional.',
};

/** The node fields the agent's boot is found from. */
export interface AgentBootNode {
  uuid: string;
  driverInfo: Readonly<Record<string, unknown>>;
}

/** Where a node's agent comes from: an ISO to insert, or a kernel and ramdisk to build one from. */
export type AgentImage =
  | { kind: 'iso'; url: string }
  | { kind: 'kernel'; kernel: ImageRef; ramdisk: ImageRef; from: 'driver_info' | '[conductor]' };

/** Ironic reads driver_info fields by truthiness: an empty string is no value. */
function field(info: Readonly<Record<string, unknown>>, name: string): unknown {
  const v = info[name];
  return v === undefined || v === null || v === '' ? undefined : v;
}

function imageRef(url: unknown, checksum: unknown, what: string): ImageRef {
  if (typeof url !== 'string') throw new InvalidParameterValue(`${what} must be a URL string, got ${JSON.stringify(url)}.`);
  if (checksum !== undefined && typeof checksum !== 'string') throw new InvalidParameterValue(`${what}_checksum must be a string, got ${JSON.stringify(checksum)}.`);
  const ref: ImageRef = checksum ? { url, checksum } : { url };
  validateImageRef(ref, what);
  return ref;
}

/** Ironic's message when neither driver_info nor the configuration names the pair (redfish/boot.py's). */
const VMEDIA_MISSING = "Error validating Redfish virtual media. Some parameters were missing in node's driver_info";

/**
 * Ironic's get_agent_kernel_ramdisk: driver_info's pair when it names both; one of them alone
 * is ambiguous (refused with `error_on_ramdisk_config_inconsistency`, else ignored); then the
 * `[conductor]` pair. `missing` starts the message when there is none (each boot interface has
 * Ironic's own).
 * @throws MissingParameterValue for a missing pair, or an ambiguous driver_info the config says to refuse
 */
export function agentKernelAndRamdisk(node: AgentBootNode, defaults: AgentBootDefaults, missing = VMEDIA_MISSING): Extract<AgentImage, { kind: 'kernel' }> {
  const info = node.driverInfo;
  const kernel = field(info, 'deploy_kernel');
  const ramdisk = field(info, 'deploy_ramdisk');
  if (kernel && ramdisk) {
    return {
      kind: 'kernel', from: 'driver_info',
      kernel: imageRef(kernel, field(info, 'deploy_kernel_checksum'), 'driver_info deploy_kernel'),
      ramdisk: imageRef(ramdisk, field(info, 'deploy_ramdisk_checksum'), 'driver_info deploy_ramdisk'),
    };
  }
  if ((kernel || ramdisk) && defaults.errorOnRamdiskConfigInconsistency) {
    const [solo, missing] = kernel ? ['deploy_kernel', 'deploy_ramdisk'] : ['deploy_ramdisk', 'deploy_kernel'];
    throw new MissingParameterValue(`Node ${node.uuid} driver_info has an override for ${solo}, but not for ${missing}. This configuration is ambiguous. Node ${node.uuid} cannot boot a ramdisk.`);
  }
  const absent = [['deploy_kernel', defaults.deployKernel], ['deploy_ramdisk', defaults.deployRamdisk]].filter(([, v]) => !v).map(([k]) => `'${k}'`);
  if (absent.length) throw new MissingParameterValue(`${missing}. Missing are: [${absent.join(', ')}]`);
  return {
    kind: 'kernel', from: '[conductor]',
    kernel: imageRef(defaults.deployKernel, defaults.deployKernelChecksum || undefined, '[conductor] deploy_kernel'),
    ramdisk: imageRef(defaults.deployRamdisk, defaults.deployRamdiskChecksum || undefined, '[conductor] deploy_ramdisk'),
  };
}

/**
 * The agent image of a node: driver_info `deploy_iso` (or the deprecated `redfish_deploy_iso`),
 * else a kernel and ramdisk.
 * @throws MissingParameterValue (Ironic's message when no ISO, nor kernel and ramdisk, is set
 *   in driver_info or the config) | InvalidParameterValue (a bad URL or checksum)
 */
export function agentImage(node: AgentBootNode, defaults: AgentBootDefaults): AgentImage {
  const iso = field(node.driverInfo, 'deploy_iso') ?? field(node.driverInfo, 'redfish_deploy_iso');
  if (iso === undefined) return agentKernelAndRamdisk(node, defaults);
  if (typeof iso !== 'string' || !IMAGE_URL.test(iso)) {
    throw new InvalidParameterValue(`driver_info deploy_iso must be an http, https, nfs or cifs URL, got ${JSON.stringify(iso)}.`);
  }
  return { kind: 'iso', url: iso };
}

/** Why the agent boots: Ironic's managed inspection passes the inspection callback instead of the API's URL. */
export type AgentBootPurpose = 'deploy' | 'inspect';

/** What the kernel command line of a node's agent ISO is made of, beyond the configuration. */
export interface AgentCmdlineInput {
  nodeUuid: string;
  driverInfo: Readonly<Record<string, unknown>>;
  /** instance_info kernel_append_params, which comes before driver_info's. */
  instanceKernelAppendParams?: unknown;
  purpose: AgentBootPurpose;
}

/** IPA's inspection endpoint under an API URL (Ironic's inspect_utils.get_inspection_callback). */
export function inspectionCallback(apiUrl: string): string {
  const base = apiUrl.replace(/\/+$/, '');
  return base.endsWith('/v1') ? `${base}/continue_inspection` : `${base}/v1/continue_inspection`;
}

/**
 * Ironic's get_kernel_append_params: instance_info, then driver_info, then the configuration;
 * `%default%` stands for the configured value. A value that would break the boot loader's
 * configuration is refused as Ironic refuses one its parser cannot read.
 * @throws InvalidParameterValue
 */
export function kernelAppendParams(input: Pick<AgentCmdlineInput, 'driverInfo' | 'instanceKernelAppendParams'>, configured: string): string {
  for (const [location, value] of [['instance_info', input.instanceKernelAppendParams], ['driver_info', input.driverInfo.kernel_append_params]] as const) {
    if (value === undefined || value === null) continue;
    const text = typeof value === 'string' ? value.replaceAll('%default%', configured) : null;
    if (text === null || /[\r\n\0]/.test(text) || (text.match(/"/g) ?? []).length % 2 !== 0) {
      throw new InvalidParameterValue(`node's ${location}['kernel_append_params'] contains malformed kernel command line`);
    }
    return text;
  }
  return configured;
}

/**
 * The agent's parameters as Ironic passes them to prepare_ramdisk and then the ISO:
 * build_agent_options (`ipa-api-url`) or the managed inspection's callback; `ipa-debug` with
 * `[DEFAULT] debug`; `boot_method=vmedia`; then override_api_url (`external_callback_url`).
 * Nothing of one node (no agent token, no BOOTIF) goes in, so that nodes share one ISO: the
 * agent gets its token on its first lookup.
 * @throws InvalidParameterValue when the configuration does not tell the API's URL
 */
function ramdiskParams(purpose: AgentBootPurpose, defaults: AgentBootDefaults): Map<string, string> {
  const params = new Map<string, string>();
  const apiUrl = defaults.apiUrl || defaults.externalCallbackUrl;
  if (!apiUrl) {
    throw new InvalidParameterValue("Couldn't get the URL of the bare metal API service from the configuration: set [deploy] external_callback_url or [api] public_endpoint (the agent calls it back).");
  }
  if (purpose === 'inspect') params.set('ipa-inspection-callback-url', inspectionCallback(apiUrl));
  else params.set('ipa-api-url', apiUrl);
  if (defaults.debug) params.set('ipa-debug', '1');
  params.set('boot_method', 'vmedia');
  if (defaults.externalCallbackUrl) {
    const external = defaults.externalCallbackUrl.replace(/\/+$/, '');
    params.set('ipa-api-url', external);
    const callback = params.get('ipa-inspection-callback-url');
    if (callback !== undefined) {
      params.delete('ipa-inspection-callback-url');
      params.set('ipa-inspection-callback-url', callback.endsWith('/continue_inspection') ? inspectionCallback(external) : callback);
    }
  }
  return params;
}

/**
 * The kernel command line of a node's agent ISO (Ironic's _prepare_kernel_cmd_line): the append
 * parameters, `ir_pub_id`, the agent's. Ironic draws the publisher id per build; here
 * `publisherId` makes it of what the ISO is built from, so that it is the same for every node
 * that shares the ISO.
 * @throws InvalidParameterValue
 */
export function agentKernelCmdline(
  input: AgentCmdlineInput, defaults: AgentBootDefaults, publisherId: (withoutId: string) => string,
): { cmdline: string; publisherId: string } {
  const append = kernelAppendParams(input, defaults.kernelAppendParams).trim();
  const params = [...ramdiskParams(input.purpose, defaults)].map(([k, v]) => `${k}=${v}`).join(' ');
  const id = publisherId(`${append}\n${params}`);
  return { cmdline: [append, `ir_pub_id=${id}`, params].filter((p) => p !== '').join(' '), publisherId: id };
}

/**
 * The bare metal API's URL as the agent should use it, when the configuration tells it
 * (Ironic's get_ironic_api_url reads the service catalog): `[api] public_endpoint`, else the
 * API's own address unless it listens on every interface.
 */
export function configuredApiUrl(api: Pick<Config['api'], 'public_endpoint' | 'host_ip' | 'port'>): string {
  if (api.public_endpoint) return api.public_endpoint.replace(/\/+$/, '');
  if (WILDCARD.test(api.host_ip)) return '';
  const host = api.host_ip.includes(':') && !api.host_ip.startsWith('[') ? `[${api.host_ip}]` : api.host_ip;
  return `http://${host}:${api.port}`;
}

/** The agent boot defaults of a configuration. */
export function agentBootDefaults(config: Readonly<Pick<Config, 'conductor' | 'redfish' | 'api' | 'deploy' | 'DEFAULT'>>): AgentBootDefaults {
  const c = config.conductor;
  return {
    deployKernel: c.deploy_kernel, deployRamdisk: c.deploy_ramdisk,
    deployKernelChecksum: c.deploy_kernel_checksum, deployRamdiskChecksum: c.deploy_ramdisk_checksum,
    errorOnRamdiskConfigInconsistency: c.error_on_ramdisk_config_inconsistency,
    kernelAppendParams: config.redfish.kernel_append_params,
    apiUrl: configuredApiUrl(config.api),
    externalCallbackUrl: config.deploy.external_callback_url,
    debug: config.DEFAULT.debug,
    downloadSource: config.deploy.ramdisk_image_download_source,
    remasterDeployIso: config.deploy.remaster_deploy_iso,
  };
}
