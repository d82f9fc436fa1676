/**
 * The simulator's own BMC: one ComputerSystem with an odd Id, two chassis of which only the
 * second has Thermal, Power and Sensors (so a client that takes "the first chassis" finds no
 * sensors), a manager and a SessionService. Static bodies are serialised once per process and
 * shared by every BMC; only the system body is built per request.
 */
import { defaultBoot, STANDARD_BOOT_TARGETS, type SimModel } from './model.js';
import type { SystemState } from './state.js';

/** Which sensor resources the chassis offers: legacy Thermal/Power, the newer Sensors, or both. */
export type ChassisModel = 'both' | 'legacy' | 'sensors';

const V1 = '/redfish/v1';
const SYSTEM = `${V1}/Systems/System.Embedded.1`;
const ENCLOSURE = `${V1}/Chassis/Enclosure`;
const BOARD = `${V1}/Chassis/Baseboard`;
const MANAGER = `${V1}/Managers/BMC`;
const SESSIONS = `${V1}/SessionService/Sessions`;
const RESET_TYPES = ['On', 'ForceOff', 'GracefulShutdown', 'GracefulRestart', 'ForceRestart', 'Nmi', 'ForceOn', 'PushPowerButton'];
const BOOT_TARGETS = STANDARD_BOOT_TARGETS.filter((t) => t !== 'UefiTarget');

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

/**
 * Static bodies by normalised path; an expanded variant (`$expand=.($levels=1)`: a resource's
 * own subordinate resources inline, not its Links) under `<path>?expand` when `expand` is on.
 */
function buildStatic(model: ChassisModel, expand: boolean): Map<string, string> {
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
    Links: { Sessions: ref(SESSIONS) },
  });
  put(`${V1}/Systems`, collection('ComputerSystem', `${V1}/Systems`, 'Computer System Collection', [SYSTEM]));
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
    Links: { Contains: [ref(BOARD)], ComputerSystems: [ref(SYSTEM)], ManagedBy: [ref(MANAGER)] },
  });
  const board: Record<string, unknown> = {
    '@odata.type': '#Chassis.v1_14_0.Chassis',
    '@odata.id': BOARD,
    Id: 'Baseboard',
    Name: 'System Board',
    ChassisType: 'Card',
    Status: status(),
    Links: { ContainedBy: ref(ENCLOSURE), ComputerSystems: [ref(SYSTEM)], ManagedBy: [ref(MANAGER)] },
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
  put(`${V1}/Managers`, collection('Manager', `${V1}/Managers`, 'Manager Collection', [MANAGER]));
  put(MANAGER, {
    '@odata.type': '#Manager.v1_10_0.Manager',
    '@odata.id': MANAGER,
    Id: 'BMC',
    Name: 'Simulated BMC',
    ManagerType: 'BMC',
    FirmwareVersion: '1.0.0-sim',
    Status: status(),
    Links: { ManagerForServers: [ref(SYSTEM)], ManagerForChassis: [ref(ENCLOSURE), ref(BOARD)] },
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
  return m;
}

const STATIC_CACHE = new Map<string, Map<string, string>>();

export class SyntheticModel implements SimModel {
  readonly systemPaths: ReadonlySet<string> = new Set([SYSTEM.toLowerCase()]);
  readonly sessionsPath = SESSIONS.toLowerCase();
  private readonly bodies: Map<string, string>;

  /** `expand`: the service root advertises `$expand=.` and chassis and collections honour it. */
  constructor(model: ChassisModel = 'both', expand = true) {
    const key = `${model}:${String(expand)}`;
    let bodies = STATIC_CACHE.get(key);
    if (!bodies) {
      bodies = buildStatic(model, expand);
      STATIC_CACHE.set(key, bodies);
    }
    this.bodies = bodies;
  }

  initialSystem(): SystemState {
    return { power: 'On', boot: defaultBoot(), version: 1 };
  }

  systemBody(_path: string, state: SystemState, bmcIndex: number): string {
    const uuid = `5a1f0000-0000-4000-8000-${bmcIndex.toString(16).padStart(12, '0')}`;
    return JSON.stringify({
      '@odata.type': '#ComputerSystem.v1_20_0.ComputerSystem',
      '@odata.id': SYSTEM,
      Id: 'System.Embedded.1',
      Name: 'Simulated server',
      SystemType: 'Physical',
      Manufacturer: 'Galvanic',
      Model: 'Redfish simulator',
      SerialNumber: `SIM${String(bmcIndex).padStart(6, '0')}`,
      UUID: uuid,
      Status: status(),
      PowerState: state.power,
      Boot: { ...state.boot, 'BootSourceOverrideTarget@Redfish.AllowableValues': BOOT_TARGETS },
      SimpleStorage: ref(`${SYSTEM}/SimpleStorage`),
      Links: { Chassis: [ref(ENCLOSURE), ref(BOARD)], ManagedBy: [ref(MANAGER)] },
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
    return BOOT_TARGETS;
  }

  get(path: string, query: string): string | null {
    if (query.includes('$expand')) {
      const expanded = this.bodies.get(`${path}?expand`);
      if (expanded) return expanded;
    }
    return this.bodies.get(path) ?? null;
  }

  isPublic(path: string): boolean {
    return path === '/redfish' || path === '/redfish/v1' || path === '/redfish/v1/odata' || path === '/redfish/v1/$metadata';
  }
}
