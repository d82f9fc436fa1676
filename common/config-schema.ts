/**
 * The one declaration of every configuration option: its type, default,
 * bounds and help. The loader validates against it, the sample file is
 * generated from it, and the `Config` type is inferred from it, so adding
 * an option is adding one entry here. Names follow ironic.conf wherever
 * Ironic has the same option. Rules across options are declared here too
 * (CROSS_CHECKS), so the loader reports them as it reports a bad value.
 */
import { expandHooks, hooksProblem } from './inspection-hook-list.js';

interface OptionCommon {
  /** One or two sentences, shown in etc/galvanic.conf.sample. */
  readonly help: string;
  /** Never printed: masked in logs and in error messages. */
  readonly secret?: boolean;
}
export interface StringOption extends OptionCommon {
  readonly type: 'string';
  readonly default: string;
}
export interface IntOption extends OptionCommon {
  readonly type: 'int';
  readonly default: number;
  readonly min?: number;
  readonly max?: number;
}
export interface FloatOption extends OptionCommon {
  readonly type: 'float';
  readonly default: number;
  readonly min?: number;
  readonly max?: number;
}
export interface BoolOption extends OptionCommon {
  readonly type: 'bool';
  readonly default: boolean;
}
/** Comma-separated strings; items are trimmed and empty items dropped. */
export interface ListOption extends OptionCommon {
  readonly type: 'list';
  readonly default: readonly string[];
}
export interface EnumOption extends OptionCommon {
  readonly type: 'enum';
  readonly choices: readonly string[];
  readonly default: string;
}
export type OptionSpec = StringOption | IntOption | FloatOption | BoolOption | ListOption | EnumOption;
export type SchemaShape = Readonly<Record<string, Readonly<Record<string, OptionSpec>>>>;

/**
 * [DEFAULT] enabled_<kind>_interfaces and default_<kind>_interface for each interface kind
 * ([kind, its name in the help, the enabled default]): one rule for all of them, the enabled
 * lists first as the sample shows them.
 */
function interfaceOptions<const K extends string>(kinds: ReadonlyArray<readonly [K, string, readonly string[]]>): {
  readonly [P in K as `enabled_${P}_interfaces`]: ListOption;
} & {
  readonly [P in K as `default_${P}_interface`]: StringOption;
} {
  const enabled = kinds.map(([kind, title, defaults]) => [`enabled_${kind}_interfaces`, {
    type: 'list', default: defaults, help: `${title} interfaces that nodes may use.`,
  }] as const);
  const defaults = kinds.map(([kind, title]) => [`default_${kind}_interface`, {
    type: 'string', default: '', help: `${title} interface given to new nodes that do not name one. Empty means the hardware type's default.`,
  }] as const);
  return Object.fromEntries([...enabled, ...defaults]) as never;
}

/** Every section and option Galvanic reads. */
export const SCHEMA = {
  DEFAULT: {
    host: {
      type: 'string',
      default: '',
      help: "Name of this conductor, unique among conductors. Empty means the machine's hostname.",
    },
    debug: {
      type: 'bool',
      default: false,
      help: 'Log at debug level instead of info.',
    },
    log_level: {
      type: 'enum',
      choices: ['trace', 'debug', 'info', 'warn', 'error', 'fatal'],
      default: 'info',
      help: 'The least severe level written to the log. debug = true lowers it to debug.',
    },
    log_format: {
      type: 'enum',
      choices: ['auto', 'json', 'text'],
      default: 'auto',
      help: 'json: one JSON object a line, for log collectors; text: one readable line a record, as oslo.log writes; auto: text when standard output is a terminal, json otherwise.',
    },
    heap_growing_percent: {
      type: 'int',
      default: 50,
      min: 0,
      max: 400,
      help: "How far V8 lets this process's heap grow past what was live at its last full collection before collecting again, in percent. On a machine with more than a few GiB V8 allows up to 300 %, so a conductor that reads thousands of BMCs at once holds several times its live heap in garbage (1.2 GiB of RSS for about 250 MiB live at 10,000 nodes). 0 leaves V8's own choice.",
    },
    enabled_hardware_types: {
      type: 'list',
      default: ['fake-hardware', 'redfish', 'ipmi'],
      help: 'Hardware types this conductor loads; a node whose driver is not listed cannot be managed here.',
    },
    ...interfaceOptions([
    ['power', 'Power', ['fake', 'redfish', 'ipmitool']],
    ['management', 'Management', ['fake', 'redfish', 'ipmitool']],
    ['console', 'Console', ['no-console', 'fake', 'ipmitool-sol']],
    ['bios', 'BIOS', ['fake', 'no-bios']],
    ['boot', 'Boot', ['fake', 'redfish-virtual-media', 'ipxe', 'pxe']],
    ['deploy', 'Deploy', ['fake', 'ramdisk', 'direct', 'custom-agent']],
    ['firmware', 'Firmware', ['fake', 'no-firmware']],
    ['inspect', 'Inspect', ['fake', 'redfish', 'no-inspect']],
    ['network', 'Network', ['noop']],
    ['raid', 'RAID', ['fake', 'no-raid', 'agent']],
    ['rescue', 'Rescue', ['fake', 'no-rescue']],
    ['storage', 'Storage', ['noop']],
    ['vendor', 'Vendor', ['fake', 'redfish', 'no-vendor']],
    ]),
    tempdir: {
      type: 'string',
      default: '',
      help: "Directory for temporary work files (an ISO being built, its EFI System Partition). Empty means the system's temporary directory (TMPDIR, else /tmp).",
    },
    isolinux_bin: {
      type: 'string',
      default: '',
      help: 'Path to isolinux.bin, the BIOS boot loader of the ISOs Galvanic builds. Empty means the first of /usr/lib/ISOLINUX/isolinux.bin (Debian package isolinux), /usr/lib/syslinux/isolinux.bin and /usr/share/syslinux/isolinux.bin that exists.',
    },
    isolinux_config_template: {
      type: 'string',
      default: '',
      help: "Template file for the isolinux configuration of the ISOs Galvanic builds, as Ironic's: {{ kernel }}, {{ ramdisk }} and {{ kernel_params }} are replaced (no other Jinja is understood). Empty means the built-in one, Ironic's.",
    },
    grub_config_path: {
      type: 'string',
      default: 'EFI/BOOT/grub.cfg',
      help: 'GRUB2 configuration file location on the UEFI ISO images Galvanic builds.',
    },
    grub_config_template: {
      type: 'string',
      default: '',
      help: "Template file for the GRUB configuration of the ISOs Galvanic builds, as Ironic's: {{ linux }}, {{ initrd }} and {{ kernel_params }} are replaced (no other Jinja is understood). Empty means the built-in one, Ironic's.",
    },
    ldlinux_c32: {
      type: 'string',
      default: '',
      help: 'Path to ldlinux.c32, which isolinux 5.0 or later loads. Empty means the first of /usr/lib/syslinux/modules/bios/ldlinux.c32 (Debian package syslinux-common) and /usr/share/syslinux/ldlinux.c32 that exists.',
    },
    esp_image: {
      type: 'string',
      default: '',
      help: "Path to an EFI System Partition image (FAT12/16/32, holding EFI boot loaders that find the ISO's grub.cfg themselves) put into the UEFI ISOs Galvanic builds. Empty means Galvanic builds one with GRUB (Debian packages grub-efi-amd64-bin, mtools and dosfstools).",
    },
  },

  api: {
    host_ip: {
      type: 'string',
      default: '127.0.0.1',
      help: 'IP address the API listens on; 0.0.0.0 or :: listens on every interface.',
    },
    port: {
      type: 'int',
      default: 6385,
      min: 1,
      max: 65535,
      help: 'TCP port the API listens on.',
    },
    auth_strategy: {
      type: 'enum',
      choices: ['noauth', 'http_basic'],
      default: 'noauth',
      help: 'How API requests are authenticated: noauth accepts everyone, http_basic checks http_basic_auth_user_file.',
    },
    http_basic_auth_user_file: {
      type: 'string',
      default: 'etc/htpasswd',
      help: 'Apache-format htpasswd file (bcrypt hashes) used when auth_strategy is http_basic; relative paths start at the working directory.',
    },
    max_limit: {
      type: 'int',
      default: 1000,
      min: 1,
      help: 'Maximum number of items one list request returns, whatever limit it asks for.',
    },
    public_endpoint: {
      type: 'string',
      default: '',
      help: 'Base URL put in links in API responses, for use behind a proxy. Empty means it is derived from each request.',
    },
    node_render_cache_bytes: {
      type: 'int',
      default: 67108864,
      min: 0,
      help: 'Memory for nodes already rendered to JSON, reused by list requests while a node is unchanged (about 2.5 KiB per node and view). 0 turns the cache off.',
    },
    max_body_bytes: {
      type: 'int',
      default: 1048576,
      min: 1024,
      help: 'Largest request body accepted, in bytes; larger ones get 413.',
    },
    ramdisk_heartbeat_timeout: {
      type: 'int',
      default: 300,
      min: 1,
      help: 'Seconds an agent is told (by lookup) it may go between heartbeats; it heartbeats every 0.3 to 0.6 of it.',
    },
    restrict_lookup: {
      type: 'bool',
      default: true,
      help: 'Whether agent lookups find only nodes in a state that waits for an agent (deploying, wait call-back, cleaning, clean wait, inspecting, inspect wait, ...).',
    },
  },

  database: {
    connection: {
      type: 'string',
      default: '',
      secret: true,
      help: 'PostgreSQL URL, e.g. postgres://user:password@host:5432/galvanic. Empty means start an embedded PostgreSQL.',
    },
    embedded_data_dir: {
      type: 'string',
      default: 'var/pgdata',
      help: 'Data directory of the embedded PostgreSQL, relative to the working directory unless absolute.',
    },
    embedded_port: {
      type: 'int',
      default: 5439,
      min: 1,
      max: 65535,
      help: 'TCP port of the embedded PostgreSQL (it listens on 127.0.0.1 only).',
    },
    max_pool_size: {
      type: 'int',
      default: 10,
      min: 1,
      max: 200,
      help: 'Maximum number of database connections this process opens.',
    },
  },

  conductor: {
    conductor_group: {
      type: 'string',
      default: '',
      help: 'Conductor group this conductor serves; it only manages nodes whose conductor_group matches.',
    },
    allow_deleting_available_nodes: {
      type: 'bool',
      default: true,
      help: 'Whether a node in the available state may be deleted (without maintenance mode). Nodes in enroll, manageable and adopt failed always may; in other states only in maintenance mode.',
    },
    allow_provisioning_in_maintenance: {
      type: 'bool',
      default: true,
      help: 'Whether to allow nodes to enter or undergo deploy or cleaning when in maintenance mode. If this option is set to False, and a node enters maintenance during deploy or cleaning, the process will be aborted after the next heartbeat. Automated cleaning or making a node available will also fail. If True (the default), the process will begin and will pause after the node starts heartbeating. Moving it from maintenance will make the process continue.',
    },
    automated_clean: {
      type: 'bool',
      default: true,
      help: "Whether nodes are cleaned automatically on provide and after undeploy. A node's own automated_clean overrides it. Clean steps with a priority above 0 run automatically: for a direct deploy interface, the agent's (erase_devices_metadata, erase_devices), which boots the agent.",
    },
    deploy_kernel: {
      type: 'string',
      default: '',
      help: "http://, https:// or file:// URL of the kernel of the default deploy image, for nodes whose driver_info names no deploy_iso nor deploy_kernel and deploy_ramdisk; the agent ISO is built from it and deploy_ramdisk.",
    },
    deploy_ramdisk: {
      type: 'string',
      default: '',
      help: 'http://, https:// or file:// URL of the initramfs of the default deploy image (see deploy_kernel).',
    },
    deploy_kernel_checksum: {
      type: 'string',
      default: '',
      help: 'Checksum deploy_kernel must match once downloaded, as <algorithm>:<hex> (md5, sha256, sha512) or bare hex (the algorithm told by its length). Empty: not checked.',
    },
    deploy_ramdisk_checksum: {
      type: 'string',
      default: '',
      help: 'Checksum deploy_ramdisk must match, as deploy_kernel_checksum.',
    },
    error_on_ramdisk_config_inconsistency: {
      type: 'bool',
      default: false,
      help: "Whether a node whose driver_info names only one of deploy_kernel and deploy_ramdisk is refused; otherwise [conductor] deploy_kernel and deploy_ramdisk are used for it, as Ironic does.",
    },
    deploy_callback_timeout: {
      type: 'int',
      default: 1800,
      min: 0,
      help: 'Seconds a node may wait in wait call-back before its deploy is failed. 0 disables the check.',
    },
    inspect_wait_timeout: {
      type: 'int',
      default: 1800,
      min: 0,
      help: 'Seconds a node may wait in inspect wait before its inspection is failed. 0 disables the check.',
    },
    clean_callback_timeout: {
      type: 'int',
      default: 1800,
      min: 0,
      help: 'Seconds a node may wait in clean wait before its cleaning is failed. 0 disables the check.',
    },
    service_callback_timeout: {
      type: 'int',
      default: 1800,
      min: 0,
      help: 'Seconds a node may wait in service wait for its agent before its servicing is failed. 0 disables the check.',
    },
    check_provision_state_interval: {
      type: 'int',
      default: 60,
      min: 1,
      help: 'Seconds between two checks for nodes that have waited too long in a wait state, or are left in a transitional provision state with no work queued for them.',
    },
    heartbeat_interval: {
      type: 'int',
      default: 10,
      min: 1,
      help: 'Seconds between two heartbeats of this conductor.',
    },
    heartbeat_timeout: {
      type: 'int',
      default: 60,
      min: 2,
      help: 'Seconds without a heartbeat after which a conductor is considered dead and its nodes and reservations are taken over.',
    },
    workers_pool_size: {
      type: 'int',
      default: 300,
      min: 1,
      max: 10000,
      help: 'Maximum number of node operations (intents and periodic tasks) this conductor runs at once (Ironic\'s default, 300). An intent holds its slot from its claim to its outcome\'s commit, so one conductor runs at most this many divided by that time a second: at 100, a conductor under 2,700 requests a second fell behind at 1,100 a second. A group operation keeps no more nodes in flight than this over all conductors, whatever its max_parallel: a deploy holds its node until it is active (about 15 s against BMCs answering in 0.1-0.5 s), so 1,000 nodes deployed at once on two conductors need 500 or more here.',
    },
    intent_max_attempts: {
      type: 'int',
      default: 5,
      min: 1,
      max: 100,
      help: 'Attempts at an intent that fails with a transient error (e.g. BMC unreachable) before it is marked failed.',
    },
    intent_retry_initial_delay: {
      type: 'float',
      default: 1,
      min: 0,
      help: 'Seconds before the first retry of an intent; later retries back off up to intent_retry_max_delay.',
    },
    intent_retry_max_delay: {
      type: 'float',
      default: 60,
      min: 0,
      help: 'Longest wait between two retries of an intent, in seconds.',
    },
    orphaned_intent_timeout: {
      type: 'float',
      default: 60,
      min: 1,
      help: 'An intent recorded as running on this conductor that the conductor is not running (its claim or outcome could not be completed, e.g. the database was away) is recovered after this many seconds, as a dead conductor\'s would be.',
    },
    poll_interval: {
      type: 'float',
      default: 5,
      min: 0.1,
      help: 'Seconds between two polls for new intents. A safety net: new intents are normally picked up at once through LISTEN/NOTIFY.',
    },
    graceful_shutdown_timeout: {
      type: 'int',
      default: 60,
      min: 0,
      help: 'Seconds a stopping conductor waits for running operations to finish before abandoning them.',
    },
    sync_power_state_interval: {
      type: 'int',
      default: 60,
      min: 0,
      help: 'Seconds between two syncs of the recorded power state with the BMCs. 0 disables the sync.',
    },
    sync_power_state_workers: {
      type: 'int',
      default: 8,
      min: 1,
      help: 'Lanes of the synchronous path of the power state sync, as Ironic\'s worker threads: nodes whose power interface reads only in a lane (ipmi, whose ipmitool runs in the IPMI worker pool), and every node when sync_power_state_async is false, are read this many at a time, one after the other in each lane.',
    },
    sync_power_state_async: {
      type: 'bool',
      default: true,
      help: 'Read the power state of nodes whose power interface reads on the event loop (redfish) all at once, bounded by sync_power_state_max_concurrency and per_bmc_concurrency, each within sync_power_state_node_timeout. When false every node takes the sync_power_state_workers lanes, as in Ironic (1,000 BMCs answering in 1-2 s: a pass of about 3 minutes with 8 lanes, against a few seconds).',
    },
    sync_power_state_max_concurrency: {
      type: 'int',
      default: 2500,
      min: 1,
      help: 'Nodes of the asynchronous power state sync read at once, the slowest of the last pass first. A read is one or two requests; more at once than this only costs memory.',
    },
    sync_power_state_node_timeout: {
      type: 'float',
      default: 30,
      min: 0.1,
      help: 'Seconds the read of one node\'s power state may take in the power state sync (Ironic has no such bound: a hung BMC holds one of its workers for the driver\'s whole timeout). It is then cancelled and counts as a failed read; a BMC that slow delays only its own node, never the pass beyond this.',
    },
    per_bmc_concurrency: {
      type: 'int',
      default: 4,
      min: 1,
      max: 64,
      help: 'Requests (Redfish) or commands (ipmitool) this conductor has in flight to one BMC address at once, over everything that reaches it: intents, the power state sync, sensor collection, inspection, virtual media. Those waiting are served an operator\'s intent first, then periodic reads. A BMC that takes one request at a time wants 1.',
    },
    power_state_sync_max_retries: {
      type: 'int',
      default: 3,
      min: 1,
      help: 'Failed power state syncs of a node in a row (power state unreadable, or not restored when force_power_state_during_sync is set) after which the next failing one puts the node in maintenance with fault "power failure", as Ironic counts them. A sync that finds the states agreeing starts the count over.',
    },
    node_locked_retry_attempts: {
      type: 'int',
      default: 3,
      min: 1,
      help: 'Attempts to take a node held by a periodic task (a power state sync, a sensor read) before a request that needs it free, such as a node delete, answers 409 NodeLocked.',
    },
    node_locked_retry_interval: {
      type: 'int',
      default: 1,
      min: 0,
      help: 'Seconds between two attempts to take a held node.',
    },
    metrics_port: {
      type: 'int',
      default: 0,
      min: 0,
      max: 65535,
      help: 'Port of the conductor\'s Prometheus /metrics (periodic tasks, sensor failures by kind, notification buffer, intent queue depth, event-loop lag). 0 disables it.',
    },
    metrics_host: {
      type: 'string',
      default: '127.0.0.1',
      help: 'Address the conductor\'s /metrics listens on.',
    },
    force_power_state_during_sync: {
      type: 'bool',
      default: false,
      help: 'When the BMC disagrees with the database, set the node back to the recorded power state instead of recording the one the BMC reports.',
    },
  },

  inspector: {
    power_off: {
      type: 'bool',
      default: true,
      help: 'Whether to power a node off when in-band (agent) inspection ends; a node with disable_power_off is rebooted instead.',
    },
    pre_create_ports: {
      type: 'bool',
      default: true,
      help: 'Whether to create ports for the MACs the BMC reports before booting the agent for in-band inspection, so that the agent can be found by them.',
    },
    add_ports: {
      type: 'enum',
      choices: ['all', 'active', 'pxe', 'disabled'],
      default: 'pxe',
      help: 'Which MACs of the inspected inventory get ports (the "ports" hook): all, active (with an IP address), pxe (the PXE NIC only, or every NIC when the inventory names none), or disabled.',
    },
    keep_ports: {
      type: 'enum',
      choices: ['all', 'present', 'added'],
      default: 'all',
      help: 'Which existing ports to keep after in-band inspection: all, present (MACs in the inventory), or added (MACs that add_ports selects).',
    },
    update_pxe_enabled: {
      type: 'bool',
      default: true,
      help: "Whether in-band inspection sets the ports' pxe_enabled from the inventory's PXE NIC.",
    },
    default_hooks: {
      type: 'string',
      default: 'ramdisk-error,validate-interfaces,ports,architecture',
      help: 'Inspection hooks run by default for the agent inspect interface.',
    },
    hooks: {
      type: 'string',
      default: '$default_hooks',
      help: 'Inspection hooks the agent inspect interface runs, in order; $default_hooks stands for default_hooks. Also available: memory, cpus, boot-mode, root-device.',
    },
    disk_partitioning_spacing: {
      type: 'bool',
      default: true,
      help: 'Whether the root-device hook leaves 1 GiB of the root disk out of local_gb for partitioning.',
    },
  },

  agent: {
    command_timeout: {
      type: 'int',
      default: 60,
      min: 1,
      help: 'Seconds a call to an agent may take before it is given up.',
    },
    max_command_attempts: {
      type: 'int',
      default: 3,
      min: 1,
      help: 'Attempts at an agent call that fails to connect (a lost answer is first looked for in the agent\'s command list).',
    },
    command_wait_attempts: {
      type: 'int',
      default: 100,
      min: 1,
      help: 'Times the agent\'s command list is read for the end of a command the conductor waits for (image.install_bootloader), before it is given up.',
    },
    command_wait_interval: {
      type: 'int',
      default: 6,
      min: 1,
      help: 'Seconds between those reads, the longest: the first come 0.2 s after the command started, then twice as long each time up to this.',
    },
    post_deploy_get_power_state_retries: {
      type: 'int',
      default: 6,
      min: 0,
      help: 'Times the BMC power state is read after the agent was asked to power the node off, before it is forced off.',
    },
    post_deploy_get_power_state_retry_interval: {
      type: 'int',
      default: 5,
      min: 0,
      help: 'Seconds between those power state reads.',
    },
    connections_per_agent: {
      type: 'int',
      default: 1,
      min: 1,
      max: 16,
      help: 'Connections the conductor keeps open to each agent. A task talks to its agent one call at a time, and a call sent as the last one completes may find that connection still busy: a second one allowed was opened then (another TLS handshake with the agent).',
    },
    verify_ca: {
      type: 'string',
      default: 'True',
      help: "Path to the TLS CA to validate connections to the ramdisk. True uses the system's CAs, False disables validation. Ignored when the agent sent its own certificate (automatic TLS, API 1.68 agent_verify_ca): that one is pinned. A node's driver_info/agent_verify_ca overrides it.",
    },
    require_tls: {
      type: 'bool',
      default: false,
      help: 'Whether heartbeats whose callback URL is not https:// are refused.',
    },
  },

  deploy: {
    erase_devices_priority: {
      type: 'int',
      default: -1,
      min: -1,
      help: "Priority of the agent's erase_devices clean step in automated cleaning; 0 disables it, -1 keeps the agent's own (10).",
    },
    erase_devices_metadata_priority: {
      type: 'int',
      default: -1,
      min: -1,
      help: "Priority of the agent's erase_devices_metadata clean step in automated cleaning; 0 disables it, -1 keeps the agent's own (99).",
    },
    delete_configuration_priority: {
      type: 'int',
      default: -1,
      min: -1,
      help: "Priority of the in-band raid.delete_configuration clean step of nodes with the agent RAID interface; 0 disables it, -1 keeps the agent's own (0).",
    },
    create_configuration_priority: {
      type: 'int',
      default: -1,
      min: -1,
      help: "Priority of the in-band raid.create_configuration clean step of nodes with the agent RAID interface; 0 disables it, -1 keeps the agent's own (0).",
    },
    http_root: {
      type: 'string',
      default: 'var/httpboot',
      help: "This conductor's HTTP root: the directory of the files it publishes for BMCs to fetch (the agent ISO it builds, as redfish/boot-<node uuid>.iso). Relative to the working directory unless absolute; each conductor has its own (Ironic's default is /httpboot).",
    },
    http_url: {
      type: 'string',
      default: '',
      help: "URL at which http_root is served, e.g. http://192.0.2.10:6180. Empty means the embedded server's, http://<http_server_host>:<http_server_port>.",
    },
    external_http_url: {
      type: 'string',
      default: '',
      help: "URL of this conductor's HTTP server for BMCs outside the provisioning network (virtual media): the URL handed to BMCs. A node's driver_info external_http_url overrides it. Empty means http_url.",
    },
    external_callback_url: {
      type: 'string',
      default: '',
      help: "URL of the bare metal API the agent calls back (its ipa-api-url), for agents outside the provisioning network. Empty means [api] public_endpoint, else http://<[api] host_ip>:<[api] port>.",
    },
    http_server: {
      type: 'bool',
      default: true,
      help: 'Whether the conductor serves http_root itself on http_server_host:http_server_port (GET and HEAD, with byte ranges, as BMCs fetch ISOs). Turn it off when an nginx or httpd serves http_root at http_url.',
    },
    http_server_host: {
      type: 'string',
      default: '127.0.0.1',
      help: 'IP address the embedded HTTP server listens on; BMCs must reach it (0.0.0.0 or :: listens on every interface, and then http_url must be set).',
    },
    http_server_port: {
      type: 'int',
      default: 6180,
      min: 0,
      max: 65535,
      help: 'TCP port of the embedded HTTP server; 0 takes a free port at each start (for tests: a URL handed to a BMC does not survive a restart).',
    },
    http_root_sweep_interval: {
      type: 'int',
      default: 600,
      min: 0,
      help: 'Seconds between two sweeps of http_root, which remove the files of nodes that no longer boot from them (deleted, or out of deploying, cleaning, inspecting, servicing and their wait states, and not active) and files a conductor that died left half-written. 0 disables the sweep.',
    },
    ramdisk_image_download_source: {
      type: 'enum',
      choices: ['http', 'local'],
      default: 'http',
      help: "How a given agent ISO (driver_info deploy_iso) reaches the BMC: http hands its http(s) URL to the BMC as it is; local downloads it once into iso_master_path and publishes it, unchanged, in http_root (Ironic's default). An ISO built from deploy_kernel and deploy_ramdisk is always published in http_root.",
    },
    remaster_deploy_iso: {
      type: 'bool',
      default: false,
      help: "Galvanic's: whether a given http(s) deploy_iso is re-mastered with the agent's kernel command line (kernel_append_params, ipa-api-url, boot_method=vmedia), cached per ISO and published in http_root, as an ISO built from deploy_kernel and deploy_ramdisk is. Ironic hands a deploy_iso over unchanged (ramdisk_image_download_source), so that it must carry its own parameters.",
    },
    iso_master_path: {
      type: 'string',
      default: 'var/master_iso_images',
      help: 'Directory of the image cache: the deploy kernels and ramdisks downloaded once, and the agent ISOs built from them, each shared by every node that boots the same. Keep it on the file system of http_root, so that publishing is a hard link, not a copy. Relative to the working directory unless absolute.',
    },
    iso_cache_size: {
      type: 'int',
      default: 20480,
      min: 1,
      help: 'Size of the image cache in MiB, files in use (published) included; the least recently used files that no node uses go first.',
    },
    iso_cache_ttl: {
      type: 'int',
      default: 10080,
      min: 0,
      help: 'Minutes an image that no node uses is kept in the cache.',
    },
    configdrive_use_object_store: {
      type: 'bool',
      default: false,
      help: "Whether every config drive is published in the conductor's HTTP root and instance_info keeps only its URL (Ironic uploads it to Swift). When false, only a config drive above configdrive_max_inline_size is; a smaller one stays in instance_info, gzipped and base64-encoded.",
    },
    configdrive_max_inline_size: {
      type: 'int',
      default: 65536,
      min: 1024,
      help: "Largest config drive, in bytes once gzipped and base64-encoded (a JSON one once built), kept whole in the node's instance_info; a larger one is published in the HTTP root and instance_info keeps its URL, and without an HTTP root its deploy fails.",
    },
  },

  dhcp: {
    dhcp_provider: {
      type: 'enum',
      choices: ['none', 'dnsmasq'],
      default: 'none',
      help: 'Who tells network-booting nodes where to boot from: dnsmasq writes per-node host and option files that a dnsmasq reads ([dnsmasq]); none writes nothing, for a DHCP server set up by hand. Galvanic runs no DHCP server of its own.',
    },
  },

  dnsmasq: {
    dhcp_optsdir: {
      type: 'string',
      default: '/etc/dnsmasq.d/optsdir.d',
      help: 'Directory where the dnsmasq provider writes option files (ironic-<node uuid>.conf) for an external dnsmasq to read. Use the same path for the dhcp-optsdir dnsmasq directive.',
    },
    dhcp_hostsdir: {
      type: 'string',
      default: '/etc/dnsmasq.d/hostsdir.d',
      help: 'Directory where the dnsmasq provider writes host files (ironic-<mac>.conf) for an external dnsmasq to read. Use the same path for the dhcp-hostsdir dnsmasq directive.',
    },
    dhcp_leasefile: {
      type: 'string',
      default: '/var/lib/dnsmasq/dnsmasq.leases',
      help: "dnsmasq's lease file, read to find the IP addresses of a node's ports (GRUB's per-address configuration). Use the same path for the dhcp-leasefile dnsmasq directive.",
    },
  },

  pxe: {
    kernel_append_params: {
      type: 'string',
      default: 'nofb vga=normal',
      help: "Kernel parameters put first on the command line of the agent booted by the pxe and ipxe boot interfaces, before ipa-api-url; a node's instance_info or driver_info kernel_append_params replaces them ('%default%' in it stands for these).",
    },
    tftp_server: {
      type: 'string',
      default: '',
      help: "IP address of the TFTP server that hands out the boot loaders, sent in the DHCP options (66, 150, and dnsmasq's server address). Empty means this machine's first non-loopback IPv4 address (Ironic's $my_ip).",
    },
    tftp_root: {
      type: 'string',
      default: '/tftpboot',
      help: "The TFTP server's root: the pxe interface writes its per-node files there (<uuid>/config, pxelinux.cfg/01-<mac>), and the boot loaders DHCP names (pxe_bootfile_name, ipxe_bootfile_name, ...) must be found there.",
    },
    pxe_config_subdir: {
      type: 'string',
      default: 'pxelinux.cfg',
      help: 'Directory of tftp_root (pxe) or http_root (ipxe) where each MAC address gets a link to its node\'s configuration.',
    },
    pxe_bootfile_name: {
      type: 'string',
      default: 'pxelinux.0',
      help: 'Boot loader DHCP hands to a BIOS node of the pxe interface.',
    },
    uefi_pxe_bootfile_name: {
      type: 'string',
      default: 'bootx64.efi',
      help: 'Boot loader DHCP hands to a UEFI node of the pxe interface (a signed shim or GRUB).',
    },
    ipxe_bootfile_name: {
      type: 'string',
      default: 'undionly.kpxe',
      help: "iPXE image DHCP hands to a BIOS node's firmware (ipxe interface); iPXE then asks again and gets boot.ipxe.",
    },
    uefi_ipxe_bootfile_name: {
      type: 'string',
      default: 'snponly.efi',
      help: "iPXE image DHCP hands to a UEFI node's firmware (ipxe interface). snponly.efi uses the firmware's network driver; ipxe.efi has its own.",
    },
    pxe_config_template: {
      type: 'string',
      default: '',
      help: "PXELINUX configuration template (BIOS, pxe interface), in the part of Jinja2 Ironic's templates use ({{ }}, |default, if/elif/else/endif). Empty means Galvanic's, which writes what Ironic's default writes.",
    },
    uefi_pxe_config_template: {
      type: 'string',
      default: '',
      help: 'GRUB configuration template (UEFI, pxe interface), as pxe_config_template.',
    },
    ipxe_config_template: {
      type: 'string',
      default: '',
      help: 'iPXE script template of a node (ipxe interface), as pxe_config_template.',
    },
    ipxe_boot_script: {
      type: 'string',
      default: '',
      help: 'Template of boot.ipxe, the script DHCP hands to iPXE, written to http_root; it chains to pxelinux.cfg/<mac>. Empty means Galvanic\'s (what Ironic writes).',
    },
    ipxe_fallback_script: {
      type: 'string',
      default: '',
      help: 'Name of an iPXE script in http_root that boot.ipxe chains to when no configuration exists for the MAC that booted (e.g. inspector.ipxe for discovery). Empty: boot.ipxe reboots after 180 s.',
    },
    ipxe_timeout: {
      type: 'int',
      default: 0,
      min: 0,
      help: 'Seconds iPXE waits for a kernel or ramdisk download before it gives up and retries; 0 waits forever.',
    },
  },

  notifications: {
    driver: {
      type: 'enum',
      choices: ['noop', 'log', 'amqp'],
      default: 'noop',
      help: 'Where notifications go: noop drops them, log writes one JSON line per notification, amqp publishes them to RabbitMQ (transport_url) as oslo.messaging does for Ironic.',
    },
    log_file: {
      type: 'string',
      default: '',
      help: 'File the log driver appends to. Empty means standard output.',
    },
    transport_url: {
      type: 'string',
      default: 'amqp://guest:guest@127.0.0.1:5672/',
      secret: true,
      help: 'Message bus URL used by bus drivers.',
    },
    exchange: {
      type: 'string',
      default: 'ironic',
      help: "amqp driver: the topic exchange notifications are published to; Ironic's control_exchange.",
    },
    topic: {
      type: 'string',
      default: 'notifications',
      help: 'amqp driver: the notification topic; a notification of priority info goes out with routing key <topic>.info, as oslo.messaging sends it.',
    },
    declare_queue: {
      type: 'bool',
      default: true,
      help: 'amqp driver: declare the queue <topic>.<priority> bound to the exchange, as oslo.messaging does, so notifications wait for a consumer that is not running yet. Disable when every consumer declares its own queue.',
    },
    buffer_size: {
      type: 'int',
      default: 20000,
      min: 1,
      help: 'amqp driver: notifications kept in memory while the broker is unreachable or slow; when full, the oldest is dropped and counted. Publishing never blocks the work that emits.',
    },
  },

  sensor_data: {
    send_sensor_data: {
      type: 'bool',
      default: false,
      help: 'Collect sensor data from the BMCs of this conductor\'s nodes and send it as hardware.<driver>.metrics notifications. This option and `interval` take a restart; the other [sensor_data] options are read again on SIGHUP and apply from the next iteration.',
    },
    interval: {
      type: 'int',
      default: 600,
      min: 1,
      help: 'Seconds between two sensor data collections. An iteration that runs longer delays the next one (never overlaps it) and is logged.',
    },
    enable_async_collection: {
      type: 'bool',
      default: true,
      help: 'Read nodes whose management interface supports it (redfish) all at once on the event loop, bounded by max_concurrency and per_bmc_concurrency. When false every node takes the synchronous path of `workers` lanes, as Ironic does.',
    },
    workers: {
      type: 'int',
      default: 4,
      min: 1,
      max: 1024,
      help: 'Lanes of the synchronous path: nodes without asynchronous collection (ipmi, whose ipmitool runs in the IPMI worker pool) are read this many at a time, one after the other in each lane.',
    },
    max_concurrency: {
      type: 'int',
      default: 1500,
      min: 1,
      help: "Nodes of the asynchronous path being read at once, the slowest of the last iteration first. Each node in flight holds its chain of requests (10-20 KiB); past a few thousand a conductor is busy parsing answers anyway, and more at once only costs memory (10,000 simulated BMCs with the power sync running too: steady iterations as long as the slowest BMC's own chain, and a peak RSS of 451 MiB; 478 MiB with 2500). A node's first read, which logs in to and discovers its BMC, counts twice; the first iteration is the one a higher value shortens.",
    },
    per_bmc_concurrency: {
      type: 'int',
      default: 1,
      min: 1,
      max: 64,
      help: 'Nodes behind one BMC address read at once (a chassis manager may serve several nodes); each read is further bounded by the driver\'s per-BMC request limit.',
    },
    node_timeout: {
      type: 'float',
      default: 60,
      min: 0.1,
      help: 'Seconds one node\'s sensor read may take; it is then cancelled (its connections closed), counted, and recorded in the node\'s history at most once an hour.',
    },
    enable_for_undeployed_nodes: {
      type: 'bool',
      default: false,
      help: 'Also collect from nodes that are not in provision state active.',
    },
    enable_for_nodes_in_maintenance: {
      type: 'bool',
      default: false,
      help: 'Also collect from nodes in maintenance.',
    },
    data_types: {
      type: 'list',
      default: ['ALL'],
      help: 'Sensor types to send (e.g. Temperature,Fan,Power,Drive for redfish; Temperature,Fan,Voltage,… for ipmi). ALL sends every type.',
    },
  },

  exporter: {
    source: {
      type: 'enum',
      choices: ['amqp', 'log'],
      default: 'amqp',
      help: "Where the exporter reads notifications: amqp consumes its own queue on the bus ([notifications] transport_url, exchange, topic); log follows the log driver's file ([notifications] log_file), for single-host setups without a broker.",
    },
    host_ip: {
      type: 'string',
      default: '127.0.0.1',
      help: 'Address `galvanic exporter` serves /metrics on.',
    },
    port: {
      type: 'int',
      default: 9608,
      min: 0,
      max: 65535,
      help: 'Port of the exporter\'s /metrics (0: any free port).',
    },
    queue: {
      type: 'string',
      default: 'galvanic-exporter',
      help: 'The exporter\'s durable queue, bound to [notifications] exchange with routing key <topic>.info.',
    },
    stale_after: {
      type: 'int',
      default: 3,
      min: 1,
      help: 'A node not heard from for this many [sensor_data] intervals (deleted, moved, or its BMC gone) loses its series.',
    },
  },

  ipmi: {
    min_command_interval: {
      type: 'float',
      default: 1,
      min: 0,
      help: 'Minimum time, in seconds, between two IPMI commands sent to one BMC (address and port); commands to one BMC run one at a time, other BMCs are not delayed. Some BMCs crash when polled too often: Ironic recommends 5.',
    },
    command_retry_timeout: {
      type: 'int',
      default: 60,
      min: 0,
      help: 'Maximum time in seconds to retry retryable IPMI operations (for example when the BMC answers that it is busy). Setting this too high can hold up the power state sync on slow or unresponsive BMCs.',
    },
    use_ipmitool_retries: {
      type: 'bool',
      default: false,
      help: 'When true, ipmitool itself retries (-R and -N derived from command_retry_timeout and min_command_interval); when false, ipmitool tries once and Galvanic retries the retryable failures.',
    },
    command_timeout: {
      type: 'float',
      default: 60,
      min: 1,
      help: 'Seconds one ipmitool process may run; it is then killed and the call fails with a BMC timeout.',
    },
    workers: {
      type: 'int',
      default: 4,
      min: 1,
      max: 64,
      help: 'Threads of the worker pool that runs ipmitool; each supervises up to 4 ipmitool processes at once, further commands wait in the queue. Threads start on the first IPMI command.',
    },
  },

  redfish: {
    connection_attempts: {
      type: 'int',
      default: 5,
      min: 1,
      max: 100,
      help: 'Attempts at one Redfish request that fails with a connection error or a retryable answer (5xx, 503 with Retry-After, a full session table), always within the call\'s timeout.',
    },
    connection_retry_interval: {
      type: 'float',
      default: 1,
      min: 0,
      max: 300,
      help: 'Seconds before the first retry of a Redfish request; each further retry waits twice as long (with jitter, at most 30 s). A Retry-After header from the BMC takes precedence.',
    },
    connection_cache_size: {
      type: 'int',
      default: 1000,
      min: 1,
      help: 'BMCs whose Redfish session and connection pool are kept; the least recently used is logged out and closed when a new one needs room. Set it at least to the number of Redfish nodes per conductor.',
    },
    max_concurrent_requests_per_bmc: {
      type: 'int',
      default: 4,
      min: 1,
      max: 64,
      help: 'Connections to one Redfish BMC, and so Redfish requests in flight to it at once; further requests wait. Every path of a conductor shares the lower [conductor] per_bmc_concurrency budget at a BMC as well. Many BMCs misbehave beyond a handful.',
    },
    request_timeout: {
      type: 'float',
      default: 60,
      min: 1,
      max: 3600,
      help: "Seconds one Redfish driver call to a BMC may take, all its requests, retries and waits included, unless the node's driver_info redfish_timeout says otherwise.",
    },
    firmware_update_status_interval: {
      type: 'float',
      default: 5,
      min: 0.01,
      max: 3600,
      help: 'Seconds between two reads of the task a BMC runs a firmware update in (the firmware.update step of the redfish firmware interface).',
    },
    firmware_update_overall_timeout: {
      type: 'int',
      default: 7200,
      min: 1,
      help: 'Seconds one component\'s firmware update may take, from SimpleUpdate to the end of its task, before the step fails.',
    },
    power_state_change_timeout: {
      type: 'float',
      default: 60,
      min: 1,
      max: 3600,
      help: 'Seconds a Redfish power action waits for the BMC to report the new power state, when the request names no timeout.',
    },
    auth_type: {
      type: 'enum',
      choices: ['auto', 'session', 'basic'],
      default: 'auto',
      help: "Redfish authentication when driver_info has no redfish_auth_type: session, basic, or auto (a session, falling back to Basic when the BMC has no session service or refuses to open one).",
    },
    kernel_append_params: {
      type: 'string',
      default: 'nofb nomodeset vga=normal',
      help: "Kernel parameters put first on the command line of the agent ISO built for redfish-virtual-media, before ipa-api-url and boot_method=vmedia; a node's instance_info or driver_info kernel_append_params replaces them ('%default%' in it stands for these). Mind the command line's size limit.",
    },
  },

  operations: {
    max_nodes: {
      type: 'int',
      default: 10000,
      min: 1,
      max: 100000,
      help: 'Most nodes one group operation (/v1/operations) may cover.',
    },
    default_max_parallel: {
      type: 'int',
      default: 50,
      min: 1,
      max: 10000,
      help: 'Nodes of one group operation active at once, over all conductors, when the request names no max_parallel.',
    },
    progress_notification_interval: {
      type: 'float',
      default: 5,
      min: 0.1,
      help: 'Seconds between two baremetal.operation.progress notifications of one operation, over all conductors.',
    },
  },
  console: {
    buffer_bytes: {
      type: 'int',
      default: 65536,
      min: 1024,
      max: 16777216,
      help: 'Bytes of recent console output kept per node and replayed to a viewer when it connects.',
    },
    log_dir: {
      type: 'string',
      default: '',
      help: 'Directory for one console log file per node (<node uuid>.log), rotated by size. Empty disables console logs.',
    },
    log_max_bytes: {
      type: 'int',
      default: 10485760,
      min: 4096,
      help: 'Size at which a console log file is rotated.',
    },
    log_backups: {
      type: 'int',
      default: 3,
      min: 0,
      max: 100,
      help: 'Rotated console log files kept per node (<uuid>.log.1 is the newest); older ones are deleted.',
    },
    token_ttl: {
      type: 'int',
      default: 600,
      min: 10,
      max: 86400,
      help: 'Seconds a console token may be used to connect after it was issued.',
    },
    admin_users: {
      type: 'list',
      default: [],
      help: 'With auth_strategy http_basic: users who may get read-write consoles on any node. Others get read-write only on nodes whose owner is their user name. With noauth every request counts as an admin.',
    },
    maintenance_closes_console: {
      type: 'bool',
      default: true,
      help: "Putting a node in maintenance bumps its access epoch: live console sessions close and earlier tokens stop working.",
    },
    internal_host: {
      type: 'string',
      default: '127.0.0.1',
      help: "Address the conductor's internal console endpoint listens on; API servers relay viewers to it, so it must be reachable from them.",
    },
    internal_port: {
      type: 'int',
      default: 0,
      min: 0,
      max: 65535,
      help: "TCP port of the conductor's internal console endpoint; 0 picks a free port (it is recorded in the database).",
    },
    idle_timeout: {
      type: 'int',
      default: 3600,
      min: 0,
      help: 'Seconds after which a viewer that sent nothing is disconnected; 0 never.',
    },
    restart_initial_delay: {
      type: 'float',
      default: 1,
      min: 0.05,
      max: 60,
      help: 'Seconds before a console process that exited is restarted; doubled after each quick exit.',
    },
    restart_max_delay: {
      type: 'float',
      default: 30,
      min: 0.1,
      max: 600,
      help: 'Longest wait between restarts of a console process that keeps exiting.',
    },
    watchdog_interval: {
      type: 'int',
      default: 10,
      min: 1,
      max: 3600,
      help: 'Seconds between reconciliations of enabled consoles with the console processes that exist.',
    },
  },

  fake: {
    record_file: {
      type: 'string',
      default: '',
      help: 'fake-hardware only: append one JSON line per fake BMC call (node, action, start and end times) to this file, so tests can check order and exclusion across processes. Empty disables it.',
    },
  },
} as const satisfies SchemaShape;

export type Schema = typeof SCHEMA;
export type SectionName = keyof Schema;

type ValueOf<O> = O extends { readonly type: 'string' }
  ? string
  : O extends { readonly type: 'int' | 'float' }
    ? number
    : O extends { readonly type: 'bool' }
      ? boolean
      : O extends { readonly type: 'list' }
        ? string[]
        : O extends { readonly type: 'enum'; readonly choices: readonly (infer C)[] }
          ? C
          : never;

/** The validated configuration, typed from SCHEMA; durations stay in the units the options name (seconds). */
export type Config = {
  readonly [S in SectionName]: { readonly [K in keyof Schema[S]]: ValueOf<Schema[S][K]> };
};

/** An option by its section and name. */
export type OptionRef = readonly [section: string, option: string];

/**
 * A rule across options that no option's type or bounds can say. The loader runs each on the
 * values it loaded and reports a problem under the first of `options` that the file or the
 * environment set (with its file:line), else under the first: a value is wrong only beside
 * the others, and the one set by hand is the one to look at.
 */
export interface CrossCheck {
  readonly options: readonly [OptionRef, ...OptionRef[]];
  /** What is wrong, or undefined when the values agree. */
  readonly check: (config: Readonly<Config>) => string | undefined;
}

/** default_<kind>_interface must be one of enabled_<kind>_interfaces, for every interface kind. */
function defaultInterfaceChecks(): CrossCheck[] {
  return Object.keys(SCHEMA.DEFAULT).flatMap((key): CrossCheck[] => {
    const kind = /^default_(.+)_interface$/.exec(key)?.[1];
    if (kind === undefined) return [];
    const enabledKey = `enabled_${kind}_interfaces`;
    const options = (config: Readonly<Config>) => config.DEFAULT as unknown as Record<string, string | readonly string[]>;
    return [{
      options: [['DEFAULT', key], ['DEFAULT', enabledKey]],
      check: (config) => {
        const def = options(config)[key] as string;
        return def !== '' && !(options(config)[enabledKey] as readonly string[]).includes(def) ? `"${def}" is not in ${enabledKey}` : undefined;
      },
    }];
  });
}

/** Every rule across options. */
export const CROSS_CHECKS: readonly CrossCheck[] = [
  ...defaultInterfaceChecks(),
  {
    // Ironic refuses these when the agent inspect interface loads; here, before anything starts.
    options: [['inspector', 'hooks'], ['inspector', 'default_hooks']],
    check: (config) => hooksProblem(expandHooks(config.inspector.hooks, config.inspector.default_hooks)),
  },
  {
    options: [['exporter', 'source'], ['notifications', 'log_file']],
    check: (config) => (config.exporter.source === 'log' && config.notifications.log_file === '' ? 'log follows [notifications] log_file, which is empty.' : undefined),
  },
  {
    // The URL handed to BMCs must name a host they can reach: a wildcard address is none.
    options: [['deploy', 'http_url'], ['deploy', 'http_server_host']],
    check: (config) => (config.deploy.http_url === '' && config.deploy.http_server && /^(0\.0\.0\.0|::|\[::\])$/.test(config.deploy.http_server_host)
      ? `http_server_host ${config.deploy.http_server_host} listens on every interface: set http_url to the URL BMCs reach it at.` : undefined),
  },
  {
    options: [['deploy', 'http_url'], ['deploy', 'http_server']],
    check: (config) => (config.deploy.http_url === '' && !config.deploy.http_server ? 'with http_server off, http_url must say where http_root is served.' : undefined),
  },
  {
    options: [['api', 'http_basic_auth_user_file'], ['api', 'auth_strategy']],
    check: (config) => (config.api.auth_strategy === 'http_basic' && config.api.http_basic_auth_user_file === '' ? 'auth_strategy http_basic needs a user file.' : undefined),
  },
];
