/**
 * Parsing of a node's Redfish driver_info, with Ironic's keys and rules
 * (ironic/drivers/modules/redfish/utils.py `parse_driver_info`). No I/O: a CA path is only
 * read when the first connection to the BMC is made.
 */
import { createHash } from 'node:crypto';
import { InvalidDriverInfo } from '../../common/errors.js';
import { AGENT_BOOT_PROPERTIES } from '../agent-boot.js';

export type RedfishAuthType = 'auto' | 'session' | 'basic';

/** What the driver needs to talk to one node's BMC. */
export interface RedfishInfo {
  /** `scheme://host:port`, the key of the connection pool. */
  origin: string;
  /** `redfish_system_id` as given: a path (`/redfish/v1/Systems/1`), a bare Id, or null. */
  systemId: string | null;
  username: string | null;
  password: string | null;
  /** true: verify with the system CAs; false: do not verify; string: a CA bundle file. */
  verifyCa: boolean | string;
  authType: RedfishAuthType;
  /** Budget of one driver call to this BMC, all requests and retries included. */
  timeoutMs: number;
  /** (address, user, TLS verification, password hash): the session cache key. */
  sessionKey: string;
}

/** The config-file defaults driver_info falls back on. */
export interface RedfishInfoDefaults {
  authType: RedfishAuthType;
  timeoutMs: number;
}

export const REDFISH_PROPERTIES: Readonly<Record<string, string>> = {
  redfish_address:
    'The URL address to the Redfish controller. It must include the authority portion of the URL. If the scheme is missing, https is assumed. For example: https://mgmt.vendor.com. Required.',
  redfish_system_id:
    'The canonical path to the ComputerSystem resource that the driver will interact with, for example /redfish/v1/Systems/1 (a bare Id is looked up among the Systems members). Only required if the BMC manages more than one ComputerSystem. Optional.',
  redfish_username: 'User account with admin/server-profile access privilege. Although not required, it is highly recommended.',
  redfish_password: 'User account password. Although not required, it is highly recommended.',
  redfish_verify_ca:
    'Either a Boolean value or a path to a CA_BUNDLE file. If true the driver verifies the host certificates; if false it does not; if a path, it uses the certificates in that file. Defaults to true. Optional.',
  redfish_auth_type:
    'Redfish HTTP client authentication method: "basic", "session" or "auto". "auto" tries session authentication first and falls back to basic if the BMC does not support sessions. Defaults to [redfish] auth_type. Optional.',
  redfish_timeout: 'Seconds one driver call to the BMC may take, retries included. Defaults to [redfish] request_timeout. Optional.',
  ...AGENT_BOOT_PROPERTIES,
};

const BOOLEAN_STRINGS: Readonly<Record<string, boolean>> = { true: true, yes: true, on: true, '1': true, false: false, no: false, off: false, '0': false };

function optionalString(info: Readonly<Record<string, unknown>>, key: string): string | null {
  const v = info[key];
  if (v === undefined || v === null || v === '') return null;
  if (typeof v !== 'string') throw new InvalidDriverInfo(`Invalid value for driver_info/${key}: expected a string, got ${typeof v}.`);
  return v;
}

function parseAddress(raw: string): string {
  const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(raw) ? raw : `https://${raw}`;
  let url: URL;
  try {
    url = new URL(withScheme);
  } catch {
    throw new InvalidDriverInfo(`Invalid Redfish address ${raw} set in driver_info/redfish_address: not a URL or host[:port].`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw new InvalidDriverInfo(`Invalid Redfish address ${raw} set in driver_info/redfish_address: the scheme must be https or http, not ${url.protocol.slice(0, -1)}.`);
  }
  if (!url.hostname) throw new InvalidDriverInfo(`Invalid Redfish address ${raw} set in driver_info/redfish_address: no host.`);
  if (url.username || url.password) {
    throw new InvalidDriverInfo(`Invalid Redfish address set in driver_info/redfish_address: credentials belong in redfish_username and redfish_password, not in the URL.`);
  }
  if (url.pathname !== '/' && url.pathname !== '' && url.pathname.replace(/\/+$/, '').toLowerCase() !== '/redfish/v1') {
    throw new InvalidDriverInfo(`Invalid Redfish address ${raw} set in driver_info/redfish_address: it must not have a path (${url.pathname}); give only scheme, host and port.`);
  }
  return url.origin;
}

function parseVerifyCa(v: unknown): boolean | string {
  if (v === undefined || v === null || v === '') return true;
  if (typeof v === 'boolean') return v;
  if (typeof v === 'string') {
    const b = BOOLEAN_STRINGS[v.trim().toLowerCase()];
    if (b !== undefined) return b;
    return v;
  }
  throw new InvalidDriverInfo(`Invalid value for driver_info/redfish_verify_ca: ${JSON.stringify(v)} is neither a Boolean nor a path to a CA bundle.`);
}

function parseTimeout(v: unknown, fallbackMs: number): number {
  if (v === undefined || v === null || v === '') return fallbackMs;
  const n = typeof v === 'number' ? v : typeof v === 'string' ? Number(v) : NaN;
  if (!Number.isFinite(n) || n <= 0 || n > 3600) {
    throw new InvalidDriverInfo(`Invalid value for driver_info/redfish_timeout: ${JSON.stringify(v)} is not a number of seconds between 0 and 3600.`);
  }
  return Math.round(n * 1000);
}

/**
 * Parses and validates driver_info.
 * @throws InvalidDriverInfo naming the key and what is wrong with it
 */
export function parseRedfishInfo(info: Readonly<Record<string, unknown>>, defaults: RedfishInfoDefaults): RedfishInfo {
  const address = optionalString(info, 'redfish_address');
  if (!address) throw new InvalidDriverInfo('Missing the following Redfish properties in driver_info: redfish_address.');
  const origin = parseAddress(address.trim());

  const systemId = optionalString(info, 'redfish_system_id');
  if (systemId !== null && /\s/.test(systemId)) {
    throw new InvalidDriverInfo(`Invalid value for driver_info/redfish_system_id: ${JSON.stringify(systemId)} contains white space.`);
  }
  const username = optionalString(info, 'redfish_username');
  const password = optionalString(info, 'redfish_password');
  if (password !== null && username === null) {
    throw new InvalidDriverInfo('driver_info/redfish_password is set but redfish_username is not.');
  }

  const authRaw = info.redfish_auth_type;
  let authType = defaults.authType;
  if (authRaw !== undefined && authRaw !== null && authRaw !== '') {
    if (authRaw !== 'auto' && authRaw !== 'session' && authRaw !== 'basic') {
      throw new InvalidDriverInfo(`Invalid value for driver_info/redfish_auth_type: ${JSON.stringify(authRaw)}; valid values are auto, session, basic.`);
    }
    authType = authRaw;
  }
  const verifyCa = parseVerifyCa(info.redfish_verify_ca);
  if (typeof verifyCa === 'string' && origin.startsWith('http:')) {
    throw new InvalidDriverInfo(`driver_info/redfish_verify_ca names a CA bundle but redfish_address ${origin} is plain http.`);
  }
  const timeoutMs = parseTimeout(info.redfish_timeout, defaults.timeoutMs);
  // The password enters the key only as a hash: the key ends up in logs and heap dumps.
  const pwHash = createHash('sha256').update(password ?? '').digest('hex');
  const sessionKey = [origin, username ?? '', String(verifyCa), pwHash].join('\u0000');
  return { origin, systemId, username, password, verifyCa, authType, timeoutMs, sessionKey };
}
