/**
 * The tempest configuration for ironic-tempest-plugin's API tests against one baremetal API:
 * pre-provisioned accounts (the stub accepts any), every other service off, the fake
 * interfaces, and the microversion range and hardware types the target itself advertises.
 */
import fs from 'node:fs/promises';
import path from 'node:path';

const SERVICES_OFF = [
  'nova', 'neutron', 'glance', 'cinder', 'swift', 'horizon', 'heat', 'aodh', 'ceilometer', 'designate', 'octavia',
  'placement', 'ironic_inspector',
];

/** What the target advertises: GET / (its v1 microversion range) and GET /v1/drivers. */
export interface TargetInfo {
  minMicroversion: string;
  maxMicroversion: string;
  hardwareTypes: string[];
}

/** Reads the target's microversion range and hardware types. */
export async function describeTarget(target: string): Promise<TargetInfo> {
  const root = await (await fetch(`${target}/`)).json() as {
    versions?: Array<{ id: string; min_version?: string; version?: string }>;
    default_version?: { min_version?: string; version?: string };
  };
  const v1 = root.versions?.find((v) => v.id === 'v1') ?? root.default_version;
  if (!v1?.min_version || !v1.version) throw new Error(`${target}/ advertises no microversion range: ${JSON.stringify(root).slice(0, 300)}`);
  const res = await fetch(`${target}/v1/drivers`, { headers: { 'X-OpenStack-Ironic-API-Version': v1.version } });
  const drivers = (await res.json() as { drivers?: Array<{ name: string; type?: string }> }).drivers ?? [];
  const hardwareTypes = drivers.filter((d) => (d.type ?? 'dynamic') === 'dynamic').map((d) => d.name).sort();
  return { minMicroversion: v1.min_version, maxMicroversion: v1.version, hardwareTypes };
}

/**
 * Writes `workdir/etc/tempest.conf` and `workdir/etc/accounts.yaml` (`accounts` project admins
 * and as many system admins: tempest locks one of each per running test class, so it must be
 * at least the run's concurrency). Returns the config file's path.
 */
export async function writeTempestConfig(opts: { workdir: string; identity: string; target: TargetInfo; accounts: number }): Promise<string> {
  const { workdir: wd, identity, target, accounts } = opts;
  const etc = path.join(wd, 'etc');
  await fs.mkdir(etc, { recursive: true });
  await fs.mkdir(path.join(wd, 'lock'), { recursive: true });
  const users: string[] = [];
  for (let i = 0; i < accounts; i++) {
    users.push(`- username: tempest-admin-${i}\n  password: pw\n  user_domain_name: Default\n  project_name: tempest-admin-${i}\n  project_domain_name: Default\n  roles: [admin, member, reader]\n`);
  }
  for (let i = 0; i < accounts; i++) {
    users.push(`- username: tempest-sysadmin-${i}\n  password: pw\n  user_domain_name: Default\n  system: all\n  roles: [admin, member, reader]\n`);
  }
  await fs.writeFile(path.join(etc, 'accounts.yaml'), users.join(''));
  const conf = `[DEFAULT]
debug = true
use_stderr = false
log_dir = ${wd}
log_file = tempest.log

[oslo_concurrency]
lock_path = ${wd}/lock

[auth]
use_dynamic_credentials = false
test_accounts_file = ${etc}/accounts.yaml
default_credentials_domain_name = Default
create_isolated_networks = false

[identity]
auth_version = v3
uri_v3 = ${identity}
region = RegionOne
v3_endpoint_type = public

[identity-feature-enabled]
api_v2 = false

[enforce_scope]
ironic = false

[service_available]
ironic = true
${SERVICES_OFF.map((s) => `${s} = false`).join('\n')}

[compute]
build_timeout = 120
# The plugin's waiters poll at this interval (whole seconds). fake-hardware's transitions take
# milliseconds, so at 1 each wait slept a second for them: poll without a pause.
build_interval = 0

[baremetal]
driver = fake-hardware
catalog_type = baremetal
endpoint_type = public
min_microversion = ${target.minMicroversion}
max_microversion = ${target.maxMicroversion}
power_timeout = 60
unprovision_timeout = 120
deploywait_timeout = 60
active_timeout = 120
enabled_hardware_types = ${target.hardwareTypes.join(',')}
enabled_drivers =
enabled_deploy_interfaces = fake
enabled_boot_interfaces = fake
enabled_power_interfaces = fake
enabled_management_interfaces = fake
enabled_bios_interfaces = fake
enabled_raid_interfaces = fake
enabled_rescue_interfaces = no-rescue

[baremetal_feature_enabled]
ipxe_enabled = false
adoption = false
software_raid = false
deploy_time_raid = false
`;
  const file = path.join(etc, 'tempest.conf');
  await fs.writeFile(file, conf);
  return file;
}
