/**
 * What gophercloud v2 (the Ironic client inside Metal3's baremetal-operator) sends and how it
 * reads the answers: its headers, the status codes each call accepts, and the Go types its
 * baremetal v1 results decode into (the struct tags of `openstack/baremetal/v1/nodes/results.go`,
 * `ports/results.go`, `inventory/*.go`, v2.13.0). Go's encoding/json fails a whole response when
 * one field has the wrong JSON type (a number where a string is declared, a string where a map
 * is), so every body is checked against those types here.
 */
import { expect } from 'chai';

/**
 * A Go type as encoding/json decodes into it. `null` decodes into every one of them (it leaves
 * the zero value, and time.Time takes it too); keys a struct does not declare are ignored, and
 * a key meets its field without regard to case, as encoding/json matches them.
 */
export type GoType =
  | 'string' | 'bool' | 'int' | 'float' | 'time' | 'map' | 'any'
  | { list: GoType }
  | { mapOf: GoType }
  | { struct: Readonly<Record<string, GoType>> };

const list = (of: GoType): GoType => ({ list: of });
const mapOf = (of: GoType): GoType => ({ mapOf: of });
const struct = (fields: Record<string, GoType>): GoType => ({ struct: fields });

/** RFC 3339 as Go's time.Time.UnmarshalJSON parses it (strictly: `T`, seconds, a zone). */
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

/** Every place in `value` that `type` cannot decode, as "path: why". */
export function goDecodeErrors(value: unknown, type: GoType, path = '$'): string[] {
  if (value === null || type === 'any') return [];
  const bad = (want: string) => [`${path}: cannot unmarshal ${JSON.stringify(value)?.slice(0, 80)} into ${want}`];
  if (typeof type === 'string') {
    switch (type) {
      case 'string': return typeof value === 'string' ? [] : bad('string');
      case 'bool': return typeof value === 'boolean' ? [] : bad('bool');
      case 'int': return Number.isInteger(value) ? [] : bad('int');
      case 'float': return typeof value === 'number' ? [] : bad('float64');
      case 'time': return typeof value === 'string' && RFC3339.test(value) ? [] : bad('time.Time (RFC 3339)');
      case 'map': return isObject(value) ? [] : bad('map[string]any');
    }
  }
  if ('list' in type) {
    if (!Array.isArray(value)) return bad('a slice');
    return value.flatMap((v, i) => goDecodeErrors(v, type.list, `${path}[${i}]`));
  }
  if (!isObject(value)) return bad('a struct or map');
  if ('mapOf' in type) return Object.entries(value).flatMap(([k, v]) => goDecodeErrors(v, type.mapOf, `${path}.${k}`));
  // encoding/json matches a key to a field exactly, else without regard to case.
  const fields = type.struct;
  const fieldOf = (k: string) => (Object.hasOwn(fields, k) ? fields[k] : Object.entries(fields).find(([f]) => f.toLowerCase() === k.toLowerCase())?.[1]);
  return Object.entries(value).flatMap(([k, v]) => {
    const t = fieldOf(k);
    return t === undefined ? [] : goDecodeErrors(v, t, `${path}.${k}`);
  });
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

const LINK = struct({ href: 'string', rel: 'string' });

/** nodes.Node. */
export const NODE = struct({
  uuid: 'string', name: 'string', power_state: 'string', target_power_state: 'string', provision_state: 'string',
  target_provision_state: 'string', maintenance: 'bool', maintenance_reason: 'string', fault: 'string', health: 'string',
  last_error: 'string', reservation: 'string', driver: 'string', driver_info: 'map', driver_internal_info: 'map',
  properties: 'map', instance_info: 'map', instance_uuid: 'string', chassis_uuid: 'string', extra: 'map',
  console_enabled: 'bool', raid_config: 'map', target_raid_config: 'map', clean_step: 'map', deploy_step: 'map',
  links: list(LINK), ports: list(LINK), portgroups: list(LINK), states: list(LINK), resource_class: 'string',
  bios_interface: 'string', boot_interface: 'string', console_interface: 'string', deploy_interface: 'string',
  inspect_interface: 'string', management_interface: 'string', network_interface: 'string', power_interface: 'string',
  raid_interface: 'string', rescue_interface: 'string', storage_interface: 'string', traits: list('string'),
  vendor_interface: 'string', volume: list(LINK), conductor_group: 'string', parent_node: 'string', protected: 'bool',
  protected_reason: 'string', owner: 'string', lessee: 'string', shard: 'string', description: 'string', conductor: 'string',
  allocation_uuid: 'string', retired: 'bool', retired_reason: 'string', network_data: 'map', automated_clean: 'bool',
  service_step: 'map', firmware_interface: 'string', provision_updated_at: 'time', inspection_started_at: 'time',
  inspection_finished_at: 'time', created_at: 'time', updated_at: 'time', disable_power_off: 'bool',
});

/** ports.Port. */
export const PORT = struct({
  uuid: 'string', address: 'string', node_uuid: 'string', portgroup_uuid: 'string', local_link_connection: 'map',
  pxe_enabled: 'bool', physical_network: 'string', internal_info: 'map', extra: 'map', created_at: 'time', updated_at: 'time',
  links: list('any'), is_smartnic: 'bool',
});

const DRIVER_VALIDATION = struct({ result: 'bool', reason: 'string' });
/** nodes.NodeValidation. */
export const VALIDATION = struct(Object.fromEntries(
  ['bios', 'boot', 'console', 'deploy', 'firmware', 'inspect', 'management', 'network', 'power', 'raid', 'rescue', 'storage'].map((k) => [k, DRIVER_VALIDATION]),
));

/** nodes.BIOSSetting, in `{"bios": [...]}`. */
export const BIOS_LIST = struct({
  bios: list(struct({
    name: 'string', value: 'string', attribute_type: 'string', allowable_values: list('string'), lower_bound: 'int', upper_bound: 'int',
    min_length: 'int', max_length: 'int', read_only: 'bool', reset_required: 'bool', unique: 'bool',
  })),
});

/** nodes.FirmwareComponent, in `{"firmware": [...]}`. */
export const FIRMWARE_LIST = struct({
  firmware: list(struct({ created_at: 'time', updated_at: 'time', component: 'string', initial_version: 'string', current_version: 'string', last_version_flashed: 'string' })),
});

const INTERFACE = {
  biosdevname: 'string', client_id: 'string', has_carrier: 'bool', ipv4_address: 'string', ipv6_address: 'string', mac_address: 'string',
  name: 'string', product: 'string', speed_mbps: 'int', vendor: 'string', pci_address: 'string',
} as const;
const ROOT_DISK = struct({
  hctl: 'string', model: 'string', name: 'string', by_path: 'string', rotational: 'bool', serial: 'string', size: 'int', vendor: 'string',
  wwn: 'string', wwn_vendor_extension: 'string', wwn_with_extension: 'string',
});
const EXTRA_SECTION = mapOf(mapOf('any'));
/** inventory.StandardPluginData, which BMO reads from plugin_data (a failure there only loses NIC details). */
export const STANDARD_PLUGIN_DATA = struct({
  all_interfaces: mapOf(struct({ ...INTERFACE, pxe_enabled: 'bool' })), boot_interface: 'string',
  configuration: struct({ collectors: list('string'), managers: list(struct({ name: 'string', version: 'string' })) }), error: 'string',
  extra: struct({ cpu: EXTRA_SECTION, disk: EXTRA_SECTION, firmware: EXTRA_SECTION, ipmi: EXTRA_SECTION, memory: EXTRA_SECTION, network: EXTRA_SECTION, system: EXTRA_SECTION }),
  macs: list('string'), numa_topology: struct({
    cpus: list(struct({ cpu: 'int', numa_node: 'int', thread_siblings: list('int') })), nics: list(struct({ name: 'string', numa_node: 'int' })),
    ram: list(struct({ numa_node: 'int', size_kb: 'int' })),
  }),
  parsed_lldp: mapOf('map'), lldp_raw: mapOf(list(list('any'))), root_disk: ROOT_DISK,
  valid_interfaces: mapOf(struct({ ...INTERFACE, pxe_enabled: 'bool' })),
});
/** nodes.InventoryData: the inventory (inventory.InventoryType) and plugin_data (json.RawMessage). */
export const INVENTORY = struct({
  inventory: struct({
    bmc_address: 'string', boot: struct({ current_boot_mode: 'string', pxe_interface: 'string' }),
    cpu: struct({ architecture: 'string', count: 'int', flags: list('string'), frequency: 'string', model_name: 'string' }),
    disks: list(ROOT_DISK), interfaces: list(struct(INTERFACE)), memory: struct({ physical_mb: 'int', total: 'int' }),
    system_vendor: struct({ manufacturer: 'string', product_name: 'string', serial_number: 'string', firmware: struct({ version: 'string', build_date: 'string', vendor: 'string' }) }),
    hostname: 'string',
  }),
  plugin_data: 'any',
});

/** nodes.SubscriptionVendorPassthru. */
export const SUBSCRIPTION = struct({ Id: 'string', Context: 'string', Destination: 'string', EventTypes: list('string'), Protocol: 'string' });

/** BMO's VirtualMedia (ironic.go), a list: what GET /v1/nodes/{n}/vmedia decodes into. */
export const VMEDIA_LIST = list(struct({ image: 'string', inserted: 'bool', media_types: list('string') }));

/** utils' version document: `{"version": {...}}` at the versioned endpoint. */
export const VERSION_DOC = struct({ id: 'string', version: struct({ id: 'string', status: 'string', version: 'string', max_version: 'string', min_version: 'string' }) });

/** Status codes gophercloud accepts when a call names none (provider_client.go defaultOkCodes). */
const DEFAULT_OK: Readonly<Record<string, number[]>> = { GET: [200], POST: [201, 202], PUT: [201, 202], PATCH: [200, 202, 204], DELETE: [202, 204] };

export interface GoCall {
  method: string;
  /** Under the endpoint, e.g. `nodes/<uuid>/states/provision`, with its query. */
  path: string;
  body?: unknown;
  /** The call's OkCodes; the method's defaults otherwise. */
  ok?: number[];
  /** What the body decodes into; none for gophercloud's ErrResult calls (the body is not read). */
  decode?: GoType;
}

export interface GoAnswer {
  status: number;
  ok: boolean;
  body: unknown;
  text: string;
}

/** One request/answer as the test saw it: "METHOD path → status". */
export type Exchange = string;

/**
 * A gophercloud baremetal ServiceClient with noauth (`noauth.NewBareMetalNoAuth`): the endpoint
 * `<url>/v1/`, `X-OpenStack-Ironic-API-Version` and `OpenStack-API-Version` on every request,
 * JSON in and out. A status outside the call's OkCodes is an error (returned, as gophercloud's
 * ErrUnexpectedResponseCode, for the caller to look at); an accepted body that its Go type
 * cannot decode fails the test.
 */
export class GopherClient {
  microversion = '1.89';
  readonly log: Exchange[] = [];

  constructor(readonly endpoint: string) {}

  async request(call: GoCall): Promise<GoAnswer> {
    const headers: Record<string, string> = {
      accept: 'application/json',
      'user-agent': 'gophercloud/v2.13.0',
      'x-openstack-ironic-api-version': this.microversion,
      'openstack-api-version': `baremetal ${this.microversion}`,
    };
    const hasBody = call.body !== undefined;
    if (hasBody) headers['content-type'] = 'application/json';
    const res = await fetch(`${this.endpoint}${call.path}`, { method: call.method, headers, ...(hasBody ? { body: JSON.stringify(call.body) } : {}) });
    const text = await res.text();
    const ok = (call.ok ?? DEFAULT_OK[call.method]).includes(res.status);
    this.log.push(`${call.method} /v1/${call.path} → ${res.status}`);
    let body: unknown = null;
    if (text !== '') {
      try {
        body = JSON.parse(text);
      } catch {
        expect.fail(`${call.method} ${call.path}: ${res.status} with a body that is not JSON: ${text.slice(0, 200)}`);
      }
    }
    if (ok && call.decode) {
      const errors = goDecodeErrors(body, call.decode);
      expect(errors, `${call.method} ${call.path}: gophercloud cannot decode the answer:\n${errors.join('\n')}`).to.deep.equal([]);
    }
    return { status: res.status, ok, body, text };
  }

  /** request(), failing the test unless the status is one the call accepts. */
  async expectOk<T = unknown>(call: GoCall): Promise<T> {
    const res = await this.request(call);
    expect(res.ok, `${call.method} ${call.path} ${JSON.stringify(call.body) ?? ''}: ${res.status} ${res.text}`).to.equal(true);
    return res.body as T;
  }
}
