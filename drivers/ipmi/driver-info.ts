import { InvalidDriverInfo } from '../../common/errors.js';

/** Privilege levels ipmitool's `-L` accepts, as Ironic's `ipmi_priv_level` does. */
export const PRIV_LEVELS = ['ADMINISTRATOR', 'CALLBACK', 'OPERATOR', 'USER'] as const;
export type PrivLevel = (typeof PRIV_LEVELS)[number];

/** IPMI protocol version → ipmitool interface (`-I`). */
export const PROTOCOL_INTERFACES = { '2.0': 'lanplus', '1.5': 'lan' } as const;
export type ProtocolVersion = keyof typeof PROTOCOL_INTERFACES;

/** The parsed driver_info of an ipmi node: everything needed to reach its BMC. */
export interface IpmiDriverInfo {
  address: string;
  port: number;
  username: string | null;
  /** Never put on argv: the worker hands it to ipmitool through its environment. */
  password: string;
  protocolVersion: ProtocolVersion;
  privLevel: PrivLevel;
  cipherSuite: number | null;
  /** Ironic's `ipmi_disable_boot_timeout`: send "raw 0x00 0x08 0x03 0x08" before `chassis bootdev`. */
  disableBootTimeout: boolean;
}

/** driver_info keys of the ipmi hardware type, for GET /v1/drivers/ipmi/properties (Ironic's wording). */
export const IPMI_PROPERTIES: Readonly<Record<string, string>> = {
  ipmi_address: 'IP address or hostname of the node. Required.',
  ipmi_port: 'remote IPMI RMCP port. Optional; default 623.',
  ipmi_username: 'username; default is NULL user. Optional.',
  ipmi_password: 'password. Optional.',
  ipmi_protocol_version: "the version of the IPMI protocol; default is '2.0'. One of '1.5', '2.0'. Optional.",
  ipmi_priv_level: `privilege level; default is ADMINISTRATOR. One of ${PRIV_LEVELS.join(', ')}. Optional.`,
  ipmi_cipher_suite: 'The number of a cipher suite to use (ipmitool -C), e.g. 3 or 17. Only with protocol 2.0. Optional.',
  ipmi_disable_boot_timeout: 'By default ironic will send a raw IPMI command to disable the 60 second timeout for booting. Setting this option to False will NOT send that command; default value is True. Optional.',
};

const BOOLEAN_WORDS: Readonly<Record<string, boolean>> = { true: true, yes: true, '1': true, on: true, false: false, no: false, '0': false, off: false };

function optionalString(info: Readonly<Record<string, unknown>>, key: string): string | null {
  const v = info[key];
  if (v === undefined || v === null) return null;
  if (typeof v !== 'string' && typeof v !== 'number') throw new InvalidDriverInfo(`${key} must be a string, got ${JSON.stringify(v)}.`);
  return String(v);
}

function optionalInteger(info: Readonly<Record<string, unknown>>, key: string, min: number, max: number): number | null {
  const v = info[key];
  if (v === undefined || v === null || v === '') return null;
  const n = typeof v === 'number' ? v : typeof v === 'string' && /^\s*\d+\s*$/.test(v) ? Number(v) : NaN;
  if (!Number.isInteger(n) || n < min || n > max) {
    throw new InvalidDriverInfo(`${key} must be an integer between ${min} and ${max}, got ${JSON.stringify(v)}.`);
  }
  return n;
}

/**
 * Parses and checks an ipmi node's driver_info. Pure: no I/O, so it is cheap enough for
 * every node create/update and validate call.
 * @throws InvalidDriverInfo naming the key and the allowed values
 */
export function parseIpmiDriverInfo(info: Readonly<Record<string, unknown>>): IpmiDriverInfo {
  const address = optionalString(info, 'ipmi_address')?.trim() ?? '';
  if (!address) throw new InvalidDriverInfo("Missing the following IPMI credentials in node's driver_info: ipmi_address.");
  // ipmitool reads the next argv element as -H's value anyway; refusing these keeps logs and
  // argv unambiguous and catches pasted URLs early.
  if (address.startsWith('-') || /[\s/]/.test(address)) {
    throw new InvalidDriverInfo(`ipmi_address must be an IP address or hostname, got ${JSON.stringify(address)}.`);
  }

  const port = optionalInteger(info, 'ipmi_port', 1, 65535) ?? 623;

  // The CLI sends `--driver-info ipmi_protocol_version=2.0` as the JSON number 2.0, which
  // arrives as 2: read a number as Python's str() would (2 → "2.0", 1.5 → "1.5").
  const versionValue = info.ipmi_protocol_version;
  const versionRaw = typeof versionValue === 'number' && Number.isInteger(versionValue)
    ? versionValue.toFixed(1)
    : optionalString(info, 'ipmi_protocol_version') ?? '2.0';
  if (!(versionRaw in PROTOCOL_INTERFACES)) {
    throw new InvalidDriverInfo(`Invalid IPMI protocol version value ${versionRaw}, the valid value can be one of ${Object.keys(PROTOCOL_INTERFACES).join(', ')}.`);
  }
  const protocolVersion = versionRaw as ProtocolVersion;

  const privRaw = (optionalString(info, 'ipmi_priv_level') ?? 'ADMINISTRATOR').toUpperCase();
  if (!(PRIV_LEVELS as readonly string[]).includes(privRaw)) {
    throw new InvalidDriverInfo(`Invalid privilege level value: ${info.ipmi_priv_level}, the valid value can be one of ${PRIV_LEVELS.join(', ')}.`);
  }

  const cipherSuite = optionalInteger(info, 'ipmi_cipher_suite', 0, 255);
  if (cipherSuite !== null && protocolVersion !== '2.0') {
    throw new InvalidDriverInfo('ipmi_cipher_suite can only be used with ipmi_protocol_version 2.0.');
  }

  const username = optionalString(info, 'ipmi_username');
  const password = optionalString(info, 'ipmi_password') ?? '';
  // IPMI passwords are at most 20 bytes; ipmitool silently truncates longer ones, which then
  // fail authentication with a misleading message.
  if (Buffer.byteLength(password) > 20) throw new InvalidDriverInfo('ipmi_password is too long: IPMI allows at most 20 bytes.');
  if (password.includes('\0') || (username ?? '').includes('\0')) throw new InvalidDriverInfo('ipmi_username and ipmi_password must not contain NUL characters.');

  let disableBootTimeout = true;
  const dbt = info.ipmi_disable_boot_timeout;
  if (dbt !== undefined && dbt !== null) {
    const parsed = typeof dbt === 'boolean' ? dbt : BOOLEAN_WORDS[String(dbt).toLowerCase()];
    if (parsed === undefined) throw new InvalidDriverInfo(`ipmi_disable_boot_timeout must be a boolean, got ${JSON.stringify(dbt)}.`);
    disableBootTimeout = parsed;
  }

  return { address, port, username: username || null, password, protocolVersion, privLevel: privRaw as PrivLevel, cipherSuite, disableBootTimeout };
}

/** The key of a BMC for per-BMC command spacing: one BMC per address and port. */
export function bmcKey(info: Pick<IpmiDriverInfo, 'address' | 'port'>): string {
  return `${info.address.toLowerCase()}:${info.port}`;
}

/**
 * ipmitool's session arguments for a BMC: interface, address, user, privilege, cipher suite.
 * Callers add -E: the password comes from IPMI_PASSWORD in the child's environment, since
 * argv is readable by any local user.
 */
export function sessionArgs(info: IpmiDriverInfo): string[] {
  const args = ['-I', PROTOCOL_INTERFACES[info.protocolVersion], '-H', info.address, '-p', String(info.port)];
  if (info.username !== null) args.push('-U', info.username);
  args.push('-L', info.privLevel);
  if (info.cipherSuite !== null) args.push('-C', String(info.cipherSuite));
  return args;
}
