import { InvalidParameterValue, NotAcceptable } from '../common/errors.js';

/** The microversions this API speaks: every change up to 1.95 (Metal3 needs 1.89 and uses 1.95). */
export const MIN_VERSION = { major: 1, minor: 1 };
export const MAX_VERSION = { major: 1, minor: 95 };
export const MIN_VERSION_STRING = `${MIN_VERSION.major}.${MIN_VERSION.minor}`;
export const MAX_VERSION_STRING = `${MAX_VERSION.major}.${MAX_VERSION.minor}`;

export const VERSION_HEADER = 'x-openstack-ironic-api-version';
export const MIN_HEADER = 'X-OpenStack-Ironic-API-Minimum-Version';
export const MAX_HEADER = 'X-OpenStack-Ironic-API-Maximum-Version';

/** A negotiated microversion: compare minors with `atLeast`. */
export class ApiVersion {
  constructor(readonly minor: number) {}
  atLeast(minor: number): boolean {
    return this.minor >= minor;
  }
  toString(): string {
    return `1.${this.minor}`;
  }
}

const VERSION_RE = /^(\d+)\.(\d+)$/;

/**
 * Reads the requested version from `X-OpenStack-Ironic-API-Version` or
 * `OpenStack-API-Version: baremetal 1.N`; none means the minimum, as Ironic does.
 */
export function negotiateVersion(headers: Record<string, string | string[] | undefined>): ApiVersion {
  let raw = first(headers[VERSION_HEADER]);
  let headerName = 'X-OpenStack-Ironic-API-Version';
  if (raw === undefined) {
    const generic = first(headers['openstack-api-version']);
    if (generic !== undefined) {
      headerName = 'OpenStack-API-Version';
      // The header may list several services: "compute 2.1, baremetal 1.31".
      for (const part of generic.split(',')) {
        const [service, value] = part.trim().split(/\s+/);
        if (service?.toLowerCase() === 'baremetal') raw = value ?? '';
      }
    }
  }
  if (raw === undefined) return new ApiVersion(MIN_VERSION.minor);
  raw = raw.trim();
  if (raw.toLowerCase() === 'latest') return new ApiVersion(MAX_VERSION.minor);
  const m = VERSION_RE.exec(raw);
  if (!m) throw new InvalidParameterValue(`Invalid value for ${headerName} header: "${raw}".`);
  const major = Number(m[1]);
  const minor = Number(m[2]);
  const range = `The supported version range is: [${MIN_VERSION_STRING}, ${MAX_VERSION_STRING}].`;
  if (major !== MAX_VERSION.major) {
    throw new NotAcceptable(`Mutually exclusive versions requested. Version ${raw} requested but not supported by this service. ${range}`);
  }
  if (minor < MIN_VERSION.minor || minor > MAX_VERSION.minor) {
    throw new NotAcceptable(`Version ${raw} was requested but the minor version is not supported by this service. ${range}`);
  }
  return new ApiVersion(minor);
}

function first(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}
