/**
 * The simulator's own BMC: one ComputerSystem with an odd Id, two chassis of which only the
 * second has Thermal, Power and Sensors (so a client that takes "the first chassis" finds no
 * sensors), a manager and a SessionService. Static bodies are serialised once per process and
 * shared by every BMC; only the system body is built per request.
 */
import { defaultBoot, emptyMedia, STANDARD_BOOT_TARGETS, type MediaSlot, type SimModel } from './model.js';
import { NO_QUIRKS, type VmediaQuirks } from './quirks.js';
import type { MediaState, SystemState } from './state.js';
import { SIM_BIOS_VERSION, SIM_BMC_VERSION } from './update-service.js';
import { dellManagerExtras } from './dell.js';

/** Which sensor resources the chassis offers: legacy Thermal/Power, the newer Sensors, or both. */
export type ChassisModel = 'both' | 'legacy' | 'sensors';

const V1 = '/redfish/v1';
const SYSTEM = `${V1}/Systems/System.Embedded.1`;
const ENCLOSURE = `${V1}/Chassis/Enclosure`;
const BOARD = `${V1}/Chassis/Baseboard`;
const MANAGER = `${V1}/Managers/BMC`;
/** An iDRAC's manager: its Id is the FQDD its configuration profiles name. */
const IDRAC_MANAGER = `${V1}/Managers/iDRAC.Embedded.1`;
const SESSIONS = `${V1}/SessionService/Sessions`;
const RESET_TYPES = ['On', 'ForceOff', 'GracefulShutdown', 'GracefulRestart', 'ForceRestart', 'Nmi', 'ForceOn', 'PushPowerButton'];
const BOOT_TARGETS = STANDARD_BOOT_TARGETS.filter((t) => t !== 'UefiTarget');

const CPUS = ['CPU1', 'CPU2'];
const CPU_MODEL = 'Intel(R) Xeon(R) Gold 6330 CPU @ 2.00GHz';
const MEMORY_GIB = 384;
const DRIVES = [
  { id: 'Disk.Bay.0', name: 'SSD 0', model: 'SIM-SSD-960', serial: 'SIMSSD0000', bytes: 960197124096 },
  { id: 'Disk.Bay.1', name: 'SSD 1', model: 'SIM-SSD-960', serial: 'SIMSSD0001', bytes: 960197124096 },
];
const NICS = [
  { id: 'NIC.Integrated.1-1', name: 'Integrated NIC 1 Port 1', speed: 25000 },
  { id: 'NIC.Integrated.1-2', name: 'Integrated NIC 1 Port 2', speed: 25000 },
] as const;
const ref = (id: string) => ({ '@odata.id': id });
const status = (state = 'Enabled', health: string | null = 'OK') => (health === null ? { State: state } : { State: state, Health: health });
const collection = (type: string, id: string, name: string, members: string[]) => ({
  '@odata.type': `#${type}Collection.${type}Collection`,
  '@odata.id': id,
  Name: name,
  'Members@odata.count': members.length,
  Members: members.map(ref),
});

const TEMPS = [
  { name: 'CPU1 Temp', ctx: 'CPU', reading: 47, number: 5 },
  { name: 'CPU2 Temp', ctx: 'CPU', reading: 44, number: 6 },
  { name: 'Inlet Temp', ctx: 'Intake', reading: 22, number: 9 },
  { name: 'Exhaust Temp', ctx: 'Exhaust', reading: 35, number: 10 },
];
const FANS = [
  { name: 'Fan 1', reading: 5400 },
  { name: 'Fan 2', reading: 5280 },
  { name: 'Fan 3', reading: 5520 },
  { name: 'Fan 4', reading: 5460 },
];
const PSUS = [
  { name: 'PSU 1', output: 182, serial: 'SIMPSU0001' },
  { name: 'PSU 2', output: 176, serial: 'SIMPSU0002' },
];

function thermal(): object {
  return {
    '@odata.type': '#Thermal.v1_7_1.Thermal',
    '@odata.id': `${BOARD}/Thermal`,
    Id: 'Thermal',
    Name: 'Thermal',
    Temperatures: TEMPS.map((t, i) => ({
      '@odata.id': `${BOARD}/Thermal#/Temperatures/${i}`,
      MemberId: String(i),
      Name: t.name,
      SensorNumber: t.number,
      Status: status(),
      ReadingCelsius: t.reading,
      UpperThresholdCritical: 90,
      MinReadingRangeTemp: 0,
      MaxReadingRangeTemp: 120,
      PhysicalContext: t.ctx,
    })),
    Fans: FANS.map((f, i) => ({
      '@odata.id': `${BOARD}/Thermal#/Fans/${i}`,
      MemberId: String(i),
      Name: f.name,
      PhysicalContext: 'Backplane',
      Status: status(),
      Reading: f.reading,
      ReadingUnits: 'RPM',
      MinReadingRange: 0,
      MaxReadingRange: 12000,
    })),
  };
}

function power(): object {
  return {
    '@odata.type': '#Power.v1_7_1.Power',
    '@odata.id': `${BOARD}/Power`,
    Id: 'Power',
    Name: 'Power',
    PowerControl: [{ '@odata.id': `${BOARD}/Power#/PowerControl/0`, MemberId: '0', Name: 'System Input Power', PowerConsumedWatts: 358, PowerCapacityWatts: 1600 }],
    Voltages: [
      { '@odata.id': `${BOARD}/Power#/Voltages/0`, MemberId: '0', Name: 'P12V', ReadingVolts: 12.05, Status: status(), PhysicalContext: 'SystemBoard' },
      { '@odata.id': `${BOARD}/Power#/Voltages/1`, MemberId: '1', Name: 'P3V3', ReadingVolts: 3.31, Status: status(), PhysicalContext: 'SystemBoard' },
    ],
    PowerSupplies: PSUS.map((p, i) => ({
      '@odata.id': `${BOARD}/Power#/PowerSupplies/${i}`,
      MemberId: String(i),
      Name: p.name,
      Status: status(),
      PowerCapacityWatts: 800,
      LineInputVoltage: 230,
      LastPowerOutputWatts: p.output,
      SerialNumber: p.serial,
      Model: 'SIM-800W',
    })),
  };
}

/** Sensors of the newer model: Id, Reading, UCUM ReadingUnits, ReadingType. */
function sensors(): Array<{ id: string; body: object }> {
  const out: Array<{ id: string; body: object }> = [];
  const sensor = (id: string, name: string, type: string, units: string, reading: number, ctx: string, extra: object = {}) => {
    out.push({
      id,
      body: {
        '@odata.type': '#Sensor.v1_7_0.Sensor',
        '@odata.id': `${BOARD}/Sensors/${id}`,
        Id: id,
        Name: name,
        ReadingType: type,
        ReadingUnits: units,
        Reading: reading,
        PhysicalContext: ctx,
        Status: status(),
        ...extra,
      },
    });
  };
  TEMPS.forEach((t, i) => sensor(`Temp${i}`, t.name, 'Temperature', 'Cel', t.reading, t.ctx, { ReadingRangeMin: 0, ReadingRangeMax: 120, Thresholds: { UpperCritical: { Reading: 90 } } }));
  FANS.forEach((f, i) => sensor(`Fan${i}`, f.name, 'Rotational', 'RPM', f.reading, 'Fan', { ReadingRangeMin: 0, ReadingRangeMax: 12000 }));
  PSUS.forEach((p, i) => sensor(`PSU${i}Power`, `${p.name} Output`, 'Power', 'W', p.output, 'PowerSupply', { ReadingRangeMax: 800 }));
  sensor('P12V', 'P12V', 'Voltage', 'V', 12.05, 'SystemBoard');
  return out;
}

/** What out-of-band inspection reads: processors, storage with drives and volumes (NICs are per BMC). */
function inventory(put: (path: string, body: object) => void): void {
  put(`${SYSTEM}/Processors`, collection('Processor', `${SYSTEM}/Processors`, 'Processors Collection', CPUS.map((c) => `${SYSTEM}/Processors/${c}`)));
  CPUS.forEach((id, i) =>
    put(`${SYSTEM}/Processors/${id}`, {
      '@odata.type': '#Processor.v1_11_0.Processor',
      '@odata.id': `${SYSTEM}/Processors/${id}`,
      Id: id,
      Name: 'Processor',
      Socket: `CPU ${i + 1}`,
      ProcessorType: 'CPU',
      ProcessorArchitecture: 'x86',
      InstructionSet: 'x86-64',
      Manufacturer: 'Intel(R) Corporation',
      Model: CPU_MODEL,
      MaxSpeedMHz: 3400,
      OperatingSpeedMHz: 2100,
      TotalCores: 24,
      TotalEnabledCores: 24,
      TotalThreads: 48,
      ProcessorId: { VendorId: 'GenuineIntel', IdentificationRegisters: '0x000606A6' },
      Status: status(),
    }),
  );
  const storage = `${SYSTEM}/Storage`;
  const ctl = `${storage}/RAID.Integrated.1`;
  put(storage, collection('Storage', storage, 'Storage Collection', [ctl]));
  put(ctl, {
    '@odata.type': '#Storage.v1_13_0.Storage',
    '@odata.id': ctl,
    Id: 'RAID.Integrated.1',
    Name: 'Integrated RAID Controller',
    Status: status(),
    StorageControllers: [
      {
        '@odata.id': `${ctl}#/StorageControllers/0`,
        MemberId: '0',
        Name: 'SIM RAID 9560',
        Manufacturer: 'Galvanic',
        Model: 'SIM RAID 9560',
        SpeedGbps: 12,
        SupportedControllerProtocols: ['PCIe'],
        SupportedDeviceProtocols: ['SAS', 'SATA'],
        Status: status(),
      },
    ],
    Drives: DRIVES.map((d) => ref(`${ctl}/Drives/${d.id}`)),
    'Drives@odata.count': DRIVES.length,
    Volumes: ref(`${ctl}/Volumes`),
  });
  for (const d of DRIVES) {
    put(`${ctl}/Drives/${d.id}`, {
      '@odata.type': '#Drive.v1_12_0.Drive',
      '@odata.id': `${ctl}/Drives/${d.id}`,
      Id: d.id,
      Name: d.name,
      Model: d.model,
      Manufacturer: 'Galvanic',
      SerialNumber: d.serial,
      MediaType: 'SSD',
      Protocol: 'SATA',
      CapacityBytes: d.bytes,
      BlockSizeBytes: 512,
      Status: status(),
    });
  }
  put(`${ctl}/Volumes`, collection('Volume', `${ctl}/Volumes`, 'Volume Collection', [`${ctl}/Volumes/Disk.Virtual.0`]));
  put(`${ctl}/Volumes/Disk.Virtual.0`, {
    '@odata.type': '#Volume.v1_6_2.Volume',
    '@odata.id': `${ctl}/Volumes/Disk.Virtual.0`,
    Id: 'Disk.Virtual.0',
    Name: 'Virtual Disk 0',
    RAIDType: 'RAID1',
    VolumeType: 'Mirrored',
    CapacityBytes: DRIVES[0].bytes,
    Encrypted: false,
    Links: { Drives: DRIVES.map((d) => ref(`${ctl}/Drives/${d.id}`)) },
    Status: status(),
  });
}

/**
 * The two NICs of BMC `index`. MACs are locally administered, derived from the fleet id and
 * the index so that they are stable across runs and unique over a fleet (and over fleets of
 * different ids): 02:<fleet>:<index, 3 bytes>:<nic>.
 */
export function nicMacs(fleet: number, index: number): string[] {
  const hex = (n: number) => (n & 0xff).toString(16).padStart(2, '0');
  const base = `02:${hex(fleet)}:${hex(index >> 16)}:${hex(index >> 8)}:${hex(index)}`;
  return NICS.map((_, i) => `${base}:${hex(i + 1)}`);
}

function nicBody(id: string, mac: string, nic: (typeof NICS)[number]): object {
  return {
    '@odata.type': '#EthernetInterface.v1_9_0.EthernetInterface',
    '@odata.id': `${SYSTEM}/EthernetInterfaces/${id}`,
    Id: id,
    Name: nic.name,
    Description: nic.name,
    MACAddress: mac,
    PermanentMACAddress: mac,
    SpeedMbps: nic.speed,
    FullDuplex: true,
    AutoNeg: true,
    LinkStatus: 'LinkUp',
    InterfaceEnabled: true,
    MTUSize: 1500,
    Status: status(),
  };
}

/**
 * Static bodies by normalised path; an expanded variant (`$expand=.($levels=1)`: a resource's
 * own subordinate resources inline, not its Links) under `<path>?expand` when `expand` is on.
 */
function buildStatic(model: ChassisModel, expand: boolean, vmedia: string, manager: string, idrac: number): Map<string, string> {
  const m = new Map<string, string>();
  const put = (path: string, body: object) => m.set(path.toLowerCase(), JSON.stringify(body));
  put('/redfish', { v1: `${V1}/` });
  put(V1, {
    '@odata.type': '#ServiceRoot.v1_15_0.ServiceRoot',
    '@odata.id': `${V1}/`,
    Id: 'RootService',
    Name: 'Galvanic simulated BMC',
    RedfishVersion: '1.15.0',
    UUID: '00000000-0000-4000-8000-000000000000',
    ProtocolFeaturesSupported: {
      ExpandQuery: expand ? { ExpandAll: true, Levels: true, MaxLevels: 1, Links: true, NoLinks: true } : { ExpandAll: false, Levels: false, Links: false, NoLinks: false },
      SelectQuery: false,
      FilterQuery: false,
    },
    Systems: ref(`${V1}/Systems`),
    Chassis: ref(`${V1}/Chassis`),
    Managers: ref(`${V1}/Managers`),
    SessionService: ref(`${V1}/SessionService`),
    EventService: ref(`${V1}/EventService`),
    Registries: ref(`${V1}/Registries`),
    UpdateService: ref(`${V1}/UpdateService`),
    TaskService: ref(`${V1}/TaskService`),
    Links: { Sessions: ref(SESSIONS) },
  });
  put(`${V1}/Systems`, collection('ComputerSystem', `${V1}/Systems`, 'Computer System Collection', [SYSTEM]));
  inventory(put);
  put(`${SYSTEM}/SimpleStorage`, collection('SimpleStorage', `${SYSTEM}/SimpleStorage`, 'Simple Storage Collection', [`${SYSTEM}/SimpleStorage/1`]));
  put(`${SYSTEM}/SimpleStorage/1`, {
    '@odata.type': '#SimpleStorage.v1_3_1.SimpleStorage',
    '@odata.id': `${SYSTEM}/SimpleStorage/1`,
    Id: '1',
    Name: 'Simple Storage Controller',
    Status: status(),
    Devices: [
      { Name: 'SATA Bay 1', Model: 'SIM-SSD-960', CapacityBytes: 960197124096, Status: status() },
      { Name: 'SATA Bay 2', Model: 'SIM-SSD-960', CapacityBytes: 960197124096, Status: status('Enabled', 'Warning') },
    ],
  });
  put(`${V1}/Chassis`, collection('Chassis', `${V1}/Chassis`, 'Chassis Collection', [ENCLOSURE, BOARD]));
  put(ENCLOSURE, {
    '@odata.type': '#Chassis.v1_14_0.Chassis',
    '@odata.id': ENCLOSURE,
    Id: 'Enclosure',
    Name: 'Enclosure',
    ChassisType: 'RackMount',
    Status: status(),
    Links: { Contains: [ref(BOARD)], ComputerSystems: [ref(SYSTEM)], ManagedBy: [ref(manager)] },
  });
  const board: Record<string, unknown> = {
    '@odata.type': '#Chassis.v1_14_0.Chassis',
    '@odata.id': BOARD,
    Id: 'Baseboard',
    Name: 'System Board',
    ChassisType: 'Card',
    Status: status(),
    Links: { ContainedBy: ref(ENCLOSURE), ComputerSystems: [ref(SYSTEM)], ManagedBy: [ref(manager)] },
  };
  const boardExpanded: Record<string, unknown> = { ...board };
  if (model !== 'sensors') {
    board.Thermal = ref(`${BOARD}/Thermal`);
    board.Power = ref(`${BOARD}/Power`);
    boardExpanded.Thermal = thermal();
    boardExpanded.Power = power();
    put(`${BOARD}/Thermal`, thermal());
    put(`${BOARD}/Power`, power());
  }
  if (model !== 'legacy') {
    board.Sensors = ref(`${BOARD}/Sensors`);
    const list = sensors();
    const coll = collection('Sensor', `${BOARD}/Sensors`, 'Sensors', list.map((s) => `${BOARD}/Sensors/${s.id}`));
    boardExpanded.Sensors = coll;
    put(`${BOARD}/Sensors`, coll);
    if (expand) {
      put(`${BOARD}/Sensors?expand`, {
        '@odata.type': '#SensorCollection.SensorCollection',
        '@odata.id': `${BOARD}/Sensors`,
        Name: 'Sensors',
        'Members@odata.count': list.length,
        Members: list.map((s) => s.body),
      });
    }
    for (const s of list) put(`${BOARD}/Sensors/${s.id}`, s.body);
  }
  put(BOARD, board);
  if (expand) put(`${BOARD}?expand`, boardExpanded);
  put(`${V1}/Managers`, collection('Manager', `${V1}/Managers`, 'Manager Collection', [manager]));
  const dell = idrac ? dellManagerExtras(manager) : null;
  put(manager, {
    '@odata.type': '#Manager.v1_10_0.Manager',
    '@odata.id': manager,
    Id: manager.slice(manager.lastIndexOf('/') + 1),
    Name: idrac ? 'Manager' : 'Simulated BMC',
    ...(idrac ? { Model: '15G Monolithic' } : {}),
    ManagerType: 'BMC',
    FirmwareVersion: bmcVersion(idrac),
    Status: status(),
    ...(vmedia.startsWith(manager) ? { VirtualMedia: ref(vmedia) } : {}),
    Links: { ManagerForServers: [ref(SYSTEM)], ManagerForChassis: [ref(ENCLOSURE), ref(BOARD)], ...(dell?.Links ?? {}) },
    ...(dell ? { Actions: dell.Actions } : {}),
  });
  put(`${V1}/SessionService`, {
    '@odata.type': '#SessionService.v1_1_8.SessionService',
    '@odata.id': `${V1}/SessionService`,
    Id: 'SessionService',
    Name: 'Session Service',
    ServiceEnabled: true,
    SessionTimeout: 1800,
    Sessions: ref(SESSIONS),
  });
  // Subscriptions live per BMC (events.ts); the collection starts empty.
  put(`${V1}/EventService`, {
    '@odata.type': '#EventService.v1_9_0.EventService',
    '@odata.id': `${V1}/EventService`,
    Id: 'EventService',
    Name: 'Event Service',
    Status: status(),
    ServiceEnabled: true,
    DeliveryRetryAttempts: 3,
    DeliveryRetryIntervalSeconds: 60,
    EventTypesForSubscription: ['StatusChange', 'ResourceUpdated', 'ResourceAdded', 'ResourceRemoved', 'Alert'],
    Subscriptions: ref(`${V1}/EventService/Subscriptions`),
  });
  put(`${V1}/EventService/Subscriptions`, collection('EventDestination', `${V1}/EventService/Subscriptions`, 'Event Subscriptions Collection', []));
  return m;
}

const STATIC_CACHE = new Map<string, Map<string, string>>();

/** The manager's firmware version: an iDRAC's names its major version. */
function bmcVersion(idrac: number): string {
  return idrac ? `${idrac}.10.50.00` : SIM_BMC_VERSION;
}
const TRANSFER_PROTOCOLS = ['CIFS', 'FTP', 'SFTP', 'HTTP', 'HTTPS', 'NFS', 'SCP', 'TFTP', 'OEM'];

/** The two slots, where the quirks put them: a CD/DVD drive and a USB stick. */
function syntheticSlots(q: Readonly<VmediaQuirks>, manager: string): Array<MediaSlot & { name: string; slotId: string }> {
  const base = q.underSystems ? `${SYSTEM}/VirtualMedia` : `${manager}/VirtualMedia`;
  const ids = q.underSystems ? ['1', '2'] : ['Cd', 'USB'];
  const defs = [
    { slotId: ids[0], name: 'Virtual CD', mediaTypes: q.dvdOnly ? ['DVD'] : ['CD', 'DVD'] },
    { slotId: ids[1], name: 'Virtual Removable Media', mediaTypes: ['USBStick'] },
  ];
  return defs.map((d) => {
    const id = `${base}/${d.slotId}`;
    return {
      ...d,
      id,
      path: id.toLowerCase(),
      system: SYSTEM.toLowerCase(),
      insertTarget: q.patchOnly ? null : `${id}/Actions/VirtualMedia.InsertMedia`.toLowerCase(),
      ejectTarget: q.patchOnly || q.noEjectAction ? null : `${id}/Actions/VirtualMedia.EjectMedia`.toLowerCase(),
    };
  });
}
const NICS_PATH = `${SYSTEM}/EthernetInterfaces`.toLowerCase();
const NICS_COLLECTION = JSON.stringify(
  collection('EthernetInterface', `${SYSTEM}/EthernetInterfaces`, 'Ethernet Network Interface Collection', NICS.map((n) => `${SYSTEM}/EthernetInterfaces/${n.id}`)),
);

export class SyntheticModel implements SimModel {
  readonly systemPaths: ReadonlySet<string> = new Set([SYSTEM.toLowerCase()]);
  readonly sessionsPath = SESSIONS.toLowerCase();
  private readonly bodies: Map<string, string>;
  readonly mediaSlots: ReadonlyMap<string, MediaSlot>;
  readonly mediaActions: ReadonlyMap<string, { slot: MediaSlot; action: 'insert' | 'eject' }>;
  private readonly slotInfo = new Map<string, { name: string; slotId: string }>();
  private readonly vmediaPath: string;
  readonly biosOf: ReadonlyMap<string, string> = new Map([[SYSTEM.toLowerCase(), `${SYSTEM}/Bios`]]);
  private readonly bootTargetList: readonly string[];
  private readonly manager: string;
  readonly dellManager?: string;
  readonly bmcFirmwareVersion: string;

  /**
   * `expand`: the service root advertises `$expand=.` and chassis and collections honour it.
   * `fleet` (0-255) goes into the NICs' MACs and the system UUID, so that fleets started with
   * different ids never share a MAC.
   */
  constructor(
    model: ChassisModel = 'both',
    expand = true,
    private readonly fleet = 0,
    private readonly quirks: Readonly<VmediaQuirks> = NO_QUIRKS,
  ) {
    this.manager = quirks.idrac ? IDRAC_MANAGER : MANAGER;
    if (quirks.idrac) this.dellManager = IDRAC_MANAGER;
    this.bmcFirmwareVersion = bmcVersion(quirks.idrac);
    this.vmediaPath = quirks.underSystems ? `${SYSTEM}/VirtualMedia` : `${this.manager}/VirtualMedia`;
    const slots = syntheticSlots(quirks, this.manager);
    const key = `${model}:${String(expand)}:${this.vmediaPath}:${quirks.idrac}:${slots.map((sl) => sl.mediaTypes.join('+')).join(',')}`;
    let bodies = STATIC_CACHE.get(key);
    if (!bodies) {
      bodies = buildStatic(model, expand, this.vmediaPath, this.manager, quirks.idrac);
      bodies.set(this.vmediaPath.toLowerCase(), JSON.stringify(collection('VirtualMedia', this.vmediaPath, 'Virtual Media Services', slots.map((sl) => sl.id))));
      STATIC_CACHE.set(key, bodies);
    }
    this.bodies = bodies;
    const byPath = new Map<string, MediaSlot>();
    const actions = new Map<string, { slot: MediaSlot; action: 'insert' | 'eject' }>();
    for (const { name, slotId, ...slot } of slots) {
      byPath.set(slot.path, slot);
      this.slotInfo.set(slot.path, { name, slotId });
      if (slot.insertTarget) actions.set(slot.insertTarget, { slot, action: 'insert' });
      if (slot.ejectTarget) actions.set(slot.ejectTarget, { slot, action: 'eject' });
    }
    this.mediaSlots = byPath;
    this.mediaActions = actions;
    // SuperMicro names the virtual CD UsbCd (sushy rewrites Cd for it).
    this.bootTargetList = quirks.supermicro ? BOOT_TARGETS.map((t) => (t === 'Cd' ? 'UsbCd' : t)) : BOOT_TARGETS;
  }

  initialMedia(): MediaState {
    return emptyMedia();
  }

  mediaBody(slot: MediaSlot, v: MediaState): string {
    const info = this.slotInfo.get(slot.path) ?? { name: 'Virtual Media', slotId: slot.id };
    const actions: Record<string, unknown> = {};
    if (slot.ejectTarget) actions['#VirtualMedia.EjectMedia'] = { target: `${slot.id}/Actions/VirtualMedia.EjectMedia` };
    if (slot.insertTarget) {
      actions['#VirtualMedia.InsertMedia'] = {
        target: `${slot.id}/Actions/VirtualMedia.InsertMedia`,
        'TransferProtocolType@Redfish.AllowableValues': TRANSFER_PROTOCOLS,
        'TransferMethod@Redfish.AllowableValues': ['Stream', 'Upload'],
      };
    }
    return JSON.stringify({
      '@odata.type': '#VirtualMedia.v1_6_0.VirtualMedia',
      '@odata.id': slot.id,
      Id: info.slotId,
      Name: info.name,
      Description: info.name,
      MediaTypes: slot.mediaTypes,
      Image: v.image,
      ImageName: v.imageName,
      Inserted: v.inserted,
      WriteProtected: v.writeProtected,
      ConnectedVia: v.connectedVia,
      TransferProtocolType: v.transferProtocolType,
      TransferMethod: v.inserted ? 'Stream' : null,
      UserName: v.userName,
      Password: null,
      ...(Object.keys(actions).length ? { Actions: actions } : {}),
    });
  }

  initialSystem(): SystemState {
    return { power: 'On', boot: defaultBoot(), version: 1, running: { device: 'Hdd', image: null, slot: null, phase: 'up', since: Math.round(Date.now()) } };
  }

  systemBody(_path: string, state: SystemState, bmcIndex: number): string {
    const uuid = `5a1f00${(this.fleet & 0xff).toString(16).padStart(2, '0')}-0000-4000-8000-${bmcIndex.toString(16).padStart(12, '0')}`;
    return JSON.stringify({
      '@odata.type': '#ComputerSystem.v1_20_0.ComputerSystem',
      '@odata.id': SYSTEM,
      Id: 'System.Embedded.1',
      Name: 'Simulated server',
      SystemType: 'Physical',
      Manufacturer: this.quirks.idrac ? 'Dell Inc.' : 'Galvanic',
      Model: this.quirks.idrac ? 'PowerEdge R650' : 'Redfish simulator',
      SerialNumber: `SIM${String(bmcIndex).padStart(6, '0')}`,
      UUID: uuid,
      Status: status(),
      PowerState: state.power,
      BiosVersion: SIM_BIOS_VERSION,
      Boot: {
        HttpBootUri: null,
        ...state.boot,
        'BootSourceOverrideTarget@Redfish.AllowableValues': this.bootTargetList,
        'BootSourceOverrideMode@Redfish.AllowableValues': ['Legacy', 'UEFI'],
      },
      ProcessorSummary: { Count: CPUS.length, LogicalProcessorCount: CPUS.length * 48, Model: CPU_MODEL, Status: status() },
      MemorySummary: { TotalSystemMemoryGiB: MEMORY_GIB, MemoryMirroring: 'None', Status: status() },
      Processors: ref(`${SYSTEM}/Processors`),
      EthernetInterfaces: ref(`${SYSTEM}/EthernetInterfaces`),
      SimpleStorage: ref(`${SYSTEM}/SimpleStorage`),
      Storage: ref(`${SYSTEM}/Storage`),
      Bios: ref(`${SYSTEM}/Bios`),
      ...(this.quirks.underSystems ? { VirtualMedia: ref(this.vmediaPath) } : {}),
      Links: { Chassis: [ref(ENCLOSURE), ref(BOARD)], ManagedBy: [ref(this.manager)] },
      Actions: {
        '#ComputerSystem.Reset': { target: `${SYSTEM}/Actions/ComputerSystem.Reset`, 'ResetType@Redfish.AllowableValues': RESET_TYPES },
      },
    });
  }

  resetTarget(): string {
    return `${SYSTEM}/Actions/ComputerSystem.Reset`.toLowerCase();
  }

  resetTypes(): readonly string[] {
    return RESET_TYPES;
  }

  bootTargets(): readonly string[] {
    return this.bootTargetList;
  }

  get(path: string, query: string, bmcIndex: number): string | null {
    if (path.startsWith(NICS_PATH)) return this.nics(path, bmcIndex);
    if (query.includes('$expand')) {
      const expanded = this.bodies.get(`${path}?expand`);
      if (expanded) return expanded;
    }
    return this.bodies.get(path) ?? null;
  }

  private nics(path: string, bmcIndex: number): string | null {
    if (path === NICS_PATH) return NICS_COLLECTION;
    const i = NICS.findIndex((n) => `${NICS_PATH}/${n.id.toLowerCase()}` === path);
    if (i < 0) return null;
    return JSON.stringify(nicBody(NICS[i].id, nicMacs(this.fleet, bmcIndex)[i], NICS[i]));
  }

  isPublic(path: string): boolean {
    return path === '/redfish' || path === '/redfish/v1' || path === '/redfish/v1/odata' || path === '/redfish/v1/$metadata';
  }
}
